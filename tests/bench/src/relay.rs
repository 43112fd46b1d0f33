//! The outbox relay: completed idempotency records with one outbox message
//! each (half for a FIFO queue, half for a standard queue) written into a
//! table with a stream; the stream mapping emulator (batch 100) invokes the
//! relay binary under a local Runtime API. Reports the relay's requests per
//! published message (moto launcher counts) and the relay process's CPU
//! time per message (from /proc).

use crate::payments::{process_cpu, sibling};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use test_kit::esm::create_queue;
use test_kit::runtime_api::{Invocation, RuntimeApi, lambda_command};
use test_kit::stream_esm::{self, Options};
use test_kit::{create_idempotency_table_with_stream, moto, now_ms, unique_name};

fn count(counts: &serde_json::Map<String, Value>, op: &str) -> u64 {
    counts.get(op).and_then(Value::as_u64).unwrap_or(0)
}

/// One relay run: its process's CPU time, the wall time, the stream
/// mapping's invocations and what the launcher saw.
pub(crate) struct RelayRun {
    pub(crate) cpu: Duration,
    pub(crate) wall: Duration,
    /// The invocations' wall time (invoke to answer), summed.
    pub(crate) busy: Duration,
    pub(crate) invocations: usize,
    pub(crate) skipped: usize,
    pub(crate) counts: serde_json::Map<String, Value>,
    pub(crate) ledger: Vec<Value>,
}

/// Publishes `messages` outbox messages through the relay binary.
pub(crate) async fn measure(messages: usize) -> Result<RelayRun, Box<dyn std::error::Error>> {
    let binary = sibling("outbox-relay")?;
    let ddb = moto().dynamodb().await;
    let sqs = moto().sqs().await;
    let table = format!("{}-idem", unique_name("bench-relay"));
    let arn = create_idempotency_table_with_stream(
        &ddb,
        &table,
        aws_sdk_dynamodb::types::StreamViewType::NewImage,
    )
    .await;
    let fifo = create_queue(&sqs, "bench-relay-n", true, 5, 30).await;
    let standard = create_queue(&sqs, "bench-relay-n", false, 5, 30).await;
    for i in 0..messages {
        let key = format!("orders.confirm#evt-{i}");
        let (url, group) = if i % 2 == 0 {
            (&fifo.url, Some(format!("acct-{}", i % 7)))
        } else {
            (&standard.url, None)
        };
        let mut entry = json!({
            "id": outbox_relay::stable_id(&key, 0),
            "destination": {"sqs": {"queue_url": url}},
            "body": json!({"type": "OrderConfirmed", "order_id": format!("o-{i}")}).to_string(),
        });
        if let Some(g) = group {
            entry["group_id"] = json!(g);
        }
        ddb.put_item()
            .table_name(&table)
            .item("id", aws_sdk_dynamodb::types::AttributeValue::S(key))
            .item(
                "status",
                aws_sdk_dynamodb::types::AttributeValue::S("COMPLETED".into()),
            )
            .item(
                "outbox",
                aws_sdk_dynamodb::types::AttributeValue::S(json!([entry]).to_string()),
            )
            .send()
            .await?;
    }

    let api = RuntimeApi::start().await;
    let mut command = lambda_command(&binary, "outbox-relay", &api);
    moto().apply_env(&mut command);
    let allowlist = serde_json::json!({"orders.confirm": [&fifo.url, &standard.url]}).to_string();
    let mut child = command
        .env("RUST_LOG", "warn")
        .env(outbox_relay::ALLOWLIST_ENV, allowlist)
        .spawn()?;
    api.wait_first_poll(Duration::from_secs(10)).await;
    let pid = child.id();
    let cpu0 = process_cpu(pid);
    moto().reset_counts().await;
    moto().reset_ledger().await;
    let start = Instant::now();
    let streams = moto().dynamodbstreams().await;
    // The invocations' own time, without the mapping's polls between them.
    let busy_ns = std::sync::atomic::AtomicU64::new(0);
    let stats = stream_esm::run(&streams, &arn, &Options::default(), |event| {
        let (api, busy_ns) = (&api, &busy_ns);
        async move {
            let t = Instant::now();
            let answer = api
                .invoke(event, now_ms() + 30_000, Duration::from_secs(30))
                .await;
            busy_ns.fetch_add(
                t.elapsed().as_nanos() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
            match answer {
                Some(Invocation::Response(r)) => Ok(serde_json::from_value(r)?),
                other => Err(format!("relay: {other:?}").into()),
            }
        }
    })
    .await;
    let busy = Duration::from_nanos(busy_ns.into_inner());
    let wall = start.elapsed();
    let cpu = process_cpu(pid).saturating_sub(cpu0);
    let counts = moto().request_counts().await;
    let ledger = moto().ledger().await;
    moto().stop_ledger().await;
    let _ = child.kill();
    let _ = child.wait();
    Ok(RelayRun {
        cpu,
        wall,
        busy,
        invocations: stats.invocations,
        skipped: stats.skipped.len(),
        counts,
        ledger,
    })
}

pub async fn run(messages: usize) -> Result<(), Box<dyn std::error::Error>> {
    let RelayRun {
        cpu,
        wall,
        invocations,
        skipped,
        counts,
        ..
    } = measure(messages).await?;
    let n = messages as f64;
    let per = |op: &str| count(&counts, op) as f64 / n;
    println!(
        "relay, {messages} messages (half FIFO, half standard), stream batch 100, \
         {} invocations, {} skipped, {:.1} s",
        invocations,
        skipped,
        wall.as_secs_f64()
    );
    println!("| per published message | value |");
    println!("| --- | --- |");
    println!(
        "| SendMessageBatch | {:.3} |",
        per("AmazonSQS.SendMessageBatch")
    );
    println!("| SendMessage | {:.3} |", per("AmazonSQS.SendMessage"));
    println!("| PutEvents | {:.3} |", per("AWSEvents.PutEvents"));
    println!(
        "| GetRecords (the mapping's, not billed to the function) | {:.3} |",
        per("DynamoDBStreams_20120810.GetRecords")
    );
    println!(
        "| relay CPU (user + system) | {:.3} ms |",
        cpu.as_secs_f64() * 1e3 / n
    );
    Ok(())
}
