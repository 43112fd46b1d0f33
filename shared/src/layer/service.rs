//! The layer (its settings) and the service it wraps around a handler.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use lambda_runtime::tower::{Layer, Service};
use lambda_runtime::{BoxFuture, LambdaEvent};
use serde::de::DeserializeOwned;
use serde::{Serialize, Serializer};

use crate::batch::whole::{self, Unfinished};
use crate::batch::{FailureReason, KeySelector, MissingKey, PayloadScope, Prepare, Processor};
use crate::batch::{Source, remaining_now};
use crate::engine::{Idempotency, Outcome};
use crate::error::HandlerError;

use super::invocation::{EventBridge, Invocation, Json, Sns};

/// What a layer and its services share: the one processor over the
/// layer's one-record source.
#[derive(Debug, Clone)]
struct Settings<V> {
    processor: Processor<V>,
}

/// A [`tower::Layer`](lambda_runtime::tower::Layer) that makes a Lambda
/// handler idempotent: see the [module docs](crate::layer).
///
/// Build it once per execution environment (it holds the engine, cheap to
/// clone) and add it to a `ServiceBuilder`, inside `lambda_runtime`'s own
/// layers.
#[derive(Debug)]
pub struct IdempotencyLayer<V: Source = Json> {
    settings: Arc<Settings<V>>,
}

impl<V: Source> Clone for IdempotencyLayer<V> {
    fn clone(&self) -> Self {
        Self {
            settings: Arc::clone(&self.settings),
        }
    }
}

impl IdempotencyLayer<Json> {
    /// A layer for a plain JSON invocation ([`Json`]): `key` reads the
    /// payload as JSON (`KeySelector::pointer("/order_id")`).
    pub fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self::with_source(engine, key, Json)
    }
}

impl IdempotencyLayer<EventBridge> {
    /// A layer for an EventBridge event invoking the function
    /// ([`EventBridge`]): `key` reads the envelope ([`KeySelector::Id`]:
    /// the event `id`; `pointer("/detail/order_id")`).
    pub fn eventbridge(engine: Idempotency, key: KeySelector) -> Self {
        Self::with_source(engine, key, EventBridge::default())
    }
}

impl IdempotencyLayer<Sns> {
    /// A layer for an SNS event invoking the function ([`Sns`]): `key`
    /// reads the notification with its `Message` parsed
    /// (`pointer("/Message/order_id")`; [`KeySelector::Id`]: the
    /// `MessageId`).
    pub fn sns(engine: Idempotency, key: KeySelector) -> Self {
        Self::with_source(engine, key, Sns)
    }
}

impl<V: Source> IdempotencyLayer<V> {
    /// A layer running invocations as the one record of `source` (one of
    /// the crate's, or a one-record [`Source`] of your own implementing
    /// [`Invocation`]).
    pub fn with_source(engine: Idempotency, key: KeySelector, source: V) -> Self {
        let processor = Processor::with_source(engine, key, source);
        Self {
            settings: Arc::new(Settings { processor }),
        }
    }

    fn edit(self, f: impl FnOnce(Processor<V>) -> Processor<V>) -> Self {
        let settings = Arc::unwrap_or_clone(self.settings);
        let processor = f(settings.processor);
        Self {
            settings: Arc::new(Settings { processor }),
        }
    }

