//! Telling a DynamoDB Streams event from other invocation payloads, record
//! by record: a record that does not parse fails alone (and, the batch being
//! one shard, stops what follows it), never the batch.

use aws_lambda_events::dynamodb::EventRecord;
use serde_json::Value;

use super::record::DYNAMODB_STREAMS;
pub use crate::adapter::malformed::MalformedRecord;
use crate::adapter::malformed::{Salvage, parse_each};
use crate::adapter::{BatchError, Delivery, json_type};

/// How a DynamoDB stream record that does not parse is read: its lane is
/// its stream (`eventSourceARN`).
static SALVAGE: Salvage = Salvage {
    noun: "a DynamoDB stream record",
    sequence_number: "/dynamodb/SequenceNumber",
    lane: |raw| {
        raw.get("eventSourceARN")
            .and_then(Value::as_str)
            .map(str::to_owned)
    },
    names: &DYNAMODB_STREAMS,
};

/// A DynamoDB Streams event as parsed: its records in stream order, each a
/// stream record or, when it does not parse, a [`MalformedRecord`] (which
/// fails on its own in [`process`](super::DynamoDbStreamsProcessor::process)).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct DynamoDbStreamEvent {
    /// The records, in stream order.
    pub records: Vec<Result<EventRecord, MalformedRecord>>,
}

impl DynamoDbStreamEvent {
    /// The event of `records` (all parsed).
    pub fn new(records: Vec<EventRecord>) -> Self {
        Self {
            records: records.into_iter().map(Ok).collect(),
        }
    }

    /// Each record as the pipeline sees it ([`Delivery`]), in stream order.
    pub fn deliveries(&self) -> impl Iterator<Item = &dyn Delivery> {
        self.records.iter().map(|r| match r {
            Ok(record) => record as &dyn Delivery,
            Err(malformed) => malformed as &dyn Delivery,
        })
    }
}

impl From<aws_lambda_events::dynamodb::Event> for DynamoDbStreamEvent {
    fn from(event: aws_lambda_events::dynamodb::Event) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as a DynamoDB Streams event: a `Records`
/// array whose items do not come from another source (an `eventSource`
/// other than `aws:dynamodb` rejects the event: the function is wired to
/// another trigger; the field is optional in the record type, so a record
/// without it is read as a stream record). Each item is parsed on its own: one that is not a
/// stream record is kept as a [`MalformedRecord`]. An empty `Records` array
/// is an empty batch.
pub fn parse_dynamodb_event(value: Value) -> Result<DynamoDbStreamEvent, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: "a DynamoDB Streams",
            message,
        })
    };
    let records = match value {
        Value::Object(mut map) => match map.remove("Records") {
            Some(Value::Array(records)) => records,
            Some(other) => return wrong(format!("Records is {}, not an array", json_type(&other))),
            None => return wrong("no Records array in an object".to_owned()),
        },
        other => return wrong(format!("no Records array in {}", json_type(&other))),
    };
    for (i, record) in records.iter().enumerate() {
        match record.get("eventSource").and_then(Value::as_str) {
            None | Some("aws:dynamodb") => {}
            Some(other) => {
                return wrong(format!(
                    "record {i} comes from {other}, expected aws:dynamodb"
                ));
            }
        }
    }
    let records = parse_each(records, &SALVAGE);
    Ok(DynamoDbStreamEvent { records })
}
