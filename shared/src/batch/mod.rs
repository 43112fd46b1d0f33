//! SQS batches, standard and FIFO, on top of the engine.
//!
//! A [`BatchProcessor`] turns an [`SqsEvent`] into per-record idempotent work
//! and the per-record outcomes into the [`SqsBatchResponse`] Lambda expects
//! (`ReportBatchItemFailures`): exactly the records that must be delivered
//! again, each listed once, never an id that was not in the batch.
//!
//! * **Standard queues**: records run concurrently, at most
//!   [`BatchProcessor::concurrency`] at a time (default: the batch size).
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
//!   parsed ([`crate::signature`]).
//! * **EventBridge envelopes** in the body (an EventBridge rule whose target
//!   is the queue) are recognised ([`EnvelopeMode`]): the handler's body type
//!   is parsed from the envelope's `detail`, the envelope is handed over in
//!   [`SqsRecord::envelope`], and a [`KeySelector::Pointer`] resolves against
//!   the whole envelope (`/id` is the event id, stable across EventBridge
//!   retries: [`KeySelector::event_id`]; `/detail/order_id` a business key).
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use shared::batch::{BatchProcessor, KeySelector, SqsRecord, parse_sqs_event};
//! use shared::{Config, HandlerError, Idempotency, MemoryStore};
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

mod exec;

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use aws_lambda_events::eventbridge::EventBridgeEvent;
pub use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};

use crate::engine::{Idempotency, Prefetched, panic_message};
use crate::error::{ErrorKind, HandlerError, KeyError, report};
use crate::key::IdempotencyKey;
use crate::signature::{SignatureError, Verifier};
use crate::write::IntoStaged;

mod fifo;
mod standard;

/// The SQS system attribute holding a FIFO record's message group.
pub const MESSAGE_GROUP_ID: &str = "MessageGroupId";
/// The SQS system attribute holding a FIFO record's deduplication id.
pub const MESSAGE_DEDUPLICATION_ID: &str = "MessageDeduplicationId";
/// The SQS system attribute counting a record's deliveries.
pub const APPROXIMATE_RECEIVE_COUNT: &str = "ApproximateReceiveCount";
/// The default [`BatchProcessor::max_body_bytes`]: 256 KiB, SQS's default
/// maximum message size.
pub const DEFAULT_MAX_BODY_BYTES: usize = 262_144;

/// A key function: gets the SQS message and its parsed body (or the
/// EventBridge envelope when the body is one) and returns the key material.
pub type KeyFn = Arc<dyn Fn(&SqsMessage, &Value) -> Result<Value, KeyError> + Send + Sync>;

/// Where a record's idempotency key comes from.
///
/// A key that is absent ([`KeyError::Missing`]), null or empty is *missing*
/// and handled by [`MissingKey`]; any other error (wrong type, a panicking
/// key function) fails the record.
#[derive(Clone)]
#[non_exhaustive]
pub enum KeySelector {
    /// An RFC 6901 JSON Pointer (`/event_id`, `/order/id`, `/items/0/sku`)
    /// into the parsed body, or into the EventBridge envelope when the body is
    /// one (`/id`, `/detail/order_id`). The value found must be a string or a
    /// number; `"1103"` and `1103` give the same key.
    Pointer(String),
    /// The `stringValue` of an SQS message attribute.
    MessageAttribute(String),
    /// The SQS `messageId`. It changes when a producer sends the same message
    /// twice, so it only catches redeliveries of one send: prefer a business key.
    MessageId,
    /// The FIFO `MessageDeduplicationId` attribute (missing on standard queues).
    DeduplicationId,
    /// A function of the message and its parsed body (or envelope). It may
    /// return any non-empty JSON value (objects combine several fields; they
    /// are hashed in canonical form). A panic fails only that record.
    Custom(KeyFn),
}

impl KeySelector {
    /// [`KeySelector::Pointer`].
    pub fn pointer(pointer: impl Into<String>) -> Self {
        Self::Pointer(pointer.into())
    }

    /// [`KeySelector::MessageAttribute`].
    pub fn attribute(name: impl Into<String>) -> Self {
        Self::MessageAttribute(name.into())
    }

    /// The EventBridge event id of an envelope delivered through the queue
    /// (`Pointer("/id")`): EventBridge keeps it across its retries, while the
    /// SQS `messageId` differs for each copy it puts on the queue.
    pub fn event_id() -> Self {
        Self::Pointer("/id".to_owned())
    }

    /// [`KeySelector::Custom`].
    pub fn custom<F>(f: F) -> Self
    where
        F: Fn(&SqsMessage, &Value) -> Result<Value, KeyError> + Send + Sync + 'static,
    {
        Self::Custom(Arc::new(f))
    }

