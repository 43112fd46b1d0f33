//! The stores: the contract suite (every case against the memory store,
//! DynamoDB on moto and Valkey on redis-server), the exact requests the
//! DynamoDB store sends, the Valkey store's refusals, races and faults, and
//! the idempotency table's check at start.

mod contract;
mod dynamodb_requests;
mod table_check;
mod valkey;
