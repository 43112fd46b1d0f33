//! Telling a Kafka event from other invocation payloads.

use aws_lambda_events::kafka::KafkaEvent;
use serde_json::Value;

use crate::batch::{BatchError, json_type};

/// The `eventSource` of an Amazon MSK event.
pub const MSK_EVENT_SOURCE: &str = "aws:kafka";
/// The `eventSource` of a self-managed Apache Kafka event.
pub const SELF_MANAGED_EVENT_SOURCE: &str = "SelfManagedKafka";

/// Parses an invocation payload as a Kafka event, rejecting other shapes:
/// `eventSource` `aws:kafka` (Amazon MSK) or `SelfManagedKafka`, and a
/// `records` object of topic-partitions, each an array of records.
pub fn parse_kafka_event(value: Value) -> Result<KafkaEvent, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: "a Kafka",
            message,
        })
    };
    match value.get("eventSource") {
        Some(Value::String(s)) if s == MSK_EVENT_SOURCE || s == SELF_MANAGED_EVENT_SOURCE => {}
        Some(Value::String(other)) => {
            return wrong(format!(
                "eventSource is {other}, expected {MSK_EVENT_SOURCE} or {SELF_MANAGED_EVENT_SOURCE}"
            ));
        }
        Some(other) => return wrong(format!("eventSource is {}", json_type(other))),
        None => return wrong(format!("no eventSource in {}", json_type(&value))),
    }
    match value.get("records") {
        Some(Value::Object(partitions)) => {
            if let Some((name, other)) = partitions.iter().find(|(_, v)| !v.is_array()) {
                return wrong(format!(
                    "records of {name} is {}, not an array",
                    json_type(other)
                ));
            }
        }
        Some(other) => return wrong(format!("records is {}, not an object", json_type(other))),
        None => return wrong("no records object".to_owned()),
    }
    serde_json::from_value(value).or_else(|e| wrong(format!("a Kafka record is malformed: {e}")))
}
