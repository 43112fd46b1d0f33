//! Hot items (docs/stores/dynamodb.md, "Hot items"): many instances crediting one account meet
//! `TransactionConflict` cancellation reasons. moto serves DynamoDB requests
//! one at a time and never answers one, so the launcher injects them
//! (`Fault::Conflict`: a `TransactionCanceledException` whose first reason
//! is `TransactionConflict`, nothing applied). Several `payments` instances
//! (each its own engine and client, as separate execution environments)
//! race on one account; a conflicted commit is sent again with a bounded,
//! jittered backoff inside the invocation and, when every attempt
//! conflicted, its record is reported as a failure (retryable): never a
//! duplicate, never a rejection.

use lambda_idempotency::{CommitMode, DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use payments::{Accounts, App};
use serde_json::json;
use std::time::Duration;
use test_kit::events::{Msg, sqs_event};
use test_kit::{Fault, FaultPlan, PaymentTables, moto, payment_tables};

const ACCOUNT: &str = "acct-hot";

/// `n` instances of `payments` over the tables, committing in `mode`.
async fn instances(t: &PaymentTables, mode: CommitMode, n: usize) -> Vec<App> {
    let mut apps = Vec::new();
    for _ in 0..n {
        let ddb = moto().dynamodb().await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(&t.idempotency)),
            App::config().commit_mode(mode),
        );
        apps.push(App::new(
            engine,
            Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb, &t.accounts)),
        ));
    }
    apps
}

/// A batch of `count` payments `{tag}-{i}` of `amount` cents to the hot
/// account.
fn batch(tag: &str, count: usize, amount: i64) -> serde_json::Value {
    let messages: Vec<Msg> = (0..count)
        .map(|i| {
            let id = format!("{tag}-{i}");
            let body = json!({"payment_id": id, "account_id": ACCOUNT, "amount_cents": amount});
            Msg::new(id, body.to_string())
        })
        .collect();
    sqs_event("payments", &messages)
}

/// Each instance handles its own batch at the same time; the failed
/// message ids of each.
async fn race(apps: &[App], batches: &[serde_json::Value]) -> Vec<Vec<String>> {
    let runs = apps.iter().zip(batches).map(|(app, event)| async move {
        let ctx = lambda_idempotency::runtime::local_context(0, Duration::from_secs(30));
        let response = app
            .handle(LambdaEvent::new(event.clone(), ctx))
            .await
            .expect("the batch answers");
        response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect::<Vec<_>>()
    });
    futures_util::future::join_all(runs).await
}

/// Conflicts on a quarter of the transactions, four instances racing on one
/// account: every payment credits it once, none fails (each conflict was
/// sent again inside the invocation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicted_commits_on_a_hot_account_are_retried_inside_the_invocation() {
    for mode in [CommitMode::Optimistic, CommitMode::Fenced] {
        let t = payment_tables("hot").await;
        let apps = instances(&t, mode, 4).await;
        let batches: Vec<_> = (0..4).map(|i| batch(&format!("p{i}"), 10, 7)).collect();
        let plan = FaultPlan::new(0.25, &[Fault::Conflict])
            .seed(21)
            .target("TransactWriteItems");
        moto().inject(&t.marker, &plan).await;
        let failed = race(&apps, &batches).await;
        let counts = moto().clear_faults(&t.marker).await;
        eprintln!("[hot items] {mode:?}: failed {failed:?}, {counts:?}");
        assert!(
            counts.get(Fault::Conflict) >= 4,
            "{mode:?}: conflicts were injected: {counts:?}"
        );
        assert_eq!(
            counts.requests,
            40 + counts.get(Fault::Conflict),
            "{mode:?}: each conflict sent again once, each payment one transaction: {counts:?}"
        );
        assert!(
            failed.iter().all(Vec::is_empty),
            "{mode:?}: no payment failed: {failed:?}"
        );
        assert_eq!(
            t.balance(ACCOUNT).await,
            Some(40 * 7),
            "{mode:?}: each credited once"
        );
    }
}

