//! Stream events parsed record by record: a record that is not a record of
//! its source (a missing field, `data` that is not base64, a malformed
//! image...) is kept as a [`MalformedRecord`] and fails alone; the event
//! and its other records stand. Kinesis and DynamoDB Streams parse so.

use std::any::Any;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::delivery::{Delivery, SourceNames};

/// A record of a stream event that does not parse as its source's record.
/// What of it could be read is kept, so that the partial batch response can
/// still name it, its lane still be kept in order, and the record itself be
/// parked as it was delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MalformedRecord {
    /// Its position in the batch.
    pub index: usize,
    /// Its sequence number, when that much could be read.
    pub sequence_number: Option<String>,
    /// Its `eventSourceARN`, when that much could be read.
    pub event_source_arn: Option<String>,
    /// Its ordering lane, when that much could be read: the shard of a
    /// Kinesis record's `eventID`, a DynamoDB stream record's
    /// `eventSourceARN`.
    pub lane: Option<String>,
    /// Why it does not parse.
    pub error: String,
    /// The record as delivered.
    pub raw: Value,
    /// Its source's names.
    names: &'static SourceNames,
}

/// How a source's records are read when they do not parse: what the record
/// is called in messages, and where its sequence number and lane are.
pub(crate) struct Salvage {
    /// `a Kinesis record`, `a DynamoDB stream record`.
    pub(crate) noun: &'static str,
    /// The JSON pointer of its sequence number.
    pub(crate) sequence_number: &'static str,
    /// Its lane, from the raw record.
    pub(crate) lane: fn(&Value) -> Option<String>,
    /// The source's names.
    pub(crate) names: &'static SourceNames,
}

/// Parses each of `records` on its own as an `R`; one that does not parse is
/// kept as a [`MalformedRecord`] (read as `salvage` says).
pub(crate) fn parse_each<R: DeserializeOwned>(
    records: Vec<Value>,
    salvage: &Salvage,
) -> Vec<Result<R, MalformedRecord>> {
    let mut parsed = Vec::with_capacity(records.len());
    for (index, raw) in records.into_iter().enumerate() {
        let error = match R::deserialize(&raw) {
            Ok(record) => {
                parsed.push(Ok(record));
                continue;
            }
            Err(e) => e,
        };
        let text = |pointer: &str| {
            raw.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        parsed.push(Err(MalformedRecord {
            index,
            sequence_number: text(salvage.sequence_number),
            event_source_arn: text("/eventSourceARN"),
            lane: (salvage.lane)(&raw),
            error: format!("record {index} is not {}: {error}", salvage.noun),
            raw,
            names: salvage.names,
        }));
    }
    parsed
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

impl Delivery for MalformedRecord {
    /// The sequence number, when it could be read.
    fn id(&self) -> Option<&str> {
        non_empty(self.sequence_number.as_deref())
    }

    /// The lane, when it could be read.
    fn lane(&self) -> Option<&str> {
        non_empty(self.lane.as_deref())
    }

    fn position(&self) -> Option<&str> {
        self.id()
    }

    fn source(&self) -> &'static SourceNames {
        self.names
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
