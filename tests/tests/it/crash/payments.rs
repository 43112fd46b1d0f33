//! `payments` as a real process under a local Lambda Runtime API, against
//! moto, killed (SIGKILL) right after each DynamoDB request of a batch is
//! answered — every boundary in turn — then restarted; the batch is
//! redelivered after the lease. Balances must be exact in every trial.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Child;
use std::time::Duration;
use test_kit::crash::{every_boundary, sqs_batch_trial};
use test_kit::events::{Msg, payment, sqs_event};
use test_kit::runtime_api::{RuntimeApi, spawn_function};
use test_kit::{PaymentTables, balance, payment_tables};

const LEASE: Duration = Duration::from_millis(1500);

/// `mode` is a `PAYMENTS_COMMIT_MODE`, or `optimistic-per-record`:
/// optimistic with batch commits off.
fn spawn(api: &RuntimeApi, t: &PaymentTables, mode: &str) -> Child {
    let [idempotency, accounts] = t.env();
    let (mode, batch_commits) = match mode {
        "optimistic-per-record" => ("optimistic", "false"),
        mode => (mode, "true"),
    };
    spawn_function(
        "payments",
        api,
        &[
            idempotency,
            accounts,
            ("PAYMENTS_COMMIT_MODE", mode),
            (lambda_idempotency::env::BATCH_COMMITS_ENV, batch_commits),
        ],
    )
}

/// One trial: kill after the `n`-th request, restart, redeliver until the
/// batch succeeds. Returns whether the kill happened, and the balances.
async fn trial(
    mode: &str,
    n: u32,
    event: &Value,
    accounts: &[&str],
) -> (bool, BTreeMap<String, Option<i64>>) {
    let t = payment_tables("crash").await;
    let killed =
        sqs_batch_trial(n, &t.marker, LEASE, event, |api| spawn(api, &t, mode), mode).await;
    let mut balances = BTreeMap::new();
    for account in accounts {
        balances.insert((*account).to_owned(), balance(&t.accounts, account).await);
    }
    (killed, balances)
}

fn batch() -> (Value, BTreeMap<String, Option<i64>>) {
    let payments = [("a", 100), ("b", 20), ("a", 3), ("b", 4000)];
    let mut expected: BTreeMap<String, Option<i64>> = BTreeMap::new();
    let messages: Vec<Msg> = payments
        .iter()
        .enumerate()
        .map(|(i, (account, amount))| {
            let e = expected.entry((*account).to_owned()).or_insert(Some(0));
            *e = e.map(|v| v + amount);
            payment(i, account, *amount)
        })
        .collect();
    (sqs_event("payments.fifo", &messages), expected)
}

/// Both transactional modes are exact at every boundary, optimistic with
/// batch commits on (the default) and off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_payments_survive_a_kill_at_every_request_boundary() {
    let (event, expected) = batch();
    for mode in ["optimistic", "optimistic-per-record", "fenced"] {
        let boundaries = every_boundary(40, |n| {
            let (event, expected) = (&event, &expected);
            async move {
                let (killed, balances) = trial(mode, n, event, &["a", "b"]).await;
                assert_eq!(&balances, expected, "{mode}: killed after request {n}");
                killed
            }
        })
        .await;
        // 4 payments on 2 accounts. Batch commits: one transaction per
        // turn of the two lanes (a's and b's first payments, then their
        // second ones). Per record: 1 request each (optimistic), 2 each
        // (fenced).
        let requests = match mode {
            "optimistic" => 2,
            "optimistic-per-record" => 4,
            _ => 8,
        };
        assert_eq!(boundaries, requests, "{mode}");
    }
}

/// The control: the classic claim / credit / complete sequence, killed right
/// after the credit is answered, credits twice. The crash test can tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_then_complete_double_credits_when_killed_after_the_effect() {
    let messages = [Msg::new(
        "m0",
        json!({"payment_id": "p0", "account_id": "a", "amount_cents": 7}).to_string(),
    )
    .in_group("a")];
    let event = sqs_event("payments.fifo", &messages);
    let (killed, balances) = trial("claim-complete", 2, &event, &["a"]).await;
    assert!(killed);
    assert_eq!(balances["a"], Some(14), "credited twice");
}
