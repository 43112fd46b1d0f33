//! Telling a DynamoDB Streams event from other invocation payloads, record
//! by record: a record that does not parse fails alone (and, the batch being
//! one shard, stops what follows it), never the batch.

use aws_lambda_events::dynamodb::EventRecord;
use serde_json::Value;

use crate::adapter::{BatchError, Delivery, json_type};

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

/// A record of the event that is not a DynamoDB stream record (a missing
/// `eventName`, `SizeBytes`, a malformed image...). What of it could be read
/// is kept, so that the partial batch response can still name it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MalformedRecord {
    /// Its position in the batch.
    pub index: usize,
    /// Its `dynamodb.SequenceNumber`, when that much could be read.
    pub sequence_number: Option<String>,
    /// Its `eventSourceARN`, when that much could be read.
    pub event_source_arn: Option<String>,
    /// Why it does not parse.
    pub error: String,
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
    let records = records
        .into_iter()
        .enumerate()
        .map(|(index, raw)| {
            let text = |pointer: &str| {
                raw.pointer(pointer)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            let sequence_number = text("/dynamodb/SequenceNumber");
            let event_source_arn = text("/eventSourceARN");
            match serde_json::from_value::<EventRecord>(raw) {
                Ok(record) => Ok(record),
                Err(e) => Err(MalformedRecord {
                    index,
                    sequence_number,
                    event_source_arn,
                    error: format!("record {index} is not a DynamoDB stream record: {e}"),
                }),
            }
        })
        .collect();
    Ok(DynamoDbStreamEvent { records })
}
