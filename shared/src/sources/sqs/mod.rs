//! SQS batches, standard and FIFO, on the batch core: [`SqsProcessor`]; bodies
//! optionally signed or opened as envelopes. The guide: [`guide::sources::sqs`](crate::guide::sources::sqs), the repository's `docs/sources/sqs.md`.

pub use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use crate::batch::envelope::{Envelope, EnvelopeMode, Envelopes};
pub use crate::batch::{
    BatchError, BatchReport, FailureReason, Ordering, PartialResponse, PreRead, RecordResult,
};

use crate::batch::PayloadKind;
use crate::batch::envelope::{self, looks_like_eventbridge};
use crate::batch::malformed::{Salvage, StreamEvent, parse_stream, text};
use crate::batch::{Attribute, Delivery, Keyed, Prepare, Prepared, Preparing, Reading};
use crate::batch::{Processor, Source, SourceNames};
use crate::sources::check_size;
use crate::{key::IdempotencyKey, signature::Verifier};

/// The SQS system attribute holding a FIFO record's message group.
pub const MESSAGE_GROUP_ID: &str = "MessageGroupId";
/// The SQS system attribute holding a FIFO record's deduplication id.
pub const MESSAGE_DEDUPLICATION_ID: &str = "MessageDeduplicationId";
/// The SQS system attribute counting a record's deliveries.
pub const APPROXIMATE_RECEIVE_COUNT: &str = "ApproximateReceiveCount";
/// The default [`SqsProcessor::max_body_bytes`]: 256 KiB, SQS's default.
pub const DEFAULT_MAX_BODY_BYTES: usize = 262_144;

/// Processes SQS batches ([`Processor`] over [`Sqs`]).
pub type SqsProcessor = Processor<Sqs>;

/// The SQS source and its settings.
#[derive(Debug, Clone, Default)]
pub struct Sqs {
    queue_kind: QueueKind,
    fifo_failure_mode: FifoFailureMode,
    max_body_bytes: Option<usize>,
    verifier: Option<Verifier>,
    envelope: EnvelopeMode,
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

/// SQS messages: their lane is a FIFO queue's message group.
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "messageId",
        id_field: "message_id",
        lane_field: "group",
        deduplication_id: "attribute MessageDeduplicationId (FIFO queues only)",
        no_lane: "FIFO record without a MessageGroupId attribute (is the queue really FIFO?)",
    },
    expected: "an SQS",
    event_source: "aws:sqs",
    event_source_fields: &["eventSource", "EventSource"],
    event_source_optional: false,
    noun: "an SQS message",
    id: "/messageId",
    lane: |raw| text(raw, "/attributes/MessageGroupId"),
};

/// An SQS event as parsed: each message parsed on its own.
pub type SqsStreamEvent = StreamEvent<SqsMessage>;

impl From<SqsEvent> for SqsStreamEvent {
    fn from(event: SqsEvent) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as an SQS event: a `Records` array whose
/// items all have `eventSource` `aws:sqs` (an EventBridge event is named).
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
        let fifo = |arn: &Option<String>| arn.as_deref().is_some_and(|a| a.ends_with(".fifo"));
        let fifo = match self.queue_kind {
            QueueKind::Standard => false,
            QueueKind::Fifo => true,
            QueueKind::Auto => event.records.iter().any(|r| match r {
                Ok(message) => fifo(&message.event_source_arn),
                Err(malformed) => fifo(&malformed.event_source_arn),
            }),
        };
        match (fifo, self.fifo_failure_mode) {
            (false, _) => Ordering::Unordered,
            (true, FifoFailureMode::SkipGroup) => Ordering::SkipLane,
            (true, FifoFailureMode::StopBatch) => Ordering::StopBatch,
        }
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
        self.source.max_body_bytes = Some(bytes);
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

    /// Whether bodies are opened as envelopes (EventBridge events, SNS
    /// notifications; [`crate::envelope`]). Default [`EnvelopeMode::Never`].
    pub fn envelope(mut self, mode: EnvelopeMode) -> Self {
        self.source.envelope = mode;
        self
    }
}

impl Delivery for SqsMessage {
    fn id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    fn lane(&self) -> Option<&str> {
        self.attributes.get(MESSAGE_GROUP_ID).map(String::as_str)
    }

    fn position(&self) -> Option<&str> {
        self.attributes.get("SequenceNumber").map(String::as_str)
    }

    fn body(&self) -> Option<&[u8]> {
        self.body.as_deref().map(str::as_bytes)
    }

    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        let text = self.message_attributes.get(name)?.string_value.as_deref();
        Some(text.map_or(Attribute::Binary, Attribute::Text))
    }

    fn deduplication_id(&self) -> Option<&str> {
        (self.attributes.get(MESSAGE_DEDUPLICATION_ID)).map(String::as_str)
    }

    fn receive_count(&self) -> Option<u32> {
        self.attributes.get(APPROXIMATE_RECEIVE_COUNT)?.parse().ok()
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }
}

/// One record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsRecord<M> {
    /// The body, or the document of the envelope the processor opened
    /// ([`crate::envelope`]), read by the handler's type
    /// ([`crate::PayloadKind`]): parsed as JSON, or taken as text or bytes;
    /// what the key and the payload hash read.
    pub body: M,
    /// The SQS message (ids, attributes, the raw body).
    pub message: SqsMessage,
    /// The envelope the body was opened from (an EventBridge event, an SNS
    /// notification).
    pub envelope: Option<Envelope>,
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

    /// The FIFO `MessageGroupId`.
    pub fn group_id(&self) -> Option<&str> {
        self.message.lane()
    }
}

impl<M: DeserializeOwned> Prepare<SqsRecord<M>> for Sqs {
    type Body = M;

    fn prepare<'r>(&self, at: &Reading<'_>, message: &'r SqsMessage) -> Preparing<'r, M> {
        let ident = at.ident();
        let parse = FailureReason::Parse;
        let text = message.body.as_deref();
        let text = text.ok_or_else(|| parse(format!("message {ident} has no body")))?;
        check_size(text.len(), self.max_body_bytes, DEFAULT_MAX_BODY_BYTES)?;
        if let Some(verifier) = &self.verifier {
            (verifier.verify_message(message)).map_err(FailureReason::BadSignature)?;
        }
        if PayloadKind::of::<M>() != PayloadKind::Json {
            let (payload, envelope) = envelope::open_raw(self.envelope, ident, text)?;
            let payload: Cow<'r, [u8]> = match payload {
                Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
                Cow::Owned(text) => Cow::Owned(text.into_bytes()),
            };
            let prepared = Prepared::from_payload(ident, "body", Some(payload))?;
            return Ok(prepared.with_envelope(envelope));
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            parse(format!(
                "body of message {ident} is not JSON, which the handler's type {} takes (type \
                 it String or lambda_idempotency::Bytes to take text or bytes): {e}",
                std::any::type_name::<M>()
            ))
        })?;
        let opened = envelope::open::<M>(self.envelope, ident, text, value)?;
        let prepared = Prepared::new(opened.body, opened.document);
        Ok(prepared.with_envelope(opened.envelope))
    }

    fn record(&self, message: SqsMessage, body: M, keyed: Keyed) -> SqsRecord<M> {
        let mut record = SqsRecord::new(body, message);
        (record.envelope, record.key) = (keyed.envelope, keyed.key);
        record
    }
}

#[cfg(test)]
mod fifo {
    use super::*;
    mod tests;
}

#[cfg(test)]
mod tests;
