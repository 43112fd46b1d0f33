//! The layer on the in-memory store, called as a `tower` service. (Through
//! the Lambda runtime itself: the integration tests, `operations::layer`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use lambda_runtime::tower::{Layer, Service, ServiceBuilder, ServiceExt};
use lambda_runtime::{Context, LambdaEvent, service_fn};
use serde_json::{Value, json};

use super::{IdempotencyLayer, Idempotent};
use crate::batch::{FailureReason, Unfinished};
use crate::eventbridge::EventPayload;
use crate::{Config, Idempotency, KeySelector, MemoryStore, MissingKey, Outcome};

type BoxError = lambda_runtime::Error;

fn engine() -> Idempotency {
    Idempotency::new(MemoryStore::new(), Config::with_prefix("layer.test"))
}

/// A handler counting its calls; it answers `{"call": n}` and fails or
/// panics when the payload says so (`"fail"`, `"panic"`).
fn counted(
    calls: &Arc<AtomicU32>,
) -> impl Service<
    LambdaEvent<Value>,
    Response = Value,
    Error = BoxError,
    Future = impl Future<Output = Result<Value, BoxError>> + Send,
> + Clone
+ Send
+ 'static {
    let calls = calls.clone();
    service_fn(move |event: LambdaEvent<Value>| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if event.payload["panic"] == json!(true) {
                panic!("the handler panicked on purpose");
            }
            if event.payload["fail"] == json!(true) {
                return Err::<Value, BoxError>("the handler failed on purpose".into());
            }
            Ok(json!({"call": n}))
        }
    })
}

async fn invoke<S>(service: &mut S, payload: Value) -> Result<Idempotent<Value>, BoxError>
where
    S: Service<LambdaEvent<Value>, Response = Idempotent<Value>, Error = BoxError>,
{
    service
        .ready()
        .await?
        .call(LambdaEvent::new(payload, Context::default()))
        .await
}

/// Why the layer failed the invocation.
fn layer_error(error: &BoxError) -> &FailureReason {
    error
        .downcast_ref::<Unfinished>()
        .unwrap_or_else(|| panic!("not the layer's failure: {error}"))
        .reason()
}

#[tokio::test]
async fn a_duplicate_is_replayed_without_calling_the_handler() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut service = ServiceBuilder::new()
        .layer(IdempotencyLayer::new(engine(), KeySelector::pointer("/id")))
        .service(counted(&calls));
    let first = invoke(&mut service, json!({"id": "a", "n": 1}))
        .await
        .unwrap();
    assert_eq!(first.outcome(), &Outcome::Executed(json!({"call": 1})));
    assert!(first.executed());
    let again = invoke(&mut service, json!({"id": "a", "n": 1}))
        .await
        .unwrap();
    assert_eq!(
        again.outcome(),
        &Outcome::Replayed(Some(json!({"call": 1})))
    );
    assert!(!again.executed());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the replay did not call the handler"
    );
    // It serializes as the handler's response.
    assert_eq!(serde_json::to_value(&again).unwrap(), json!({"call": 1}));
    // Another key runs.
    let other = invoke(&mut service, json!({"id": "b"})).await.unwrap();
    assert_eq!(other.outcome(), &Outcome::Executed(json!({"call": 2})));
}

#[tokio::test]
async fn the_same_key_with_another_payload_is_a_mismatch() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut service =
        IdempotencyLayer::new(engine(), KeySelector::pointer("/id")).layer(counted(&calls));
    invoke(&mut service, json!({"id": "a", "n": 1}))
        .await
        .unwrap();
    let error = invoke(&mut service, json!({"id": "a", "n": 2}))
        .await
        .expect_err("a mismatch");
    assert!(
        matches!(layer_error(&error), FailureReason::PayloadMismatch),
        "{error}"
    );
    assert!(layer_error(&error).is_terminal());
    assert_eq!(crate::diagnostic::error_type(&*error), "PayloadMismatch");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_handler_error_comes_back_unchanged_and_releases_the_claim() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut service = IdempotencyLayer::new(engine(), KeySelector::pointer("/id"))
        .payload(crate::PayloadScope::None)
        .layer(counted(&calls));
    let error = invoke(&mut service, json!({"id": "a", "fail": true}))
        .await
        .expect_err("the handler's error");
    assert!(
        error.downcast_ref::<Unfinished>().is_none(),
        "not wrapped: {error:?}"
    );
    assert_eq!(error.to_string(), "the handler failed on purpose");
    let retry = invoke(&mut service, json!({"id": "a"})).await.unwrap();
    assert_eq!(retry.outcome(), &Outcome::Executed(json!({"call": 2})));
}

