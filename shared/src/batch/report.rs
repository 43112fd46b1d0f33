//! What happened to each record of a batch, and the partial batch response
//! for Lambda, for every source.

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use super::delivery::Ordering;
use super::delivery::{Delivery, SourceNames};
use super::log::Failure;
use crate::engine::Outcome;
use crate::error::ErrorType;
use crate::error::{Error, ErrorKind, HandlerError, KeyError, report};
use crate::signature::SignatureError;

/// Why a record failed. Every failure puts the record in `batchItemFailures`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureReason {
    /// No body, a body that is not JSON, not the handler's body type, or a
    /// broken EventBridge envelope. The message says which and why.
    Parse(String),
    /// No usable idempotency key (with [`MissingKey::Fail`](crate::MissingKey::Fail), or a wrong type).
    Key(KeyError),
    /// The body is larger than [`SqsProcessor::max_body_bytes`](crate::sqs::SqsProcessor::max_body_bytes); it was
    /// not parsed (permanent).
    BodyTooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Signatures are verified ([`SqsProcessor::verify_signatures`](crate::sqs::SqsProcessor::verify_signatures)) and
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
    /// An ordered record whose lane (FIFO group, shard, partition) is
    /// unknown: its order cannot be kept. It names the record and what it
    /// lacks ([`SourceNames::no_lane`](crate::batch::SourceNames::no_lane)).
    NoLane(&'static str),
    /// Ordered lanes (FIFO group, shard): not run because an earlier record
    /// it must follow failed.
    Skipped {
        /// The record that failed first.
        after: String,
    },
    /// Not started: less than the deadline margin was left of the
    /// invocation when its turn came (retry later; nothing ran).
    OutOfTime {
        /// What was left of the invocation, in ms.
        remaining_ms: u64,
        /// The margin, in ms (`deadline_margin` of the processor).
        margin_ms: u64,
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
            Self::NoLane(record) => write!(
                f,
                "{record}: its order cannot be kept, so it and every later record of the batch \
                 are failed"
            ),
            Self::BodyTooLarge { size, limit } => write!(
                f,
                "body of {size} bytes is over the {limit}-byte limit \
                 (SqsProcessor::max_body_bytes); not parsed (permanent)"
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
            Self::OutOfTime {
                remaining_ms,
                margin_ms,
            } => write!(
                f,
                "not started: {remaining_ms} ms of the invocation left, under the \
                 {margin_ms} ms deadline margin (deadline_margin); nothing ran, retry later"
            ),
            Self::DuplicateOf { first, reason } => {
                write!(f, "in-batch duplicate of {first}, which failed: {reason}")
            }
        }
    }
}

impl FailureReason {
    /// Whether the record can never succeed: delivered again, it fails the
    /// same way. Terminal: it does not parse ([`Parse`](Self::Parse)), has
    /// no usable key ([`Key`](Self::Key)), is too large
    /// ([`BodyTooLarge`](Self::BodyTooLarge)), fails its signature check
    /// ([`BadSignature`](Self::BadSignature)), its key was used with another
    /// payload ([`PayloadMismatch`](Self::PayloadMismatch)), the handler
    /// returned a terminal error ([`Handler`](Self::Handler) with
    /// [`ErrorKind::Terminal`]), or it is an in-batch copy of such a record.
    /// Everything else may succeed on a later try: the store, a key held by
    /// another invocation, the deadline, a retryable handler error, a panic,
    /// a record not run behind a failure or whose lane is unknown. On an
    /// ordered stream with parking ([`crate::parking`]), a terminal failure
    /// is parked and its lane goes on; any other stops its lane.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::Parse(_)
            | Self::Key(_)
            | Self::BodyTooLarge { .. }
            | Self::BadSignature(_)
            | Self::PayloadMismatch => true,
            Self::Handler { kind, .. } => *kind == ErrorKind::Terminal,
            Self::DuplicateOf { reason, .. } => reason.is_terminal(),
            Self::InProgress { .. }
            | Self::Panic(_)
            | Self::Store(_)
            | Self::Idempotency(_)
            | Self::NoLane(_)
            | Self::Skipped { .. }
            | Self::OutOfTime { .. } => false,
        }
    }
}

impl Failure for FailureReason {
    fn in_progress(&self) -> bool {
        matches!(self, Self::InProgress { .. })
    }

    fn expected(&self) -> bool {
        matches!(self, Self::InProgress { .. } | Self::Skipped { .. })
    }

    fn retryable(&self) -> Option<bool> {
        None
    }

    fn next(&self) -> &'static str {
        "it will be delivered again"
    }

    fn describe(&self) -> String {
        self.to_string()
    }
}

