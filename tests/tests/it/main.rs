//! Integration tests: one binary (each test file links its own large
//! binary), modules per area.

mod contract;
mod dynamodb_requests;
mod payments;
