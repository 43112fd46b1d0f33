//! Persistence: where idempotency records live.
//!
//! A [`Store`] implements four verbs: a conditional claim, an atomic commit
//! of the record with staged writes, a fenced release, and a batch read;
//! and, where the store has it, a fifth: many records' commits in one
//! transaction ([`Store::commit_many`], batch commits). The engine decides
//! what the outcomes mean; the store only guarantees the conditions
//! atomically. [`MemoryStore`] and [`DynamoDbStore`] pass the same contract
//! suite (see `tests/`); `ValkeyStore` (feature `valkey`) passes its
//! record cases and refuses staged writes with the record
//! ([`Store::transactions`]).

use async_trait::async_trait;
use std::sync::Arc;

use crate::error::StoreError;
use crate::write::Write;

pub mod batch;
mod choice;
pub(crate) mod connect;
#[cfg(feature = "dynamodb")]
pub mod dynamodb;
mod layout;
pub mod memory;
#[cfg(feature = "valkey")]
pub mod valkey;

pub use crate::record::{Record, Status};
pub use crate::table::TableStore;
pub use batch::{Commit, CommitsError};
pub use choice::{STORE_ENV, StoreChoice};
pub use connect::{ConnectError, TableEnv};
#[cfg(feature = "dynamodb")]
pub use dynamodb::DynamoDbStore;
pub use layout::{
    Attributes, CLAIMS_ROUTED_ENV, KEY_LAYOUT_ENV, KeyLayout, PARTITION_KEY_ENV,
    PARTITION_VALUE_ENV, RECORD_KEY_PREFIX, RECORD_SORT_VALUE, SORT_KEY_ENV, TABLE_ENV,
    TableConfig,
};
pub use memory::MemoryStore;
#[cfg(feature = "valkey")]
pub use valkey::ValkeyStore;

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

/// How the idempotency record is written in a transaction.
#[derive(Debug, Clone, Copy)]
pub enum RecordWrite<'a> {
    /// Complete a record this invocation claimed, only while it carries the
    /// record's owner token (fenced mode).
    Fenced(&'a Record),
    /// Write a completed record under the claim condition at `now_ms`,
    /// without a prior claim (optimistic mode).
    Claim {
        /// The completed record.
        record: &'a Record,
        /// The time the claim condition is evaluated at.
        now_ms: u64,
    },
    /// No record (the kill switch is on): only the writes.
    None,
}

/// Why a transaction did not commit. Nothing was applied, except that after
/// [`TransactError::Store`] from a timeout the outcome is unknown.
#[derive(Debug)]
#[non_exhaustive]
pub enum TransactError {
    /// The record's condition failed. Fenced: the lease was lost. Claim: a
    /// record stands in the way, returned when the store has it.
    Record(Option<Record>),
    /// The condition of a staged write failed.
    Write {
        /// Its index in the staged writes.
        index: usize,
        /// The item as it stood, when the write has a rejection to describe
        /// and the store returned it (`None`: absent or not returned).
        item: Option<crate::write::Item>,
    },
    /// Cancelled by a conflicting request on one of its items (DynamoDB's
    /// `TransactionConflict` cancellation reason: another transaction on a
    /// hot item). Nothing was applied, so sending it again is safe; the
    /// engine does so with a bounded, jittered backoff.
    Conflict(StoreError),
    /// Anything else (throttling, a network error).
    Store(StoreError),
}

/// A conditional store of idempotency records: four verbs (and
/// [`Store::commit_many`] where the store has it), over the
/// store-neutral [`Item`](crate::write::Item) of [`AttrValue`](crate::value::AttrValue)s
/// (no SDK types). In DynamoDB each is usually one request: a claim that
/// fails may read the record back, and [`Store::get_many`] takes one round
/// trip per 100 records plus retries.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Writes `record` if and only if no record exists for its id, or the
    /// existing one expired (`expiration < now` seconds), or it is in
    /// progress with a lapsed lease (`in_progress_expiration < now_ms`).
    /// Whatever `record` holds is written: an in-progress claim with its
    /// owner token, or a completed record (in optimistic mode, where no
    /// claim precedes the handler, the engine records a terminal handler
    /// error as a rejection this way, under the same condition).
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError>;

    /// Commits `writes` and the record write atomically: all or nothing.
    /// With no writes, the record write alone (a plain conditional write
    /// where the store has one). With [`RecordWrite::None`] and no writes,
    /// nothing.
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError>;

    /// Deletes the in-progress record `id` only while it carries `owner`;
    /// otherwise [`StoreError::LeaseLost`].
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError>;

    /// Reads many records at once (strongly consistent); absent ones are
    /// left out.
    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError>;

    /// Reads one record (strongly consistent).
    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        Ok(self.get_many(&[id.to_owned()]).await?.pop())
    }

    /// The size the store counts for `record` against its item limit (with
    /// its own attribute names).
    fn item_size(&self, record: &Record) -> usize {
        record.item_size(&crate::store::Attributes::default())
    }

    /// Whether staged writes commit atomically with the record (one
    /// transaction). A store that cannot (Valkey) refuses
    /// [`RecordWrite::Fenced`] / [`RecordWrite::Claim`] with writes, and the
    /// engine refuses [`CommitMode::Optimistic`](crate::CommitMode::Optimistic)
    /// over it.
    fn transactions(&self) -> bool {
        true
    }

    /// Commits many records' commits in one transaction: all or nothing,
    /// each commit's conditions as [`Store::commit`] evaluates them, within
    /// the limits of one transaction (100 actions, 4 MB, one action per
    /// item; refused as a whole otherwise).
    /// The default commits nothing and answers
    /// [`CommitsError::Unsupported`]: the engine then commits each record
    /// on its own.
    async fn commit_many(&self, commits: &[Commit<'_>]) -> Result<(), CommitsError> {
        let _ = commits;
        Err(CommitsError::Unsupported)
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for Arc<S> {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        (**self).claim(record, now_ms).await
    }
    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        (**self).commit(record, writes).await
    }
    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        (**self).release(id, owner).await
    }
    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        (**self).get_many(ids).await
    }
    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        (**self).get(id).await
    }
    fn item_size(&self, record: &Record) -> usize {
        (**self).item_size(record)
    }
    fn transactions(&self) -> bool {
        (**self).transactions()
    }
    async fn commit_many(&self, commits: &[Commit<'_>]) -> Result<(), CommitsError> {
        (**self).commit_many(commits).await
    }
}