impl From<EngineFailure> for FailureReason {
    fn from(failure: EngineFailure) -> Self {
        match failure {
            EngineFailure::InProgress {
                lease_expires_at_ms,
            } => Self::InProgress {
                lease_expires_at_ms,
            },
            EngineFailure::PayloadMismatch => Self::PayloadMismatch,
            EngineFailure::Handler(e) => Self::Handler {
                message: report(e.error()),
                kind: e.kind(),
            },
            EngineFailure::Engine(Error::Store(e)) => Self::Store(report(&e)),
            EngineFailure::Engine(other) => Self::Idempotency(report(&other)),
        }
    }
}

/// One record's result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordResult<T> {
    /// Position in the batch.
    pub position: usize,
    /// Its id as received ([`Delivery::id`](crate::batch::Delivery::id):
    /// the SQS `messageId`, the Kinesis `sequenceNumber`).
    pub message_id: Option<String>,
    /// Its ordering lane, when it has one (FIFO group, shard).
    pub lane: Option<String>,
    /// The hash part of the idempotency key (safe to log), when there was one.
    pub key_hash: Option<String>,
    /// What happened: a done outcome (`Executed`, `Replayed`, `Rejected`,
    /// `Unprotected`: the record is deleted from the queue), or why it failed
    /// (it is listed in `batchItemFailures` and delivered again). An engine
    /// `InProgress` or `PayloadMismatch` is a failure here
    /// ([`FailureReason::InProgress`], [`FailureReason::PayloadMismatch`]).
    pub outcome: Result<Outcome<T>, FailureReason>,
}

impl<T> RecordResult<T> {
    /// Whether the record goes to `batchItemFailures`.
    pub fn is_failure(&self) -> bool {
        self.outcome.is_err()
    }

    /// A short name for logs: the outcome's label, or `failed`.
    pub(crate) fn label(&self) -> &'static str {
        match &self.outcome {
            Ok(outcome) => outcome.label(),
            Err(_) => "failed",
        }
    }
}

/// The results of one batch, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchReport<T> {
    /// One result per record, in batch order.
    pub records: Vec<RecordResult<T>>,
    /// Whether the batch was processed in order (FIFO, a stream).
    pub fifo: bool,
    /// How it was processed.
    ordering: Ordering,
    /// Its source's names.
    names: &'static SourceNames,
}

/// A partial batch response (`{"batchItemFailures":[{"itemIdentifier":..}]}`)
/// of one source: the SQS, Kinesis, DynamoDB Streams, Kafka shapes.
pub trait PartialResponse: Default {
    /// Names one record to deliver again.
    fn add_item_failure(&mut self, id: &str);
}

impl<T> BatchReport<T> {
    /// A report of `records` (in batch order) run under `ordering`.
    pub(crate) fn new(
        records: Vec<RecordResult<T>>,
        ordering: Ordering,
        names: &'static SourceNames,
    ) -> Self {
        Self {
            records,
            fifo: ordering.is_ordered(),
            ordering,
            names,
        }
    }

    /// How the batch was processed.
    pub fn ordering(&self) -> Ordering {
        self.ordering
    }

    /// The per-invocation metric counts of this batch.
    pub fn counts(&self) -> crate::metrics::Counts {
        let mut counts = crate::metrics::Counts::default();
        for r in &self.records {
            super::log::count(&mut counts, r.outcome.as_ref());
        }
        counts
    }

    /// The failed records.
    pub fn failures(&self) -> impl Iterator<Item = &RecordResult<T>> {
        self.records.iter().filter(|r| r.outcome.is_err())
    }

    /// Whether no record failed.
    pub fn is_success(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The ids the partial batch response names, in batch order, each once:
    /// every failed record, or under [`Ordering::StopLane`] the first failed
    /// record of each lane in batch order (the stream checkpoints before it
    /// and redelivers from there). A lane whose records ran by key (a shard
    /// by partition key) names the lowest among its keys' first failures:
    /// what other keys committed after it is redelivered and replays.
    ///
    /// A named record without an id cannot be reported; returning a
    /// response would drop it. That is [`BatchError::NoItemIdentifier`]:
    /// return it as the invocation's error so Lambda retries the whole batch
    /// (the records that succeeded replay).
    pub fn item_failures(&self) -> Result<Vec<&str>, BatchError> {
        let failed = self.records.iter().filter_map(|r| {
            let reason = r.outcome.as_ref().err()?;
            Some(Failed {
                position: r.position,
                id: r.message_id.as_deref(),
                lane: r.lane.as_deref(),
                reason,
            })
        });
        named_failures(failed, self.ordering, self.names)
    }

    /// The partial batch response of type `P` ([`BatchReport::item_failures`]).
    pub fn response_as<P: PartialResponse>(&self) -> Result<P, BatchError> {
        let mut response = P::default();
        for id in self.item_failures()? {
            response.add_item_failure(id);
        }
        Ok(response)
    }
}

/// A failed record, as the partial batch response sees it.
struct Failed<'a> {
    position: usize,
    id: Option<&'a str>,
    lane: Option<&'a str>,
    reason: &'a FailureReason,
}

