//! SQS batches, standard and FIFO, on the batch core: [`SqsProcessor`] and
//! the partial batch response ([`SqsBatchResponse`]); bodies optionally
//! signed or opened as envelopes ([`EnvelopeMode`]). The guide:
//! [docs/sources/sqs.md].
//!
//! [docs/sources/sqs.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/sqs.md

mod record;

pub use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use serde_json::Value;

pub use crate::batch::envelope::{Envelope, EnvelopeMode, Envelopes};
pub use crate::batch::{
    BatchError, BatchReport, FailureReason, Ordering, PartialResponse, PreRead, RecordResult,
};
pub use record::SqsRecord;

use crate::batch::envelope::looks_like_eventbridge;
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream};
use crate::batch::{
    IdField, LaneField, MalformedRecord, PayloadScope, Processor, Source, SourceNames,
};
use crate::signature::Verifier;

/// The SQS system attribute holding a FIFO record's message group.
pub const MESSAGE_GROUP_ID: &str = "MessageGroupId";
/// The SQS system attribute holding a FIFO record's deduplication id.
pub const MESSAGE_DEDUPLICATION_ID: &str = "MessageDeduplicationId";
/// The SQS system attribute counting a record's deliveries.
pub const APPROXIMATE_RECEIVE_COUNT: &str = "ApproximateReceiveCount";
/// The default [`SqsProcessor::max_body_bytes`]: 256 KiB, SQS's default
/// maximum message size.
pub const DEFAULT_MAX_BODY_BYTES: usize = 262_144;

/// Processes SQS batches ([`Processor`] over [`Sqs`]).
pub type SqsProcessor = Processor<Sqs>;

/// The SQS source and its settings: the queue kind, the FIFO failure mode,
/// and how each record's body is checked, parsed and keyed.
#[derive(Debug, Clone)]
pub struct Sqs {
    queue_kind: QueueKind,
    fifo_failure_mode: FifoFailureMode,
    max_body_bytes: usize,
    verifier: Option<Verifier>,
    envelope: EnvelopeMode,
    payload: PayloadScope,
}

impl Default for Sqs {
    fn default() -> Self {
        Self {
            queue_kind: QueueKind::default(),
            fifo_failure_mode: FifoFailureMode::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            verifier: None,
            envelope: EnvelopeMode::default(),
            payload: PayloadScope::default(),
        }
    }
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
    /// The later records of its `MessageGroupId` fail without running;
    /// other groups go on, concurrently.
    #[default]
    SkipGroup,
    /// AWS's documented mode: it and every later record of the batch fail
    /// without running; the batch runs one record at a time.
    StopBatch,
}

/// SQS messages: their lane a FIFO queue's message group, also when they
/// do not parse.
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "messageId",
        id_field: IdField::MessageId,
        lane_field: LaneField::Group,
        deduplication_id: "attribute MessageDeduplicationId (FIFO queues only)",
        no_lane: "FIFO record without a MessageGroupId attribute (is the queue really FIFO?)",
    },
    expected: "an SQS",
    event_source: "aws:sqs",
    event_source_fields: &["eventSource", "EventSource"],
    event_source_optional: false,
    noun: "an SQS message",
    id: "/messageId",
    lane: |raw| {
        Some(
            raw.get("attributes")?
                .get(MESSAGE_GROUP_ID)?
                .as_str()?
                .to_owned(),
        )
    },
};

/// An SQS event as parsed: each message an SQS message or a
/// [`MalformedRecord`], which fails alone.
pub type SqsStreamEvent = StreamEvent<SqsMessage>;

impl From<SqsEvent> for SqsStreamEvent {
    fn from(event: SqsEvent) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as an SQS event: a `Records` array whose
/// items all have `eventSource` `aws:sqs` (an EventBridge event is named as
/// such), each parsed on its own.
pub fn parse_sqs_event(value: Value) -> Result<SqsStreamEvent, BatchError> {
    if value.get("Records").is_none() && looks_like_eventbridge(&value) {
        return Err(BatchError::WrongEvent {
            expected: "an SQS",
            message: format!(
                "this is an EventBridge event (detail-type {}), not an SQS batch; is the \
                 function wired to the right trigger?",
                value.get("detail-type").unwrap_or(&Value::Null)
            ),
        });
    }
    parse_stream(value, &SALVAGE)
}

/// Whether the batch is processed as FIFO.
fn is_fifo(kind: QueueKind, event: &SqsStreamEvent) -> bool {
    let fifo = |arn: &Option<String>| arn.as_deref().is_some_and(|a| a.ends_with(".fifo"));
    match kind {
        QueueKind::Standard => false,
        QueueKind::Fifo => true,
        QueueKind::Auto => event.records.iter().any(|r| match r {
            Ok(message) => fifo(&message.event_source_arn),
            Err(malformed) => fifo(&malformed.event_source_arn),
        }),
    }
}

impl Source for Sqs {
    type Event = SqsStreamEvent;
    type Raw = SqsMessage;
    type Response = SqsBatchResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &SALVAGE.names;

    fn parse(payload: Value) -> Result<SqsStreamEvent, BatchError> {
        parse_sqs_event(payload)
    }

    fn ordering(&self, event: &SqsStreamEvent) -> Ordering {
        match (is_fifo(self.queue_kind, event), self.fifo_failure_mode) {
            (false, _) => Ordering::Unordered,
            (true, FifoFailureMode::SkipGroup) => Ordering::SkipLane,
            (true, FifoFailureMode::StopBatch) => Ordering::StopBatch,
        }
    }

    fn records(&self, event: SqsStreamEvent) -> Vec<Result<SqsMessage, MalformedRecord>> {
        event.records
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<SqsBatchResponse, BatchError> {
        report.response_as()
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
    /// [`DEFAULT_MAX_BODY_BYTES`]; raise it for a larger `MaximumMessageSize`.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.source.max_body_bytes = bytes;
        self
    }

    /// Checks each record's HMAC-SHA256 with `verifier` before parsing its
    /// body: a missing or wrong signature is [`FailureReason::BadSignature`].
    pub fn verify_signatures(mut self, verifier: Verifier) -> Self {
        self.source.verifier = Some(verifier);
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
        self.source.payload = scope;
        self
    }

    /// Whether bodies are opened as envelopes (EventBridge events, SNS
    /// notifications; [`crate::envelope`]). Default [`EnvelopeMode::Never`].
    pub fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.source.envelope = mode;
        self
    }
}

#[cfg(test)]
mod fifo {
    use super::*;
    mod tests;
}

#[cfg(test)]
mod pipeline_tests;

#[cfg(test)]
mod tests;
