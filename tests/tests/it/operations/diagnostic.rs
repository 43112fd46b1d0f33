//! The `errorType` of failed invocations, as Lambda receives it: the
//! function binaries run under a local Runtime API (and locally on event
//! files) and answer the error endpoint with what failed (`InvalidEvent`,
//! `StoreUnavailable`), not a Rust type name.

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use test_kit::runtime_api::{Invocation, RuntimeApi, function_binary, lambda_command};

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
async fn a_store_lost_after_start_is_store_unavailable() {
    // The table passes the check at start, then goes away: every request
    // of the invocation fails, the event fails as a whole.
    let moto = test_kit::moto();
    let ddb = moto.dynamodb().await;
    let table = test_kit::create_idempotency_table(&ddb).await;
    let api = RuntimeApi::start().await;
    let mut command = lambda_command(&function_binary("inventory"), "inventory", &api);
    moto.apply_env(&mut command);
    command
        .env("IDEMPOTENCY_TABLE", &table)
        .env("STOCK_TABLE", "stock");
    let mut child = command.spawn().expect("start the function");
    assert!(
        api.wait_first_poll(Duration::from_secs(30)).await.is_some(),
        "the function started"
    );
    ddb.delete_table().table_name(&table).send().await.unwrap();
    let result = api
        .invoke(
            event("inventory-order-placed.json"),
            deadline_in(Duration::from_secs(30)),
            Duration::from_secs(60),
        )
        .await;
    let _ = child.kill();
    let _ = child.wait();
    let Some(Invocation::Error(body)) = result else {
        panic!("expected an error response, got {result:?}");
    };
    assert_eq!(body["errorType"], "StoreUnavailable", "{body}");
    let message = body["errorMessage"].as_str().expect("a message");
    assert!(
        message.contains("idempotency store"),
        "the chain of causes: {message}"
    );
}

#[test]
fn an_unreachable_store_at_start_fails_the_init_naming_the_check() {
    // Nothing listens on port 1: the table check at start (DescribeTable)
    // cannot be made, so the function refuses to start.
    let output = std::process::Command::new(function_binary("inventory"))
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:1")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .env("IDEMPOTENCY_TABLE", "idempotency")
        .env("STOCK_TABLE", "stock")
        .output()
        .expect("run inventory");
    assert!(!output.status.success(), "the init fails");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("DescribeTable") && stderr.contains("idempotency"),
        "{stderr}"
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
