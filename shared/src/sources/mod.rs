//! The event sources, one folder each, all laid out alike, each over the
//! core in [`crate::batch`].

pub mod dynamodb_streams;
pub mod eventbridge;
pub mod http;
pub mod kafka;
pub mod kinesis;
pub mod sns;
pub mod sqs;

#[cfg(test)]
mod payload_tests;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::batch::payload::{self, PayloadKind};
use crate::batch::{Delivery, FailureReason, KeyInput, PayloadScope, Pipeline, Prepared};

/// What payload validation hashes of `document` under `scope`.
pub(crate) fn hashed(scope: PayloadScope, document: Value) -> Option<Value> {
    match scope {
        PayloadScope::None => None,
        PayloadScope::Body => Some(document),
    }
}

/// A body of `size` bytes over `max` (`None`: `default`) is too large.
fn check_size(size: usize, max: Option<usize>, default: usize) -> Result<(), FailureReason> {
    let limit = max.unwrap_or(default);
    match size > limit {
        true => Err(FailureReason::BodyTooLarge { size, limit }),
        false => Ok(()),
    }
}

/// A record's payload (`bytes`, its `what` in errors; `None`: a
/// tombstone, JSON `null`) read as `M` and keyed, by the one rule of
/// [`PayloadKind`]: parsed as JSON when `M` wants JSON (keys and payload
/// hashes keep the exact text of numbers that `f64` cannot hold, as SQS
/// bodies do), else taken as text or bytes ([`prepare_raw`]).
pub(crate) fn prepare_json<M: DeserializeOwned>(
    pipeline: &Pipeline<'_>,
    ident: &str,
    what: &str,
    bytes: Option<&[u8]>,
    delivery: &dyn Delivery,
    scope: PayloadScope,
) -> Result<Prepared<M>, FailureReason> {
    let parse = |m: String| FailureReason::Parse(m);
    let type_name = std::any::type_name::<M>();
    let (body, material) = match bytes {
        None => {
            let body = M::deserialize(&Value::Null).map_err(|e| {
                parse(format!(
                    "record {ident} is a tombstone (no {what}), which does not parse as \
                     {type_name}: {e}"
                ))
            })?;
            (body, Value::Null)
        }
        Some(bytes) => {
            let kind = PayloadKind::of::<M>();
            if kind != PayloadKind::Json {
                let (body, material) = prepare_raw::<M>(kind, bytes, what, ident)?;
                let input = KeyInput::new(&material, Some(delivery)).with_payload(Some(bytes));
                let key = pipeline.key_of(ident, input)?;
                return Ok(Prepared::new(body, key, hashed(scope, material)));
            }
            let text = std::str::from_utf8(bytes).map_err(|e| {
                parse(format!(
                    "{what} of record {ident} is not UTF-8 (so not JSON, which the handler's \
                     type {type_name} takes: type it String or lambda_idempotency::Bytes to \
                     take text or bytes): {e}"
                ))
            })?;
            let value: Value = serde_json::from_str(text).map_err(|e| {
                parse(format!(
                    "{what} of record {ident} is not JSON, which the handler's type \
                     {type_name} takes (type it String or lambda_idempotency::Bytes to take \
                     text or bytes): {e}"
                ))
            })?;
            let body: M = serde_json::from_str(text).map_err(|e| {
                parse(format!(
                    "{what} of record {ident} does not parse as {type_name}: {e}"
                ))
            })?;
            (
                body,
                crate::key::exact_material(text, &value).unwrap_or(value),
            )
        }
    };
    let key = pipeline.key_of(ident, KeyInput::new(&material, Some(delivery)))?;
    Ok(Prepared::new(body, key, hashed(scope, material)))
}

/// A payload taken as text or bytes (`kind`): the handler's `M` and the
/// document keys and the payload hash read ([`payload::document`]).
pub(crate) fn prepare_raw<M: DeserializeOwned>(
    kind: PayloadKind,
    bytes: &[u8],
    what: &str,
    ident: &str,
) -> Result<(M, Value), FailureReason> {
    let body = payload::decode::<M>(kind, bytes, what, ident)?;
    Ok((body, payload::document(bytes)))
}
