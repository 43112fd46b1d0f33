//! Telling a Kinesis event from other payloads, record by record.

use aws_lambda_events::kinesis::{KinesisEvent, KinesisEventRecord};
use serde_json::Value;

use super::record::KINESIS;
use crate::batch::BatchError;
#[cfg(doc)]
use crate::batch::malformed::MalformedRecord;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};

/// How a Kinesis record that does not parse is read: its lane is the shard
/// of its `eventID` (`<shardId>:<sequenceNumber>`).
static SALVAGE: Salvage = Salvage {
    expected: "a Kinesis",
    event_source: "aws:kinesis",
    event_source_fields: &["eventSource"],
    event_source_optional: false,
    noun: "a Kinesis record",
    id: "/kinesis/sequenceNumber",
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
pub type KinesisStreamEvent = StreamEvent<KinesisEventRecord>;

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
    parse_stream(value, &SALVAGE)
}
