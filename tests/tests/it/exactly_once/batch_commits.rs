//! Batch commits through the `payments` binary on moto (optimistic mode):
//! requests counted by the launcher for the test's tables only, batch
//! commits on and off (`IDEMPOTENCY_BATCH_COMMITS`), and a batch whose
//! transaction keeps conflicting.

use serde_json::{Value, json};
use std::process::Child;
use std::time::Duration;
use test_kit::events::{Msg, sqs_event};
use test_kit::runtime_api::{Invocation, RuntimeApi, spawn_function};
use test_kit::{Fault, FaultPlan, PaymentTables, balance, moto, now_ms, payment_tables};

fn spawn(api: &RuntimeApi, t: &PaymentTables, batch_commits: bool) -> Child {
    let [idempotency, accounts] = t.env();
    spawn_function(
        "payments",
        api,
        &[
            idempotency,
            accounts,
            ("PAYMENTS_COMMIT_MODE", "optimistic"),
            (shared::BATCH_COMMITS_ENV, &batch_commits.to_string()),
        ],
    )
}

/// Ten new payments, each on its own account (its FIFO group).
fn ten_payments(redelivered: bool) -> Value {
    let messages: Vec<Msg> = (0..10)
        .map(|i| {
            let account = format!("acct-{i}");
            Msg::new(
                format!("m{i}"),
                json!({"payment_id": format!("pay-{i}"), "account_id": account, "amount_cents": 100 + i})
                    .to_string(),
            )
            .in_group(account)
        })
        .collect();
    let mut event = sqs_event("payments.fifo", &messages);
    if redelivered {
        for r in event["Records"].as_array_mut().unwrap() {
            r["attributes"]["ApproximateReceiveCount"] = json!("2");
        }
    }
    event
}

/// Counts (never injects: `max` 0) the requests on the test's tables, of
/// one operation when `target` is set.
async fn count(t: &PaymentTables, target: Option<&str>) {
    let plan = FaultPlan::new(1.0, &[Fault::Throttle]).max(0);
    let plan = match target {
        Some(op) => plan.target(op),
        None => plan,
    };
    moto().inject(&t.marker, &plan).await;
}

async fn invoke_ok(api: &RuntimeApi, event: Value) {
    let result = api
        .invoke(event, now_ms() + 30_000, Duration::from_secs(20))
        .await;
    assert_eq!(
        result.as_ref().and_then(Invocation::failed_ids),
        Some(vec![]),
        "{result:?}"
    );
}

/// Ten new payments: one `TransactWriteItems` with batch commits, ten
/// without; redelivered, one `BatchGetItem` settles the batch either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_new_payments_cost_one_request_with_batch_commits() {
    for (batch_commits, transactions) in [(true, 1), (false, 10)] {
        let t = payment_tables("batchtx").await;
        let api = RuntimeApi::start().await;
        let mut child = spawn(&api, &t, batch_commits);
        api.wait_first_poll(Duration::from_secs(20)).await;
        count(&t, None).await;
        invoke_ok(&api, ten_payments(false)).await;
        let counts = moto().clear_faults(&t.marker).await;
        assert_eq!(
            counts.requests, transactions,
            "batch commits {batch_commits}: every request of the batch"
        );
        count(&t, Some("TransactWriteItems")).await;
        invoke_ok(&api, ten_payments(true)).await;
        let counts = moto().clear_faults(&t.marker).await;
        assert_eq!(
            counts.requests, 0,
            "redelivered: replayed from the read ahead"
        );
        for i in 0..10 {
            assert_eq!(
                balance(&t.accounts, &format!("acct-{i}")).await,
                Some(100 + i),
                "batch commits {batch_commits}"
            );
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Every batch transaction cancelled by a conflict (3 attempts): the
/// records fall back to one transaction each and are applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_batch_falls_back_to_one_transaction_per_payment() {
    let t = payment_tables("batchtx-hot").await;
    let api = RuntimeApi::start().await;
    let mut child = spawn(&api, &t, true);
    api.wait_first_poll(Duration::from_secs(20)).await;
    let plan = FaultPlan::new(1.0, &[Fault::Conflict])
        .max(3)
        .target("TransactWriteItems");
    moto().inject(&t.marker, &plan).await;
    invoke_ok(&api, ten_payments(false)).await;
    let counts = moto().clear_faults(&t.marker).await;
    assert_eq!(counts.injected, 3);
    assert_eq!(
        counts.requests,
        3 + 10,
        "3 batch attempts, then one per payment"
    );
    for i in 0..10 {
        assert_eq!(
            balance(&t.accounts, &format!("acct-{i}")).await,
            Some(100 + i)
        );
    }
    // Redelivered: nothing applies again.
    invoke_ok(&api, ten_payments(true)).await;
    for i in 0..10 {
        assert_eq!(
            balance(&t.accounts, &format!("acct-{i}")).await,
            Some(100 + i)
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
