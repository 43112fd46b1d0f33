//! A Kinesis record's key, and the preparation of its `data`.
//!
//! The key is a business key in the record's `data`, by pointer
//! ([`KeySelector::pointer`]`("/event_id")`). Not the `sequenceNumber`
//! ([`KeySelector::Id`]): a producer whose `PutRecord` timed out and is
//! retried writes the same data again under a new sequence number, so
//! keying on it would apply the retry a second time. Nor the
//! `partitionKey`: it names an ordering lane shared by many records.

use std::any::type_name;

use aws_lambda_events::kinesis::KinesisEventRecord;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Kinesis;
use crate::batch::pipeline::Pipeline;
use crate::batch::{FailureReason, KeyInput, PayloadScope};
use crate::key::IdempotencyKey;

/// A record's parsed body, key and payload.
pub(super) struct Parsed<M> {
    pub(super) body: M,
    pub(super) key: Option<IdempotencyKey>,
    pub(super) payload: Option<Value>,
}

impl Kinesis {
    /// Decodes (Lambda's base64 is decoded by the event types), parses and
    /// keys one record's `data`.
    pub(super) fn parse<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: &KinesisEventRecord,
    ) -> Result<Parsed<M>, FailureReason> {
        let parse = FailureReason::Parse;
        let data = record.kinesis.data.as_slice();
        if data.len() > self.max_data_bytes {
            return Err(FailureReason::BodyTooLarge {
                size: data.len(),
                limit: self.max_data_bytes,
            });
        }
        let text = std::str::from_utf8(data)
            .map_err(|e| parse(format!("data of record {ident} is not UTF-8: {e}")))?;
        let value: Value = serde_json::from_str(text)
            .map_err(|e| parse(format!("data of record {ident} is not JSON: {e}")))?;
        let body: M = serde_json::from_str(text).map_err(|e| {
            parse(format!(
                "data of record {ident} does not parse as {}: {e}",
                type_name::<M>()
            ))
        })?;
        // Keys and payload hashes keep the exact text of numbers that `f64`
        // cannot hold, as SQS bodies do.
        let material = crate::key::exact_material(text, &value).unwrap_or(value);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(record)))?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(material),
        };
        Ok(Parsed { body, key, payload })
    }
}
