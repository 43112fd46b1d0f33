//! DynamoDB Streams batches on the batch core: [`DynamoDbStreamsProcessor`],
//! lanes by item, the response a shard checkpoint, the default key
//! [`keys_and`]. The guide: [docs/sources/dynamodb-streams.md].
//!
//! [docs/sources/dynamodb-streams.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/dynamodb-streams.md

mod image;
mod key;
mod parse;
mod record;
mod response;

pub use aws_lambda_events::dynamodb::{EventRecord, StreamRecord, UserIdentity};
use serde_json::Value;

pub use crate::batch::StreamEvent;
pub use image::{item_json, to_item};
pub use key::{keys_and, record_json};
pub use parse::{DynamoDbStreamEvent, MalformedRecord, parse_dynamodb_event};
pub use record::{DynamoDbRecord, TTL_PRINCIPAL, is_ttl_deletion};
pub use response::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

pub use crate::batch::partial_response;

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::parking::Ticket;
use crate::batch::{
    BatchError, BatchReport, Ordering, Parks, PayloadScope, Processor, Source, SourceNames, Within,
};
use record::{DYNAMODB_STREAMS, item_of};

/// The `eventSource` of a DynamoDB stream record.
const SOURCE: &str = "aws:dynamodb";

/// Processes DynamoDB Streams batches ([`Processor`] over
/// [`DynamoDbStreams`]): the engine plus how keys and failures are handled.
/// Build it once per execution environment; cheap to clone. Its key
/// ([`KeySelector`]) is selected from the record's JSON view
/// ([`record_json`]): by default [`keys_and`]`("<a version attribute>")`.
pub type DynamoDbStreamsProcessor = Processor<DynamoDbStreams>;

/// The DynamoDB Streams source and its settings: how each record's images
/// are keyed and hashed.
#[derive(Debug, Clone, Default)]
pub struct DynamoDbStreams {
    payload: PayloadScope,
}

impl Source for DynamoDbStreams {
    type Event = DynamoDbStreamEvent;
    type Raw = EventRecord;
    type Response = DynamoDbEventResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &DYNAMODB_STREAMS;

    fn parse(payload: Value) -> Result<DynamoDbStreamEvent, BatchError> {
        parse_dynamodb_event(payload)
    }

    fn ordering(&self, _: &DynamoDbStreamEvent) -> Ordering {
        Ordering::StopLane
    }

    fn records(&self, event: DynamoDbStreamEvent) -> Vec<Result<EventRecord, MalformedRecord>> {
        event.records
    }

    /// The item: its key attributes.
    fn within(&self, record: &EventRecord) -> Within {
        item_of(Some(&record.change.keys))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        let keys = raw
            .pointer("/dynamodb/Keys")
            .and_then(|k| serde_json::from_value::<serde_dynamo::Item>(k.clone()).ok());
        item_of(keys.as_ref())
    }

    fn ticket(&self, record: &EventRecord) -> Option<Ticket> {
        let raw = serde_json::to_value(record).ok()?;
        Ticket::new(SOURCE, record.event_source_arn.as_deref(), record, raw)
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<DynamoDbEventResponse, BatchError> {
        report.response_as()
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
