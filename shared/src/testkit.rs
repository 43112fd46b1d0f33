//! Helpers shared by the unit tests of the sources, beside the public test
//! kit (`crate::testing`, feature `testing`, on in the crate's own tests).

use crate::sqs::{MESSAGE_GROUP_ID, SqsBatchResponse, SqsEvent, SqsMessage};
use crate::{Config, Idempotency, MemoryStore, clock::ManualClock};
use serde_json::Value;

/// Epoch ms the tests' clock starts at (2026-11-29).
pub(crate) const T0: u64 = 1_795_946_400_000;

/// A file of `events/`, parsed.
pub(crate) fn event_json(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// A file of `events/` as an SQS event.
pub(crate) fn sqs_event(name: &str) -> SqsEvent {
    serde_json::from_value(event_json(name)).unwrap()
}

/// An engine on a memory store and a manual clock.
pub(crate) fn engine_with(config: Config) -> (Idempotency, MemoryStore, ManualClock) {
    let store = MemoryStore::new();
    let clock = ManualClock::new(T0);
    let engine = Idempotency::new(store.clone(), config.disabled(false)).with_clock(clock.clone());
    (engine, store, clock)
}

/// [`engine_with`] the default configuration.
pub(crate) fn memory_engine() -> (Idempotency, MemoryStore, ManualClock) {
    engine_with(Config::with_prefix("test.batch"))
}

/// The ids in a batch response (the test kit's [`FailedIds`](crate::testing::FailedIds)).
pub(crate) fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
    crate::testing::FailedIds::failed_ids(response)
}

/// The message ids of an event, in order.
pub(crate) fn ids(event: &SqsEvent) -> Vec<String> {
    event
        .records
        .iter()
        .map(|r| r.message_id.clone().unwrap_or_default())
        .collect()
}

/// A minimal SQS record.
pub(crate) fn message(id: Option<&str>, body: &str) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = id.map(str::to_owned);
    m.body = Some(body.to_owned());
    m.event_source = Some("aws:sqs".to_owned());
    m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders".to_owned());
    m
}

/// A FIFO record of `group`.
pub(crate) fn fifo_message(id: &str, group: Option<&str>, body: &str) -> SqsMessage {
    let mut m = message(Some(id), body);
    m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:payments.fifo".to_owned());
    if let Some(g) = group {
        m.attributes
            .insert(MESSAGE_GROUP_ID.to_owned(), g.to_owned());
    }
    m
}

/// An event of `records`.
pub(crate) fn batch(records: Vec<SqsMessage>) -> SqsEvent {
    let mut e = SqsEvent::default();
    e.records = records;
    e
}

/// A memory store that counts what it is sent: transactions (one per
/// [`Store::commit`](crate::store::Store::commit), one per
/// [`Store::commit_many`](crate::store::Store::commit_many)) and pre-reads
/// ([`Store::get_many`](crate::store::Store::get_many)).
#[derive(Debug, Clone, Default)]
pub(crate) struct Counting {
    /// The store counted.
    pub(crate) inner: MemoryStore,
    transactions: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pre_reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Counting {
    /// Transactions sent so far, reset to zero.
    pub(crate) fn take_transactions(&self) -> usize {
        self.transactions
            .swap(0, std::sync::atomic::Ordering::SeqCst)
    }

    /// Pre-reads sent so far, reset to zero.
    pub(crate) fn take_pre_reads(&self) -> usize {
        self.pre_reads.swap(0, std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl crate::store::Store for Counting {
    async fn claim(
        &self,
        record: &crate::record::Record,
        now_ms: u64,
    ) -> Result<crate::store::Claim, crate::error::StoreError> {
        self.inner.claim(record, now_ms).await
    }
    async fn commit(
        &self,
        record: crate::store::RecordWrite<'_>,
        writes: &[crate::write::Write],
    ) -> Result<(), crate::store::TransactError> {
        self.transactions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.commit(record, writes).await
    }
    async fn release(&self, id: &str, owner: &str) -> Result<(), crate::error::StoreError> {
        self.inner.release(id, owner).await
    }
    async fn get_many(
        &self,
        ids: &[String],
    ) -> Result<Vec<crate::record::Record>, crate::error::StoreError> {
        self.pre_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.get_many(ids).await
    }
    async fn get(
        &self,
        id: &str,
    ) -> Result<Option<crate::record::Record>, crate::error::StoreError> {
        self.inner.get(id).await
    }
    fn item_size(&self, record: &crate::record::Record) -> usize {
        self.inner.item_size(record)
    }
    async fn commit_many(
        &self,
        commits: &[crate::store::Commit<'_>],
    ) -> Result<(), crate::store::CommitsError> {
        self.transactions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.commit_many(commits).await
    }
}