    /// The key material of `message` whose parsed body (or envelope) is
    /// `value`. The outer `Err` is a panic of a custom key function.
    fn select(
        &self,
        message: &SqsMessage,
        value: &Value,
    ) -> Result<Result<Value, KeyError>, String> {
        Ok(match self {
            Self::Pointer(pointer) => pointer_key(value, pointer),
            Self::MessageAttribute(name) => {
                let at = || format!("message attribute {name}");
                match message.message_attributes.get(name) {
                    None => Err(KeyError::Missing(at())),
                    Some(attr) => match &attr.string_value {
                        Some(s) => Ok(Value::String(s.clone())),
                        None => Err(KeyError::WrongType {
                            at: at(),
                            found: "a binary attribute",
                        }),
                    },
                }
            }
            Self::MessageId => message
                .message_id
                .clone()
                .map(Value::String)
                .ok_or_else(|| KeyError::Missing("messageId".to_owned())),
            Self::DeduplicationId => message
                .attributes
                .get(MESSAGE_DEDUPLICATION_ID)
                .cloned()
                .map(Value::String)
                .ok_or_else(|| {
                    KeyError::Missing(format!(
                        "attribute {MESSAGE_DEDUPLICATION_ID} (FIFO queues only)"
                    ))
                }),
            Self::Custom(f) => {
                return catch_unwind(AssertUnwindSafe(|| f(message, value)))
                    .map_err(|panic| panic_message(&*panic));
            }
        })
    }
}

impl fmt::Debug for KeySelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pointer(p) => f.debug_tuple("Pointer").field(p).finish(),
            Self::MessageAttribute(a) => f.debug_tuple("MessageAttribute").field(a).finish(),
            Self::MessageId => f.write_str("MessageId"),
            Self::DeduplicationId => f.write_str("DeduplicationId"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The key material at `pointer` in `value`: a string or a number.
pub(crate) fn pointer_key(value: &Value, pointer: &str) -> Result<Value, KeyError> {
    match value.pointer(pointer) {
        None if !pointer.is_empty() && !pointer.starts_with('/') => Err(KeyError::Missing(
            format!("{pointer} (not a JSON Pointer: it must start with '/')"),
        )),
        None => Err(KeyError::Missing(pointer.to_owned())),
        Some(Value::Null) => Err(KeyError::Missing(format!("{pointer} (null)"))),
        Some(v @ (Value::String(_) | Value::Number(_))) => Ok(v.clone()),
        Some(other) => Err(KeyError::WrongType {
            at: pointer.to_owned(),
            found: json_type(other),
        }),
    }
}

/// Whether a key error means "no key" (handled by [`MissingKey`]) rather
/// than "a bad key" (always a failure).
pub(crate) fn is_missing(error: &KeyError) -> bool {
    matches!(
        error,
        KeyError::Missing(_) | KeyError::Null | KeyError::Empty
    )
}

/// The JSON type of `value`, for messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `value` has the shape of an EventBridge envelope: an object with
/// string `detail-type` and `source` and a `detail`.
pub(crate) fn looks_like_envelope(value: &Value) -> bool {
    value.get("detail-type").is_some_and(Value::is_string)
        && value.get("source").is_some_and(Value::is_string)
        && value.get("detail").is_some()
}

/// What to do with a record that has no idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Fail the record (it is retried, then goes to the DLQ).
    #[default]
    Fail,
    /// Run the handler without idempotency (a warning is logged); the record
    /// reports [`RecordOutcome::Unprotected`].
    RunUnprotected,
}

/// Standard or FIFO processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueKind {
    /// FIFO when a record's `eventSourceARN` ends with `.fifo`.
    #[default]
    Auto,
    /// Every record independent.
    Standard,
    /// Order kept within each `MessageGroupId`.
    Fifo,
}

/// What a failed record takes down with it on a FIFO queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FifoFailureMode {
    /// The later records of the failed record's `MessageGroupId` are failed
    /// without running; other groups go on. Groups run concurrently.
    #[default]
    SkipGroup,
    /// AWS's documented mode: at the first failure, that record and every
    /// record after it in the batch are failed without running. The batch
    /// then runs one record at a time in batch order (the mode is only exact
    /// that way), whatever the concurrency.
    StopBatch,
}

/// What is hashed for payload validation (same key, other payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadScope {
    /// The parsed body; for an EventBridge envelope, its `detail` (the
    /// envelope's `id` and `time` differ between two publications of the same
    /// business event, which a business key would otherwise flag).
    #[default]
    Body,
    /// Nothing: no payload validation for this processor.
    None,
}

/// Whether record bodies are EventBridge envelopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvelopeMode {
    /// An envelope when the body is an object with string `detail-type` and
    /// `source` and a `detail`.
    #[default]
    Auto,
    /// Bodies are never envelopes.
    Never,
    /// Bodies must be envelopes; any other body fails its record.
    Required,
}

/// When to read a batch's idempotency records ahead, in one `BatchGetItem`
/// per 100 keys, so completed duplicates are replayed without a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreRead {
    /// Never: every record claims (or commits) directly.
    Never,
    /// When the batch shows a redelivery (a record with
    /// `ApproximateReceiveCount` > 1): the case where most records are
    /// duplicates, at no cost for first deliveries.
    #[default]
    OnRedelivery,
    /// Always: one extra request per batch; duplicates cost no write.
    Always,
}

