//! A Kinesis record as the pipeline ([`Delivery`]) and the handler see it.

use std::any::Any;

use aws_lambda_events::kinesis::KinesisEventRecord;

use crate::batch::{Delivery, IdField, LaneField, SourceNames};
use crate::key::IdempotencyKey;

/// The names of a Kinesis record's notions.
pub(crate) static KINESIS: SourceNames = SourceNames {
    id: "sequenceNumber",
    id_field: IdField::SequenceNumber,
    lane_field: LaneField::Shard,
    deduplication_id: "a deduplication id (Kinesis records have none)",
    no_lane: "Kinesis record without a shard (no eventID)",
};

/// The shard of a record: its `eventID` is `<shardId>:<sequenceNumber>`.
fn shard_of(record: &KinesisEventRecord) -> Option<&str> {
    record
        .event_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .map(|(shard, _)| shard)
        .filter(|shard| !shard.is_empty())
}

impl Delivery for KinesisEventRecord {
    /// The `sequenceNumber`: what `batchItemFailures` names.
    fn id(&self) -> Option<&str> {
        Some(self.kinesis.sequence_number.as_str()).filter(|s| !s.is_empty())
    }

    /// The shard (from `eventID`).
    fn lane(&self) -> Option<&str> {
        shard_of(self)
    }

    /// The `sequenceNumber`.
    fn position(&self) -> Option<&str> {
        self.id()
    }

    /// The decoded `data`.
    fn body(&self) -> Option<&[u8]> {
        Some(self.kinesis.data.as_slice())
    }

    fn source(&self) -> &'static SourceNames {
        &KINESIS
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One Kinesis record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KinesisRecord<M> {
    /// The parsed `data` (base64-decoded, then JSON).
    pub body: M,
    /// The record as Lambda delivered it (ids, `partitionKey`, the raw
    /// `data`, the arrival time).
    pub record: KinesisEventRecord,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M> KinesisRecord<M> {
    /// A record (handler unit tests).
    pub fn new(body: M, record: KinesisEventRecord) -> Self {
        Self {
            body,
            record,
            key: None,
        }
    }

    /// The `sequenceNumber` (its position in the shard).
    pub fn sequence_number(&self) -> &str {
        &self.record.kinesis.sequence_number
    }

    /// The `partitionKey` the producer chose.
    pub fn partition_key(&self) -> &str {
        &self.record.kinesis.partition_key
    }

    /// The shard, from the `eventID`.
    pub fn shard_id(&self) -> Option<&str> {
        shard_of(&self.record)
    }
}
