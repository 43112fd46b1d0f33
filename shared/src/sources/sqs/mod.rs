//! SQS batches, standard and FIFO, on top of the engine.
//!
//! A [`SqsProcessor`] turns an [`SqsEvent`] into per-record idempotent work
//! and the per-record outcomes into the [`SqsBatchResponse`] Lambda expects
//! (`ReportBatchItemFailures`): exactly the records that must be delivered
//! again, each listed once, never an id that was not in the batch.
//! [`SqsProcessor::handle`] takes the `LambdaEvent` and returns that
//! response, so a function's handler is one call; [`SqsProcessor::process`]
//! returns the [`BatchReport`]: per record, the engine's
//! [`Outcome`](crate::Outcome) or a [`FailureReason`].
//!
//! * **Standard queues**: records run concurrently, at most
//!   [`SqsProcessor::concurrency`] at a time (default: [`DEFAULT_CONCURRENCY`](crate::batch::DEFAULT_CONCURRENCY), whatever the batch size).
//! * **FIFO queues** (recognised by an `eventSourceARN` ending in `.fifo`, or
//!   forced with [`QueueKind::Fifo`]): the records of one `MessageGroupId`
//!   run one after another in batch order, groups concurrently. When a record
//!   fails, what else fails without running is set by [`FifoFailureMode`].
//! * **In-batch duplicates** (records sharing an idempotency key) run once;
//!   the others wait for that run and get its outcome as a replay.
//! * **Poison records** (a body that does not parse, a missing key, a panic)
//!   fail alone; the rest of the batch finishes. A body over
//!   [`SqsProcessor::max_body_bytes`] fails without being parsed.
//! * **Signed bodies** (optional, [`SqsProcessor::verify_signatures`]): a
//!   record whose HMAC-SHA256 is missing or wrong fails before its body is
//!   parsed ([`crate::Verifier`]).
//! * **Envelopes** (opt-in, [`SqsProcessor::envelope`]): a queue that is
//!   an EventBridge rule's target, or subscribed to an SNS topic with raw
//!   message delivery off, opens each body that is a *strict* EventBridge
//!   event or SNS notification ([`EnvelopeMode`]). The handler's body, the
//!   key ([`KeySelector::Pointer`] into the `detail` or the parsed
//!   `Message`) and the payload hash then read that one inner document; the
//!   envelope is in [`SqsRecord::envelope`], and its id (the EventBridge
//!   `id`, the SNS `MessageId`, kept across that service's retries) is
//!   [`KeySelector::EventId`]. By default the body is the message. See
//!   [`crate::envelope`].
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use lambda_idempotency::sqs::{SqsProcessor, SqsRecord, parse_sqs_event};
//! use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//!
//! #[derive(Deserialize)]
//! struct Order { event_id: String, amount_cents: i64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.v1"));
//! let processor = SqsProcessor::new(engine, KeySelector::pointer("/event_id"));
//! let record = |id: &str, body: &str| json!({
//!     "messageId": id, "body": body, "eventSource": "aws:sqs",
//!     "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
//! });
//! let event = parse_sqs_event(json!({"Records": [
//!     record("m-1", r#"{"event_id":"evt-1","amount_cents":100}"#),
//!     record("m-2", r#"{"event_id":"evt-1","amount_cents":100}"#), // duplicate
//!     record("m-3", "not json"),                                   // poison
//! ]}))
//! .expect("an SQS event");
//!
//! let report = processor
//!     .process(event, None, |r: SqsRecord<Order>| async move {
//!         Ok::<_, HandlerError>(json!({"charged": r.body.amount_cents}))
//!     })
//!     .await;
//! let response = processor.response(&report).expect("every failed record has a messageId");
//! let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
//! assert_eq!(failed, ["m-3"]);
//! # }
//! ```

mod fifo;
mod parse;
#[cfg(test)]
mod pipeline_tests;
mod policy;
mod prepare;
mod record;
#[cfg(test)]
mod tests;

pub use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use crate::batch::envelope::{Envelope, EnvelopeMode, Envelopes};
pub use crate::batch::{
    BatchError, BatchReport, FailureReason, Ordering, PartialResponse, PreRead, RecordResult,
};
pub use parse::{SqsStreamEvent, parse_sqs_event};
pub use policy::{FifoFailureMode, QueueKind};
pub use record::SqsRecord;

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::{
    MalformedRecord, PayloadScope, Pipeline, Prepare, Prepared, Processor, Source, SourceNames,
};
use crate::signature::Verifier;
use prepare::BodyRules;
use record::SQS;

