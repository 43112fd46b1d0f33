//! Telling an SNS event (a function subscribed to a topic) from other
//! invocation payloads. (An SNS notification in an SQS body is an
//! envelope: [`crate::envelope`].)

use aws_lambda_events::sns::SnsEvent;
use serde_json::Value;

use crate::batch::{BatchError, json_type};

/// The `EventSource` of the records of an SNS event.
pub const SNS_EVENT_SOURCE: &str = "aws:sns";

/// Parses an invocation payload as an SNS event, rejecting other shapes: a
/// `Records` array whose items all have `EventSource` `aws:sns`.
pub fn parse_sns_event(value: Value) -> Result<SnsEvent, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: "an SNS",
            message,
        })
    };
    let records = match value.get("Records") {
        Some(Value::Array(records)) => records,
        Some(other) => return wrong(format!("Records is {}, not an array", json_type(other))),
        None => return wrong(format!("no Records array in {}", json_type(&value))),
    };
    for (i, record) in records.iter().enumerate() {
        match record.get("EventSource").and_then(Value::as_str) {
            Some(SNS_EVENT_SOURCE) => {}
            Some(other) => {
                return wrong(format!(
                    "record {i} comes from {other}, expected {SNS_EVENT_SOURCE}"
                ));
            }
            None => {
                return wrong(format!(
                    "record {i} has no EventSource (expected {SNS_EVENT_SOURCE})"
                ));
            }
        }
    }
    serde_json::from_value(value).or_else(|e| wrong(format!("an SNS record is malformed: {e}")))
}