/// One record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsRecord<M> {
    /// The parsed body, or the parsed `detail` of an EventBridge envelope.
    pub body: M,
    /// The SQS message (ids, attributes, the raw body).
    pub message: SqsMessage,
    /// The EventBridge envelope, when the body was one.
    pub envelope: Option<EventBridgeEvent<Value>>,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M> SqsRecord<M> {
    /// A record (handler unit tests).
    pub fn new(body: M, message: SqsMessage) -> Self {
        Self {
            body,
            message,
            envelope: None,
            key: None,
        }
    }

    /// The SQS `messageId` (empty when absent).
    pub fn message_id(&self) -> &str {
        self.message.message_id.as_deref().unwrap_or_default()
    }

    /// The FIFO `MessageGroupId`.
    pub fn group_id(&self) -> Option<&str> {
        self.message
            .attributes
            .get(MESSAGE_GROUP_ID)
            .map(String::as_str)
    }

    /// The FIFO `MessageDeduplicationId`.
    pub fn deduplication_id(&self) -> Option<&str> {
        self.message
            .attributes
            .get(MESSAGE_DEDUPLICATION_ID)
            .map(String::as_str)
    }

    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub fn receive_count(&self) -> Option<u32> {
        self.message
            .attributes
            .get(APPROXIMATE_RECEIVE_COUNT)
            .and_then(|c| c.parse().ok())
    }
}

/// Why a record failed. Every failure puts the record in `batchItemFailures`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureReason {
    /// No body, a body that is not JSON, not the handler's body type, or a
    /// broken EventBridge envelope. The message says which and why.
    Parse(String),
    /// No usable idempotency key (with [`MissingKey::Fail`], or a wrong type).
    Key(KeyError),
    /// A FIFO record without `MessageGroupId`: its order cannot be kept.
    NoGroupId,
    /// The body is larger than [`BatchProcessor::max_body_bytes`]; it was
    /// not parsed (permanent).
    BodyTooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Signatures are verified ([`BatchProcessor::verify_signatures`]) and
    /// this record's is missing, malformed or wrong; its body was not parsed
    /// (permanent).
    BadSignature(SignatureError),
    /// Another invocation holds the key: retry later.
    InProgress {
        /// When that claim lapses (epoch ms), if known.
        lease_expires_at_ms: Option<u64>,
    },
    /// The key was used before with a different payload (permanent).
    PayloadMismatch,
    /// The handler returned an error (or panicked: retryable).
    Handler {
        /// The error with its sources.
        message: String,
        /// Retryable or terminal (a terminal one not recorded).
        kind: ErrorKind,
    },
    /// A panic outside the handler (key function, body deserializer, ...).
    Panic(String),
    /// The idempotency store failed; the handler may not have run.
    Store(String),
    /// Another engine failure (lease lost, response too large, ...).
    Idempotency(String),
    /// FIFO: not run because an earlier record it must follow failed.
    Skipped {
        /// The record that failed first.
        after: String,
    },
    /// An in-batch duplicate whose first copy failed.
    DuplicateOf {
        /// The first copy.
        first: String,
        /// Why it failed.
        reason: Box<FailureReason>,
    },
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Parse(m) => write!(f, "unparseable record: {m}"),
            Self::Key(e) => write!(f, "no usable idempotency key: {e}"),
            Self::NoGroupId => f.write_str(
                "FIFO record without a MessageGroupId attribute: its order cannot be kept, so it \
                 and every later record of the batch are failed (is the queue really FIFO?)",
            ),
            Self::BodyTooLarge { size, limit } => write!(
                f,
                "body of {size} bytes is over the {limit}-byte limit \
                 (BatchProcessor::max_body_bytes); not parsed (permanent)"
            ),
            Self::BadSignature(e) => write!(
                f,
                "signature check failed: {e}; body not parsed (permanent)"
            ),
            Self::InProgress {
                lease_expires_at_ms,
            } => {
                f.write_str("another invocation is processing the same idempotency key")?;
                if let Some(t) = lease_expires_at_ms {
                    write!(f, " (its lease lapses at {t} ms)")?;
                }
                f.write_str("; retry later")
            }
            Self::PayloadMismatch => f.write_str(
                "the idempotency key was already used with a different payload (permanent)",
            ),
            Self::Handler { message, kind } => {
                let kind = match kind {
                    ErrorKind::Retryable => "retryable",
                    ErrorKind::Terminal => "terminal",
                };
                write!(f, "handler failed ({kind}): {message}")
            }
            Self::Panic(m) => write!(f, "panicked: {m}"),
            Self::Store(m) => write!(f, "idempotency store failed: {m}"),
            Self::Idempotency(m) => f.write_str(m),
            Self::Skipped { after } => write!(
                f,
                "not run: an earlier record it must follow ({after}) failed"
            ),
            Self::DuplicateOf { first, reason } => {
                write!(f, "in-batch duplicate of {first}, which failed: {reason}")
            }
        }
    }
}

/// What happened to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordOutcome<T> {
    /// The handler ran now and its completion was recorded.
    Processed(T),
    /// A duplicate (of an earlier delivery, or of a record earlier in this
    /// batch): the handler did not run. The stored response, if kept.
    Replayed(Option<T>),
    /// A terminal error recorded as the key's outcome: the record counts as
    /// done (deleted from the queue, not retried).
    Rejected {
        /// The recorded error.
        error: String,
        /// `true` when replaying an earlier rejection.
        replayed: bool,
    },
    /// The handler ran without idempotency ([`MissingKey::RunUnprotected`] or
    /// the engine's kill switch).
    Unprotected(T),
    /// Reported in `batchItemFailures`: the record is delivered again.
    Failed(FailureReason),
}