/// The SQS system attribute holding a FIFO record's message group.
pub const MESSAGE_GROUP_ID: &str = "MessageGroupId";
/// The SQS system attribute holding a FIFO record's deduplication id.
pub const MESSAGE_DEDUPLICATION_ID: &str = "MessageDeduplicationId";
/// The SQS system attribute counting a record's deliveries.
pub const APPROXIMATE_RECEIVE_COUNT: &str = "ApproximateReceiveCount";
/// The default [`SqsProcessor::max_body_bytes`]: 256 KiB, SQS's default
/// maximum message size.
pub const DEFAULT_MAX_BODY_BYTES: usize = 262_144;

/// Processes SQS batches: the engine plus how keys, groups and failures are
/// handled ([`Processor`] over [`Sqs`]). Build it once per execution
/// environment; cheap to clone.
pub type SqsProcessor = Processor<Sqs>;

/// The SQS source and its settings: the queue kind, the FIFO failure mode,
/// and how each record's body is checked, parsed and keyed.
#[derive(Debug, Clone)]
pub struct Sqs {
    queue_kind: QueueKind,
    fifo_failure_mode: FifoFailureMode,
    rules: BodyRules,
}

impl Default for Sqs {
    fn default() -> Self {
        Self {
            queue_kind: QueueKind::default(),
            fifo_failure_mode: FifoFailureMode::default(),
            rules: BodyRules {
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                verifier: None,
                envelope: EnvelopeMode::default(),
                payload: PayloadScope::default(),
            },
        }
    }
}

impl Source for Sqs {
    type Event = SqsStreamEvent;
    type Raw = SqsMessage;
    type Response = SqsBatchResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &SQS;

    fn parse(payload: Value) -> Result<SqsStreamEvent, BatchError> {
        parse_sqs_event(payload)
    }

    fn ordering(&self, event: &SqsStreamEvent) -> Ordering {
        fifo::ordering(
            fifo::is_fifo(self.queue_kind, event),
            self.fifo_failure_mode,
        )
    }

    fn records(&self, event: SqsStreamEvent) -> Vec<Result<SqsMessage, MalformedRecord>> {
        event.records
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<SqsBatchResponse, BatchError> {
        report.response_as()
    }
}

impl<M: DeserializeOwned> Prepare<SqsRecord<M>> for Sqs {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        message: SqsMessage,
    ) -> Result<Prepared<SqsRecord<M>>, FailureReason> {
        let p = self.rules.prepare::<M>(pipeline, ident, &message)?;
        let record = SqsRecord {
            body: p.body,
            message,
            envelope: p.envelope,
            key: p.key.clone(),
        };
        Ok(Prepared::new(record, p.key, p.payload))
    }
}

impl PartialResponse for SqsBatchResponse {
    fn add_item_failure(&mut self, id: &str) {
        self.add_failure(id);
    }
}

impl Processor<Sqs> {
    /// Bodies over `bytes` (UTF-8 length) fail their record with
    /// [`FailureReason::BodyTooLarge`] without being parsed. Default
    /// [`DEFAULT_MAX_BODY_BYTES`] (256 KiB); raise it for queues configured
    /// with a larger `MaximumMessageSize`.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.source.rules.max_body_bytes = bytes;
        self
    }

    /// Checks each record's HMAC-SHA256 with `verifier` before parsing its
    /// body (after the size check). A missing or wrong signature fails the
    /// record with [`FailureReason::BadSignature`]; only its message id and
    /// the reason are logged. Off by default.
    pub fn verify_signatures(mut self, verifier: Verifier) -> Self {
        self.source.rules.verifier = Some(verifier);
        self
    }

    /// Standard or FIFO. Default [`QueueKind::Auto`].
    pub fn queue_kind(mut self, kind: QueueKind) -> Self {
        self.source.queue_kind = kind;
        self
    }

    /// FIFO failure handling. Default [`FifoFailureMode::SkipGroup`].
    pub fn fifo_failure_mode(mut self, mode: FifoFailureMode) -> Self {
        self.source.fifo_failure_mode = mode;
        self
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`].
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.rules.payload = scope;
        self
    }

    /// Whether bodies are opened as envelopes (EventBridge events, SNS
    /// notifications). Default [`EnvelopeMode::Never`]: the body is the
    /// message. A queue that is an EventBridge rule's target, or subscribed
    /// to an SNS topic with raw message delivery off, asks for
    /// [`EnvelopeMode::Unwrap`] or [`EnvelopeMode::Require`]; the key and
    /// the payload hash then read the opened document, as the handler does.
    pub fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.source.rules.envelope = mode;
        self
    }
}