/// Every transaction conflicts: each payment fails, retryable (in the batch
/// failures, so SQS redelivers it), nothing credited, no record left that
/// would replay it; the redelivery, conflicts over, credits each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_conflicts_fail_the_record_retryably_never_as_a_duplicate() {
    for mode in [CommitMode::Optimistic, CommitMode::Fenced] {
        let t = payment_tables("hot-x").await;
        let apps = instances(&t, mode, 2).await;
        let batches: Vec<_> = (0..2).map(|i| batch(&format!("q{i}"), 3, 5)).collect();
        let plan = FaultPlan::new(1.0, &[Fault::Conflict]).target("TransactWriteItems");
        moto().inject(&t.marker, &plan).await;
        let started = std::time::Instant::now();
        let failed = race(&apps, &batches).await;
        let took = started.elapsed();
        let counts = moto().clear_faults(&t.marker).await;
        eprintln!("[hot items] {mode:?} exhausted in {took:?}: {failed:?}, {counts:?}");
        for (i, ids) in failed.iter().enumerate() {
            let expected: Vec<String> = (0..3).map(|k| format!("q{i}-{k}")).collect();
            assert_eq!(
                ids, &expected,
                "{mode:?}: every payment of batch {i} failed"
            );
        }
        // 8 attempts per payment (the policy's bound), all conflicted.
        assert_eq!(counts.get(Fault::Conflict), 6 * 8, "{mode:?}: {counts:?}");
        // The attempts are bounded by this count; the pauses between them
        // by `lambda-idempotency: engine::conflict::tests` (no wall-clock bound here).
        assert_eq!(counts.requests, 6 * 8, "{mode:?}: {counts:?}");
        assert_eq!(t.balance(ACCOUNT).await, None, "{mode:?}: nothing credited");

        // Redelivered with the conflicts over: executed now, not replayed
        // and not rejected, each credited once.
        let failed = race(&apps, &batches).await;
        assert!(failed.iter().all(Vec::is_empty), "{mode:?}: {failed:?}");
        assert_eq!(t.balance(ACCOUNT).await, Some(6 * 5), "{mode:?}");
        let again = race(&apps, &batches).await;
        assert!(again.iter().all(Vec::is_empty), "{mode:?}: {again:?}");
        assert_eq!(
            t.balance(ACCOUNT).await,
            Some(6 * 5),
            "{mode:?}: duplicates replayed"
        );
    }
}

/// Claim-then-complete credits with a plain conditional `UpdateItem`: an
/// item in another request's transaction answers it with
/// `TransactionConflictException`, which is a conflict like a cancelled
/// transaction's (nothing applied): the engine sends it again inside the
/// invocation, the payment is credited once and completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicted_plain_credit_is_sent_again() {
    let t = payment_tables("hot-plain").await;
    let apps = instances(&t, CommitMode::ClaimThenComplete, 1).await;
    let plan = FaultPlan::new(1.0, &[Fault::Conflict])
        .max(1)
        .target("UpdateItem");
    moto().inject(&t.marker, &plan).await;
    let failed = race(&apps, &[batch("r", 1, 9)]).await;
    let counts = moto().clear_faults(&t.marker).await;
    eprintln!("[hot items] plain credit: {failed:?}, {counts:?}");
    assert_eq!(counts.get(Fault::Conflict), 1, "{counts:?}");
    // The conflicted credit, the credit sent again, the completion.
    assert_eq!(counts.requests, 3, "{counts:?}");
    assert!(failed.iter().all(Vec::is_empty), "{failed:?}");
    assert_eq!(t.balance(ACCOUNT).await, Some(9), "credited once");
    let again = race(&apps, &[batch("r", 1, 9)]).await;
    assert!(again.iter().all(Vec::is_empty), "{again:?}");
    assert_eq!(t.balance(ACCOUNT).await, Some(9), "the duplicate replayed");
}
