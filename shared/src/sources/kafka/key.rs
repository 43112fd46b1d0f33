//! A Kafka record's value parsed and keyed: a business key in the value or
//! a header, never the offset (a producer's retry writes the same record at
//! a new one) nor the record key (an ordering shared by many records).

use serde::de::DeserializeOwned;

use super::{Kafka, KafkaDelivery, KafkaMessage};
use crate::batch::{FailureReason, Pipeline, Prepare, Prepared};
use crate::sources::prepare_json;

impl<M: DeserializeOwned> Prepare<KafkaMessage<M>> for Kafka {
    /// A tombstone (no value) is JSON `null`.
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        delivery: KafkaDelivery,
    ) -> Result<Prepared<KafkaMessage<M>>, FailureReason> {
        if let Some(problem) = &delivery.undecodable {
            return Err(FailureReason::Parse(format!("record {ident}: {problem}")));
        }
        let value = delivery.value.as_deref();
        let p = prepare_json::<M>(pipeline, ident, "value", value, &delivery, self.payload)?;
        let key = p.key.clone();
        Ok(Prepared::new(
            KafkaMessage {
                body: p.record,
                delivery,
                key,
            },
            p.key,
            p.payload,
        ))
    }
}
