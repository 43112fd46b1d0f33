//! The `errorType` of failed invocations, as Lambda receives it: the
//! function binaries run under a local Runtime API (and locally on event
//! files) and answer the error endpoint with what failed (`InvalidEvent`,
//! `StoreUnavailable`), not a Rust type name.

use integration_tests::runtime_api::{Invocation, RuntimeApi, function_binary, lambda_command};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn event(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../events")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(path).expect("event file")).expect("JSON")
}

fn deadline_in(d: Duration) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    u64::try_from(now).expect("ms") + u64::try_from(d.as_millis()).expect("ms")
}

/// Runs `binary` under a Runtime API with `env`, invokes it once with
/// `payload`, and returns the error body it posted.
async fn error_of(binary: &str, env: &[(&str, &str)], payload: Value) -> Value {
    let api = RuntimeApi::start().await;
    let mut command = lambda_command(&function_binary(binary), binary, &api);
    command.envs(env.iter().copied());
    let mut child = command.spawn().expect("start the function");
    let result = api
        .invoke(
            payload,
            deadline_in(Duration::from_secs(30)),
            Duration::from_secs(60),
        )
        .await;
    let _ = child.kill();
    let _ = child.wait();
    match result {
        Some(Invocation::Error(body)) => body,
        other => panic!("{binary}: expected an error response, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_event_is_an_invalid_event() {
    // An SQS batch to the EventBridge function, an EventBridge event to an
    // SQS function or to the stream relay.
    for (binary, file) in [
        ("inventory", "payments-fifo.json"),
        ("payments", "inventory-order-placed.json"),
        ("orders", "inventory-order-placed.json"),
        ("outbox-relay", "inventory-order-placed.json"),
    ] {
        let env = [
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("OUTBOX_ALLOWLIST", "{}"),
        ];
        let body = error_of(binary, &env, event(file)).await;
        assert_eq!(
            body["errorType"], "InvalidEvent",
            "{binary} on {file}: {body}"
        );
        assert!(
            body["errorMessage"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_store_is_store_unavailable() {
    // Nothing listens on port 1: every DynamoDB request is refused, the
    // SDK's retries run out, the event fails as a whole.
    let env = [
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("IDEMPOTENCY_TABLE", "idempotency"),
        ("STOCK_TABLE", "stock"),
    ];
    let body = error_of("inventory", &env, event("inventory-order-placed.json")).await;
    assert_eq!(body["errorType"], "StoreUnavailable", "{body}");
    let message = body["errorMessage"].as_str().expect("a message");
    assert!(
        message.contains("idempotency store"),
        "the chain of causes: {message}"
    );
}

#[test]
fn a_local_run_prints_the_same_error_type() {
    let output = std::process::Command::new(function_binary("payments"))
        .arg("--event")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/inventory-order-placed.json"))
        .env_remove("AWS_LAMBDA_RUNTIME_API")
        .env_remove("IDEMPOTENCY_TABLE")
        .env_remove("ACCOUNTS_TABLE")
        .env_remove("MESSAGE_SIGNING_SECRET")
        .env_remove("MESSAGE_SIGNING_SECRET_PARAMETER")
        .output()
        .expect("run payments");
    assert!(
        !output.status.success(),
        "a failed invocation exits non-zero"
    );
    let line: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    assert_eq!(line["errorType"], "InvalidEvent", "{line}");
}
