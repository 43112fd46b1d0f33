//! A [`tower`](lambda_runtime::tower) layer that makes any Lambda handler
//! idempotent: [`IdempotencyLayer`].
//!
//! `lambda_runtime` serves a `tower::Service<LambdaEvent<P>>`; its own
//! middleware (tracing, panics) are layers. [`IdempotencyLayer`] is one
//! more: built from an engine ([`Idempotency`](crate::Idempotency)) and a
//! [`KeySelector`](crate::KeySelector), it wraps the handler's service so
//! that
//!
//! * the first invocation of a key runs the handler, and its response is
//!   kept;
//! * a duplicate is answered from the kept response, and the handler is
//!   not called;
//! * the same key with another payload fails ([`Unfinished`] with
//!   [`FailureReason::PayloadMismatch`], permanent), and a key held by a
//!   running invocation fails ([`FailureReason::InProgress`]) so that it is
//!   delivered again;
//! * a handler error or panic releases the claim: the retry runs it again.
//!   The handler's own error comes back unchanged.
//!
//! The service answers an [`Idempotent<R>`](Idempotent) for the handler's
//! response `R`: it serializes as `R` itself (so the runtime returns what
//! the handler returned, now or replayed), and its
//! [`outcome`](Idempotent::outcome) is the engine's [`Outcome`](crate::Outcome),
//! as the processors report it (`Executed`, `Replayed`, `Unprotected`).
//! Every invocation logs one line and emits its metric counts, as the
//! processors do.
//!
//! An invocation runs as the one record of a one-record source on the one
//! [`Processor`](crate::batch::Processor), the path every source takes: its
//! key and payload are read by the source's own rules, its failure is a
//! [`FailureReason`], answered whole ([`Unfinished`]): [`Json`] (a plain
//! JSON invocation: [`IdempotencyLayer::new`]), [`EventBridge`] (an
//! EventBridge event invoking the function: [`IdempotencyLayer::eventbridge`])
//! and [`Sns`] (an SNS event invoking the function: [`IdempotencyLayer::sns`]);
//! a payload of your own: a one-record source implementing [`Invocation`].
//! Batches (SQS, Kinesis, DynamoDB Streams, Kafka) need per-record results:
//! use their processors. For HTTP APIs, [`crate::http`] answers with HTTP
//! semantics (`409`, `422`, the `Idempotency-Key` header).
//!
//! Under Lambda, the layer goes inside the runtime's own layers. The
//! layer's failures reach the runtime as the inner service's error type
//! (`S::Error: From<Unfinished>`; `lambda_runtime::Error` is); mapped with
//! [`diagnostic`](crate::diagnostic::diagnostic), a failed invocation's
//! `errorType` says what failed (`PayloadMismatch`, `InProgress`,
//! `InvalidKey`, `HandlerFailed`), as [`runtime::run`](crate::runtime::run)
//! answers:
//!
//! ```no_run
//! use lambda_runtime::tower::ServiceBuilder;
//! use lambda_runtime::{LambdaEvent, Runtime, layers::TracingLayer, service_fn};
//! use serde_json::{Value, json};
//! use lambda_idempotency::layer::IdempotencyLayer;
//! use lambda_idempotency::{Config, Idempotency, KeySelector, MemoryStore};
//!
//! async fn charge(event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
//!     Ok(json!({"charged": event.payload["payment_id"]}))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), lambda_runtime::Error> {
//!     let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("payments.charge"));
//!     let service = ServiceBuilder::new()
//!         .map_err(|e: lambda_runtime::Error| lambda_idempotency::diagnostic::diagnostic(&*e))
//!         .layer(IdempotencyLayer::new(engine, KeySelector::pointer("/payment_id")))
//!         .service(service_fn(charge));
//!     Runtime::new(service).layer(TracingLayer::new()).run().await
//! }
//! ```
//!
//! # A plain JSON invocation
//!
//! ```
//! use lambda_runtime::tower::{Service, ServiceBuilder, ServiceExt};
//! use lambda_runtime::{Context, LambdaEvent, service_fn};
//! use serde_json::{Value, json};
//! use lambda_idempotency::layer::IdempotencyLayer;
//! use lambda_idempotency::{Config, Idempotency, KeySelector, MemoryStore, Outcome};
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lambda_runtime::Error> {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("payments.charge"));
//! let charges = Arc::new(AtomicU32::new(0));
//! let counter = charges.clone();
//! let mut service = ServiceBuilder::new()
//!     .layer(IdempotencyLayer::new(engine, KeySelector::pointer("/payment_id")))
//!     .service(service_fn(move |event: LambdaEvent<Value>| {
//!         let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
//!         async move { Ok::<_, lambda_runtime::Error>(json!({"charge": n, "for": event.payload["payment_id"]})) }
//!     }));
//!
//! let invoke = || LambdaEvent::new(json!({"payment_id": "pay-1", "cents": 1250}), Context::default());
//! let first = service.ready().await?.call(invoke()).await?;
//! assert!(matches!(first.outcome(), Outcome::Executed(_)));
//! let again = service.ready().await?.call(invoke()).await?; // a retry of the same invocation
//! assert!(matches!(again.outcome(), Outcome::Replayed(Some(_))));
//! assert_eq!(serde_json::to_value(&again)?, json!({"charge": 1, "for": "pay-1"}));
//! assert_eq!(charges.load(Ordering::SeqCst), 1); // two invocations, one charge
//! # Ok(())
//! # }
//! ```
//!
//! # EventBridge invoking the function
//!
//! The key is the event `id` (EventBridge keeps it across its retries) or a
//! business key in the `detail`; payload validation hashes the `detail`.
//! [`EventPayload`](crate::eventbridge::EventPayload) keeps numbers beyond
//! `f64` exact; `EventBridgeEvent<D>` and `Value` payloads work too.
//!
//! ```
//! use lambda_runtime::tower::{Service, ServiceBuilder, ServiceExt};
//! use lambda_runtime::{Context, LambdaEvent, service_fn};
//! use serde_json::{Value, json};
//! use lambda_idempotency::eventbridge::EventBridgeEvent;
//! use lambda_idempotency::layer::IdempotencyLayer;
//! use lambda_idempotency::{Config, Idempotency, KeySelector, MemoryStore, Outcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lambda_runtime::Error> {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.ship"));
//! let mut service = ServiceBuilder::new()
//!     .layer(IdempotencyLayer::eventbridge(engine, KeySelector::pointer("/detail/order_id")))
//!     .service(service_fn(|event: LambdaEvent<EventBridgeEvent<Value>>| async move {
//!         Ok::<_, lambda_runtime::Error>(json!({"shipped": event.payload.detail["order_id"]}))
//!     }));
//!
//! let event = |id: &str| -> EventBridgeEvent<Value> {
//!     serde_json::from_value(json!({
//!         "version": "0", "id": id, "detail-type": "OrderPlaced", "source": "shop.orders",
//!         "account": "123456789012", "time": "2026-12-01T00:00:00Z", "region": "us-east-1",
//!         "resources": [], "detail": {"order_id": "ord-7"},
//!     }))
//!     .expect("an EventBridge event")
//! };
//! let first = service.ready().await?.call(LambdaEvent::new(event("e-1"), Context::default())).await?;
//! assert!(matches!(first.outcome(), Outcome::Executed(_)));
//! // The same order published again (a new event id, the same detail): one shipment.
//! let again = service.ready().await?.call(LambdaEvent::new(event("e-2"), Context::default())).await?;
//! assert_eq!(again.outcome(), &Outcome::Replayed(Some(json!({"shipped": "ord-7"}))));
//! # Ok(())
//! # }
//! ```
//!
//! # SNS invoking the function
//!
//! The key is read from the notification with its `Message` parsed
//! (`/Message/order_id`), or is the `MessageId` ([`KeySelector::Id`](crate::KeySelector::Id));
//! payload validation hashes the parsed `Message`.
//!
//! ```
//! use lambda_runtime::tower::{Service, ServiceBuilder, ServiceExt};
//! use lambda_runtime::{Context, LambdaEvent, service_fn};
//! use serde_json::json;
//! use lambda_idempotency::batch::{FailureReason, Unfinished};
//! use lambda_idempotency::layer::IdempotencyLayer;
//! use lambda_idempotency::sns::SnsEvent;
//! use lambda_idempotency::{Config, Idempotency, KeySelector, MemoryStore, Outcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lambda_runtime::Error> {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.notify"));
//! let mut service = ServiceBuilder::new()
//!     .layer(IdempotencyLayer::sns(engine, KeySelector::pointer("/Message/order_id")))
//!     .service(service_fn(|event: LambdaEvent<SnsEvent>| async move {
//!         Ok::<_, lambda_runtime::Error>(json!({"notified": event.payload.records[0].sns.message_id}))
//!     }));
//!
//! let notification = |message_id: &str, message: &str| -> LambdaEvent<SnsEvent> {
//!     let event = serde_json::from_value(json!({"Records": [{
//!         "EventSource": "aws:sns", "EventVersion": "1.0",
//!         "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:orders:5f1c",
//!         "Sns": {
//!             "Type": "Notification", "MessageId": message_id,
//!             "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
//!             "Message": message, "Timestamp": "2026-12-01T00:00:00.000Z",
//!             "SignatureVersion": "1", "Signature": "EXAMPLE",
//!             "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem",
//!             "UnsubscribeUrl": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
//!             "MessageAttributes": {},
//!         },
//!     }]}))
//!     .expect("an SNS event");
//!     LambdaEvent::new(event, Context::default())
//! };
//! let first = service.ready().await?.call(notification("m-1", r#"{"order_id":"ord-1","total":10}"#)).await?;
//! assert!(matches!(first.outcome(), Outcome::Executed(_)));
//! // SNS delivers it again: replayed, the handler does not run.
//! let again = service.ready().await?.call(notification("m-1", r#"{"order_id":"ord-1","total":10}"#)).await?;
//! assert_eq!(again.outcome(), &Outcome::Replayed(Some(json!({"notified": "m-1"}))));
//! // Another message under the same order id: a mismatch, not a replay.
//! let other = service.ready().await?.call(notification("m-2", r#"{"order_id":"ord-1","total":99}"#)).await;
//! let error = other.expect_err("a payload mismatch");
//! let failure = error.downcast_ref::<Unfinished>().expect("the layer's failure");
//! assert_eq!(failure.reason(), &FailureReason::PayloadMismatch);
//! # Ok(())
//! # }
//! ```

mod invocation;
mod service;

#[cfg(doc)]
use crate::batch::{FailureReason, Unfinished};
pub use invocation::{EventBridge, Invocation, Json, JsonInvocation, Sns};
pub use service::{IdempotencyLayer, IdempotencyService, Idempotent};

#[cfg(test)]
mod tests;
