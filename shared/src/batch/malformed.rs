//! Stream events parsed record by record: a record that is not a record of
//! its source is kept as a [`MalformedRecord`] and fails alone.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::delivery::{Delivery, Ids, SourceNames, Within};
use super::parking::Ticket;
use super::pipeline::Pipeline;
use super::report::{BatchError, FailureReason, json_type};
use super::slot::Slot;

/// A record of a stream event that does not parse as its source's record:
/// what of it could be read, to name it, keep its lane's order and park it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MalformedRecord {
    /// Its position in the batch.
    pub index: usize,
    /// Its id (a `messageId`, a sequence number), if it could be read.
    pub id: Option<String>,
    /// Its `eventSourceARN`, if it could be read.
    pub event_source_arn: Option<String>,
    /// Its ordering lane, if it could be read.
    pub lane: Option<String>,
    /// Why it does not parse.
    pub error: String,
    /// The record as delivered.
    pub raw: Value,
    /// Its position in its lane when its id is more (a Kafka offset).
    pub(crate) position: Option<String>,
    /// What names its source without an ARN (a self-managed Kafka cluster's
    /// bootstrap servers), for its parked id.
    pub(crate) cluster: Option<String>,
    names: &'static SourceNames,
    event_source: &'static str,
}

/// A stream event as parsed: its records in batch order, each an `R` or a
/// [`MalformedRecord`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StreamEvent<R> {
    /// The records, in batch order.
    pub records: Vec<Result<R, MalformedRecord>>,
}

impl<R> StreamEvent<R> {
    /// The event of `records` (all parsed).
    pub fn new(records: Vec<R>) -> Self {
        Self::parsed(records.into_iter().map(Ok).collect())
    }

    /// The event of `records`, each parsed or kept as a [`MalformedRecord`]
    /// (a source parsing its own event shape).
    pub fn parsed(records: Vec<Result<R, MalformedRecord>>) -> Self {
        Self { records }
    }
}

/// How a source's event of a `Records` array is told from other payloads,
/// and its records read when they do not parse ([`parse_stream`]): a
/// source states it once, as a `static`.
#[derive(Debug)]
pub struct Salvage {
    /// The source's names.
    pub names: SourceNames,
    /// `a Kinesis`: what a wrong payload was expected to be.
    pub expected: &'static str,
    /// The records' `eventSource`.
    pub event_source: &'static str,
    /// The fields that may hold it (`eventSource`; SNS's `EventSource`).
    pub event_source_fields: &'static [&'static str],
    /// Whether a record without `eventSource` is read as one of the source
    /// (the field is optional in DynamoDB's record type).
    pub event_source_optional: bool,
    /// `a Kinesis record`: what a record that does not parse is not.
    pub noun: &'static str,
    /// The JSON Pointer of its id in a record as delivered.
    pub id: &'static str,
    /// The lane of a record as delivered, if it can be read.
    pub lane: fn(&Value) -> Option<String>,
}

/// Parses a payload as `salvage`'s stream event: a `Records` array whose
/// items all come from its `eventSource` (else [`BatchError::WrongEvent`]:
/// another source's event), each parsed as `R` on its own (one that does
/// not parse is kept as a [`MalformedRecord`] and fails alone).
pub fn parse_stream<R: DeserializeOwned>(
    value: Value,
    salvage: &'static Salvage,
) -> Result<StreamEvent<R>, BatchError> {
    let wrong = |message: String| {
        Err(BatchError::WrongEvent {
            expected: salvage.expected,
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
    let expected = salvage.event_source;
    for (i, record) in records.iter().enumerate() {
        let source = salvage
            .event_source_fields
            .iter()
            .find_map(|field| record.get(*field))
            .and_then(Value::as_str);
        match source {
            Some(source) if source == expected => {}
            None if salvage.event_source_optional => {}
            Some(other) => {
                return wrong(format!(
                    "record {i} comes from {other}, expected {expected}"
                ));
            }
            None => {
                return wrong(format!(
                    "record {i} has no {} (expected {expected})",
                    salvage.event_source_fields[0]
                ));
            }
        }
    }
    let malformed = |index, raw: Value, error| MalformedRecord {
        id: text(&raw, salvage.id),
        event_source_arn: text(&raw, "/eventSourceARN"),
        lane: (salvage.lane)(&raw),
        error: format!("record {index} is not {}: {error}", salvage.noun),
        ..MalformedRecord::new(index, raw, &salvage.names, salvage.event_source)
    };
    let mut parsed = Vec::with_capacity(records.len());
    for (index, raw) in records.into_iter().enumerate() {
        parsed.push(R::deserialize(&raw).map_err(|e| malformed(index, raw, e)));
    }
    Ok(StreamEvent { records: parsed })
}

/// The string at `pointer` in `raw`.
pub(crate) fn text(raw: &Value, pointer: &str) -> Option<String> {
    raw.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

impl MalformedRecord {
    /// The record at `index` as delivered (`raw`) by the source of `names`
    /// (its `event_source`, as parked), with nothing read of it yet: set
    /// what can be read of it (its id, its lane, its `eventSourceARN`) and
    /// why it does not parse (`error`).
    pub fn new(
        index: usize,
        raw: Value,
        names: &'static SourceNames,
        event_source: &'static str,
    ) -> Self {
        let (id, event_source_arn, lane, error) = (None, None, None, String::new());
        Self {
            index,
            id,
            event_source_arn,
            lane,
            error,
            raw,
            position: None,
            cluster: None,
            names,
            event_source,
        }
    }

    /// Its slot at `index`: failed for not parsing, ordered `within` its
    /// lane, with its parking ticket when the pipeline parks.
    pub(crate) fn into_slot<Rec>(
        mut self,
        index: usize,
        within: Within,
        pipeline: &Pipeline<'_>,
    ) -> Slot<Rec> {
        let ids = Ids::of(&self, within);
        let ident = ids.ident(index, self.names.id);
        let ticket = pipeline.parks().then(|| {
            let raw = std::mem::take(&mut self.raw);
            let arn = self.event_source_arn.as_deref();
            let ticket = Ticket::new(self.event_source, arn, &self, raw);
            ticket.map(|t| t.in_cluster(self.cluster.as_deref()))
        });
        let ticket = ticket.flatten();
        let failed = Err(FailureReason::Parse(self.error));
        Slot::new(index, ident, ids, failed, ticket)
    }
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

impl Delivery for MalformedRecord {
    fn id(&self) -> Option<&str> {
        non_empty(self.id.as_deref())
    }

    fn lane(&self) -> Option<&str> {
        non_empty(self.lane.as_deref())
    }

    fn position(&self) -> Option<&str> {
        non_empty(self.position.as_deref()).or_else(|| self.id())
    }

    fn source(&self) -> &'static SourceNames {
        self.names
    }
}
