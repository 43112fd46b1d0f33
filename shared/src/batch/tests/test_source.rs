//! A small source for the core's own tests: JSON records with an id, an
//! optional lane, an optional key to order by within the lane, and a body
//! (JSON text), under any [`Ordering`]. It states only what a source
//! states (its parse, ordering, lanes, tickets, answer, and the record's
//! preparation); everything else is the core's.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::batch::envelope::{self, Envelope, EnvelopeMode};
use crate::batch::malformed::{Salvage, parse_stream, text};
use crate::batch::parking::Ticket;
use crate::batch::{
    Attribute, BatchError, BatchReport, Delivery, FailureReason, Keyed, Ordering, PartialResponse,
    Prepare, Prepared, Preparing, Processor, Reading, Source, SourceNames, StreamEvent, Within,
};
use crate::key::IdempotencyKey;

/// The test source's `eventSource`.
pub(crate) const EVENT_SOURCE: &str = "test:source";

/// The test source's names: its records are named by `id`.
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "id",
        id_field: "record_id",
        lane_field: "lane",
        deduplication_id: "the record's deduplication_id",
        no_lane: "ordered test record without a lane",
    },
    expected: "a test",
    event_source: EVENT_SOURCE,
    event_source_fields: &["eventSource"],
    event_source_optional: true,
    noun: "a test record",
    id: "/id",
    lane: |raw| text(raw, "/lane"),
};

/// One record of the test source, as delivered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestMessage {
    /// What names it in the answer.
    #[serde(default)]
    pub(crate) id: Option<String>,
    /// Its lane (ordered sources).
    #[serde(default)]
    pub(crate) lane: Option<String>,
    /// What it keeps its order with inside its lane, when the source
    /// orders by key ([`TestSource::by_key`]).
    #[serde(default)]
    pub(crate) key: Option<String>,
    /// Its position in its lane (default: its id).
    #[serde(default)]
    pub(crate) position: Option<String>,
    /// The body, JSON text.
    #[serde(default)]
    pub(crate) body: Option<String>,
    /// Named text attributes.
    #[serde(default)]
    pub(crate) attributes: BTreeMap<String, String>,
    /// The source's own deduplication id.
    #[serde(default)]
    pub(crate) deduplication_id: Option<String>,
    /// How often it was delivered.
    #[serde(default)]
    pub(crate) receive_count: Option<u32>,
    #[serde(default, rename = "eventSource")]
    pub(crate) event_source: Option<String>,
}

impl Delivery for TestMessage {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    fn lane(&self) -> Option<&str> {
        self.lane.as_deref()
    }

    fn position(&self) -> Option<&str> {
        self.position.as_deref().or(self.id.as_deref())
    }

    fn body(&self) -> Option<&[u8]> {
        self.body.as_deref().map(str::as_bytes)
    }

    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        self.attributes.get(name).map(|v| Attribute::Text(v))
    }

    fn deduplication_id(&self) -> Option<&str> {
        self.deduplication_id.as_deref()
    }

    fn receive_count(&self) -> Option<u32> {
        self.receive_count
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }
}

/// The test source and its settings.
#[derive(Debug, Clone, Default)]
pub(crate) struct TestSource {
    ordering: Ordering,
    by_key: bool,
    envelope: EnvelopeMode,
}

/// A test processor.
pub(crate) type TestProcessor = Processor<TestSource>;

/// The test source's answer: the ids the core reports failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TestResponse {
    pub(crate) failed: Vec<String>,
}

impl PartialResponse for TestResponse {
    fn add_item_failure(&mut self, id: &str) {
        self.failed.push(id.to_owned());
    }
}

impl Source for TestSource {
    type Event = StreamEvent<TestMessage>;
    type Raw = TestMessage;
    type Response = TestResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &SALVAGE.names;

    fn parse(payload: Value) -> Result<Self::Event, BatchError> {
        parse_stream(payload, &SALVAGE)
    }

    fn ordering(&self, _event: &Self::Event) -> Ordering {
        self.ordering
    }

    fn within(&self, record: &TestMessage) -> Within {
        self.within(Some(record.key.as_deref()))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        match raw.get("key") {
            Some(Value::String(key)) => self.within(Some(Some(key))),
            Some(Value::Null) => self.within(Some(None)),
            _ => self.within(None),
        }
    }

    fn ticket(&self, record: &TestMessage) -> Option<Ticket> {
        Ticket::new(EVENT_SOURCE, None, record, record.clone())
    }
}

impl TestSource {
    /// What a record of `key` keeps its order with: its key when the
    /// lane is cut by key (the records without one keep their own order
    /// together); the whole lane when its key could not be read (`None`).
    fn within(&self, key: Option<Option<&str>>) -> Within {
        match (self.by_key, key) {
            (false, _) => Within::Lane,
            (true, Some(Some(key))) => Within::Key(format!("k{key}")),
            (true, Some(None)) => Within::Key("-".to_owned()),
            (true, None) => Within::Unknown,
        }
    }
}

