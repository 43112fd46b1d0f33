//! What happened to each record of a batch, and the partial batch response
//! for Lambda, for every source.

use std::collections::HashSet;

use serde_json::Value;

use super::delivery::{Ordering, SourceNames};
use super::log::Failure;
use crate::engine::Outcome;
use crate::error::{Error, ErrorKind, ErrorType, KeyError, report};
use crate::signature::SignatureError;

/// Why a record failed. Every failure puts the record in `batchItemFailures`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FailureReason {
    /// No body, a body that is not JSON, not the handler's body type, or a
    /// broken envelope. The message says which and why.
    #[error("unparseable record: {0}")]
    Parse(String),
    /// Not an event the processor accepts (an EventBridge `source` and
    /// `detail-type` other than [`EventBridgeProcessor::accept`](crate::eventbridge::EventBridgeProcessor::accept)'s);
    /// it was not claimed (permanent).
    #[error("not accepted: {0} (permanent)")]
    NotAccepted(String),
    /// No usable idempotency key (with [`MissingKey::Fail`](crate::MissingKey::Fail), or a wrong type).
    #[error("no usable idempotency key: {0}")]
    Key(KeyError),
    /// The body is larger than [`SqsProcessor::max_body_bytes`](crate::sqs::SqsProcessor::max_body_bytes); it was
    /// not parsed (permanent).
    #[error(
        "body of {size} bytes is over the {limit}-byte limit (SqsProcessor::max_body_bytes); \
         not parsed (permanent)"
    )]
    BodyTooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Signatures are verified ([`SqsProcessor::verify_signatures`](crate::sqs::SqsProcessor::verify_signatures)) and
    /// this record's is missing, malformed or wrong; its body was not parsed
    /// (permanent).
    #[error("signature check failed: {0}; body not parsed (permanent)")]
    BadSignature(SignatureError),
    /// Another invocation holds the key: retry later.
    #[error(
        "another invocation is processing the same idempotency key{}; retry later",
        lease_lapses(*lease_expires_at_ms)
    )]
    InProgress {
        /// When that claim lapses (epoch ms), if known.
        lease_expires_at_ms: Option<u64>,
    },
    /// The key was used before with a different payload (permanent).
    #[error("the idempotency key was already used with a different payload (permanent)")]
    PayloadMismatch,
    /// The handler returned an error (or panicked: retryable).
    #[error("handler failed ({}): {message}", kind_name(*kind))]
    Handler {
        /// The error with its sources.
        message: String,
        /// Retryable or terminal (a terminal one not recorded).
        kind: ErrorKind,
    },
    /// A panic outside the handler (key function, body deserializer, ...).
    #[error("panicked: {0}")]
    Panic(String),
    /// The idempotency store failed; the handler may not have run.
    #[error("idempotency store failed: {0}")]
    Store(String),
    /// Another engine failure (lease lost, response too large, ...).
    #[error("{0}")]
    Idempotency(String),
    /// An ordered record whose lane (FIFO group, shard, partition) is
    /// unknown: it names the record and what it lacks
    /// ([`SourceNames::no_lane`](crate::batch::SourceNames::no_lane)).
    #[error("{0}: its order cannot be kept, so it and every later record of the batch are failed")]
    NoLane(&'static str),
    /// Not run because an earlier record of its unit failed.
    #[error("not run: an earlier record it must follow ({after}) failed")]
    Skipped {
        /// The record that failed first.
        after: String,
    },
    /// Not started: less than the deadline margin was left of the
    /// invocation when its turn came (retry later; nothing ran).
    #[error(
        "not started: {remaining_ms} ms of the invocation left, under the {margin_ms} ms \
         deadline margin (deadline_margin); nothing ran, retry later"
    )]
    OutOfTime {
        /// What was left of the invocation, in ms.
        remaining_ms: u64,
        /// The margin, in ms (`deadline_margin` of the processor).
        margin_ms: u64,
    },
    /// An in-batch duplicate whose first copy failed.
    #[error("in-batch duplicate of {first}, which failed: {reason}")]
    DuplicateOf {
        /// The first copy.
        first: String,
        /// Why it failed.
        reason: Box<FailureReason>,
    },
}

fn lease_lapses(at_ms: Option<u64>) -> String {
    at_ms.map_or_else(String::new, |t| format!(" (its lease lapses at {t} ms)"))
}

