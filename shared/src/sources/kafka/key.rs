//! A Kafka record's key, and the preparation of its value.
//!
//! The key is a business key in the record's decoded value, by pointer
//! ([`KeySelector::pointer`]`("/event_id")`), or a header the producer sets
//! ([`KeySelector::attribute`]`("idempotency-key")`). Never the offset
//! ([`KeySelector::Id`] keys on `<topic-partition>@<offset>`): a producer
//! whose send timed out and is retried writes the same record again at a
//! new offset, so keying on it would apply the retry a second time. Nor the
//! Kafka record key: it names an ordering (all of one customer's orders),
//! shared by many records.
//!
//! [`KeySelector::pointer`]: crate::KeySelector::pointer
//! [`KeySelector::attribute`]: crate::KeySelector::attribute
//! [`KeySelector::Id`]: crate::KeySelector::Id

use std::any::type_name;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Kafka;
use super::record::KafkaDelivery;
use crate::batch::{FailureReason, KeyInput, PayloadScope, Pipeline};
use crate::key::IdempotencyKey;

/// A record's parsed value, key and payload.
pub(super) struct Parsed<M> {
    pub(super) body: M,
    pub(super) key: Option<IdempotencyKey>,
    pub(super) payload: Option<Value>,
}

/// How a Kafka record's value is parsed and keyed: the part of a
/// [`KafkaProcessor`]'s settings its records' preparation reads.
impl Kafka {
    /// Parses and keys one record's decoded value. A tombstone (no value)
    /// is JSON `null`.
    pub(super) fn parse<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        delivery: &KafkaDelivery,
    ) -> Result<Parsed<M>, FailureReason> {
        let parse = FailureReason::Parse;
        if let Some(problem) = &delivery.undecodable {
            return Err(parse(format!("record {ident}: {problem}")));
        }
        let (value, text) = match delivery.value.as_deref() {
            None => (Value::Null, None),
            Some(bytes) => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| parse(format!("value of record {ident} is not UTF-8: {e}")))?;
                let value: Value = serde_json::from_str(text)
                    .map_err(|e| parse(format!("value of record {ident} is not JSON: {e}")))?;
                (value, Some(text))
            }
        };
        let body: M = match text {
            Some(text) => serde_json::from_str(text).map_err(|e| {
                parse(format!(
                    "value of record {ident} does not parse as {}: {e}",
                    type_name::<M>()
                ))
            })?,
            None => M::deserialize(&Value::Null).map_err(|e| {
                parse(format!(
                    "record {ident} is a tombstone (no value), which does not parse as {}: {e}",
                    type_name::<M>()
                ))
            })?,
        };
        // Keys and payload hashes keep the exact text of numbers that `f64`
        // cannot hold, as SQS bodies do.
        let material = text
            .and_then(|text| crate::key::exact_material(text, &value))
            .unwrap_or(value);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(delivery)))?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(material),
        };
        Ok(Parsed { body, key, payload })
    }
}
