//! Integration tests: one binary (each test file links its own large
//! binary), grouped by the guarantee they prove. `tests/README.md` maps each
//! guarantee of docs/guarantees.md's "Semantics" to the tests that prove it.

#![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

mod bad_input;
mod crash;
mod exactly_once;
mod faults;
mod operations;
mod races;
mod sources;
mod stores;
