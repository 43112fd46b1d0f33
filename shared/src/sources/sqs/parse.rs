//! Telling an SQS event from other invocation payloads.

use aws_lambda_events::sqs::SqsEvent;
use serde_json::Value;

use super::BatchError;
use crate::batch::envelope::looks_like_eventbridge;
use crate::batch::json_type;

/// Parses an invocation payload as an SQS event, rejecting other shapes.
///
/// `SqsEvent` itself would accept an EventBridge event or `{"Records": []}`
/// from any source as zero or more empty records; this requires a `Records`
/// array whose items all have `eventSource` `aws:sqs`. An empty `Records`
/// array is an empty batch.
pub fn parse_sqs_event(value: Value) -> Result<SqsEvent, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: "an SQS",
            message,
        })
    };
    let Some(object) = value.as_object() else {
        return wrong(format!(
            "expected an object with a Records array, got {}",
            json_type(&value)
        ));
    };
    let records = match object.get("Records") {
        Some(Value::Array(records)) => records,
        Some(other) => return wrong(format!("Records is {}, not an array", json_type(other))),
        None if looks_like_eventbridge(&value) => {
            return wrong(format!(
                "this is an EventBridge event (detail-type {}), not an SQS batch; is the \
                 function wired to the right trigger?",
                object.get("detail-type").unwrap_or(&Value::Null)
            ));
        }
        None => return wrong("no Records array".to_owned()),
    };
    for (i, record) in records.iter().enumerate() {
        let source = record
            .get("eventSource")
            .or_else(|| record.get("EventSource"))
            .and_then(Value::as_str);
        match source {
            Some("aws:sqs") => {}
            Some(other) => {
                return wrong(format!("record {i} comes from {other}, expected aws:sqs"));
            }
            None => return wrong(format!("record {i} has no eventSource (expected aws:sqs)")),
        }
    }
    serde_json::from_value(value).or_else(|e| wrong(format!("an SQS record is malformed: {e}")))
}
