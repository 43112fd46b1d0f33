//! SQS batches, standard and FIFO, on top of the engine.
//!
//! A [`BatchProcessor`] turns an [`SqsEvent`] into per-record idempotent work
//! and the per-record outcomes into the [`SqsBatchResponse`] Lambda expects
//! (`ReportBatchItemFailures`): exactly the records that must be delivered
//! again, each listed once, never an id that was not in the batch.
//! [`BatchProcessor::handle`] takes the `LambdaEvent` and returns that
//! response, so a function's handler is one call; [`BatchProcessor::process`]
//! returns the [`BatchReport`]: per record, the engine's
//! [`Outcome`](crate::Outcome) or a [`FailureReason`].
//!
//! * **Standard queues**: records run concurrently, at most
//!   [`BatchProcessor::concurrency`] at a time (default: [`DEFAULT_CONCURRENCY`](crate::DEFAULT_CONCURRENCY), whatever the batch size).
//! * **FIFO queues** (recognised by an `eventSourceARN` ending in `.fifo`, or
//!   forced with [`QueueKind::Fifo`]): the records of one `MessageGroupId`
//!   run one after another in batch order, groups concurrently. When a record
//!   fails, what else fails without running is set by [`FifoFailureMode`].
//! * **In-batch duplicates** (records sharing an idempotency key) run once;
//!   the others wait for that run and get its outcome as a replay.
//! * **Poison records** (a body that does not parse, a missing key, a panic)
//!   fail alone; the rest of the batch finishes. A body over
//!   [`BatchProcessor::max_body_bytes`] fails without being parsed.
//! * **Signed bodies** (optional, [`BatchProcessor::verify_signatures`]): a
//!   record whose HMAC-SHA256 is missing or wrong fails before its body is
//!   parsed ([`crate::Verifier`]).
//! * **Envelopes** (opt-in, [`BatchProcessor::envelope`]): a queue that is
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
//! use shared::batch::{BatchProcessor, SqsRecord, parse_sqs_event};
//! use shared::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//!
//! #[derive(Deserialize)]
//! struct Order { event_id: String, amount_cents: i64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.v1"));
//! let processor = BatchProcessor::new(engine, KeySelector::pointer("/event_id"));
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
//! let response = report.into_response().expect("every failed record has a messageId");
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

use std::future::Future;
use std::time::{Duration, Instant};

pub use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;
#[cfg(feature = "lambda")]
use serde_json::Value;

pub use crate::adapter::envelope::{Envelope, EnvelopeMode, Envelopes};
pub use crate::adapter::{
    BatchError, BatchReport, FailureReason, Ordering, PartialResponse, PreRead, RecordResult,
};
pub use parse::parse_sqs_event;
pub use policy::{FifoFailureMode, QueueKind};
pub use record::SqsRecord;

use crate::adapter::delivery::SQS;
use crate::adapter::lanes::fail_after_missing_lane;
#[cfg(feature = "lambda")]
use crate::adapter::remaining_now;
use crate::adapter::settings::Settings;
use crate::adapter::{KeySelector, PayloadScope};
use crate::engine::Idempotency;
use crate::error::HandlerError;
use crate::signature::Verifier;
use crate::write::IntoStaged;
use prepare::BodyRules;

/// The SQS system attribute holding a FIFO record's message group.
pub const MESSAGE_GROUP_ID: &str = "MessageGroupId";
/// The SQS system attribute holding a FIFO record's deduplication id.
pub const MESSAGE_DEDUPLICATION_ID: &str = "MessageDeduplicationId";
/// The SQS system attribute counting a record's deliveries.
pub const APPROXIMATE_RECEIVE_COUNT: &str = "ApproximateReceiveCount";
/// The default [`BatchProcessor::max_body_bytes`]: 256 KiB, SQS's default
/// maximum message size.
pub const DEFAULT_MAX_BODY_BYTES: usize = 262_144;

/// Processes SQS batches: the engine plus how keys, groups and failures are
/// handled. Build it once per execution environment; cheap to clone.
#[derive(Debug, Clone)]
pub struct BatchProcessor {
    queue_kind: QueueKind,
    fifo_failure_mode: FifoFailureMode,
    settings: Settings,
    /// How each record's body is checked, parsed and keyed.
    rules: BodyRules,
}

