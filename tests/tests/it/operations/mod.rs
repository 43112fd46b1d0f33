//! What an operator runs and sees: the SAM template's checks, the
//! "Deploy and check" commands of docs/operations.md, the docs' links, JSON logs and EMF metrics, the `errorType` of
//! failed invocations, the functions run locally on sample events, the
//! moto launcher the benchmarks use, the Amazon MQ example's size,
//! `tests/README.md`'s table of tests, and the library's layout.

mod bill;
mod deploy_check;
mod diagnostic;
mod example_source;
mod layout;
mod links;
mod local_run;
mod moto_launcher;
mod observability;
mod outside;
mod template;
mod test_table;
