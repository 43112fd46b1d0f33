//! The tower layer (`lambda_idempotency::layer::IdempotencyLayer`) under
//! `lambda_runtime`'s own runtime: the `layer-probe` binary (a
//! `ServiceBuilder` stack with the layer, served by `Runtime` with its
//! tracing layer and panic catching) polling a local Runtime API, invoked
//! as Lambda invokes it. Its handler counts its calls.

use std::time::Duration;

use serde_json::{Value, json};
use test_kit::runtime_api::{Invocation, RuntimeApi, function_command};
use test_kit::{create_idempotency_table, moto, now_ms};

/// The probe under a fresh Runtime API, with `env`.
struct Probe {
    api: RuntimeApi,
    child: std::process::Child,
}

impl Probe {
    async fn start(env: &[(&str, &str)]) -> Self {
        let api = RuntimeApi::start().await;
        let child = function_command("layer-probe", &api)
            .envs(env.iter().copied())
            .spawn()
            .expect("start layer-probe");
        Self { api, child }
    }

    async fn invoke(&self, event: Value) -> Invocation {
        self.api
            .invoke(event, now_ms() + 30_000, Duration::from_secs(30))
            .await
            .expect("layer-probe answered")
    }

    /// A response: `(outcome, calls so far, the handler's response)`.
    async fn answer(&self, event: Value) -> (String, u64, Value) {
        match self.invoke(event.clone()).await {
            Invocation::Response(r) => (
                r["outcome"].as_str().unwrap_or_default().to_owned(),
                r["calls"].as_u64().expect("calls"),
                r["response"].clone(),
            ),
            Invocation::Error(e) => panic!("{event} failed: {e}"),
        }
    }

    async fn error(&self, event: Value) -> Value {
        match self.invoke(event.clone()).await {
            Invocation::Error(e) => e,
            Invocation::Response(r) => panic!("{event} answered {r}, expected an error"),
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first invocation executes, its retry replays without calling the
/// handler, another payload under the key is a mismatch, a panic releases
/// the claim: on `store_env`'s store.
async fn the_layer_holds(store_env: &[(&str, &str)]) {
    let probe = Probe::start(store_env).await;
    let first = probe.answer(json!({"id": "a", "amount": 10})).await;
    assert_eq!(first, ("executed".into(), 1, json!({"call": 1})));
    let again = probe.answer(json!({"id": "a", "amount": 10})).await;
    assert_eq!(
        again,
        ("replayed".into(), 1, json!({"call": 1})),
        "the retry is answered from the kept response; the handler is not called again"
    );
    let mismatch = probe.error(json!({"id": "a", "amount": 99})).await;
    assert_eq!(mismatch["errorType"], "PayloadMismatch", "{mismatch}");
    let other = probe.answer(json!({"id": "b", "amount": 10})).await;
    assert_eq!(
        other,
        ("executed".into(), 2, json!({"call": 2})),
        "the mismatch did not run"
    );

    let panicked = probe.error(json!({"id": "p", "panic_once": true})).await;
    assert!(
        panicked["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("panicked on purpose")),
        "{panicked}"
    );
    let retry = probe.answer(json!({"id": "p", "panic_once": true})).await;
    assert_eq!(
        retry,
        ("executed".into(), 4, json!({"call": 4})),
        "the panic released the claim: the retry runs"
    );
    let replay = probe.answer(json!({"id": "p", "panic_once": true})).await;
    assert_eq!(replay, ("replayed".into(), 4, json!({"call": 4})));
}

#[tokio::test]
async fn under_the_runtime_a_duplicate_is_replayed_and_a_panic_releases_the_claim() {
    the_layer_holds(&[]).await;
}

#[tokio::test]
async fn under_the_runtime_on_dynamodb() {
    let table = create_idempotency_table(&moto().dynamodb().await).await;
    the_layer_holds(&[(lambda_idempotency::env::TABLE_ENV, &table)]).await;
}
