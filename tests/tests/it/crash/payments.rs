//! `payments` as a real process under a local Lambda Runtime API, against
//! moto, killed (SIGKILL) right after each DynamoDB request of a batch is
//! answered — every boundary in turn — then restarted; the batch is
//! redelivered after the lease. Balances must be exact in every trial.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};
use test_kit::events::{Msg, sqs_event};
use test_kit::runtime_api::{Invocation, RuntimeApi, Watched, function_binary, lambda_command};
use test_kit::{PaymentTables, moto, now_ms, payment_tables};

const LEASE: Duration = Duration::from_millis(1500);

fn spawn(api: &RuntimeApi, t: &PaymentTables, mode: &str) -> Child {
    let mut command = lambda_command(&function_binary("payments"), "payments", api);
    moto().apply_env(&mut command);
    command
        .env("IDEMPOTENCY_TABLE", &t.idempotency)
        .env("ACCOUNTS_TABLE", &t.accounts)
        .env("PAYMENTS_COMMIT_MODE", mode)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start the payments binary")
}

async fn balance(accounts: &str, account: &str) -> Option<i64> {
    let out = moto()
        .dynamodb()
        .await
        .get_item()
        .table_name(accounts)
        .key(
            "account_id",
            aws_sdk_dynamodb::types::AttributeValue::S(account.to_owned()),
        )
        .consistent_read(true)
        .send()
        .await
        .expect("read balance");
    out.item()?.get("balance_cents")?.as_n().ok()?.parse().ok()
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
    let api = RuntimeApi::start().await;
    let mut child = spawn(&api, &t, mode);
    let started = Instant::now();
    // Wait for the response, or for the kill (then no response ever comes).
    let Watched {
        result: first,
        killed,
    } = moto()
        .invoke_killing_after(n, &t.marker, &api, &mut child, event.clone(), LEASE)
        .await;
    if !killed {
        assert_eq!(
            first.as_ref().and_then(Invocation::failed_ids),
            Some(vec![]),
            "{mode} n={n}: {first:?}"
        );
    } else {
        // The runtime restarts the function; SQS redelivers after the lease.
        let api = RuntimeApi::start().await;
        let mut child = spawn(&api, &t, mode);
        let mut pending = event.clone();
        for round in 0..6 {
            let wait = (started + LEASE + Duration::from_millis(200))
                .saturating_duration_since(Instant::now());
            tokio::time::sleep(wait.max(Duration::from_millis(if round == 0 { 0 } else { 500 })))
                .await;
            let result = api
                .invoke(pending.clone(), now_ms() + 30_000, Duration::from_secs(20))
                .await;
            let failed = result
                .as_ref()
                .and_then(Invocation::failed_ids)
                .unwrap_or_else(|| panic!("{mode} n={n}: {result:?}"));
            if failed.is_empty() {
                break;
            }
            assert!(round < 5, "{mode} n={n}: still failing {failed:?}");
            let records: Vec<Value> = event["Records"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| failed.iter().any(|f| r["messageId"] == json!(f)))
                .cloned()
                .collect();
            pending = json!({ "Records": records });
        }
        let _ = child.kill();
        let _ = child.wait();
    }
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
            Msg::new(
                format!("m{i}"),
                json!({"payment_id": format!("p{i}"), "account_id": account, "amount_cents": amount})
                    .to_string(),
            )
            .in_group(*account)
        })
        .collect();
    (sqs_event("payments.fifo", &messages), expected)
}

/// Both transactional modes are exact at every boundary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_payments_survive_a_kill_at_every_request_boundary() {
    let (event, expected) = batch();
    for mode in ["optimistic", "fenced"] {
        let mut boundaries = 0;
        for n in 1..=40 {
            let (killed, balances) = trial(mode, n, &event, &["a", "b"]).await;
            assert_eq!(balances, expected, "{mode}: killed after request {n}");
            if !killed {
                break;
            }
            boundaries += 1;
        }
        // 4 payments: 1 request each (optimistic), 2 each (fenced).
        let per_payment = if mode == "optimistic" { 1 } else { 2 };
        assert_eq!(boundaries, 4 * per_payment, "{mode}");
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