    /// What to do without a key. Default [`MissingKey::Fail`]
    /// ([`FailureReason::Key`]).
    pub fn missing_key(self, policy: MissingKey) -> Self {
        self.edit(|p| p.missing_key(policy))
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`]
    /// (the source's body: the whole JSON, the EventBridge `detail`, the
    /// parsed SNS `Message`).
    pub fn payload(self, scope: PayloadScope) -> Self {
        self.edit(|p| p.payload(scope))
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        self.settings.processor.engine()
    }

    /// The processor it runs on.
    pub fn processor(&self) -> &Processor<V> {
        &self.settings.processor
    }
}

impl<S, V: Source> Layer<S> for IdempotencyLayer<V> {
    type Service = IdempotencyService<S, V>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService {
            inner,
            settings: Arc::clone(&self.settings),
        }
    }
}

/// The service [`IdempotencyLayer`] wraps around `S`.
#[derive(Debug)]
pub struct IdempotencyService<S, V: Source = Json> {
    inner: S,
    settings: Arc<Settings<V>>,
}

impl<S: Clone, V: Source> Clone for IdempotencyService<S, V> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            settings: Arc::clone(&self.settings),
        }
    }
}

/// What an [`IdempotencyService`] answers for an invocation that is done:
/// the [`Outcome`], as the processors report it.
///
/// It serializes as the function's response, so the runtime returns what
/// the handler returned, now or replayed:
///
/// * [`Outcome::Executed`], [`Outcome::Replayed`]`(Some(r))`,
///   [`Outcome::Unprotected`]: the response `r` itself;
/// * [`Outcome::Replayed`]`(None)` (a duplicate whose response was not
///   kept): `{"duplicate": true}`;
/// * [`Outcome::Rejected`] (a terminal error recorded for the key by a
///   processor sharing the engine's prefix): `{"rejected": "..."}`.
///
/// An outer layer or a test reads the outcome with [`outcome`](Self::outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotent<T> {
    pub(super) outcome: Outcome<T>,
}

impl<T> Idempotent<T> {
    /// The outcome: executed, replayed or unprotected.
    pub fn outcome(&self) -> &Outcome<T> {
        &self.outcome
    }

    /// Takes the outcome.
    pub fn into_outcome(self) -> Outcome<T> {
        self.outcome
    }

    /// The handler's response, run now or replayed (`None` for a duplicate
    /// whose response was not kept).
    pub fn response(&self) -> Option<&T> {
        self.outcome.response()
    }

    /// Whether the inner service ran for this invocation
    /// ([`Outcome::Executed`] or [`Outcome::Unprotected`]).
    pub fn executed(&self) -> bool {
        matches!(self.outcome, Outcome::Executed(_) | Outcome::Unprotected(_))
    }
}

impl<T: Serialize> Serialize for Idempotent<T> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        #[derive(Serialize)]
        struct Duplicate {
            duplicate: bool,
        }
        #[derive(Serialize)]
        struct Rejected<'a> {
            rejected: &'a str,
        }
        match &self.outcome {
            Outcome::Executed(t) | Outcome::Replayed(Some(t)) | Outcome::Unprotected(t) => {
                t.serialize(serializer)
            }
            Outcome::Replayed(None) => Duplicate { duplicate: true }.serialize(serializer),
            Outcome::Rejected { error, .. } => Rejected { rejected: error }.serialize(serializer),
            other => Err(serde::ser::Error::custom(format!(
                "outcome {} is not a response",
                other.label()
            ))),
        }
    }
}

impl<S, V, P> Service<LambdaEvent<P>> for IdempotencyService<S, V>
where
    S: Service<LambdaEvent<P>> + Clone + Send + 'static,
    S::Response: Serialize + DeserializeOwned + Send,
    S::Error: From<Unfinished> + fmt::Display + Send,
    S::Future: Send,
    P: Send + 'static,
    V: Invocation<P> + Prepare<<V as Invocation<P>>::Record>,
    V::Event: Send,
    <V as Invocation<P>>::Record: Send + Sync,
{
    type Response = Idempotent<S::Response>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, event: LambdaEvent<P>) -> Self::Future {
        // The clone that was driven to readiness serves this call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let settings = Arc::clone(&self.settings);
        Box::pin(async move { settings.call(inner, event).await })
    }
}

impl<V: Source> Settings<V> {
    /// One invocation, the one record of its event: prepared by the
    /// source, run through the one processor (`inner` its handler), logged
    /// and counted; the inner service's own error comes back unchanged.
    async fn call<S, P>(
        &self,
        mut inner: S,
        event: LambdaEvent<P>,
    ) -> Result<Idempotent<S::Response>, S::Error>
    where
        S: Service<LambdaEvent<P>>,
        S::Response: Serialize + DeserializeOwned,
        S::Error: From<Unfinished> + fmt::Display,
        V: Invocation<P> + Prepare<<V as Invocation<P>>::Record>,
    {
        let remaining = remaining_now(&event.context);
        let processor = crate::tenant::scoped(
            &self.processor,
            event.context.tenant_id.as_deref(),
            |p, t| p.for_tenant(Some(t)),
        );
        let source = processor.source();
        let one = source.event(&event.payload, &event.context.request_id);
        let inner_error = Mutex::new(None);
        let own_error = &inner_error;
        let handler = whole::once(move |_: <V as Invocation<P>>::Record| async move {
            inner.call(event).await.map_err(|e| {
                let error = HandlerError::retryable(e.to_string());
                *own_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                error
            })
        });
        let report = processor.process(one, remaining, handler).await;
        let own = inner_error.into_inner().unwrap_or_else(|p| p.into_inner());
        match (whole::single(report), own) {
            (Ok(outcome), _) => Ok(Idempotent { outcome }),
            (Err(e), Some(own)) if matches!(e.reason(), FailureReason::Handler { .. }) => Err(own),
            (Err(e), _) => Err(e.into()),
        }
    }
}
