//! Integration tests: one binary (each test file links its own large
//! binary), modules per area.

#![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

mod batch;
mod contract;
mod crash;
mod dynamodb_requests;
mod inventory;
mod local_run;
mod orders;
mod payments;
