//! Before anything runs: each record's body parsed, its key selected, and
//! the records sharing a key linked (in-batch duplicates).

use std::any::type_name;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::panic::{AssertUnwindSafe, catch_unwind};

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sqs::SqsMessage;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;

use super::pipeline::{Role, Slot, State, ident};
use super::{BatchProcessor, EnvelopeMode, FailureReason, MESSAGE_GROUP_ID, SqsRecord};
use crate::adapter::{KeyFailure, KeyInput, PayloadScope, Unit, key_for, looks_like_envelope};
use crate::engine::panic_message;
use crate::key::{IdempotencyKey, payload_hash};

struct Prepared<M> {
    body: M,
    envelope: Option<EventBridgeEvent<Value>>,
    key: Option<IdempotencyKey>,
    payload: Option<Value>,
}

impl BatchProcessor {
    /// Parses a record and selects its key. Any failure, panics included,
    /// fails only this record.
    pub(super) fn prepare<M: DeserializeOwned>(
        &self,
        index: usize,
        message: SqsMessage,
    ) -> Slot<M> {
        let message_id = message.message_id.clone();
        let group = message.attributes.get(MESSAGE_GROUP_ID).cloned();
        let ident = ident(index, message_id.as_deref());
        let prepared = catch_unwind(AssertUnwindSafe(|| {
            self.prepare_inner::<M>(&ident, &message)
        }));
        let state = match prepared {
            Ok(Ok(p)) => State::Ready {
                record: Box::new(SqsRecord {
                    body: p.body,
                    message,
                    envelope: p.envelope,
                    key: p.key.clone(),
                }),
                key: p.key,
                payload: p.payload,
            },
            Ok(Err(reason)) => State::Failed(reason),
            Err(panic) => State::Failed(FailureReason::Panic(format!(
                "preparing message {ident} (body deserializer) panicked: {}",
                panic_message(&*panic)
            ))),
        };
        Slot {
            index,
            ident,
            message_id,
            group,
            state,
            role: Role::Solo,
        }
    }

    fn prepare_inner<M: DeserializeOwned>(
        &self,
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
        let is_envelope = match self.envelope {
            EnvelopeMode::Never => false,
            EnvelopeMode::Auto => looks_like_envelope(&value),
            EnvelopeMode::Required if looks_like_envelope(&value) => true,
            EnvelopeMode::Required => {
                return Err(parse(format!(
                    "body of message {ident} is not an EventBridge envelope (EnvelopeMode::Required)"
                )));
            }
        };
        let envelope = if is_envelope {
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
        let key = self.key_for(ident, message, &material)?;
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body if envelope.is_some() => material.get("detail").cloned(),
            PayloadScope::Body => Some(material),
        };
        Ok(Prepared {
            body,
            envelope,
            key,
            payload,
        })
    }

    /// The record's key; `None` to run unprotected.
    fn key_for(
        &self,
        ident: &str,
        message: &SqsMessage,
        value: &Value,
    ) -> Result<Option<IdempotencyKey>, FailureReason> {
        let input = KeyInput {
            value,
            message: Some(message),
        };
        let unit = Unit {
            noun: "record",
            message_id: Some(ident),
            ..Unit::default()
        };
        key_for(&self.engine, &self.key, self.missing_key, input, &unit).map_err(|e| match e {
            KeyFailure::Bad(e) => FailureReason::Key(e),
            KeyFailure::Panic(panic) => {
                FailureReason::Panic(format!("key selector panicked on message {ident}: {panic}"))
            }
        })
    }

    /// Links the records that share a key: the first runs, the later ones
    /// take its outcome. A later copy with another payload fails as a payload
    /// mismatch without waiting. Nothing is linked when the kill switch is on.
    pub(super) fn assign_duplicates<M>(&self, slots: &mut [Slot<M>]) {
        let config = self.engine.config();
        if config.disabled {
            return;
        }
        let hash = |slot: &Slot<M>| match &slot.state {
            State::Ready {
                payload: Some(p), ..
            } if config.validate_payload => Some(payload_hash(p)),
            _ => None,
        };
        let mut first: HashMap<IdempotencyKey, (usize, Option<String>)> = HashMap::new();
        for i in 0..slots.len() {
            let State::Ready { key: Some(key), .. } = &slots[i].state else {
                continue;
            };
            let (leader, leader_hash) = match first.entry(key.clone()) {
                Entry::Vacant(v) => {
                    v.insert((i, hash(&slots[i])));
                    continue;
                }
                Entry::Occupied(o) => o.get().clone(),
            };
            if let (Some(a), Some(b)) = (&leader_hash, hash(&slots[i]))
                && *a != b
            {
                slots[i].state = State::Failed(FailureReason::PayloadMismatch);
                continue;
            }
            let outcome = match &slots[leader].role {
                Role::Leader(tx) => tx.subscribe(),
                _ => {
                    let (tx, rx) = watch::channel(None);
                    slots[leader].role = Role::Leader(tx);
                    rx
                }
            };
            slots[i].role = Role::Follower {
                first: slots[leader].ident.clone(),
                outcome,
            };
        }
    }
}
