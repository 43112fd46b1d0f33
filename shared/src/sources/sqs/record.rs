//! An SQS message as the pipeline ([`Delivery`]) and the handler see it:
//! its body checked (size, signature), parsed (an envelope opened when
//! asked) and keyed ([`Prepare`]).

use std::any::Any;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{APPROXIMATE_RECEIVE_COUNT, MESSAGE_DEDUPLICATION_ID, MESSAGE_GROUP_ID};
use super::{FailureReason, SALVAGE, Sqs, SqsMessage};
use crate::batch::envelope::{self, Envelope};
use crate::batch::{Attribute, Delivery, KeyInput, Pipeline, Prepare, Prepared, SourceNames};
use crate::key::IdempotencyKey;
use crate::sources::hashed;

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
        let attr = self.message_attributes.get(name)?;
        Some(
            attr.string_value
                .as_deref()
                .map_or(Attribute::Binary, Attribute::Text),
        )
    }

    fn deduplication_id(&self) -> Option<&str> {
        self.attributes
            .get(MESSAGE_DEDUPLICATION_ID)
            .map(String::as_str)
    }

    fn receive_count(&self) -> Option<u32> {
        self.attributes.get(APPROXIMATE_RECEIVE_COUNT)?.parse().ok()
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqsRecord<M> {
    /// The parsed body; when the processor opened an envelope
    /// ([`EnvelopeMode`](crate::envelope::EnvelopeMode)), the parsed `detail`
    /// of the EventBridge event or the parsed `Message` of the SNS
    /// notification: the document the key and the payload hash read too.
    pub body: M,
    /// The SQS message (ids, attributes, the raw body).
    pub message: SqsMessage,
    /// The envelope the body was opened from: an EventBridge event or an
    /// SNS notification (`MessageId`, `TopicArn`, `Subject`,
    /// `MessageAttributes`, the raw `Message`).
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
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        message: SqsMessage,
    ) -> Result<Prepared<SqsRecord<M>>, FailureReason> {
        let parse = FailureReason::Parse;
        let text = message
            .body
            .as_deref()
            .ok_or_else(|| parse(format!("message {ident} has no body")))?;
        if text.len() > self.max_body_bytes {
            let (size, limit) = (text.len(), self.max_body_bytes);
            return Err(FailureReason::BodyTooLarge { size, limit });
        }
        if let Some(verifier) = &self.verifier {
            (verifier.verify_message(&message)).map_err(FailureReason::BadSignature)?;
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| parse(format!("body of message {ident} is not JSON: {e}")))?;
        let opened = envelope::open::<M>(self.envelope, ident, text, value)?;
        let input =
            KeyInput::new(&opened.document, Some(&message)).with_envelope(opened.envelope.as_ref());
        let key = pipeline.key_of(ident, input)?;
        let payload = hashed(self.payload, opened.document);
        let (body, envelope) = (opened.body, opened.envelope);
        let record = SqsRecord {
            body,
            message,
            envelope,
            key: key.clone(),
        };
        Ok(Prepared::new(record, key, payload))
    }
}
