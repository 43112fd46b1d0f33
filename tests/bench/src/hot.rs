//! `bench hot [PAYMENTS]`: one hot account. Several in-process `payments`
//! instances (each its own engine and client, as separate execution
//! environments), each taking SQS batches of 10 payments to the same account,
//! all at once against moto, in the optimistic mode (one `TransactWriteItems`
//! per payment, the credit and the record). Two passes: no conflict, then
//! `TransactionConflict` injected on 25 % of the transactions (moto serves
//! DynamoDB requests one at a time and never answers one itself), so the
//! engine's in-invocation retry shows what it costs. Per pass: credits per
//! second on the one item, transactions sent, conflicts, failed records,
//! p50/p99 batch latency, the balance checked. Printed next to DynamoDB's
//! per-item ceiling: a partition (so one item) serves at most 1,000 write
//! units per second, and a transactional write costs 2 write units per KB,
//! so at most 500 transactional credits per second of one item under 1 KB.

use lambda_idempotency::{DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use payments::{Accounts, App};
use serde_json::json;
use std::time::{Duration, Instant};
use test_kit::events::{Msg, sqs_event};
use test_kit::{Fault, FaultPlan, moto, payment_tables};

use crate::percentile;

const INSTANCES: usize = 8;
const BATCH: usize = 10;
const ACCOUNT: &str = "acct-hot";
/// DynamoDB's write ceiling of one partition (write units per second).
const PARTITION_WCU: f64 = 1000.0;
/// Write units of one transactional write of an item under 1 KB.
const TRANSACTIONAL_WCU: f64 = 2.0;

/// `bench hot [PAYMENTS]`.
pub async fn run(payments: usize) -> Result<(), Box<dyn std::error::Error>> {
    let payments =
        payments.clamp(INSTANCES * BATCH, 20_000) / (INSTANCES * BATCH) * (INSTANCES * BATCH);
    println!(
        "hot item: {payments} payments to one account, {INSTANCES} instances x batches of \
         {BATCH}, optimistic (1 TransactWriteItems per payment)"
    );
    println!(
        "DynamoDB's ceiling for one item: {PARTITION_WCU} write units/s per partition, \
         {TRANSACTIONAL_WCU} per transactional write (< 1 KB): at most {:.0} credits/s",
        PARTITION_WCU / TRANSACTIONAL_WCU
    );
    for conflict_rate in [0.0, 0.25] {
        pass(payments, conflict_rate).await?;
    }
    Ok(())
}

async fn pass(payments: usize, conflict_rate: f64) -> Result<(), Box<dyn std::error::Error>> {
    let t = payment_tables("bench-hot").await;
    let mut apps = Vec::new();
    for _ in 0..INSTANCES {
        let ddb = moto().dynamodb().await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(&t.idempotency)),
            App::config(),
        );
        apps.push(App::new(
            engine,
            Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb, &t.accounts)),
        ));
    }
    let per_instance = payments / INSTANCES;
    if conflict_rate > 0.0 {
        let plan = FaultPlan::new(conflict_rate, &[Fault::Conflict])
            .seed(7)
            .target("TransactWriteItems");
        moto().inject(&t.marker, &plan).await;
    }
    moto().reset_counts().await;
    let started = Instant::now();
    let runs = apps.iter().enumerate().map(|(i, app)| async move {
        let mut latencies = Vec::new();
        let mut failed = 0usize;
        for b in 0..per_instance / BATCH {
            let messages: Vec<Msg> = (0..BATCH)
                .map(|k| {
                    let id = format!("i{i}-b{b}-{k}");
                    let body = json!({"payment_id": id, "account_id": ACCOUNT, "amount_cents": 1});
                    Msg::new(id, body.to_string())
                })
                .collect();
            let ctx = lambda_idempotency::runtime::local_context(0, Duration::from_secs(30));
            let began = Instant::now();
            let response = app
                .handle(LambdaEvent::new(sqs_event("payments", &messages), ctx))
                .await
                .expect("the batch answers");
            latencies.push(began.elapsed());
            failed += response.batch_item_failures.len();
        }
        (latencies, failed)
    });
    let results = futures_util::future::join_all(runs).await;
    let wall = started.elapsed();
    let counts = moto().clear_faults(&t.marker).await;
    let transactions = crate::payments::counts()
        .await
        .get("TransactWriteItems")
        .copied()
        .unwrap_or(0);
    let mut latencies: Vec<Duration> = results.iter().flat_map(|(l, _)| l.clone()).collect();
    latencies.sort();
    let failed: usize = results.iter().map(|(_, f)| f).sum();
    let balance = t.balance(ACCOUNT).await;
    let credited = payments - failed;
    println!(
        "  conflicts {:>4.0} %: {:>6.0} credits/s on one item ({credited} credited in {wall:.2?}), \
         {} transactions, {} conflicts, {failed} failed, batch p50 {:.1?} p99 {:.1?}, balance \
         {balance:?} (expected {credited})",
        conflict_rate * 100.0,
        credited as f64 / wall.as_secs_f64(),
        transactions,
        counts.get(Fault::Conflict),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
    );
    if balance != Some(credited as i64) {
        return Err(format!("balance {balance:?}, expected {credited}").into());
    }
    Ok(())
}