impl<T> RecordOutcome<T> {
    /// Whether the record goes to `batchItemFailures`.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed(_))
    }

    /// A short name for logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Processed(_) => "processed",
            Self::Replayed(_) => "replayed",
            Self::Rejected { .. } => "rejected",
            Self::Unprotected(_) => "unprotected",
            Self::Failed(_) => "failed",
        }
    }
}

/// One record's result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordResult<T> {
    /// Position in the batch.
    pub position: usize,
    /// The SQS `messageId` as received.
    pub message_id: Option<String>,
    /// The hash part of the idempotency key (safe to log), when there was one.
    pub key_hash: Option<String>,
    /// What happened.
    pub outcome: RecordOutcome<T>,
}

/// The results of one batch, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchReport<T> {
    /// One result per record, in batch order.
    pub records: Vec<RecordResult<T>>,
    /// Whether the batch was processed as FIFO.
    pub fifo: bool,
}

impl<T> BatchReport<T> {
    /// The per-invocation metric counts of this batch.
    pub fn counts(&self) -> crate::metrics::Counts {
        let mut counts = crate::metrics::Counts::default();
        for r in &self.records {
            match &r.outcome {
                RecordOutcome::Processed(_) | RecordOutcome::Unprotected(_) => {
                    counts.processed += 1
                }
                RecordOutcome::Replayed(_) | RecordOutcome::Rejected { replayed: true, .. } => {
                    counts.replayed += 1
                }
                RecordOutcome::Rejected { .. } => counts.rejected += 1,
                RecordOutcome::Failed(reason) => {
                    counts.failed += 1;
                    if matches!(reason, FailureReason::InProgress { .. }) {
                        counts.in_progress += 1;
                    }
                }
            }
        }
        counts
    }

    /// The failed records.
    pub fn failures(&self) -> impl Iterator<Item = &RecordResult<T>> {
        self.records.iter().filter(|r| r.outcome.is_failure())
    }

    /// Whether no record failed.
    pub fn is_success(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The response for Lambda: each failed `messageId` once, in batch order.
    ///
    /// A failed record without a `messageId` cannot be reported; returning a
    /// response would delete it. That is [`BatchError::UnreportableFailure`]:
    /// return it as the invocation's error so Lambda retries the whole batch
    /// (the records that succeeded replay).
    pub fn response(&self) -> Result<SqsBatchResponse, BatchError> {
        let mut response = SqsBatchResponse::default();
        let mut seen = HashSet::new();
        for record in self.records.iter() {
            let RecordOutcome::Failed(reason) = &record.outcome else {
                continue;
            };
            match record.message_id.as_deref() {
                Some(id) if !id.is_empty() => {
                    if seen.insert(id) {
                        response.add_failure(id);
                    }
                }
                _ => {
                    let error = BatchError::UnreportableFailure {
                        position: record.position,
                        reason: reason.clone(),
                    };
                    tracing::error!(position = record.position, error = %error, "unreportable failure");
                    return Err(error);
                }
            }
        }
        Ok(response)
    }

    /// [`BatchReport::response`], consuming the report.
    pub fn into_response(self) -> Result<SqsBatchResponse, BatchError> {
        self.response()
    }
}

/// A batch-level error: the invocation fails and Lambda retries the batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The event is not an SQS event (the function is wired to another
    /// trigger, or was invoked by hand with the wrong payload).
    #[error("not an SQS event: {0}")]
    NotAnSqsEvent(String),
    /// A failed record has no `messageId`, so `batchItemFailures` cannot name it.
    #[error(
        "record at position {position} failed ({reason}) but has no messageId, so it cannot be \
         listed in batchItemFailures; failing the invocation so that Lambda retries the whole \
         batch (idempotency makes the retry safe)"
    )]
    UnreportableFailure {
        /// Its position in the batch.
        position: usize,
        /// Why it failed.
        reason: FailureReason,
    },
}

/// Parses an invocation payload as an SQS event, rejecting other shapes.
///
/// `SqsEvent` itself would accept an EventBridge event or `{"Records": []}`
/// from any source as zero or more empty records; this requires a `Records`
/// array whose items all have `eventSource` `aws:sqs`. An empty `Records`
/// array is an empty batch.
pub fn parse_sqs_event(value: Value) -> Result<SqsEvent, BatchError> {
    let wrong = |m: String| Err(BatchError::NotAnSqsEvent(m));
    let Some(object) = value.as_object() else {
        return wrong(format!(
            "expected an object with a Records array, got {}",
            json_type(&value)
        ));
    };
    let records = match object.get("Records") {
        Some(Value::Array(records)) => records,
        Some(other) => return wrong(format!("Records is {}, not an array", json_type(other))),
        None if looks_like_envelope(&value) => {
            return wrong(format!(
                "this is an EventBridge event (detail-type {}), not an SQS batch; is the \
                 function wired to the right trigger?",
                object.get("detail-type").unwrap_or(&Value::Null)
            ));
        }
        None => return wrong("no Records array".to_owned()),
    };
    for (i, record) in records.iter().enumerate() {
        let source = record
            .get("eventSource")
            .or_else(|| record.get("EventSource"))
            .and_then(Value::as_str);
        match source {
            Some("aws:sqs") => {}
            Some(other) => {
                return wrong(format!("record {i} comes from {other}, expected aws:sqs"));
            }
            None => return wrong(format!("record {i} has no eventSource (expected aws:sqs)")),
        }
    }
    serde_json::from_value(value).or_else(|e| wrong(format!("an SQS record is malformed: {e}")))
}

