//! Before anything runs: each SQS record's body checked (size, signature),
//! parsed (an envelope opened when the processor asks for it: see
//! [`crate::envelope`]) and its key selected from the one document
//! the handler gets.

use aws_lambda_events::sqs::SqsMessage;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[cfg(doc)]
use super::SqsProcessor;
use super::{EnvelopeMode, FailureReason};
use crate::batch::envelope::{self, Envelope};
use crate::batch::{KeyInput, PayloadScope, Pipeline};
use crate::key::IdempotencyKey;
use crate::signature::Verifier;

pub(super) struct Parsed<M> {
    pub(super) body: M,
    pub(super) envelope: Option<Envelope>,
    pub(super) key: Option<IdempotencyKey>,
    pub(super) payload: Option<Value>,
}

/// How an SQS record's body is checked, parsed and keyed: the part of a
/// [`SqsProcessor`]'s settings its records' preparation reads.
#[derive(Debug, Clone)]
pub(super) struct BodyRules {
    /// [`SqsProcessor::max_body_bytes`].
    pub(super) max_body_bytes: usize,
    /// [`SqsProcessor::verify_signatures`].
    pub(super) verifier: Option<Verifier>,
    /// [`SqsProcessor::envelope`].
    pub(super) envelope: EnvelopeMode,
    /// [`SqsProcessor::payload`].
    pub(super) payload: PayloadScope,
}

impl BodyRules {
    /// Parses a record and selects its key. Any failure, panics included,
    /// fails only this record.
    pub(super) fn prepare<M: DeserializeOwned>(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        message: &SqsMessage,
    ) -> Result<Parsed<M>, FailureReason> {
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
        let opened = envelope::open::<M>(self.envelope, ident, text, value)?;
        let input =
            KeyInput::new(&opened.document, Some(message)).with_envelope(opened.envelope.as_ref());
        let key = pipeline.key_of(ident, input)?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(opened.document),
        };
        Ok(Parsed {
            body: opened.body,
            envelope: opened.envelope,
            key,
            payload,
        })
    }
}
