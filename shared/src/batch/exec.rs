//! How a record's handler runs through the engine.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::time::Duration;

use super::SqsRecord;
use crate::engine::{Idempotency, Outcome};
use crate::error::{Error, HandlerError};
use crate::key::IdempotencyKey;
use crate::write::IntoStaged;

/// Runs one record's handler through the engine; without a key, unprotected.
pub(super) trait Execute<M, T> {
    fn execute(
        &self,
        engine: &Idempotency,
        record: SqsRecord<M>,
        key: Option<&IdempotencyKey>,
        payload: Option<&Value>,
        remaining: Option<Duration>,
    ) -> impl Future<Output = Result<Outcome<T>, Error>>;
}

/// A handler returning its response, or a [`Staged`] response.
pub(super) struct Plain<'h, H>(pub(super) &'h H);

impl<M, T, R, H, Fut> Execute<M, T> for Plain<'_, H>
where
    T: Serialize + DeserializeOwned,
    R: IntoStaged<T>,
    H: Fn(SqsRecord<M>) -> Fut,
    Fut: Future<Output = Result<R, HandlerError>>,
{
    async fn execute(
        &self,
        engine: &Idempotency,
        record: SqsRecord<M>,
        key: Option<&IdempotencyKey>,
        payload: Option<&Value>,
        remaining: Option<Duration>,
    ) -> Result<Outcome<T>, Error> {
        engine
            .run(key, payload, remaining, || (self.0)(record))
            .await
    }
}