/// The invocation's remaining time at `now_ms` (epoch ms): `None` when the
/// context has no deadline (`deadline == 0`), otherwise the time left, zero
/// when the deadline has passed (a real zero, not "unknown": the engine then
/// takes leases that lapse at once).
#[cfg(feature = "lambda")]
pub fn remaining_time(ctx: &lambda_runtime::Context, now_ms: u64) -> Option<Duration> {
    (ctx.deadline != 0).then(|| Duration::from_millis(ctx.deadline.saturating_sub(now_ms)))
}

/// Processes SQS batches: the engine plus how keys, groups and failures are
/// handled. Build it once per execution environment; cheap to clone.
#[derive(Debug, Clone)]
pub struct BatchProcessor {
    engine: Idempotency,
    key: KeySelector,
    concurrency: Option<usize>,
    missing_key: MissingKey,
    queue_kind: QueueKind,
    fifo_failure_mode: FifoFailureMode,
    payload: PayloadScope,
    envelope: EnvelopeMode,
    pre_read: PreRead,
    max_body_bytes: usize,
    verifier: Option<Verifier>,
}

impl BatchProcessor {
    /// A processor over `engine` taking each record's key from `key`.
    pub fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self {
            engine,
            key,
            concurrency: None,
            missing_key: MissingKey::default(),
            queue_kind: QueueKind::default(),
            fifo_failure_mode: FifoFailureMode::default(),
            payload: PayloadScope::default(),
            envelope: EnvelopeMode::default(),
            pre_read: PreRead::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            verifier: None,
        }
    }

    /// Bodies over `bytes` (UTF-8 length) fail their record with
    /// [`FailureReason::BodyTooLarge`] without being parsed. Default
    /// [`DEFAULT_MAX_BODY_BYTES`] (256 KiB); raise it for queues configured
    /// with a larger `MaximumMessageSize`.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Checks each record's HMAC-SHA256 with `verifier` before parsing its
    /// body (after the size check). A missing or wrong signature fails the
    /// record with [`FailureReason::BadSignature`]; only its message id and
    /// the reason are logged. Off by default.
    pub fn verify_signatures(mut self, verifier: Verifier) -> Self {
        self.verifier = Some(verifier);
        self
    }

    /// When to read the batch's records ahead (default
    /// [`PreRead::OnRedelivery`]).
    pub fn pre_read(mut self, policy: PreRead) -> Self {
        self.pre_read = policy;
        self
    }

    /// At most `n` records run at a time (0 counts as 1). Default: the batch
    /// size. Records waiting for an in-batch duplicate's first copy, or for
    /// the earlier records of their FIFO group, do not count.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }

    /// What to do with records without a key. Default [`MissingKey::Fail`].
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.missing_key = policy;
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
        self.payload = scope;
        self
    }

    /// EventBridge envelope detection. Default [`EnvelopeMode::Auto`].
    pub fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.envelope = mode;
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        &self.engine
    }

    /// Processes `event`: each record's body is parsed into `M`, its key
    /// selected, and `handler` run through the engine. Never fails as a
    /// whole: per-record failures are in the report (see
    /// [`BatchReport::into_response`]).
    ///
    /// `remaining` is the invocation's remaining time at the call (see
    /// [`remaining_time`]); each record's lease is capped by what is left when
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
        self.process_with(event, remaining, exec::Plain(&handler))
            .await
    }

    async fn process_with<M, T, E>(
        &self,
        event: SqsEvent,
        remaining: Option<Duration>,
        exec: E,
    ) -> BatchReport<T>
    where
        M: DeserializeOwned,
        E: exec::Execute<M, T>,
        T: Serialize + DeserializeOwned,
    {
        let started = Instant::now();
        let fifo = fifo::is_fifo(self.queue_kind, &event);
        let size = event.records.len();
        let mut slots: Vec<Slot<M>> = event
            .records
            .into_iter()
            .enumerate()
            .map(|(index, message)| self.prepare(index, message))
            .collect();
        if fifo {
            fifo::fail_after_missing_group(&mut slots);
        }
        self.assign_duplicates(&mut slots);
        let known = self.read_ahead(&slots).await;
        let units = if fifo {
            fifo::units(slots, self.fifo_failure_mode)
        } else {
            standard::units(slots)
        };

        let permits = Semaphore::new(
            self.concurrency
                .unwrap_or(size)
                .clamp(1, Semaphore::MAX_PERMITS),
        );
        let run = Run {
            exec: &exec,
            known: &known,
            permits: &permits,
            started,
            remaining,
        };
        let mut running: FuturesUnordered<_> = units
            .into_iter()
            .map(|unit| self.run_unit(unit, &run))
            .collect();
        let mut results: Vec<Option<RecordResult<T>>> = (0..size).map(|_| None).collect();
        while let Some(done) = running.next().await {
            for result in done {
                let position = result.position;
                results[position] = Some(result);
            }
        }
        let records: Vec<RecordResult<T>> = results.into_iter().flatten().collect();
        debug_assert_eq!(records.len(), size);

        let count = |label: &str| {
            records
                .iter()
                .filter(|r| r.outcome.label() == label)
                .count()
        };
        tracing::info!(
            records = size,
            fifo,
            processed = count("processed"),
            replayed = count("replayed"),
            rejected = count("rejected"),
            unprotected = count("unprotected"),
            failed = count("failed"),
            latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "batch processed"
        );
        let report = BatchReport { records, fifo };
        crate::metrics::emit(&crate::metrics::Counts {
            undecodable: self.engine.take_undecodable(),
            ..report.counts()
        });
        report
    }

    /// Reads ahead the records of the batch's keys when [`PreRead`] says so.
    /// A failed read is logged and ignored: each record then claims as usual.
    async fn read_ahead<M>(&self, slots: &[Slot<M>]) -> Prefetched {
        let redelivered = || {
            slots.iter().any(|s| match &s.state {
                State::Ready { record, .. } => record.receive_count().is_some_and(|c| c > 1),
                State::Failed(_) => false,
            })
        };
        let wanted = match self.pre_read {
            PreRead::Never => false,
            PreRead::Always => true,
            PreRead::OnRedelivery => redelivered(),
        };
        if !wanted {
            return Prefetched::default();
        }
        let keys: Vec<&IdempotencyKey> = slots
            .iter()
            .filter(|s| !matches!(s.role, Role::Follower { .. }))
            .filter_map(|s| match &s.state {
                State::Ready { key: Some(k), .. } => Some(k),
                _ => None,
            })
            .collect();
        match self.engine.prefetch(&keys).await {
            Ok(known) => known,
            Err(err) => {
                tracing::warn!(error = %report(&err), "pre-read failed; records claim one by one");
                Prefetched::default()
            }
        }
    }

    /// Runs the records of one unit (one record; a FIFO group; a whole FIFO
    /// batch in [`FifoFailureMode::StopBatch`]) one after another. After the
    /// first failure, the unit's later records are failed without running.
    async fn run_unit<M, T, E>(&self, unit: Vec<Slot<M>>, run: &Run<'_, E>) -> Vec<RecordResult<T>>
    where
        M: DeserializeOwned,
        E: exec::Execute<M, T>,
        T: Serialize + DeserializeOwned,
    {
        let mut results = Vec::with_capacity(unit.len());
        let mut failed: Option<String> = None;
        for slot in unit {
            let ident = slot.ident.clone();
            let result = self.run_slot(slot, failed.as_deref(), run).await;
            if failed.is_none() && result.outcome.is_failure() {
                failed = Some(ident);
            }
            results.push(result);
        }
        results
    }
}

