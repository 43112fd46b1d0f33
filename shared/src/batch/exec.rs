//! How a record's handler runs through the engine: a plain handler, or one
//! whose effects are staged DynamoDB writes committed with the record.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::time::Duration;

use super::SqsRecord;
use crate::engine::{CommitMode, Idempotency, Outcome};
use crate::error::{Error, HandlerError};
use crate::key::IdempotencyKey;
use crate::write::Staged;

/// Runs one record's handler through the engine; without a key, unprotected.
pub(super) trait Execute<M> {
    /// The response recorded and replayed.
    type Response: Serialize + DeserializeOwned;

    fn execute(
        &self,
        engine: &Idempotency,
        record: SqsRecord<M>,
        key: Option<&IdempotencyKey>,
        payload: Option<&Value>,
        remaining: Option<Duration>,
    ) -> impl Future<Output = Result<Outcome<Self::Response>, Error>>;
}

/// A handler returning its response.
pub(super) struct Plain<'h, H>(pub(super) &'h H);

impl<M, T, H, Fut> Execute<M> for Plain<'_, H>
where
    T: Serialize + DeserializeOwned,
    H: Fn(SqsRecord<M>) -> Fut,
    Fut: Future<Output = Result<T, HandlerError>>,
{
    type Response = T;

    async fn execute(
        &self,
        engine: &Idempotency,
        record: SqsRecord<M>,
        key: Option<&IdempotencyKey>,
        payload: Option<&Value>,
        remaining: Option<Duration>,
    ) -> Result<Outcome<T>, Error> {
        match key {
            Some(key) => {
                engine
                    .execute(key, payload, remaining, || (self.0)(record))
                    .await
            }
            None => engine.unprotected(|| (self.0)(record)).await,
        }
    }
}

/// A handler returning staged writes, committed with the record.
pub(super) struct Transactional<'h, H> {
    pub(super) handler: &'h H,
    pub(super) mode: CommitMode,
}

impl<M, T, H, Fut> Execute<M> for Transactional<'_, H>
where
    T: Serialize + DeserializeOwned,
    H: Fn(SqsRecord<M>) -> Fut,
    Fut: Future<Output = Result<Staged<T>, HandlerError>>,
{
    type Response = T;

    async fn execute(
        &self,
        engine: &Idempotency,
        record: SqsRecord<M>,
        key: Option<&IdempotencyKey>,
        payload: Option<&Value>,
        remaining: Option<Duration>,
    ) -> Result<Outcome<T>, Error> {
        match key {
            Some(key) => {
                engine
                    .execute_transaction(key, payload, remaining, self.mode, || {
                        (self.handler)(record)
                    })
                    .await
            }
            None => {
                engine
                    .unprotected_transaction(|| (self.handler)(record))
                    .await
            }
        }
    }
}
