//! Before anything runs: each SQS record's body checked (size, signature),
//! parsed (an EventBridge envelope or an SNS notification recognised) and
//! its key selected.

use std::any::type_name;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sns::SnsMessage;
use aws_lambda_events::sqs::SqsMessage;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[cfg(doc)]
use super::BatchProcessor;
use super::{EnvelopeMode, FailureReason, SqsRecord};
use crate::adapter::delivery::{Ids, SQS};
use crate::adapter::pipeline::{Pipeline, Prepared as PreparedSlot, Slot, guard};
use crate::adapter::{KeyInput, PayloadScope, looks_like_envelope, sns};
use crate::key::IdempotencyKey;
use crate::signature::Verifier;

struct Prepared<M> {
    body: M,
    envelope: Option<EventBridgeEvent<Value>>,
    sns: Option<SnsMessage>,
    key: Option<IdempotencyKey>,
    payload: Option<Value>,
}

/// How an SQS record's body is checked, parsed and keyed: the part of a
/// [`BatchProcessor`]'s settings its records' preparation reads.
#[derive(Debug, Clone)]
pub(super) struct BodyRules {
    /// [`BatchProcessor::max_body_bytes`].
    pub(super) max_body_bytes: usize,
    /// [`BatchProcessor::verify_signatures`].
    pub(super) verifier: Option<Verifier>,
    /// [`BatchProcessor::envelope`].
    pub(super) envelope: EnvelopeMode,
    /// [`BatchProcessor::payload`].
    pub(super) payload: PayloadScope,
}

impl BodyRules {
    /// Parses a record and selects its key. Any failure, panics included,
    /// fails only this record.
    pub(super) fn prepare<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        index: usize,
        message: SqsMessage,
    ) -> Slot<SqsRecord<M>> {
        let ids = Ids::of(&message);
        let ident = ids.ident(index, SQS.id);
        let prepared = match guard(|| self.prepare_inner::<M>(pipeline, &ident, &message)) {
            Ok(Ok(p)) => Ok(PreparedSlot {
                record: SqsRecord {
                    body: p.body,
                    message,
                    envelope: p.envelope,
                    sns: p.sns,
                    key: p.key.clone(),
                },
                key: p.key,
                payload: p.payload,
            }),
            Ok(Err(reason)) => Err(reason),
            Err(panic) => Err(FailureReason::Panic(format!(
                "preparing message {ident} (body deserializer) panicked: {panic}"
            ))),
        };
        Slot::new(index, ident, ids, prepared)
    }

    fn prepare_inner<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        message: &SqsMessage,
    ) -> Result<Prepared<M>, FailureReason> {
        let parse = FailureReason::Parse;
        let text = message
            .body
            .as_deref()
            .ok_or_else(|| parse(format!("message {ident} has no body")))?;
        if text.len() > self.max_body_bytes {
            return Err(FailureReason::BodyTooLarge {
                size: text.len(),
                limit: self.max_body_bytes,
            });
        }
        if let Some(verifier) = &self.verifier {
            verifier
                .verify_message(message)
                .map_err(FailureReason::BadSignature)?;
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| parse(format!("body of message {ident} is not JSON: {e}")))?;
        let kind = match self.envelope {
            EnvelopeMode::Never => None,
            EnvelopeMode::Auto => envelope_kind(&value),
            EnvelopeMode::Required => Some(envelope_kind(&value).ok_or_else(|| {
                parse(format!(
                    "body of message {ident} is not an EventBridge envelope or an SNS \
                     notification (EnvelopeMode::Required)"
                ))
            })?),
        };
        if kind == Some(Envelope::Sns) {
            return self.prepare_notification(pipeline, ident, message, value);
        }
        let envelope = if kind == Some(Envelope::EventBridge) {
            Some(EventBridgeEvent::<Value>::deserialize(&value).map_err(|e| {
                parse(format!(
                    "body of message {ident} looks like an EventBridge envelope but is not a valid one: {e}"
                ))
            })?)
        } else {
            None
        };
        let body: M = match &envelope {
            Some(envelope) => M::deserialize(&envelope.detail).map_err(|e| {
                parse(format!(
                    "detail of the EventBridge event in message {ident} does not parse as {}: {e}",
                    type_name::<M>()
                ))
            })?,
            None => serde_json::from_str(text).map_err(|e| {
                parse(format!(
                    "body of message {ident} does not parse as {}: {e}",
                    type_name::<M>()
                ))
            })?,
        };
        // Keys and payload hashes keep the exact text of numbers that `f64`
        // cannot hold (a second parse, only for bodies with such numbers).
        let material = crate::key::exact_material(text, &value).unwrap_or(value);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(message)))?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body if envelope.is_some() => material.get("detail").cloned(),
            PayloadScope::Body => Some(material),
        };
        Ok(Prepared {
            body,
            envelope,
            sns: None,
            key,
            payload,
        })
    }

    /// A body that is an SNS notification (raw message delivery off): the
    /// handler gets its parsed `Message`; keys are selected from the
    /// notification with its `Message` parsed (`/MessageId`,
    /// `/Message/order_id`); the payload is the parsed `Message`.
    fn prepare_notification<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        message: &SqsMessage,
        value: Value,
    ) -> Result<Prepared<M>, FailureReason> {
        let notification = SnsMessage::deserialize(&value).map_err(|e| {
            FailureReason::Parse(format!(
                "body of message {ident} looks like an SNS notification but is not a valid one: {e}"
            ))
        })?;
        let opened = sns::open_message::<M>(&format!("message {ident}"), &notification.message)?;
        let material = sns::material(value, &opened.message);
        let key = pipeline.key_of(ident, KeyInput::new(&material, Some(message)))?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(opened.message),
        };
        Ok(Prepared {
            body: opened.body,
            envelope: None,
            sns: Some(notification),
            key,
            payload,
        })
    }
}

/// The envelopes a body can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Envelope {
    EventBridge,
    Sns,
}

/// The envelope `value` looks like, if any.
fn envelope_kind(value: &Value) -> Option<Envelope> {
    if looks_like_envelope(value) {
        Some(Envelope::EventBridge)
    } else if sns::looks_like_notification(value) {
        Some(Envelope::Sns)
    } else {
        None
    }
}
