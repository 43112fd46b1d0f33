//! Helpers shared by the unit tests of the adapters.

use crate::batch::{
    BatchReport, MESSAGE_GROUP_ID, SqsBatchResponse, SqsEvent, SqsMessage, parse_sqs_event,
};
use crate::{Config, Idempotency, ManualClock, MemoryStore};
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
    parse_sqs_event(event_json(name)).unwrap()
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

/// The ids in a batch response.
pub(crate) fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

/// The message ids of a report's failed records.
pub(crate) fn report_failed<T>(report: &BatchReport<T>) -> Vec<String> {
    report
        .failures()
        .map(|r| r.message_id.clone().unwrap_or_default())
        .collect()
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
