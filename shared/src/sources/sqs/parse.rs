//! Telling an SQS event from other payloads, message by message.

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use serde_json::Value;

#[cfg(doc)]
use super::MalformedRecord;
use super::record::SQS;
use super::{BatchError, MESSAGE_GROUP_ID};
use crate::batch::envelope::looks_like_eventbridge;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};

/// How an SQS message that does not parse is read: its `messageId`, and its
/// lane (a FIFO queue's message group).
static SALVAGE: Salvage = Salvage {
    expected: "an SQS",
    event_source: "aws:sqs",
    event_source_fields: &["eventSource", "EventSource"],
    event_source_optional: false,
    noun: "an SQS message",
    id: "/messageId",
    lane: |raw| {
        raw.get("attributes")
            .and_then(|a| a.get(MESSAGE_GROUP_ID))
            .and_then(Value::as_str)
            .map(str::to_owned)
    },
    names: &SQS,
};

/// An SQS event as parsed: its messages in batch order, each an SQS message
/// or, when it does not parse, a [`MalformedRecord`] (which fails on its own
/// in [`process`](super::SqsProcessor::process)).
pub type SqsStreamEvent = StreamEvent<SqsMessage>;

impl From<SqsEvent> for SqsStreamEvent {
    fn from(event: SqsEvent) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as an SQS event, rejecting other shapes: a
/// `Records` array whose items all have `eventSource` `aws:sqs` (an
/// EventBridge event is named as such: the function is wired to the wrong
/// trigger). Each message is parsed on its own. An empty `Records` array is
/// an empty batch.
pub fn parse_sqs_event(value: Value) -> Result<SqsStreamEvent, BatchError> {
    if value.get("Records").is_none() && looks_like_eventbridge(&value) {
        return Err(BatchError::WrongEvent {
            expected: "an SQS",
            message: format!(
                "this is an EventBridge event (detail-type {}), not an SQS batch; is the \
                 function wired to the right trigger?",
                value.get("detail-type").unwrap_or(&Value::Null)
            ),
        });
    }
    parse_stream(value, &SALVAGE)
}
