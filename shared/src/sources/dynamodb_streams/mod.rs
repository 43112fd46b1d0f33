//! DynamoDB Streams batches on the batch core: [`DynamoDbStreamsProcessor`],
//! lanes by item, the response a shard checkpoint, the default key
//! [`keys_and`]. The guide: [docs/sources/dynamodb-streams.md].
//!
//! [docs/sources/dynamodb-streams.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/dynamodb-streams.md

mod image;
mod record;

pub use aws_lambda_events::dynamodb::{EventRecord, StreamRecord, UserIdentity};
pub use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use serde_json::Value;

pub use image::{item_json, to_item};
pub use record::{DynamoDbRecord, TTL_PRINCIPAL, keys_and, record_json};

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};
use crate::batch::parking::Ticket;
use crate::batch::{
    BatchError, BatchReport, IdField, LaneField, MalformedRecord, Ordering, Parks, PartialResponse,
    PayloadScope, Processor, Source, SourceNames, Within,
};

/// Processes DynamoDB Streams batches ([`Processor`] over
/// [`DynamoDbStreams`]). Its key ([`KeySelector`]) is selected from the
/// record's JSON view ([`record_json`]): by default
/// [`keys_and`]`("<a version attribute>")`.
pub type DynamoDbStreamsProcessor = Processor<DynamoDbStreams>;

/// The DynamoDB Streams source and its settings: how each record's images
/// are keyed and hashed.
#[derive(Debug, Clone, Default)]
pub struct DynamoDbStreams {
    payload: PayloadScope,
}

/// DynamoDB stream records: their lane their stream (`eventSourceARN`),
/// also when they do not parse.
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "SequenceNumber",
        id_field: IdField::SequenceNumber,
        lane_field: LaneField::Shard,
        deduplication_id: "a deduplication id (DynamoDB stream records have none)",
        no_lane: "DynamoDB stream record without an eventSourceARN (its stream)",
    },
    expected: "a DynamoDB Streams",
    event_source: "aws:dynamodb",
    event_source_fields: &["eventSource"],
    event_source_optional: true,
    noun: "a DynamoDB stream record",
    id: "/dynamodb/SequenceNumber",
    lane: |raw| Some(raw.get("eventSourceARN")?.as_str()?.to_owned()),
};

/// A DynamoDB Streams event as parsed: each record a stream record or a
/// [`MalformedRecord`], which fails alone.
pub type DynamoDbStreamEvent = StreamEvent<EventRecord>;

impl From<aws_lambda_events::dynamodb::Event> for DynamoDbStreamEvent {
    fn from(event: aws_lambda_events::dynamodb::Event) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as a DynamoDB Streams event: a `Records`
/// array whose items do not come from another source (a record without an
/// `eventSource` is read as a stream record), each parsed on its own.
pub fn parse_dynamodb_event(value: Value) -> Result<DynamoDbStreamEvent, BatchError> {
    parse_stream(value, &SALVAGE)
}

impl Source for DynamoDbStreams {
    type Event = DynamoDbStreamEvent;
    type Raw = EventRecord;
    type Response = DynamoDbEventResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &SALVAGE.names;

    fn parse(payload: Value) -> Result<DynamoDbStreamEvent, BatchError> {
        parse_dynamodb_event(payload)
    }

    fn ordering(&self, _: &DynamoDbStreamEvent) -> Ordering {
        Ordering::StopLane
    }

    fn records(&self, event: DynamoDbStreamEvent) -> Vec<Result<EventRecord, MalformedRecord>> {
        event.records
    }

    fn within(&self, record: &EventRecord) -> Within {
        record::item_of(Some(&record.change.keys))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        let keys = raw.pointer("/dynamodb/Keys").cloned();
        record::item_of(keys.and_then(|k| serde_json::from_value(k).ok()).as_ref())
    }

    fn ticket(&self, record: &EventRecord) -> Option<Ticket> {
        let raw = serde_json::to_value(record).ok()?;
        Ticket::new(
            SALVAGE.event_source,
            record.event_source_arn.as_deref(),
            record,
            raw,
        )
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<DynamoDbEventResponse, BatchError> {
        report.response_as()
    }
}

impl PartialResponse for DynamoDbEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(id.to_owned());
        self.batch_item_failures.push(failure);
    }
}

impl Parks for DynamoDbStreams {}

impl Processor<DynamoDbStreams> {
    /// What payload validation hashes. Default [`PayloadScope::Body`]: the
    /// record's JSON view ([`record_json`]: event name, keys, images).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.payload = scope;
        self
    }
}

#[cfg(test)]
mod tests;
