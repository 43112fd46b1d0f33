//! Integration tests: one binary (each test file links its own large
//! binary), modules per area.

#![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

mod async_invoke;
mod bad_input;
mod batch;
mod batch_commits;
mod big_batch;
mod bill;
mod contract;
mod crash;
mod deploy_check;
mod diagnostic;
mod dynamodb_requests;
mod dynamodb_streams;
mod faults;
mod hot_items;
mod inventory;
mod kafka_esm;
mod kinesis_esm;
mod ledger;
mod ledger_crash;
mod local_run;
mod managed_instances;
mod moto_launcher;
mod observability;
mod orders;
mod payments;
mod payments_api;
mod payments_api_crash;
mod relay;
mod relay_crash;
mod source_samples;
mod table_check;
mod template;
mod valkey;
