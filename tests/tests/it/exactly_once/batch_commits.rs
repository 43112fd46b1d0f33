//! Batch commits through the `payments` binary on moto (optimistic mode):
//! the requests read from the launcher's ledger (a moto of each test's own,
//! so no other test's requests count), batch commits on and off
//! (`IDEMPOTENCY_BATCH_COMMITS`), and a batch whose transaction keeps
//! conflicting.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Child;
use std::time::Duration;
use test_kit::events::{Msg, sqs_event};
use test_kit::runtime_api::{Invocation, RuntimeApi, function_command};
use test_kit::{Fault, FaultPlan, Moto, PaymentTables, now_ms, payment_tables_on};

/// The `payments` binary on `moto`'s tables `t`.
fn spawn(moto: &Moto, api: &RuntimeApi, t: &PaymentTables, batch_commits: bool) -> Child {
    function_command("payments", api)
        .envs(moto.env())
        .envs(t.env())
        .env("PAYMENTS_COMMIT_MODE", "optimistic")
        .env(
            lambda_idempotency::env::BATCH_COMMITS_ENV,
            batch_commits.to_string(),
        )
        .spawn()
        .expect("start the payments binary")
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

pub(crate) async fn invoke_ok(api: &RuntimeApi, event: Value) {
    let result = api
        .invoke(event, now_ms() + 30_000, Duration::from_secs(20))
        .await;
    assert_eq!(
        result.as_ref().and_then(Invocation::failed_ids),
        Some(vec![]),
        "{result:?}"
    );
}

/// One request as the ledger kept it: its operation (the `X-Amz-Target`
/// suffix), its actions (a `TransactWriteItems`'s items, a
/// `BatchGetItem`'s keys) and whether an injected fault answered it.
#[derive(Debug, PartialEq)]
pub(crate) struct Sent {
    pub(crate) op: String,
    pub(crate) actions: usize,
    pub(crate) faulted: bool,
}

pub(crate) fn sent(op: &str, actions: usize, faulted: bool) -> Sent {
    Sent {
        op: op.to_owned(),
        actions,
        faulted,
    }
}

/// Runs `invoke` with the ledger on: the DynamoDB requests it sent, in order.
pub(crate) async fn requests_of(moto: &Moto, invoke: impl Future<Output = ()>) -> Vec<Sent> {
    moto.reset_ledger().await;
    invoke.await;
    let ledger = moto.ledger().await;
    moto.stop_ledger().await;
    ledger
        .iter()
        .filter_map(|e| {
            let op = e["target"].as_str()?.strip_prefix("DynamoDB_20120810.")?;
            let request = &e["request"];
            let actions = match op {
                "TransactWriteItems" => request["TransactItems"].as_array().map_or(0, Vec::len),
                "BatchGetItem" => request["RequestItems"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(_, spec)| spec["Keys"].as_array().map_or(0, Vec::len))
                    .sum(),
                _ => 1,
            };
            Some(sent(op, actions, e.get("fault").is_some()))
        })
        .collect()
}

/// Every balance of `t`'s accounts on `moto` (a consistent scan).
pub(crate) async fn balances(moto: &Moto, t: &PaymentTables) -> BTreeMap<String, i64> {
    test_kit::balances_on(moto, &t.accounts).await
}

/// Each payment credited once: `acct-i` holds `100 + i`.
fn credited_once() -> BTreeMap<String, i64> {
    (0..10).map(|i| (format!("acct-{i}"), 100 + i)).collect()
}

/// Ten new payments: one `TransactWriteItems` of their 20 actions (each
/// payment's credit and its record) with batch commits, ten of 2 without;
/// redelivered, one `BatchGetItem` of the ten keys settles the batch either
/// way, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_new_payments_cost_one_request_with_batch_commits() {
    let moto = Moto::start(&[]);
    for (batch_commits, transactions) in [
        (true, vec![sent("TransactWriteItems", 20, false)]),
        (
            false,
            (0..10)
                .map(|_| sent("TransactWriteItems", 2, false))
                .collect(),
        ),
    ] {
        let t = payment_tables_on(&moto, "batchtx").await;
        let api = RuntimeApi::start().await;
        let mut child = spawn(&moto, &api, &t, batch_commits);
        api.wait_first_poll(Duration::from_secs(20)).await;
        let first = requests_of(&moto, invoke_ok(&api, ten_payments(false))).await;
        assert_eq!(
            first, transactions,
            "batch commits {batch_commits}: every request of the batch"
        );
        let again = requests_of(&moto, invoke_ok(&api, ten_payments(true))).await;
        assert_eq!(
            again,
            [sent("BatchGetItem", 10, false)],
            "batch commits {batch_commits}, redelivered: replayed from the read ahead"
        );
        assert_eq!(
            balances(&moto, &t).await,
            credited_once(),
            "batch commits {batch_commits}"
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Every batch transaction cancelled by a conflict (3 attempts of the
/// batch's 20 actions): the records fall back to one transaction each
/// (2 actions) and are applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_batch_falls_back_to_one_transaction_per_payment() {
    let moto = Moto::start(&[]);
    let t = payment_tables_on(&moto, "batchtx-hot").await;
    let api = RuntimeApi::start().await;
    let mut child = spawn(&moto, &api, &t, true);
    api.wait_first_poll(Duration::from_secs(20)).await;
    let plan = FaultPlan::new(1.0, &[Fault::Conflict])
        .max(3)
        .target("TransactWriteItems");
    moto.inject(&t.marker, &plan).await;
    let requests = requests_of(&moto, invoke_ok(&api, ten_payments(false))).await;
    let counts = moto.clear_faults(&t.marker).await;
    assert_eq!(counts.injected, 3);
    let expected: Vec<Sent> = (0..3)
        .map(|_| sent("TransactWriteItems", 20, true))
        .chain((0..10).map(|_| sent("TransactWriteItems", 2, false)))
        .collect();
    assert_eq!(
        requests, expected,
        "3 attempts of the batch, then one transaction per payment"
    );
    assert_eq!(balances(&moto, &t).await, credited_once());
    // Redelivered: nothing applies again.
    invoke_ok(&api, ten_payments(true)).await;
    assert_eq!(balances(&moto, &t).await, credited_once());
    let _ = child.kill();
    let _ = child.wait();
}
