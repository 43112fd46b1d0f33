//! The partial batch response of a Kafka event source mapping (Amazon MSK
//! and self-managed Apache Kafka, `ReportBatchItemFailures`):
//!
//! ```json
//! {"batchItemFailures": [{"itemIdentifier": {"partition": "orders-0", "offset": 42}}]}
//! ```
//!
//! `partition` is the topic-partition as the event's `records` map names
//! it, `offset` the record's offset (a number). Lambda resumes each listed
//! topic-partition from the listed offset; the pipeline's
//! [`Ordering::StopLane`](crate::adapter::Ordering::StopLane) names the first
//! failed record of each. `aws_lambda_events` 1.2.1 has no type for it:
//! these serialize exactly so.

use serde::{Deserialize, Serialize};

use super::record::AT;
use crate::adapter::PartialResponse;

/// The response of a Kafka-triggered function: the records to resume from.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct KafkaEventResponse {
    /// One entry per topic-partition to resume (empty: the batch is done).
    pub batch_item_failures: Vec<KafkaBatchItemFailure>,
}

/// One record to resume from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct KafkaBatchItemFailure {
    /// Its topic-partition and offset.
    pub item_identifier: KafkaItemIdentifier,
}

/// A Kafka record's identifier in the partial batch response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KafkaItemIdentifier {
    /// The topic-partition, as the event's `records` map names it
    /// (`orders-0`).
    pub partition: String,
    /// The record's offset.
    pub offset: i64,
}

impl KafkaItemIdentifier {
    /// The identifier of the record `id` (`<topic-partition>@<offset>`, a
    /// [`KafkaDelivery::id`](super::KafkaDelivery::id)); `None` when `id`
    /// is not one.
    pub fn parse(id: &str) -> Option<Self> {
        let (partition, offset) = id.rsplit_once(AT)?;
        Some(Self {
            partition: partition.to_owned(),
            offset: offset.parse().ok()?,
        })
    }
}

impl KafkaEventResponse {
    /// Adds the record `partition`/`offset` to resume from.
    pub fn add_failure(&mut self, partition: impl Into<String>, offset: i64) {
        self.batch_item_failures.push(KafkaBatchItemFailure {
            item_identifier: KafkaItemIdentifier {
                partition: partition.into(),
                offset,
            },
        });
    }
}

impl PartialResponse for KafkaEventResponse {
    /// `id` is a [`KafkaDelivery::id`](super::KafkaDelivery::id), which
    /// always parses (the pipeline only names ids it was given).
    fn add_item_failure(&mut self, id: &str) {
        if let Some(item_identifier) = KafkaItemIdentifier::parse(id) {
            self.batch_item_failures
                .push(KafkaBatchItemFailure { item_identifier });
        }
    }
}