/// The ids the partial batch response names, of the `failed` records (in
/// batch order) of a batch run under `ordering`: each once; under
/// [`Ordering::StopLane`] only the first of each lane. The rule of
/// [`BatchReport::item_failures`] and [`partial_response`].
fn named_failures<'a>(
    failed: impl Iterator<Item = Failed<'a>>,
    ordering: Ordering,
    names: &'static SourceNames,
) -> Result<Vec<&'a str>, BatchError> {
    let mut ids = Vec::new();
    let mut seen = HashSet::new();
    let mut stopped_lanes = HashSet::new();
    for record in failed {
        if ordering == Ordering::StopLane && !stopped_lanes.insert(record.lane.unwrap_or_default())
        {
            continue;
        }
        match record.id {
            Some(id) if !id.is_empty() => {
                if seen.insert(id) {
                    ids.push(id);
                }
            }
            _ => {
                let (position, reason) = (record.position, record.reason.clone());
                let error = BatchError::NoItemIdentifier {
                    position,
                    id: names.id,
                    reason,
                };
                tracing::error!(position = record.position, error = %error, "unreportable failure");
                return Err(error);
            }
        }
    }
    Ok(ids)
}

/// The partial batch response of type `P` for a batch whose records were
/// processed outside the pipeline (the outbox relay publishes across
/// records, ten messages per request): `failed` lists the failed records,
/// each with its position in the batch and why, in batch order. The
/// response names what [`BatchReport::item_failures`] would under
/// `ordering`: under [`Ordering::StopLane`] the first failed record of each
/// lane. A named record without an id is [`BatchError::NoItemIdentifier`]
/// fail the invocation.
pub fn partial_response<'a, P: PartialResponse>(
    ordering: Ordering,
    failed: impl IntoIterator<Item = (usize, &'a dyn Delivery, &'a FailureReason)>,
) -> Result<P, BatchError> {
    let mut failed = failed.into_iter().peekable();
    let names = match failed.peek() {
        Some((_, delivery, _)) => delivery.source(),
        None => return Ok(P::default()),
    };
    let failed = failed.map(|(position, delivery, reason)| Failed {
        position,
        id: delivery.id(),
        lane: delivery.lane(),
        reason,
    });
    let mut response = P::default();
    for id in named_failures(failed, ordering, names)? {
        response.add_item_failure(id);
    }
    Ok(response)
}

/// A batch-level error: the invocation fails and Lambda retries the batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The event is not the processor's source's (a Kinesis processor given
    /// another payload).
    #[error("not {expected} event: {message}")]
    WrongEvent {
        /// The expected source, with its article (`a Kinesis`).
        expected: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A failed record has no id (`messageId`, `sequenceNumber`), so
    /// `batchItemFailures` cannot name it.
    #[error(
        "record at position {position} failed ({reason}) but has no {id}, so it cannot be \
         listed in batchItemFailures; failing the invocation so that Lambda retries the whole \
         batch (idempotency makes the retry safe)"
    )]
    NoItemIdentifier {
        /// Its position in the batch.
        position: usize,
        /// What the id is called (`sequenceNumber`).
        id: &'static str,
        /// Why it failed.
        reason: FailureReason,
    },
}

impl ErrorType for BatchError {
    fn error_type(&self) -> &'static str {
        match self {
            Self::WrongEvent { .. } => "InvalidEvent",
            Self::NoItemIdentifier { .. } => "UnreportableRecordFailure",
        }
    }
}

/// An engine answer that is not a done outcome.
#[derive(Debug)]
pub(crate) enum EngineFailure {
    /// Another invocation holds the key.
    InProgress { lease_expires_at_ms: Option<u64> },
    /// The key was used before with a different payload.
    PayloadMismatch,
    /// The handler failed (retryable, or terminal and not recorded).
    Handler(HandlerError),
    /// The engine failed (store, lease lost, response too large...).
    Engine(Error),
}

/// Splits the engine's answer into a done outcome or a failure.
pub(crate) fn split<T>(result: Result<Outcome<T>, Error>) -> Result<Outcome<T>, EngineFailure> {
    match result {
        Ok(Outcome::InProgress {
            lease_expires_at_ms,
        }) => Err(EngineFailure::InProgress {
            lease_expires_at_ms,
        }),
        Ok(Outcome::PayloadMismatch) => Err(EngineFailure::PayloadMismatch),
        Ok(done) => Ok(done),
        Err(Error::Handler(e)) => Err(EngineFailure::Handler(e)),
        Err(e) => Err(EngineFailure::Engine(e)),
    }
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