crate::adapter::settings::batch_settings!(BatchProcessor);

impl BatchProcessor {
    /// A processor over `engine` taking each record's key from `key`.
    pub fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self {
            queue_kind: QueueKind::default(),
            fifo_failure_mode: FifoFailureMode::default(),
            settings: Settings::new(engine, key),
            rules: BodyRules {
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                verifier: None,
                envelope: EnvelopeMode::default(),
                payload: PayloadScope::default(),
            },
        }
    }

    /// Bodies over `bytes` (UTF-8 length) fail their record with
    /// [`FailureReason::BodyTooLarge`] without being parsed. Default
    /// [`DEFAULT_MAX_BODY_BYTES`] (256 KiB); raise it for queues configured
    /// with a larger `MaximumMessageSize`.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.rules.max_body_bytes = bytes;
        self
    }

    /// Checks each record's HMAC-SHA256 with `verifier` before parsing its
    /// body (after the size check). A missing or wrong signature fails the
    /// record with [`FailureReason::BadSignature`]; only its message id and
    /// the reason are logged. Off by default.
    pub fn verify_signatures(mut self, verifier: Verifier) -> Self {
        self.rules.verifier = Some(verifier);
        self
    }

    /// Standard or FIFO. Default [`QueueKind::Auto`].
    pub fn queue_kind(mut self, kind: QueueKind) -> Self {
        self.queue_kind = kind;
        self
    }

    /// FIFO failure handling. Default [`FifoFailureMode::SkipGroup`].
    pub fn fifo_failure_mode(mut self, mode: FifoFailureMode) -> Self {
        self.fifo_failure_mode = mode;
        self
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`].
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.rules.payload = scope;
        self
    }

    /// Whether bodies are opened as envelopes (EventBridge events, SNS
    /// notifications). Default [`EnvelopeMode::Never`]: the body is the
    /// message. A queue that is an EventBridge rule's target, or subscribed
    /// to an SNS topic with raw message delivery off, asks for
    /// [`EnvelopeMode::Unwrap`] or [`EnvelopeMode::Require`]; the key and
    /// the payload hash then read the opened document, as the handler does.
    pub fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.rules.envelope = mode;
        self
    }

    /// Handles one invocation: parses the SQS event, runs [`process`] with
    /// the invocation's remaining time, and returns the partial batch
    /// response (`ReportBatchItemFailures`) listing exactly the records to
    /// deliver again. An `Err` fails the whole invocation: the payload is
    /// not an SQS event, or a failed record has no `messageId`
    /// ([`BatchError`]).
    ///
    /// [`process`]: BatchProcessor::process
    #[cfg(feature = "lambda")]
    pub async fn handle<M, T, R, H, Fut>(
        &self,
        event: LambdaEvent<Value>,
        handler: H,
    ) -> Result<SqsBatchResponse, lambda_runtime::Error>
    where
        M: DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(SqsRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let (payload, ctx) = event.into_parts();
        let event = parse_sqs_event(payload)?;
        let report = self.process(event, remaining_now(&ctx), handler).await;
        Ok(report.into_response()?)
    }

    /// Processes `event`: each record's body is parsed into `M`, its key
    /// selected, and `handler` run through the engine. Never fails as a
    /// whole: per-record failures are in the report (see
    /// [`BatchReport::into_response`]).
    ///
    /// `remaining` is the invocation's remaining time at the call (`None`:
    /// unknown); each record's lease is capped by what is left when
    /// it starts. `T` is the response recorded and replayed to duplicates.
    pub async fn process<M, T, R, H, Fut>(
        &self,
        event: SqsEvent,
        remaining: Option<Duration>,
        handler: H,
    ) -> BatchReport<T>
    where
        M: DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(SqsRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let started = Instant::now();
        let ordering = fifo::ordering(
            fifo::is_fifo(self.queue_kind, &event),
            self.fifo_failure_mode,
        );
        let pipeline = self.settings.pipeline(ordering, &SQS);
        let mut slots: Vec<_> = event
            .records
            .into_iter()
            .enumerate()
            .map(|(index, message)| self.rules.prepare(&pipeline, index, message))
            .collect();
        fail_after_missing_lane(&mut slots, ordering, FailureReason::NoGroupId);
        pipeline.run(slots, started, remaining, handler).await
    }
}