/// What every record of one `process` call shares.
struct Run<'a, E> {
    exec: &'a E,
    /// Records read ahead ([`PreRead`]).
    known: &'a Prefetched,
    permits: &'a Semaphore,
    started: Instant,
    remaining: Option<Duration>,
}

/// One record on its way through `process`.
struct Slot<M> {
    index: usize,
    /// The `messageId`, or a description of the record when it has none.
    ident: String,
    message_id: Option<String>,
    group: Option<String>,
    state: State<M>,
    role: Role,
}

enum State<M> {
    Ready {
        record: Box<SqsRecord<M>>,
        /// `None`: run unprotected.
        key: Option<IdempotencyKey>,
        payload: Option<Value>,
    },
    Failed(FailureReason),
}

/// A record's part in in-batch deduplication.
enum Role {
    Solo,
    /// The first record of its key, with later copies waiting for its outcome.
    Leader(watch::Sender<Option<Shared>>),
    /// A later copy: waits for the first one and takes its outcome.
    Follower {
        first: String,
        outcome: watch::Receiver<Option<Shared>>,
    },
}

/// A first copy's outcome as its in-batch duplicates receive it.
#[derive(Clone)]
enum Shared {
    Done(Option<Value>),
    Rejected(String),
    Failed(FailureReason),
}

