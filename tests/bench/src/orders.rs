//! `bench orders`: the orders function against moto, for (a) unique order
//! events in batches of 10, (b) the same batches redelivered, (c) every
//! event sent again by its producer (new message ids, first delivery: no
//! pre-read hint), (d) one event of (a) sent again in each batch of nine
//! new ones, each with commits per record and per batch side by side. Per
//! scenario: DynamoDB and SQS requests per message by operation (counted by
//! the moto launcher), the function's CPU time per message (in this
//! process: the bench's own work included) and the batch latency (the relay that publishes staged notifications is measured by
//! `bench relay`).

use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use std::time::Duration;
use test_kit::events::{Msg, sqs_event};
use test_kit::{create_idempotency_table, create_table, esm, moto};

use crate::payments::{counts, cpu_time};

const BATCH: usize = 10;

pub(crate) fn batches(ids: &[usize], tag: &str, redelivered: bool) -> Vec<Value> {
    ids.chunks(BATCH)
        .enumerate()
        .map(|(b, chunk)| {
            let msgs: Vec<Msg> = chunk
                .iter()
                .enumerate()
                .map(|(i, id)| {
                    let body = json!({"event_id": format!("evt-{id}"), "order_id": format!("ord-{id}"), "customer_id": format!("cust-{}", id % 50), "amount_cents": 1000 + id % 97, "status": "PLACED"});
                    Msg::new(format!("{tag}-{b}-{i}"), body.to_string())
                })
                .collect();
            let mut event = sqs_event("orders", &msgs);
            if redelivered {
                for r in event["Records"].as_array_mut().into_iter().flatten() {
                    r["attributes"]["ApproximateReceiveCount"] = json!("2");
                }
            }
            event
        })
        .collect()
}

pub async fn run(messages: usize) -> Result<(), Box<dyn std::error::Error>> {
    let messages = messages.clamp(BATCH, 20_000) / BATCH * BATCH;
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let sqs = moto.sqs().await;
    // Per-record and per-batch commits side by side, each on its own tables.
    let mut apps = Vec::new();
    for (label, batch_commits) in [("per-record", false), ("per-batch", true)] {
        let idempotency = create_idempotency_table(&ddb).await;
        let orders_table = create_table(&ddb, "bench-orders", "order_id", None).await;
        let queue = esm::create_queue(&sqs, "bench-notify", true, 5, 30).await;
        let app = crate::orders_app::app(
            ddb.clone(),
            sqs.clone(),
            idempotency,
            orders_table,
            queue.url,
            batch_commits,
        );
        apps.push((label, app));
    }
    let ids: Vec<usize> = (0..messages).collect();
    // (d): per batch, nine new events and one of (a) sent again.
    let one_dup: Vec<usize> = (0..messages / BATCH)
        .flat_map(|b| {
            let first = messages + b * (BATCH - 1);
            (first..first + BATCH - 1).chain([b])
        })
        .collect();
    println!(
        "orders against moto: {messages} messages per scenario, batches of {BATCH}; \
         commits per record (IDEMPOTENCY_BATCH_COMMITS=false) and per batch (the default)"
    );
    println!(
        "| scenario | commits | requests / message (by operation) | CPU / message | p50 batch | p99 batch |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (scenario, events) in [
        ("(a) unique", batches(&ids, "a", false)),
        ("(b) all redelivered", batches(&ids, "b", true)),
        ("(c) resent by the producer", batches(&ids, "c", false)),
        ("(d) 1 duplicate / batch", batches(&one_dup, "d", false)),
    ] {
        for (label, app) in &apps {
            moto.reset_counts().await;
            let cpu0 = cpu_time();
            let mut latencies = Vec::with_capacity(events.len());
            for event in &events {
                let t = std::time::Instant::now();
                let ctx = lambda_idempotency::runtime::local_context(0, Duration::from_secs(30));
                let response = app
                    .handle(LambdaEvent::new(event.clone(), ctx))
                    .await
                    .map_err(|e| e.to_string())?;
                if !response.batch_item_failures.is_empty() {
                    return Err(format!(
                        "{scenario} {label}: failures {:?}",
                        response.batch_item_failures
                    )
                    .into());
                }
                latencies.push(t.elapsed());
            }
            let cpu = cpu_time().saturating_sub(cpu0);
            latencies.sort();
            let requests = counts().await;
            let n = events.len() * BATCH;
            let total: u64 = requests.values().sum();
            let by_op: Vec<String> = requests
                .iter()
                .map(|(op, c)| format!("{op} {:.2}", *c as f64 / n as f64))
                .collect();
            println!(
                "| {scenario} | {label} | **{:.2}** ({}) | {:.3} ms | {:.1} ms | {:.1} ms |",
                total as f64 / n as f64,
                by_op.join(", "),
                cpu.as_secs_f64() * 1000.0 / n as f64,
                crate::percentile(&latencies, 0.5).as_secs_f64() * 1e3,
                crate::percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            );
        }
    }
    Ok(())
}
