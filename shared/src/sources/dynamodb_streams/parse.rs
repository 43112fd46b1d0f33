//! Telling a DynamoDB Streams event from other payloads, record by record.

use aws_lambda_events::dynamodb::EventRecord;
use serde_json::Value;

use super::record::DYNAMODB_STREAMS;
use crate::batch::BatchError;
pub use crate::batch::malformed::MalformedRecord;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};

/// How a stream record that does not parse is read: its lane is its stream.
static SALVAGE: Salvage = Salvage {
    expected: "a DynamoDB Streams",
    event_source: "aws:dynamodb",
    event_source_fields: &["eventSource"],
    event_source_optional: true,
    noun: "a DynamoDB stream record",
    id: "/dynamodb/SequenceNumber",
    lane: |raw| {
        raw.get("eventSourceARN")
            .and_then(Value::as_str)
            .map(str::to_owned)
    },
    names: &DYNAMODB_STREAMS,
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
/// array whose items do not come from another source (an `eventSource`
/// other than `aws:dynamodb` rejects the event; a record without one is
/// read as a stream record). Each item is parsed on its own: one that is
/// not a stream record is kept as a [`MalformedRecord`].
pub fn parse_dynamodb_event(value: Value) -> Result<DynamoDbStreamEvent, BatchError> {
    parse_stream(value, &SALVAGE)
}
