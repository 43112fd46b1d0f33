//! `bench orders`: the orders function against moto, for (a) unique order
//! events in batches of 10, (b) the same batches redelivered, (c) every
//! event sent again by its producer (new message ids, first delivery: no
//! pre-read hint). Per scenario: DynamoDB and SQS requests per message by
//! operation (counted by the moto launcher) and the function's CPU time per
//! message (the relay that publishes staged notifications is measured by
//! `bench relay`).

use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use std::time::Duration;
use test_kit::events::{Msg, sqs_event};
use test_kit::{create_idempotency_table, create_table, esm, moto};

use crate::payments::{counts, cpu_time};

const BATCH: usize = 10;

fn batches(ids: &[usize], tag: &str, redelivered: bool) -> Vec<Value> {
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
    let idempotency = create_idempotency_table(&ddb).await;
    let orders_table = create_table(&ddb, "bench-orders", "order_id", None).await;
    let queue = esm::create_queue(&sqs, "bench-notify", true, 5, 30).await;
    let app = crate::orders_app::app(ddb, sqs, idempotency, orders_table, queue.url);
    let ids: Vec<usize> = (0..messages).collect();
    println!("orders against moto: {messages} messages per scenario, batches of {BATCH}");
    println!("| scenario | requests / message (by operation) | CPU / message |");
    println!("| --- | --- | --- |");
    for (scenario, events) in [
        ("(a) unique", batches(&ids, "a", false)),
        ("(b) all redelivered", batches(&ids, "b", true)),
        ("(c) resent by the producer", batches(&ids, "c", false)),
    ] {
        moto.reset_counts().await;
        let cpu0 = cpu_time();
        for event in &events {
            let ctx = shared::runtime::local_context(0, Duration::from_secs(30));
            let response = app
                .handle(LambdaEvent::new(event.clone(), ctx))
                .await
                .map_err(|e| e.to_string())?;
            if !response.batch_item_failures.is_empty() {
                return Err(
                    format!("{scenario}: failures {:?}", response.batch_item_failures).into(),
                );
            }
        }
        let cpu = cpu_time().saturating_sub(cpu0);
        let requests = counts().await;
        let total: u64 = requests.values().sum();
        let by_op: Vec<String> = requests
            .iter()
            .map(|(op, n)| format!("{op} {:.2}", *n as f64 / messages as f64))
            .collect();
        println!(
            "| {scenario} | **{:.2}** ({}) | {:.3} ms |",
            total as f64 / messages as f64,
            by_op.join(", "),
            cpu.as_secs_f64() * 1000.0 / messages as f64
        );
    }
    Ok(())
}
