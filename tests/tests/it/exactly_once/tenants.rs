//! A tenant-isolated function (Lambda's tenant isolation mode): the real
//! `payments-api` binary under a local Runtime API that sends each
//! invocation's `Lambda-Runtime-Aws-Tenant-Id`, on moto. Two tenants send
//! the same request under the same key: both are credited, and each
//! retry replays only its own tenant's answer.

use std::time::Duration;

use serde_json::Value;
use test_kit::runtime_api::{Invocation, RuntimeApi, function_command};
use test_kit::{PaymentTables, now_ms, payment_tables};

use super::payments_api::post;

/// The `payments-api` binary as Lambda runs it, on the test's tables, with
/// `env` more.
fn spawn(api: &RuntimeApi, t: &PaymentTables, env: &[(&str, &str)]) -> std::process::Child {
    function_command("payments-api", api)
        .envs(t.env())
        .env("PAYMENTS_COMMIT_MODE", "fenced")
        .envs(env.iter().copied())
        .spawn()
        .expect("start the payments-api binary")
}

const BODY: &str = r#"{"account_id":"acct-1","amount_cents":250}"#;

/// `event` as an invocation of `tenant` (`None`: no tenant): the answer.
async fn call(api: &RuntimeApi, tenant: Option<&str>, event: &Value) -> Value {
    let (deadline, limit) = (now_ms() + 30_000, Duration::from_secs(20));
    let answer = match tenant {
        Some(tenant) => {
            api.invoke_as_tenant(tenant, event.clone(), deadline, limit)
                .await
        }
        None => api.invoke(event.clone(), deadline, limit).await,
    };
    match answer {
        Some(Invocation::Response(r)) => r,
        other => panic!("{tenant:?}: {other:?}"),
    }
}

fn replayed(r: &Value) -> bool {
    r["headers"]["idempotent-replayed"] == "true"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_same_key_both_execute_on_the_binary() {
    let t = payment_tables("tenants").await;
    let api = RuntimeApi::start().await;
    let mut child = spawn(&api, &t, &[]);
    let event = post(Some("k-shared"), BODY);
    let a = call(&api, Some("tenant-a"), &event).await;
    assert_eq!(a["statusCode"], 201, "{a}");
    assert!(!replayed(&a), "{a}");
    let b = call(&api, Some("tenant-b"), &event).await;
    assert_eq!(b["statusCode"], 201, "{b}");
    assert!(
        !replayed(&b),
        "tenant-b's payment ran, not tenant-a's answer: {b}"
    );
    assert_ne!(a["body"], b["body"], "two payments");
    assert_eq!(t.balance("acct-1").await, Some(500));
    // Each tenant's retry replays its own answer, nothing more is credited.
    let again_a = call(&api, Some("tenant-a"), &event).await;
    assert!(replayed(&again_a), "{again_a}");
    assert_eq!(again_a["body"], a["body"]);
    let again_b = call(&api, Some("tenant-b"), &event).await;
    assert!(replayed(&again_b), "{again_b}");
    assert_eq!(again_b["body"], b["body"]);
    assert_eq!(t.balance("acct-1").await, Some(500));
    let _ = child.kill();
    let _ = child.wait();
}

/// `IDEMPOTENCY_TENANT_SCOPE=shared`: keys are global, as they are without
/// tenant isolation: the second tenant's request is a replay of the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_tenant_scope_shares_records_on_the_binary() {
    let t = payment_tables("tenants").await;
    let api = RuntimeApi::start().await;
    let mut child = spawn(&api, &t, &[("IDEMPOTENCY_TENANT_SCOPE", "shared")]);
    let event = post(Some("k-global"), BODY);
    let a = call(&api, Some("tenant-a"), &event).await;
    assert!(!replayed(&a), "{a}");
    let b = call(&api, Some("tenant-b"), &event).await;
    assert!(replayed(&b), "{b}");
    assert_eq!(a["body"], b["body"]);
    // Without a tenant id: the same, unscoped key.
    let none = call(&api, None, &event).await;
    assert!(replayed(&none), "{none}");
    assert_eq!(t.balance("acct-1").await, Some(250));
    let _ = child.kill();
    let _ = child.wait();
}