/// `retryable` or `terminal`, for messages.
pub(crate) fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Retryable => "retryable",
        ErrorKind::Terminal => "terminal",
    }
}

impl FailureReason {
    /// Whether the record can never succeed (delivered again, it fails the
    /// same way): it does not parse, has no usable key, is too large, fails
    /// its signature check, its key was used with another payload, the
    /// handler returned a terminal error, or it is an in-batch copy of such
    /// a record. With [`crate::parking`], a terminal failure is parked.
    pub fn is_terminal(&self) -> bool {
        match self {
            Self::Parse(_)
            | Self::NotAccepted(_)
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

    fn describe(&self) -> String {
        self.to_string()
    }
}

/// The engine's answer as a record's outcome: an engine `InProgress` or
/// `PayloadMismatch` is a failure.
pub(crate) fn record_outcome<T>(
    result: Result<Outcome<T>, Error>,
) -> Result<Outcome<T>, FailureReason> {
    match result {
        Ok(Outcome::InProgress {
            lease_expires_at_ms,
        }) => Err(FailureReason::InProgress {
            lease_expires_at_ms,
        }),
        Ok(Outcome::PayloadMismatch) => Err(FailureReason::PayloadMismatch),
        Ok(done) => Ok(done),
        Err(Error::Handler(e)) => Err(FailureReason::Handler {
            message: report(e.error()),
            kind: e.kind(),
        }),
        Err(Error::Store(e)) => Err(FailureReason::Store(report(&e))),
        Err(other) => Err(FailureReason::Idempotency(report(&other))),
    }
}

/// One record's result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordResult<T> {
    /// Position in the batch.
    pub position: usize,
    /// Its id as received ([`Delivery::id`](super::Delivery::id)).
    pub message_id: Option<String>,
    /// Its ordering lane, when it has one (FIFO group, shard).
    pub lane: Option<String>,
    /// The hash part of the idempotency key (safe to log), when there was one.
    pub key_hash: Option<String>,
    /// What happened: a done outcome (`Executed`, `Replayed`, `Rejected`,
    /// `Unprotected`, `Parked`), or why it failed (it is named in
    /// `batchItemFailures` and delivered again; an engine `InProgress` or
    /// `PayloadMismatch` is a failure here).
    pub outcome: Result<Outcome<T>, FailureReason>,
}

impl<T> RecordResult<T> {
    /// Whether the record goes to `batchItemFailures`.
    pub fn is_failure(&self) -> bool {
        self.outcome.is_err()
    }

    /// A short name for logs: the outcome's label, or `failed`.
    pub(crate) fn label(&self) -> &'static str {
        self.outcome.as_ref().map_or("failed", Outcome::label)
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
    ordering: Ordering,
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
        let fifo = ordering.is_ordered();
        Self {
            records,
            fifo,
            ordering,
            names,
        }
    }

    /// What a record's id is called (`MessageId`, `offset`), for messages.
    pub(crate) fn id_name(&self) -> &'static str {
        self.names.id
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
    /// record of each lane (the lowest among its keys' first failures).
    /// A named record without an id is [`BatchError::NoItemIdentifier`]:
    /// return it as the invocation's error so Lambda retries the batch.
    pub fn item_failures(&self) -> Result<Vec<&str>, BatchError> {
        let mut ids = Vec::new();
        let mut seen = HashSet::new();
        let mut stopped_lanes = HashSet::new();
        for r in &self.records {
            let Err(reason) = &r.outcome else { continue };
            let lane = r.lane.as_deref().unwrap_or_default();
            if self.ordering == Ordering::StopLane && !stopped_lanes.insert(lane) {
                continue;
            }
            match r.message_id.as_deref() {
                Some(id) if !id.is_empty() => {
                    if seen.insert(id) {
                        ids.push(id);
                    }
                }
                _ => {
                    let error = BatchError::NoItemIdentifier {
                        position: r.position,
                        id: self.names.id,
                        reason: reason.clone(),
                    };
                    tracing::error!(position = r.position, error = %error, "unreportable failure");
                    return Err(error);
                }
            }
        }
        Ok(ids)
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

/// A batch-level error: the invocation fails and Lambda retries the batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// The event is not the processor's source's.
    #[error("not {expected} event: {message}")]
    WrongEvent {
        /// The expected source, with its article (`a Kinesis`).
        expected: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A failed record has no id, so `batchItemFailures` cannot name it.
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
