//! Each SQS record's body checked (size, signature), parsed (an envelope
//! opened when asked: [`crate::envelope`]) and keyed.

use aws_lambda_events::sqs::SqsMessage;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{FailureReason, Sqs, SqsRecord};
use crate::batch::envelope;
use crate::batch::{KeyInput, Pipeline, Prepare, Prepared};
use crate::sources::hashed;

impl<M: DeserializeOwned> Prepare<SqsRecord<M>> for Sqs {
    /// Parses a record and selects its key. Any failure, panics included,
    /// fails only this record.
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
