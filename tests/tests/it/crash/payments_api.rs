//! `payments-api` as a real process, killed (SIGKILL) right after each
//! DynamoDB request of a `POST /payments` is answered — every boundary in
//! turn — then restarted; the client retries the same request after the
//! lease. Exactly one credit in every trial, and the retry gets the answer
//! kept with the key (the first execution's, when it committed).

use crate::exactly_once::payments_api::{post, spawn};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;
use std::time::Duration;
use test_kit::crash::{Restarted, every_boundary, first_invocation};
use test_kit::runtime_api::Invocation;
use test_kit::{PaymentTables, moto, now_ms, payment_tables};

const LEASE: Duration = Duration::from_millis(1500);
/// No payment_id: each execution generates its own, so a retry that got
/// another execution's answer would show.
const BODY: &str = r#"{"account_id":"acct-1","amount_cents":250}"#;

/// The answers kept in the idempotency table (there is one key).
async fn kept_bodies(t: &PaymentTables) -> Vec<String> {
    let out = moto()
        .dynamodb()
        .await
        .scan()
        .table_name(&t.idempotency)
        .consistent_read(true)
        .send()
        .await
        .expect("scan the idempotency table");
    out.items()
        .iter()
        .filter(|i| i.get("status") == Some(&AttributeValue::S("COMPLETED".into())))
        .filter_map(|i| i.get("data")?.as_s().ok().cloned())
        .map(|data| {
            let kept: Value = serde_json::from_str(&data).expect("a kept response");
            kept["body"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// One trial: kill after the `n`-th request, restart, retry after the
/// lease. Returns whether the kill happened.
async fn trial(mode: &str, n: u32) -> bool {
    let t = payment_tables("papi-crash").await;
    let event = post(Some("k-crash"), BODY);
    let first = first_invocation(n, &t.marker, LEASE, &event, |api| spawn(api, &t, mode)).await;
    let answer = if first.killed {
        // The client retries the same request after the lease.
        let again = Restarted::start(|api| spawn(api, &t, mode)).await;
        first.after_the_lease().await;
        again
            .api
            .invoke(event.clone(), now_ms() + 30_000, Duration::from_secs(20))
            .await
    } else {
        first.result
    };
    let Some(Invocation::Response(answer)) = answer else {
        panic!("{mode} n={n}: {answer:?}");
    };
    assert_eq!(answer["statusCode"], 201, "{mode} n={n}: {answer}");
    assert_eq!(
        kept_bodies(&t).await,
        vec![answer["body"].as_str().unwrap().to_owned()],
        "{mode} n={n}: the answer is the one kept with the key"
    );
    assert_eq!(
        t.balance("acct-1").await,
        Some(250),
        "{mode} n={n}: exactly one credit"
    );
    first.killed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_at_every_request_boundary_credits_once() {
    for (mode, requests) in [("fenced", 2), ("optimistic", 1)] {
        let boundaries = every_boundary(10, |n| trial(mode, n)).await;
        // A new key: claim + commit (fenced), one commit (optimistic).
        assert_eq!(boundaries, requests, "{mode}");
    }
}
