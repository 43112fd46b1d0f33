//! Telling an SNS event from other payloads, record by record.

use aws_lambda_events::sns::{SnsEvent, SnsRecord};
use serde_json::Value;

use super::record::SNS;
use crate::batch::BatchError;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};

/// The `EventSource` of the records of an SNS event.
pub const SNS_EVENT_SOURCE: &str = "aws:sns";

/// How an SNS record that does not parse is read: its `MessageId`.
static SALVAGE: Salvage = Salvage {
    expected: "an SNS",
    event_source: SNS_EVENT_SOURCE,
    event_source_fields: &["EventSource"],
    event_source_optional: false,
    noun: "an SNS record",
    id: "/Sns/MessageId",
    lane: |_: &Value| None,
    names: &SNS,
};

/// An SNS event as parsed: its records, each an SNS record or, when it does
/// not parse, a [`MalformedRecord`](crate::batch::MalformedRecord).
pub type SnsStreamEvent = StreamEvent<SnsRecord>;

impl From<SnsEvent> for SnsStreamEvent {
    fn from(event: SnsEvent) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as an SNS event, rejecting other shapes: a
/// `Records` array whose items all have `EventSource` `aws:sns`. Each
/// record is parsed on its own.
pub fn parse_sns_event(value: Value) -> Result<SnsStreamEvent, BatchError> {
    parse_stream(value, &SALVAGE)
}
