//! Telling a Kinesis event from other invocation payloads.

use aws_lambda_events::kinesis::KinesisEvent;
use serde_json::Value;

use crate::adapter::{BatchError, json_type};

/// Parses an invocation payload as a Kinesis Data Streams event, rejecting
/// other shapes: a `Records` array whose items all have `eventSource`
/// `aws:kinesis`. An empty `Records` array is an empty batch.
pub fn parse_kinesis_event(value: Value) -> Result<KinesisEvent, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: "a Kinesis",
            message,
        })
    };
    let records = match value.get("Records") {
        Some(Value::Array(records)) => records,
        Some(other) => return wrong(format!("Records is {}, not an array", json_type(other))),
        None => return wrong(format!("no Records array in {}", json_type(&value))),
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
    serde_json::from_value(value).or_else(|e| wrong(format!("a Kinesis record is malformed: {e}")))
}
