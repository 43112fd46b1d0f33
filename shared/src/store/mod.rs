//! Persistence: where idempotency records live.
//!
//! A [`Store`] implements four conditional operations. The engine decides
//! what the outcomes mean; the store only guarantees the conditions
//! atomically. [`MemoryStore`] and [`DynamoDbStore`] pass the same contract
//! suite (see `tests/`).

use async_trait::async_trait;
use std::sync::Arc;

use crate::error::StoreError;
use crate::record::Record;

pub mod dynamodb;
pub mod memory;

pub use dynamodb::DynamoDbStore;
pub use memory::MemoryStore;

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The record was written: this invocation owns the key.
    Acquired,
    /// The condition failed; this is the record that stands in the way.
    Existing(Record),
    /// The condition failed but the record was gone by the time it was read
    /// (deleted or expired in between): claim again.
    Vanished,
}

/// A conditional store of idempotency records.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Writes `record` (status in progress, with its owner token) if and only if
    /// no record exists for its id, or the existing one expired
    /// (`expiration < now` seconds), or it is in progress with a lapsed lease
    /// (`in_progress_expiration < now_ms`).
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError>;

    /// Replaces the in-progress record with `record` (completed), only while
    /// the stored record carries `record.owner`; otherwise
    /// [`StoreError::LeaseLost`].
    async fn complete(&self, record: &Record) -> Result<(), StoreError>;

    /// Deletes the in-progress record `id` only while it carries `owner`;
    /// otherwise [`StoreError::LeaseLost`].
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError>;

    /// Reads a record (strongly consistent).
    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError>;
}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        (**self).claim(record, now_ms).await
    }
    async fn complete(&self, record: &Record) -> Result<(), StoreError> {
        (**self).complete(record).await
    }
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        (**self).release(id, owner).await
    }
    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        (**self).get(id).await
    }
}
