//! A Kinesis record as the pipeline ([`Delivery`]) and the handler see it:
//! its `data` parsed and keyed ([`Prepare`]).

use std::any::Any;

use serde::de::DeserializeOwned;

use super::{Kinesis, KinesisEventRecord, SALVAGE};
use crate::batch::{Delivery, FailureReason, Pipeline, Prepare, Prepared, SourceNames};
use crate::key::IdempotencyKey;
use crate::sources::prepare_json;

/// The shard of an `eventID` (`<shardId>:<sequenceNumber>`).
pub(super) fn shard_of(event_id: &str) -> Option<&str> {
    let (shard, _) = event_id.split_once(':')?;
    Some(shard).filter(|shard| !shard.is_empty())
}

impl Delivery for KinesisEventRecord {
    fn id(&self) -> Option<&str> {
        Some(self.kinesis.sequence_number.as_str()).filter(|s| !s.is_empty())
    }

    fn lane(&self) -> Option<&str> {
        shard_of(self.event_id.as_deref()?)
    }

    fn position(&self) -> Option<&str> {
        self.id()
    }

    fn body(&self) -> Option<&[u8]> {
        Some(self.kinesis.data.as_slice())
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
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
    /// The record as Lambda delivered it (`sequenceNumber`, `partitionKey`,
    /// the raw `data`, the arrival time).
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

    /// The shard, from the `eventID`.
    pub fn shard_id(&self) -> Option<&str> {
        self.record.lane()
    }
}

impl<M: DeserializeOwned> Prepare<KinesisRecord<M>> for Kinesis {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: KinesisEventRecord,
    ) -> Result<Prepared<KinesisRecord<M>>, FailureReason> {
        let data = record.kinesis.data.as_slice();
        if data.len() > self.max_data_bytes {
            let (size, limit) = (data.len(), self.max_data_bytes);
            return Err(FailureReason::BodyTooLarge { size, limit });
        }
        let p = prepare_json::<M>(pipeline, ident, "data", Some(data), &record, self.payload)?;
        let key = p.key.clone();
        let record = KinesisRecord {
            body: p.record,
            record,
            key,
        };
        Ok(Prepared::new(record, p.key, p.payload))
    }
}