#[tokio::test]
async fn a_panic_releases_the_claim() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut service = IdempotencyLayer::new(engine(), KeySelector::pointer("/id"))
        .payload(crate::PayloadScope::None)
        .layer(counted(&calls));
    let error = invoke(&mut service, json!({"id": "a", "panic": true}))
        .await
        .expect_err("the panic");
    assert!(
        matches!(layer_error(&error), FailureReason::Handler { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("panicked on purpose"), "{error}");
    let retry = invoke(&mut service, json!({"id": "a"})).await.unwrap();
    assert_eq!(retry.outcome(), &Outcome::Executed(json!({"call": 2})));
    let again = invoke(&mut service, json!({"id": "a"})).await.unwrap();
    assert_eq!(
        again.outcome(),
        &Outcome::Replayed(Some(json!({"call": 2})))
    );
}

#[tokio::test]
async fn a_missing_key_fails_or_runs_unprotected() {
    let calls = Arc::new(AtomicU32::new(0));
    let layer = IdempotencyLayer::new(engine(), KeySelector::pointer("/id"));
    let mut strict = layer.clone().layer(counted(&calls));
    let error = invoke(&mut strict, json!({"n": 1}))
        .await
        .expect_err("no key");
    assert!(
        matches!(layer_error(&error), FailureReason::Key(_)),
        "{error}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let mut lenient = layer
        .missing_key(MissingKey::RunUnprotected)
        .layer(counted(&calls));
    let run = invoke(&mut lenient, json!({"n": 1})).await.unwrap();
    assert_eq!(run.outcome(), &Outcome::Unprotected(json!({"call": 1})));
}

fn eventbridge_text(id: &str, order: &str) -> String {
    json!({
        "version": "0", "id": id, "detail-type": "OrderPlaced", "source": "shop.orders",
        "account": "123456789012", "time": "2026-12-01T00:00:00Z", "region": "us-east-1",
        "resources": [], "detail": {"order_id": "__ORDER__"},
    })
    .to_string()
    .replace("\"__ORDER__\"", order)
}

#[tokio::test]
async fn eventbridge_keys_exact_numbers_and_validates_the_detail() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let mut service =
        IdempotencyLayer::eventbridge(engine(), KeySelector::pointer("/detail/order_id")).layer(
            service_fn(move |event: LambdaEvent<EventPayload>| {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                drop(event);
                async move { Ok::<_, BoxError>(json!({"call": n})) }
            }),
        );
    let mut send = async |id: &str, order: &str| {
        let payload = EventPayload::from_text(eventbridge_text(id, order)).unwrap();
        service
            .ready()
            .await?
            .call(LambdaEvent::new(payload, Context::default()))
            .await
    };
    // Two orders an f64 cannot tell apart are two keys.
    let a = send("e-1", "12345678901234567890123").await.unwrap();
    let b = send("e-2", "12345678901234567890124").await.unwrap();
    assert!(a.executed() && b.executed());
    // The same order in a new event (new id, time): replayed.
    let again = send("e-3", "12345678901234567890123").await.unwrap();
    assert_eq!(
        again.outcome(),
        &Outcome::Replayed(Some(json!({"call": 1})))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Not an EventBridge event: invalid, the handler is not called.
    let payload = EventPayload::from_text(r#"{"Records": []}"#).unwrap();
    let error = service
        .ready()
        .await
        .unwrap()
        .call(LambdaEvent::new(payload, Context::default()))
        .await
        .expect_err("not an EventBridge event");
    assert!(
        matches!(layer_error(&error), FailureReason::Parse(_)),
        "{error}"
    );
    assert_eq!(crate::diagnostic::error_type(&*error), "InvalidEvent");
}

#[tokio::test]
async fn sns_keys_on_the_message_id() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let mut service = IdempotencyLayer::sns(engine(), KeySelector::Id).layer(service_fn(
        move |_: LambdaEvent<crate::sns::SnsEvent>| {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok::<_, BoxError>(json!({"call": n})) }
        },
    ));
    let event = |message_id: &str, records: usize| -> crate::sns::SnsEvent {
        let record = json!({
            "EventSource": "aws:sns", "EventVersion": "1.0",
            "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:orders:5f1c",
            "Sns": {
                "Type": "Notification", "MessageId": message_id,
                "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
                "Message": "plain text", "Timestamp": "2026-12-01T00:00:00.000Z",
                "SignatureVersion": "1", "Signature": "EXAMPLE",
                "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem",
                "UnsubscribeUrl": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
                "MessageAttributes": {},
            },
        });
        serde_json::from_value(json!({"Records": vec![record; records]})).unwrap()
    };
    let mut send = async |e: crate::sns::SnsEvent| {
        service
            .ready()
            .await?
            .call(LambdaEvent::new(e, Context::default()))
            .await
    };
    assert!(send(event("m-1", 1)).await.unwrap().executed());
    let again = send(event("m-1", 1)).await.unwrap();
    assert_eq!(
        again.outcome(),
        &Outcome::Replayed(Some(json!({"call": 1})))
    );
    assert!(send(event("m-2", 1)).await.unwrap().executed());
    let error = send(event("m-3", 2)).await.expect_err("two notifications");
    assert!(
        matches!(layer_error(&error), FailureReason::Parse(_)),
        "{error}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_replay_without_a_kept_response_serializes_as_a_duplicate() {
    let none: Idempotent<Value> = Idempotent {
        outcome: Outcome::Replayed(None),
    };
    assert_eq!(
        serde_json::to_value(&none).unwrap(),
        json!({"duplicate": true})
    );
}
