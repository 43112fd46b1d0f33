//! `bench bigbatch`: large SQS batches on DynamoDB (moto).
//!
//! 1. The default concurrency: a 1,000-record batch in process (each record
//!    claims its key and does one `PutItem`), with 16, 32, 64 and 128
//!    records in flight: wall time and the peak of open file descriptors
//!    above the idle process's.
//! 2. The orders function (release build) on 1,000-, 7,000- and
//!    10,000-record events under a 1,024 open-file limit (`prlimit
//!    --nofile=1024`), timed by `/usr/bin/time`: wall time, peak RSS, CPU
//!    per record, DynamoDB requests per record, failed records. 1,000 and
//!    10,000 are `orders_event` records (559 bytes each: 5.6 MB at 10,000);
//!    7,000 are filled to SQS's real record size (receipt handles of a few
//!    hundred characters), just under the 6 MB invocation cap. Each run
//!    gets `LOCAL_TIMEOUT_SECONDS=900` (Lambda's largest timeout): moto
//!    serves about 3 ms a request, one at a time, so 10,000 records take
//!    longer than the local run's default 30 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use lambda_idempotency::sqs::{SqsProcessor, SqsRecord, parse_sqs_event};
use lambda_idempotency::{Config, DynamoDbStore, Idempotency, KeySelector, store::TableConfig};
use serde_json::Value;
use test_kit::events::{MAX_INVOCATION_PAYLOAD, filled_to, orders_event};
use test_kit::{create_idempotency_table, create_table, moto};

use crate::payments::sibling;
use crate::put_key;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Samples this process's open descriptors every millisecond until dropped.
struct FdPeak {
    peak: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FdPeak {
    fn start() -> Self {
        let peak = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                p.fetch_max(open_fds(), Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Relaxed)
    }
}

pub async fn run(records: usize) -> Result<(), Box<dyn std::error::Error>> {
    sweep(records.min(1_000)).await?;
    functions().await
}

/// Part 1: records in flight against wall time and descriptors.
async fn sweep(records: usize) -> Result<(), Box<dyn std::error::Error>> {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let business = create_table(&ddb, "bench-big", "pk", None).await;
    println!("{records}-record batch in process, one claim + one PutItem per record");
    println!("| records in flight | wall | records/s | peak fds above idle |");
    println!("| --- | --- | --- | --- |");
    for concurrency in [16usize, 32, 64, 128] {
        // A table per round: moto slows as a table grows.
        let idempotency = create_idempotency_table(&ddb).await;
        // A fresh client per round: no connection left from the last one.
        let client = aws_sdk_dynamodb::Client::new(&moto.sdk_config().await);
        let engine = Idempotency::new(
            DynamoDbStore::new(client.clone(), TableConfig::new(idempotency)),
            Config::with_prefix("bench.bigbatch").disabled(false),
        );
        let event = parse_sqs_event(orders_event(records, &format!("c{concurrency}")))?;
        let processor =
            SqsProcessor::new(engine, KeySelector::pointer("/event_id")).concurrency(concurrency);
        let idle = open_fds();
        let fds = FdPeak::start();
        let start = Instant::now();
        let (client, business) = (&client, &business);
        let report = processor
            .process(event, None, |r: SqsRecord<Value>| async move {
                put_key(
                    client,
                    business,
                    r.body["order_id"].as_str().unwrap_or_default(),
                )
                .await
            })
            .await;
        let wall = start.elapsed();
        let peak = fds.finish();
        let failed = report.records.iter().filter(|r| r.is_failure()).count();
        if failed > 0 {
            return Err(format!("concurrency {concurrency}: {failed} records failed").into());
        }
        println!(
            "| {concurrency} | {:.2} s | {:.0} | {} |",
            wall.as_secs_f64(),
            records as f64 / wall.as_secs_f64(),
            peak.saturating_sub(idle)
        );
    }
    Ok(())
}

/// Part 2: the orders binary on large events under Lambda's 1,024 files.
async fn functions() -> Result<(), Box<dyn std::error::Error>> {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let binary = sibling("orders")?;
    println!();
    println!(
        "orders (release) on DynamoDB (moto), one event, under prlimit --nofile=1024, \
         LOCAL_TIMEOUT_SECONDS=900"
    );
    println!(
        "| records | event | delivery | wall | peak RSS | CPU per record | DynamoDB requests per record | failed |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (n, at_cap) in [(1_000usize, false), (7_000, true), (10_000, false)] {
        let idempotency = create_idempotency_table(&ddb).await;
        let orders = create_table(&ddb, "bench-orders", "order_id", None).await;
        let mut event = orders_event(n, &format!("big{n}"));
        if at_cap {
            event = filled_to(event, MAX_INVOCATION_PAYLOAD);
        }
        // The first delivery, then the same batch again (every record a
        // duplicate: the pre-read answers them, 100 keys a BatchGetItem).
        for again in [false, true] {
            if again {
                for r in event["Records"].as_array_mut().into_iter().flatten() {
                    r["attributes"]["ApproximateReceiveCount"] = Value::from("2");
                }
            }
            let text = serde_json::to_string(&event)?;
            let file = std::env::temp_dir()
                .join(format!("bench-bigbatch-{}-{n}.json", std::process::id()));
            std::fs::write(&file, &text)?;
            moto.reset_counts().await;
            let mut command = std::process::Command::new("prlimit");
            command
                .arg("--nofile=1024:1024")
                .arg("/usr/bin/time")
                .arg("-f")
                .arg("time: %M %e %U %S")
                .arg(&binary)
                .arg("--event")
                .arg(&file)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("IDEMPOTENCY_TABLE", &idempotency)
                .env("ORDERS_TABLE", &orders)
                .env("LOCAL_TIMEOUT_SECONDS", "900")
                .env(
                    "NOTIFICATIONS_QUEUE_URL",
                    "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo",
                )
                .env("AWS_ENDPOINT_URL", moto.endpoint())
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("RUST_LOG", "warn");
            let output = tokio::task::spawn_blocking(move || command.output()).await??;
            let _ = std::fs::remove_file(&file);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let line = stderr
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("time: "))
                .ok_or_else(|| format!("no /usr/bin/time line: {stderr}"))?;
            let f: Vec<f64> = line
                .split_whitespace()
                .map(|v| v.parse().unwrap_or(0.0))
                .collect();
            let (rss_kb, wall, cpu) = (f[0], f[1], f[2] + f[3]);
            let response: Value = serde_json::from_slice(&output.stdout)
                .map_err(|e| format!("orders answered no JSON ({e}): {stderr}"))?;
            let failed = response["batchItemFailures"].as_array().map_or(0, Vec::len);
            let counts = moto.request_counts().await;
            let requests: u64 = counts
                .iter()
                .filter(|(op, _)| op.starts_with("DynamoDB"))
                .map(|(_, v)| v.as_u64().unwrap_or(0))
                .sum();
            println!(
                "| {n} | {:.1} MB | {} | {wall:.2} s | {:.1} MB | {:.2} ms | {:.2} | {failed} |",
                text.len() as f64 / 1e6,
                if again { "again" } else { "first" },
                rss_kb / 1024.0,
                cpu * 1e3 / n as f64,
                requests as f64 / n as f64,
            );
            eprintln!(
                "bench bigbatch: requests for {n} records: {counts:?}; failed records past the \
             deadline margin (not started): {}",
                stderr.matches("not started").count()
            );
        }
    }
    Ok(())
}
