//! SQS batches, standard and FIFO, on the batch core: [`SqsProcessor`] and
//! the partial batch response ([`SqsBatchResponse`]); bodies optionally
//! signed or opened as envelopes ([`EnvelopeMode`]). The guide:
//! [docs/sources/sqs.md].
//!
//! [docs/sources/sqs.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/sqs.md

mod fifo;
mod parse;
mod policy;
mod prepare;
mod record;

pub use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
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
use crate::batch::{MalformedRecord, PayloadScope, Processor, Source, SourceNames};
use crate::signature::Verifier;
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
        self.source.max_body_bytes = bytes;
        self
    }

    /// Checks each record's HMAC-SHA256 with `verifier` before parsing its
    /// body (after the size check). A missing or wrong signature fails the
    /// record with [`FailureReason::BadSignature`]; only its message id and
    /// the reason are logged. Off by default.
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
    /// notifications). Default [`EnvelopeMode::Never`]: the body is the
    /// message. A queue that is an EventBridge rule's target, or subscribed
    /// to an SNS topic with raw message delivery off, asks for
    /// [`EnvelopeMode::Unwrap`] or [`EnvelopeMode::Require`]; the key and
    /// the payload hash then read the opened document, as the handler does.
    pub fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.source.envelope = mode;
        self
    }
}

#[cfg(test)]
mod pipeline_tests;

#[cfg(test)]
mod tests;
