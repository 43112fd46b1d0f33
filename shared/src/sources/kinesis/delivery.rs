//! A Kinesis batch as deliveries: each plain record one, each KPL
//! aggregate ([`super::aggregate`]) split into its user records, each its
//! own [`KinesisDelivery`] (its partition key, data, key and log line; its
//! id `<sequenceNumber>:<subSequenceNumber>`). An aggregate that cannot be
//! read is one poison record.

use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use super::aggregate::{self, UserRecord};
use super::{KinesisEventRecord, SALVAGE};
use crate::batch::malformed::MalformedRecord;
use crate::batch::{Delivery, SourceNames};

/// One delivery of a Kinesis batch: a plain record, or one user record of
/// a KPL aggregate. What a key function gets as
/// [`KeyInput::raw`](crate::KeyInput::raw)`::<KinesisDelivery>()`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KinesisDelivery {
    /// The record: a user record's `partitionKey` and `data` are its own,
    /// its `sequenceNumber`, `eventID` and the rest its aggregate's.
    pub record: KinesisEventRecord,
    /// Where a user record sits in its aggregate; `None` for a plain record.
    pub aggregated: Option<Aggregated>,
    /// A user record's id, `<sequenceNumber>:<subSequenceNumber>`.
    id: Option<String>,
}

/// Where a user record sits in its KPL aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Aggregated {
    /// Its place in the aggregate, from 0 (the KCL's `subSequenceNumber`).
    pub sub_sequence_number: u64,
    /// Its explicit hash key, when its producer set one.
    pub explicit_hash_key: Option<String>,
}

impl KinesisDelivery {
    /// A plain record (not an aggregate, or deaggregation off).
    pub fn plain(record: KinesisEventRecord) -> Self {
        Self {
            record,
            aggregated: None,
            id: None,
        }
    }

    /// User record `sub` of the aggregate `record` (its `data` taken out).
    fn user(record: &KinesisEventRecord, sub: u64, user: UserRecord) -> Self {
        let mut copy = record.clone();
        copy.kinesis.partition_key = user.partition_key;
        copy.kinesis.data.0 = user.data;
        let id = user_record_id(&record.kinesis.sequence_number, sub);
        Self {
            record: copy,
            aggregated: Some(Aggregated {
                sub_sequence_number: sub,
                explicit_hash_key: user.explicit_hash_key,
            }),
            id: Some(id),
        }
    }

    /// The record and, for a user record, where it sits in its aggregate.
    pub fn into_parts(self) -> (KinesisEventRecord, Option<Aggregated>) {
        (self.record, self.aggregated)
    }
}

/// The id of user record `sub` of the aggregate at `sequence_number`:
/// `<sequenceNumber>:<subSequenceNumber>`.
fn user_record_id(sequence_number: &str, sub: u64) -> String {
    format!("{sequence_number}:{sub}")
}

/// The sequence number `batchItemFailures` names for a delivery's `id`: a
/// user record's aggregate's (Kinesis checkpoints whole records), a plain
/// record's own.
pub(crate) fn checkpoint_of(id: &str) -> &str {
    match id.split_once(':') {
        Some((sequence, sub))
            if !sequence.is_empty()
                && sequence.bytes().all(|b| b.is_ascii_digit())
                && !sub.is_empty()
                && sub.bytes().all(|b| b.is_ascii_digit()) =>
        {
            sequence
        }
        _ => id,
    }
}

/// Appends the deliveries of `record` (at `index` in the batch) to `out`:
/// the record itself when it is no aggregate, each of its user records
/// when it is, or one poison record when it is an aggregate that cannot
/// be read.
pub(crate) fn split(
    index: usize,
    mut record: KinesisEventRecord,
    out: &mut Vec<Result<KinesisDelivery, MalformedRecord>>,
) {
    match aggregate::unpack(&record.kinesis.data) {
        Ok(None) => out.push(Ok(KinesisDelivery::plain(record))),
        Ok(Some(users)) => {
            // Each user record is a copy of the aggregate with its own data.
            record.kinesis.data.0 = Vec::new();
            out.reserve(users.len());
            for (sub, user) in (0u64..).zip(users) {
                out.push(Ok(KinesisDelivery::user(&record, sub, user)));
            }
        }
        Err(error) => {
            let id = Some(record.kinesis.sequence_number.clone()).filter(|s| !s.is_empty());
            let lane = record.lane().map(str::to_owned);
            let event_source_arn = record.event_source_arn.clone();
            let raw = serde_json::to_value(&record).unwrap_or(Value::Null);
            let mut poison = MalformedRecord::new(index, raw, &SALVAGE.names, SALVAGE.event_source);
            poison.id = id;
            poison.event_source_arn = event_source_arn;
            poison.lane = lane;
            poison.error = format!(
                "record {index} is a KPL aggregate that cannot be read (permanent): {error}"
            );
            out.push(Err(poison));
        }
    }
}

/// Whether a record as delivered (`raw`) is a KPL aggregate: the partition
/// keys of its user records are unknown when it cannot be read.
pub(crate) fn is_aggregate(raw: &Value) -> bool {
    use base64::Engine as _;
    let Some(data) = raw.pointer("/kinesis/data").and_then(Value::as_str) else {
        return false;
    };
    // 8 characters of base64 are the first 6 bytes.
    let head = data.get(..8).unwrap_or(data);
    (base64::engine::general_purpose::STANDARD.decode(head))
        .is_ok_and(|b| aggregate::is_aggregate(&b))
}

impl Delivery for KinesisDelivery {
    fn id(&self) -> Option<&str> {
        match &self.id {
            Some(id) => Some(id),
            None => self.record.id(),
        }
    }

    fn lane(&self) -> Option<&str> {
        self.record.lane()
    }

    fn body(&self) -> Option<&[u8]> {
        Some(self.record.kinesis.data.as_slice())
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }
}

/// A delivery as parked: the record as delivered, and for a user record its
/// `kinesis` with `subSequenceNumber`, `explicitHashKey` and `aggregated`,
/// as the `kinesis-aggregation` deaggregators write a user record.
impl Serialize for KinesisDelivery {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(aggregated) = &self.aggregated else {
            return self.record.serialize(serializer);
        };
        let mut value = serde_json::to_value(&self.record).map_err(serde::ser::Error::custom)?;
        if let Some(kinesis) = value.get_mut("kinesis").and_then(Value::as_object_mut) {
            kinesis.insert(
                "subSequenceNumber".to_owned(),
                json!(aggregated.sub_sequence_number),
            );
            kinesis.insert(
                "explicitHashKey".to_owned(),
                json!(aggregated.explicit_hash_key),
            );
            kinesis.insert("aggregated".to_owned(), json!(true));
        }
        value.serialize(serializer)
    }
}
