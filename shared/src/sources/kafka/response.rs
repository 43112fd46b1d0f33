//! How a Kafka-triggered function answers ([`KafkaItemFailures`]).

use serde::{Deserialize, Serialize};

use super::record::AT;
use crate::batch::PartialResponse;
use crate::batch::report::{BatchReport, FailureReason};
use crate::error::ErrorType;

/// Whether the event source mapping acts on `batchItemFailures`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KafkaItemFailures {
    /// It does not: a batch with a record not done fails the invocation
    /// ([`KafkaError::BatchFailed`]). The default: safe with any mapping.
    #[default]
    FailBatch,
    /// Provisioned mode with `ReportBatchItemFailures`: the response names
    /// every failed and every skipped record.
    Reported,
}

/// A Kafka batch had records not done under [`KafkaItemFailures::FailBatch`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// These records failed or were skipped behind a failure.
    #[error(
        "{} of the batch's Kafka records not done ({}), the first because {reason}; failing \
         the invocation so that Lambda retries the batch (the mapping is not declared to act on \
         batchItemFailures, provisioned mode with ReportBatchItemFailures, and would commit \
         them); the records that were done replay",
        .records.len(),
        shown(.records)
    )]
    BatchFailed {
        /// Every record not done, `<topic-partition>@<offset>`, in batch order.
        records: Vec<String>,
        /// Why the first of them that failed (not skipped) failed.
        reason: FailureReason,
    },
}

/// The records an error message lists: the first 20, then how many more.
fn shown(records: &[String]) -> String {
    let mut text = records[..records.len().min(20)].join(", ");
    if records.len() > 20 {
        text.push_str(&format!(" and {} more", records.len() - 20));
    }
    text
}

impl ErrorType for KafkaError {
    /// `KafkaRecordsFailed`.
    fn error_type(&self) -> &'static str {
        "KafkaRecordsFailed"
    }
}

/// The answer to a Kafka batch under `mode`: the partial batch response, or
/// the error of a batch not done under [`KafkaItemFailures::FailBatch`] (in
/// either mode, of one with a record without an id, which Kafka never has).
pub fn answer<T>(
    report: &BatchReport<T>,
    mode: KafkaItemFailures,
) -> Result<KafkaEventResponse, KafkaError> {
    let failed: Vec<(Option<&str>, usize, &FailureReason)> = (report.records.iter())
        .filter_map(|r| {
            let id = r.message_id.as_deref().filter(|id| !id.is_empty());
            Some((id, r.position, r.outcome.as_ref().err()?))
        })
        .collect();
    let mut response = KafkaEventResponse::default();
    if mode == KafkaItemFailures::Reported && failed.iter().all(|(id, ..)| id.is_some()) {
        for (id, ..) in &failed {
            response.add_item_failure(id.unwrap_or_default());
        }
        return Ok(response);
    }
    let Some(first) = (failed.iter())
        .find(|(.., reason)| !matches!(reason, FailureReason::Skipped { .. }))
        .or(failed.first())
    else {
        return Ok(response);
    };
    let name = |(id, position, _): &(Option<&str>, usize, _)| match id {
        Some(id) => (*id).to_owned(),
        None => format!("record #{position} (no offset)"),
    };
    let records = failed.iter().map(name).collect();
    Err(KafkaError::BatchFailed {
        records,
        reason: first.2.clone(),
    })
}

/// The response under [`KafkaItemFailures::Reported`], filled by [`answer`]
/// (`BatchReport::response_as` would name only each partition's first).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct KafkaEventResponse {
    /// One entry per record to deliver again (empty: the batch is done).
    pub batch_item_failures: Vec<KafkaBatchItemFailure>,
}

/// One record to deliver again.
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
    /// The topic-partition, as the event's `records` map names it (`orders-0`).
    pub partition: String,
    /// The record's offset.
    pub offset: i64,
}

impl KafkaItemIdentifier {
    /// The identifier of the record `id` (`<topic-partition>@<offset>`).
    pub fn parse(id: &str) -> Option<Self> {
        let (partition, offset) = id.rsplit_once(AT)?;
        let (partition, offset) = (partition.to_owned(), offset.parse().ok()?);
        Some(Self { partition, offset })
    }
}

impl KafkaEventResponse {
    /// Adds the record `partition`/`offset` to deliver again.
    pub fn add_failure(&mut self, partition: impl Into<String>, offset: i64) {
        let item_identifier = KafkaItemIdentifier {
            partition: partition.into(),
            offset,
        };
        self.batch_item_failures
            .push(KafkaBatchItemFailure { item_identifier });
    }
}

impl PartialResponse for KafkaEventResponse {
    /// `id` is a [`KafkaDelivery::id`](super::KafkaDelivery::id): it parses.
    fn add_item_failure(&mut self, id: &str) {
        if let Some(item_identifier) = KafkaItemIdentifier::parse(id) {
            self.batch_item_failures
                .push(KafkaBatchItemFailure { item_identifier });
        }
    }
}
