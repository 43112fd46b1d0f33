//! Store faults: throttling, 500s, connection resets and answers slower than
//! the SDK's attempt timeout injected between the SDK and moto. Every payment
//! is still credited exactly once, every failed record is reported in
//! `batchItemFailures`, a whole batch never fails, and no record stays in
//! progress past its lease.

mod store;
