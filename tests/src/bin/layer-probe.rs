//! A probe function for the tower layer's tests: `lambda_runtime`'s own
//! `Runtime` (its tracing layer, its panic catching) serving a
//! `ServiceBuilder` stack with `lambda_idempotency::layer::IdempotencyLayer` around a
//! handler that counts its calls. The store is the one the environment
//! names (`IDEMPOTENCY_TABLE`: DynamoDB; none: memory); the key is `/id`.
//!
//! Payload `{"id": K, ...}` answers `{"outcome", "calls", "response"}`:
//! the layer's outcome, how many times the handler has run in this process
//! (read after the invocation), and the handler's response
//! (`{"call": n}`, now or replayed). `{"panic_once": true}` panics the
//! first time the process sees it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use lambda_idempotency::layer::{IdempotencyLayer, Idempotent};
use lambda_idempotency::{Backend, Config, KeySelector, Outcome};
use lambda_runtime::tower::ServiceBuilder;
use lambda_runtime::{LambdaEvent, Runtime, layers::TracingLayer, service_fn};
use serde_json::{Value, json};

fn label(outcome: &Outcome<Value>) -> &'static str {
    match outcome {
        Outcome::Executed(_) => "executed",
        Outcome::Replayed(_) => "replayed",
        Outcome::Unprotected(_) => "unprotected",
        _ => "other",
    }
}

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::start(async {
        lambda_idempotency::runtime::init_telemetry();
        let (engine, []) = Backend::from_env(Config::with_prefix("layer.probe"), [])
            .await?
            .into_parts();
        let calls = Arc::new(AtomicU32::new(0));
        let panicked = Arc::new(AtomicBool::new(false));
        let (counter, seen) = (calls.clone(), calls.clone());
        let handler = service_fn(move |event: LambdaEvent<Value>| {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            let panic = event.payload["panic_once"] == json!(true)
                && !panicked.swap(true, Ordering::SeqCst);
            async move {
                assert!(!panic, "the handler panicked on purpose");
                Ok::<_, lambda_runtime::Error>(json!({"call": n}))
            }
        });
        let service = ServiceBuilder::new()
            // Errors as `lambda_idempotency::runtime::run` answers them: an `errorType`
            // that says what failed (`PayloadMismatch`, `HandlerFailed`).
            .map_err(|e: lambda_runtime::Error| lambda_idempotency::diagnostic::diagnostic(&*e))
            .map_response(move |answer: Idempotent<Value>| {
                json!({
                    "outcome": label(answer.outcome()),
                    "calls": seen.load(Ordering::SeqCst),
                    "response": answer,
                })
            })
            .layer(IdempotencyLayer::new(engine, KeySelector::pointer("/id")))
            .service(handler);
        Runtime::new(service).layer(TracingLayer::new()).run().await
    })
}