impl Processor<TestSource> {
    /// How records keep their order. Default [`Ordering::Unordered`].
    pub(crate) fn ordering(mut self, ordering: Ordering) -> Self {
        self.source.ordering = ordering;
        self
    }

    /// Lanes are cut by each record's `key`.
    pub(crate) fn by_key(mut self) -> Self {
        self.source.by_key = true;
        self
    }

    /// Whether bodies are opened as envelopes.
    pub(crate) fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.source.envelope = mode;
        self
    }
}

/// A record as the handler gets it.
#[derive(Debug, Clone)]
pub(crate) struct TestRecord<M> {
    /// The body (or the document of its envelope), read as `M`.
    pub(crate) body: M,
    /// The record as delivered.
    pub(crate) message: TestMessage,
    /// The envelope the body was opened from.
    pub(crate) envelope: Option<Envelope>,
    /// Its idempotency key.
    pub(crate) key: Option<IdempotencyKey>,
}

impl<M> TestRecord<M> {
    /// Its lane.
    pub(crate) fn lane(&self) -> Option<&str> {
        self.message.lane.as_deref()
    }
}

impl<M: DeserializeOwned> Prepare<TestRecord<M>> for TestSource {
    type Body = M;

    fn prepare<'r>(&self, at: &Reading<'_>, message: &'r TestMessage) -> Preparing<'r, M> {
        let ident = at.ident();
        let parse = FailureReason::Parse;
        let text = message.body.as_deref();
        let text = text.ok_or_else(|| parse(format!("record {ident} has no body")))?;
        let value: Value = serde_json::from_str(text)
            .map_err(|e| parse(format!("body of record {ident} is not JSON: {e}")))?;
        let opened = envelope::open::<M>(self.envelope, ident, text, value)?;
        Ok(Prepared::new(opened.body, opened.document).with_envelope(opened.envelope))
    }

    fn record(&self, message: TestMessage, body: M, keyed: Keyed) -> TestRecord<M> {
        TestRecord {
            body,
            message,
            envelope: keyed.envelope,
            key: keyed.key,
        }
    }
}

/// A record `id` with `body` (JSON text).
pub(crate) fn rec(id: Option<&str>, body: &str) -> TestMessage {
    TestMessage {
        id: id.map(str::to_owned),
        body: Some(body.to_owned()),
        ..TestMessage::default()
    }
}

/// A record `id` of `lane` with `body`.
pub(crate) fn laned(id: &str, lane: Option<&str>, body: &str) -> TestMessage {
    TestMessage {
        lane: lane.map(str::to_owned),
        ..rec(Some(id), body)
    }
}

/// A record `id` of `lane`, ordered by `key` within it, with `body`.
pub(crate) fn keyed(id: &str, lane: &str, key: Option<&str>, body: &str) -> TestMessage {
    TestMessage {
        key: key.map(str::to_owned),
        ..laned(id, Some(lane), body)
    }
}

/// An event of `records`.
pub(crate) fn batch_of(records: Vec<TestMessage>) -> StreamEvent<TestMessage> {
    StreamEvent::new(records)
}

/// The records of a sample SQS event of `events/` as test records (its
/// `messageId`s, FIFO groups and bodies): the same data, no SQS.
pub(crate) fn sample(name: &str) -> StreamEvent<TestMessage> {
    let file = crate::testkit::event_json(name);
    let records = file["Records"].as_array().expect("a Records array");
    batch_of(
        records
            .iter()
            .map(|r| TestMessage {
                id: r["messageId"].as_str().map(str::to_owned),
                lane: text(r, "/attributes/MessageGroupId"),
                body: r["body"].as_str().map(str::to_owned),
                deduplication_id: text(r, "/attributes/MessageDeduplicationId"),
                ..TestMessage::default()
            })
            .collect(),
    )
}

/// The ids of `event`'s records, in order.
pub(crate) fn ids(event: &StreamEvent<TestMessage>) -> Vec<String> {
    event
        .records
        .iter()
        .map(|r| r.as_ref().unwrap().id.clone().unwrap_or_default())
        .collect()
}

/// The records of `event` (all parsed).
pub(crate) fn messages(event: &StreamEvent<TestMessage>) -> Vec<TestMessage> {
    event
        .records
        .iter()
        .map(|r| r.as_ref().unwrap().clone())
        .collect()
}

/// The ids the test source's answer names failed.
pub(crate) fn failed<T>(report: &BatchReport<T>) -> Vec<String> {
    report.response_as::<TestResponse>().unwrap().failed
}

/// A test record as JSON, as the invocation payload carries it.
pub(crate) fn raw(message: &TestMessage) -> Value {
    let mut value = serde_json::to_value(message).unwrap();
    value["eventSource"] = json!(EVENT_SOURCE);
    value
}

impl crate::batch::Parks for TestSource {}