fn ident(index: usize, message_id: Option<&str>) -> String {
    match message_id {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("record #{index} (no messageId)"),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod testkit {
    //! Helpers shared by the unit tests of the adapters.

    use super::*;
    use crate::{Config, ManualClock, MemoryStore};

    /// Epoch ms the tests' clock starts at (2026-11-29).
    pub(crate) const T0: u64 = 1_795_946_400_000;

    /// A file of `events/`, parsed.
    pub(crate) fn event_json(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../events")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        serde_json::from_str(&text).unwrap()
    }

    /// A file of `events/` as an SQS event.
    pub(crate) fn sqs_event(name: &str) -> SqsEvent {
        parse_sqs_event(event_json(name)).unwrap()
    }

    /// An engine on a memory store and a manual clock.
    pub(crate) fn engine_with(config: Config) -> (Idempotency, MemoryStore, ManualClock) {
        let store = MemoryStore::new();
        let clock = ManualClock::new(T0);
        let engine =
            Idempotency::new(store.clone(), config.disabled(false)).with_clock(clock.clone());
        (engine, store, clock)
    }

    /// [`engine_with`] the default configuration.
    pub(crate) fn memory_engine() -> (Idempotency, MemoryStore, ManualClock) {
        engine_with(Config::with_prefix("test.batch"))
    }

    /// The ids in a batch response.
    pub(crate) fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
        response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect()
    }

    /// The message ids of a report's failed records.
    pub(crate) fn report_failed<T>(report: &BatchReport<T>) -> Vec<String> {
        report
            .failures()
            .map(|r| r.message_id.clone().unwrap_or_default())
            .collect()
    }

    /// The message ids of an event, in order.
    pub(crate) fn ids(event: &SqsEvent) -> Vec<String> {
        event
            .records
            .iter()
            .map(|r| r.message_id.clone().unwrap_or_default())
            .collect()
    }

    /// A minimal SQS record.
    pub(crate) fn message(id: Option<&str>, body: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = id.map(str::to_owned);
        m.body = Some(body.to_owned());
        m.event_source = Some("aws:sqs".to_owned());
        m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders".to_owned());
        m
    }

    /// A FIFO record of `group`.
    pub(crate) fn fifo_message(id: &str, group: Option<&str>, body: &str) -> SqsMessage {
        let mut m = message(Some(id), body);
        m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:payments.fifo".to_owned());
        if let Some(g) = group {
            m.attributes
                .insert(MESSAGE_GROUP_ID.to_owned(), g.to_owned());
        }
        m
    }

    /// An event of `records`.
    pub(crate) fn batch(records: Vec<SqsMessage>) -> SqsEvent {
        let mut e = SqsEvent::default();
        e.records = records;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const SQS_FILES: [&str; 6] = [
        "orders-standard.json",
        "orders-missing-key.json",
        "orders-eventbridge-via-sqs.json",
        "payments-fifo.json",
        "payments-fifo-poison.json",
        "payments-fifo-duplicate.json",
    ];
    const EVENTBRIDGE_FILES: [&str; 2] = [
        "inventory-order-placed.json",
        "inventory-insufficient-stock.json",
    ];

    #[test]
    fn event_files_round_trip_through_the_aws_types() {
        for name in SQS_FILES {
            let original = event_json(name);
            let parsed: SqsEvent = serde_json::from_value(original.clone()).unwrap();
            assert!(!parsed.records.is_empty(), "{name}");
            let once = serde_json::to_value(&parsed).unwrap();
            let again: SqsEvent = serde_json::from_value(once.clone()).unwrap();
            assert_eq!(parsed, again, "{name}");
            assert_eq!(once, serde_json::to_value(&again).unwrap(), "{name}");
            // Nothing the adapters read is lost on the way.
            for (record, raw) in parsed
                .records
                .iter()
                .zip(original["Records"].as_array().unwrap())
            {
                assert_eq!(
                    record.message_id.as_deref(),
                    raw["messageId"].as_str(),
                    "{name}"
                );
                assert_eq!(record.body.as_deref(), raw["body"].as_str(), "{name}");
                assert_eq!(
                    record.event_source_arn.as_deref(),
                    raw["eventSourceARN"].as_str(),
                    "{name}"
                );
                assert_eq!(
                    serde_json::to_value(&record.attributes).unwrap(),
                    raw["attributes"],
                    "{name}"
                );
            }
            assert_eq!(parse_sqs_event(original).unwrap(), parsed, "{name}");
        }
        for name in EVENTBRIDGE_FILES {
            let original = event_json(name);
            let parsed: EventBridgeEvent<Value> = serde_json::from_value(original.clone()).unwrap();
            let once = serde_json::to_value(&parsed).unwrap();
            let again: EventBridgeEvent<Value> = serde_json::from_value(once.clone()).unwrap();
            assert_eq!(parsed, again, "{name}");
            assert_eq!(once, serde_json::to_value(&again).unwrap(), "{name}");
            assert_eq!(once["id"], original["id"], "{name}");
            assert_eq!(once["detail"], original["detail"], "{name}");
            assert_eq!(once["detail-type"], original["detail-type"], "{name}");
        }
    }

    #[test]
    fn wrong_shapes_are_not_sqs_events() {
        let eventbridge = event_json("inventory-order-placed.json");
        let cases = [
            (eventbridge, "EventBridge event"),
            (json!(42), "got a number"),
            (json!("Records"), "got a string"),
            (json!({}), "no Records array"),
            (json!({"Records": {}}), "not an array"),
            (
                json!({"Records": [{"EventSource": "aws:sns", "Sns": {}}]}),
                "aws:sns",
            ),
            (
                json!({"Records": [{"eventSource": "aws:s3", "s3": {}}]}),
                "aws:s3",
            ),
            (
                json!({"Records": [{"messageId": "m-1", "body": "{}"}]}),
                "no eventSource",
            ),
            (
                json!({"Records": [{"eventSource": "aws:sqs", "messageId": 7}]}),
                "malformed",
            ),
        ];
        for (value, expected) in cases {
            let err = parse_sqs_event(value.clone()).unwrap_err();
            assert!(matches!(err, BatchError::NotAnSqsEvent(_)), "{value}");
            assert!(err.to_string().contains(expected), "{value}: {err}");
        }
        assert!(
            parse_sqs_event(json!({"Records": []}))
                .unwrap()
                .records
                .is_empty()
        );
    }

    #[test]
    #[cfg(feature = "lambda")]
    fn remaining_time_from_the_context() {
        let mut ctx = lambda_runtime::Context::default();
        assert_eq!(remaining_time(&ctx, T0), None, "no deadline is unknown");
        ctx.deadline = T0 + 2_500;
        assert_eq!(remaining_time(&ctx, T0), Some(Duration::from_millis(2_500)));
        // cargo lambda watch sends 600000: long past, a real zero.
        ctx.deadline = 600_000;
        assert_eq!(remaining_time(&ctx, T0), Some(Duration::ZERO));
    }

    #[tokio::test]
    async fn empty_batch_gives_an_empty_response() {
        let (engine, store, _) = memory_engine();
        let runs = AtomicUsize::new(0);
        let report = BatchProcessor::new(engine, KeySelector::MessageId)
            .process(batch(vec![]), None, |_r: SqsRecord<Value>| async {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, HandlerError>(())
            })
            .await;
        assert!(report.records.is_empty() && report.is_success());
        let response = report.into_response().unwrap();
        assert!(response.batch_item_failures.is_empty());
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            json!({"batchItemFailures": []})
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert!(store.is_empty());
    }

    #[tokio::test]
    async fn records_without_message_id() {
        let (engine, _, _) = memory_engine();
        let processor = BatchProcessor::new(engine, KeySelector::pointer("/id"));
        let handler = |_r: SqsRecord<Value>| async { Ok::<_, HandlerError>(()) };
        // A record without messageId that succeeds needs no reporting.
        let ok = processor
            .process(
                batch(vec![
                    message(None, r#"{"id":"a"}"#),
                    message(Some(""), r#"{"id":"b"}"#),
                ]),
                None,
                handler,
            )
            .await;
        assert!(ok.is_success());
        assert!(ok.into_response().unwrap().batch_item_failures.is_empty());
        // One that fails (None or empty id) makes the whole invocation fail.
        for id in [None, Some("")] {
            let report = processor
                .process(
                    batch(vec![
                        message(Some("m-1"), r#"{"id":"c"}"#),
                        message(id, "poison"),
                    ]),
                    None,
                    handler,
                )
                .await;
            assert!(!report.records[0].outcome.is_failure());
            match report.into_response() {
                Err(BatchError::UnreportableFailure {
                    position: 1,
                    reason: FailureReason::Parse(m),
                }) => assert!(m.contains("record #1 (no messageId)"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn duplicate_message_ids_are_reported_once() {
        let (engine, _, _) = memory_engine();
        let processor = BatchProcessor::new(engine, KeySelector::pointer("/id"));
        let event = batch(vec![
            message(Some("m-1"), "poison"),
            message(Some("m-2"), r#"{"id":"x"}"#),
            message(Some("m-1"), "poison again"),
            message(Some("m-3"), "{"),
        ]);
        let report = processor
            .process(event, None, |_r: SqsRecord<Value>| async {
                Ok::<_, HandlerError>(())
            })
            .await;
        assert_eq!(report.failures().count(), 3);
        let response = report.into_response().unwrap();
        assert_eq!(failed_ids(&response), ["m-1", "m-3"]);
    }

    #[test]
    fn pointer_keys() {
        let body = json!({"s": "k", "n": 1103, "z": null, "o": {"a": 1}, "b": true, "e": ""});
        assert_eq!(pointer_key(&body, "/s"), Ok(json!("k")));
        assert_eq!(pointer_key(&body, "/n"), Ok(json!(1103)));
        assert!(
            matches!(pointer_key(&body, "/missing"), Err(KeyError::Missing(p)) if p == "/missing")
        );
        assert!(
            matches!(pointer_key(&body, "/z"), Err(KeyError::Missing(p)) if p.contains("null"))
        );
        assert!(
            matches!(pointer_key(&body, "s"), Err(KeyError::Missing(p)) if p.contains("must start with '/'"))
        );
        assert_eq!(
            pointer_key(&body, "/o"),
            Err(KeyError::WrongType {
                at: "/o".into(),
                found: "an object"
            })
        );
        assert!(matches!(
            pointer_key(&body, "/b"),
            Err(KeyError::WrongType {
                found: "a boolean",
                ..
            })
        ));
        // Empty strings pass the selector and are rejected by the key itself.
        assert_eq!(pointer_key(&body, "/e"), Ok(json!("")));
        assert_eq!(IdempotencyKey::new("p", &json!("")), Err(KeyError::Empty));
    }

    #[test]
    fn record_accessors() {
        let event = sqs_event("payments-fifo-duplicate.json");
        let record = SqsRecord::new((), event.records[0].clone());
        assert_eq!(record.message_id(), "704d72db-5ef2-45e6-9d4b-ef8bdd197e76");
        assert_eq!(record.group_id(), Some("acct-1"));
        assert_eq!(record.deduplication_id(), Some("pay-9d04c0de"));
        assert_eq!(record.receive_count(), Some(2));
    }

    #[test]
    fn process_future_is_send() {
        fn assert_send<F: Future + Send>(_: F) {}
        let (engine, _, _) = memory_engine();
        let processor = BatchProcessor::new(engine, KeySelector::MessageId);
        assert_send(
            processor.process(batch(vec![]), None, |r: SqsRecord<Value>| async move {
                Ok::<_, HandlerError>(r.body)
            }),
        );
    }
}
