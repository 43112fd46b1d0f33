//! A Kinesis record's `data` parsed and keyed: a business key by pointer,
//! never the `sequenceNumber` (a producer's `PutRecord` retry writes the
//! same data under a new one) nor the `partitionKey` (an ordering lane).

use serde::de::DeserializeOwned;

use super::{Kinesis, KinesisEventRecord, KinesisRecord};
use crate::batch::{FailureReason, Pipeline, Prepare, Prepared};
use crate::sources::prepare_json;

impl<M: DeserializeOwned> Prepare<KinesisRecord<M>> for Kinesis {
    /// Lambda's base64 is decoded by the event types; `data` over
    /// [`max_data_bytes`](super::KinesisProcessor::max_data_bytes) fails
    /// unparsed.
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
        Ok(Prepared::new(
            KinesisRecord {
                body: p.record,
                record,
                key,
            },
            p.key,
            p.payload,
        ))
    }
}
