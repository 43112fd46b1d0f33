//! How a Kafka-triggered function answers (Amazon MSK and self-managed
//! Apache Kafka), in one of two modes ([`KafkaItemFailures`]).
//!
//! The Lambda developer guide ("Configuring error handling controls for Kafka
//! event sources", `kafka-retry-configurations`) lists "Partial batch
//! response – Allow your function to return information about which records
//! in a batch failed processing, so Lambda can retry only the failed
//! records" among the error handling controls, and configures them thus:
//! "Under Event poller configuration, select provisioned mode to configure
//! error handling controls", then "To enable partial batch response, select
//! ReportBatchItemFailures" (its CLI example passes
//! `--provisioned-poller-config`). A mapping without them does not act on
//! `batchItemFailures`: an invocation that succeeds commits the batch's
//! offsets, its failed and skipped records included.
//!
//! * [`KafkaItemFailures::FailBatch`] (the default): a batch with any
//!   record not done fails the invocation ([`KafkaError::BatchFailed`],
//!   naming each by `<topic-partition>@<offset>`). Lambda retries the batch;
//!   the records that were done replay (the idempotency records make the
//!   retry safe).
//! * [`KafkaItemFailures::Reported`]: the mapping is in provisioned mode
//!   with `FunctionResponseTypes: [ReportBatchItemFailures]`. The response
//!   names **every** failed and every skipped record of each
//!   topic-partition, not only the first: correct whether Lambda resumes
//!   each partition at its lowest named offset or retries only the named
//!   records.
//!
//! ```json
//! {"batchItemFailures": [{"itemIdentifier": {"partition": "orders-0", "offset": 42}},
//!                        {"itemIdentifier": {"partition": "orders-0", "offset": 43}}]}
//! ```
//!
//! `partition` is the topic-partition as the event's `records` map names
//! it, `offset` the record's offset (a number). `aws_lambda_events` 1.2.1
//! has no type for it: these serialize exactly so.

use serde::{Deserialize, Serialize};

use super::record::AT;
use crate::batch::PartialResponse;
use crate::batch::report::{BatchReport, FailureReason};
use crate::error::ErrorType;

/// Whether the event source mapping acts on the function's
/// `batchItemFailures`: how a [`KafkaProcessor`](super::KafkaProcessor)
/// answers a batch with records not done (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KafkaItemFailures {
    /// The mapping does not process item failures (not provisioned mode, or
    /// no `ReportBatchItemFailures`): a batch with a record not done fails
    /// the invocation ([`KafkaError::BatchFailed`]) and Lambda retries the
    /// batch. The default: safe with any mapping.
    #[default]
    FailBatch,
    /// The mapping is in provisioned mode with
    /// `FunctionResponseTypes: [ReportBatchItemFailures]`: the response
    /// names every failed and every skipped record.
    Reported,
}

/// A Kafka batch had records not done and the mapping does not act on
/// `batchItemFailures` ([`KafkaItemFailures::FailBatch`]): the invocation
/// fails, so that Lambda retries the batch instead of committing them.
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
        /// Every record not done, `<topic-partition>@<offset>`, in batch
        /// order (partitions in name order, each in offset order).
        records: Vec<String>,
        /// Why the first of them that failed (not skipped) failed.
        reason: FailureReason,
    },
}

/// The records an error message lists: the first [`SHOWN`], then how many
/// more.
const SHOWN: usize = 20;

fn shown(records: &[String]) -> String {
    let mut text = records[..records.len().min(SHOWN)].join(", ");
    if records.len() > SHOWN {
        text.push_str(&format!(" and {} more", records.len() - SHOWN));
    }
    text
}

impl ErrorType for KafkaError {
    /// `KafkaRecordsFailed`.
    fn error_type(&self) -> &'static str {
        "KafkaRecordsFailed"
    }
}

/// The answer to a Kafka batch under `mode` (see the module docs): the
/// partial batch response, empty when every record is done; under
/// [`KafkaItemFailures::FailBatch`], an error when one is not (and in
/// either mode when a record not done has no id to name it by, which a
/// Kafka record always has).
pub fn answer<T>(
    report: &BatchReport<T>,
    mode: KafkaItemFailures,
) -> Result<KafkaEventResponse, KafkaError> {
    let failed: Vec<(Option<&str>, usize, &FailureReason)> = report
        .records
        .iter()
        .filter_map(|r| {
            let reason = r.outcome.as_ref().err()?;
            Some((r.message_id.as_deref(), r.position, reason))
        })
        .collect();
    let mut response = KafkaEventResponse::default();
    let unnamed = failed.iter().any(|(id, ..)| id.is_none_or(str::is_empty));
    if mode == KafkaItemFailures::Reported && !unnamed {
        for (id, ..) in &failed {
            response.add_item_failure(id.unwrap_or_default());
        }
        return Ok(response);
    }
    let Some(first) = failed
        .iter()
        .find(|(.., reason)| !matches!(reason, FailureReason::Skipped { .. }))
        .or(failed.first())
    else {
        return Ok(response);
    };
    Err(KafkaError::BatchFailed {
        records: failed
            .iter()
            .map(|(id, position, _)| match id {
                Some(id) if !id.is_empty() => (*id).to_owned(),
                _ => format!("record #{position} (no offset)"),
            })
            .collect(),
        reason: first.2.clone(),
    })
}

/// The response of a Kafka-triggered function under
/// [`KafkaItemFailures::Reported`]: the records to deliver again ([`answer`]
/// fills it; `BatchReport::response_as` would name only the first failed
/// record of each partition).
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
    /// Adds the record `partition`/`offset` to deliver again.
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
