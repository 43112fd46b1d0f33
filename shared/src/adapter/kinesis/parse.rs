//! Telling a Kinesis event from other invocation payloads, record by
//! record: a record that does not parse (its `data` is not base64, a field
//! is missing) fails alone (and stops what follows it in its shard), never
//! the batch.

use aws_lambda_events::kinesis::{KinesisEvent, KinesisEventRecord};
use serde_json::Value;

use super::record::KINESIS;
use crate::adapter::malformed::{MalformedRecord, Salvage, parse_each};
use crate::adapter::{BatchError, Delivery, json_type};

/// How a Kinesis record that does not parse is read: its lane is the shard
/// of its `eventID` (`<shardId>:<sequenceNumber>`).
static SALVAGE: Salvage = Salvage {
    noun: "a Kinesis record",
    sequence_number: "/kinesis/sequenceNumber",
    lane: |raw| {
        raw.get("eventID")
            .and_then(Value::as_str)
            .and_then(|id| id.split_once(':'))
            .map(|(shard, _)| shard.to_owned())
            .filter(|shard| !shard.is_empty())
    },
    names: &KINESIS,
};

/// A Kinesis event as parsed: its records in batch order, each a Kinesis
/// record or, when it does not parse, a [`MalformedRecord`] (which fails on
/// its own in [`process`](super::KinesisProcessor::process)).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct KinesisStreamEvent {
    /// The records, in batch order.
    pub records: Vec<Result<KinesisEventRecord, MalformedRecord>>,
}

impl KinesisStreamEvent {
    /// The event of `records` (all parsed).
    pub fn new(records: Vec<KinesisEventRecord>) -> Self {
        Self {
            records: records.into_iter().map(Ok).collect(),
        }
    }

    /// Each record as the pipeline sees it ([`Delivery`]), in batch order.
    pub fn deliveries(&self) -> impl Iterator<Item = &dyn Delivery> {
        self.records.iter().map(|r| match r {
            Ok(record) => record as &dyn Delivery,
            Err(malformed) => malformed as &dyn Delivery,
        })
    }
}

impl From<KinesisEvent> for KinesisStreamEvent {
    fn from(event: KinesisEvent) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as a Kinesis Data Streams event, rejecting
/// other shapes: a `Records` array whose items all have `eventSource`
/// `aws:kinesis`. Each item is parsed on its own: one that is not a Kinesis
/// record (its `data` not base64, a field missing) is kept as a
/// [`MalformedRecord`]. An empty `Records` array is an empty batch.
pub fn parse_kinesis_event(value: Value) -> Result<KinesisStreamEvent, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: "a Kinesis",
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
            Some("aws:kinesis") => {}
            Some(other) => {
                return wrong(format!(
                    "record {i} comes from {other}, expected aws:kinesis"
                ));
            }
            None => {
                return wrong(format!(
                    "record {i} has no eventSource (expected aws:kinesis)"
                ));
            }
        }
    }
    Ok(KinesisStreamEvent {
        records: parse_each(records, &SALVAGE),
    })
}
