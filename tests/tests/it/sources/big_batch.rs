//! Batches at the 6 MB invocation cap on DynamoDB (moto): the orders binary
//! on one event of thousands of records, under Lambda's quota of 1,024 open
//! files (`ulimit -n 1024` around the binary), completes every record once
//! within a bounded peak RSS, the new records sharing transactions (batch
//! commits: between records/50 and records/10 `TransactWriteItems`, and no
//! other request but the table check), and the same event delivered again
//! is answered from a pre-read of one `BatchGetItem` per 100 keys, with no
//! write. The bound on records in flight is the pipeline's own tests'
//! (`lambda-idempotency: batch::tests::pipeline::concurrency_is_bounded`); here
//! the open-file limit is what it keeps.
//!
//! Two sizes, one helper: 7,000 records of SQS's real size (receipt handles
//! of a few hundred characters: about 900 bytes a record, the event just
//! under [`MAX_INVOCATION_PAYLOAD`]) and 10,000 smaller ones (559 bytes, a
//! 5.6 MB event). moto answers one request at a time (about 3 ms each), so
//! a run takes longer than the local run's default 30 s: the binary is given
//! `LOCAL_TIMEOUT_SECONDS=900` (a Lambda function's largest timeout).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_kit::events::{MAX_INVOCATION_PAYLOAD, filled_to, orders_event};
use test_kit::runtime_api::{PipedOutput, function_binary};
use test_kit::{Moto, create_idempotency_table, create_table};

/// Peak RSS the function may reach on a batch (Lambda's smallest functions
/// have 128 MB; half of it).
const MAX_RSS_KB: u64 = 64 * 1024;

/// What of [`MAX_RSS_KB`] the release binary's own code may take: its size
/// on disk (8.7 MB for orders), an upper bound of its file-backed pages. The
/// test runs the debug build, whose code alone is about 19 MB resident
/// (`RssFile`), so it checks the anonymous memory (what the batch costs, the
/// same in both builds) against the rest: `MAX_RSS_KB - CODE_KB`.
/// `bench bigbatch` reads the release build's VmHWM itself.
const CODE_KB: u64 = 9 * 1024;

/// How long one run of the binary may take before the test gives up.
const RUN_LIMIT: Duration = Duration::from_secs(300);

fn status_kb(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What one run of the binary gave.
struct Run {
    response: Value,
    stderr: String,
    peak_kb: u64,
    /// The most anonymous memory (`RssAnon`) seen, sampled every 5 ms, or
    /// VmHWM less the code (`RssFile`), whichever is more.
    anon_kb: u64,
    /// File-backed pages (`RssFile`: the binary's code) at the last sample.
    file_kb: u64,
    /// The `Max open files` line of the process's limits.
    nofile: String,
    wall: Duration,
}

/// Runs orders once on `event` (written to a file) under `ulimit -n 1024`,
/// sampling its VmHWM until it exits.
async fn run_orders(moto: &Moto, idempotency: &str, orders: &str, event: &Value) -> Run {
    let file = std::env::temp_dir().join(format!(
        "big-batch-{}-{}.json",
        std::process::id(),
        event["Records"].as_array().map_or(0, Vec::len)
    ));
    std::fs::write(&file, serde_json::to_vec(event).unwrap()).unwrap();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(r#"ulimit -n 1024 && exec "$0" "$@""#)
        .arg(function_binary("orders"))
        .arg("--event")
        .arg(&file)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("IDEMPOTENCY_TABLE", idempotency)
        .env("ORDERS_TABLE", orders)
        .env(
            "NOTIFICATIONS_QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo",
        )
        .env("LOCAL_TIMEOUT_SECONDS", "900")
        .envs(moto.env())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let mut child = command.spawn().unwrap();
        let pid = child.id();
        let output = PipedOutput::read(&mut child);
        let (mut peak_kb, mut anon_kb, mut file_kb, mut nofile) = (0, 0, 0, String::new());
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            peak_kb = peak_kb.max(status_kb(pid, "VmHWM:").unwrap_or(0));
            anon_kb = anon_kb.max(status_kb(pid, "RssAnon:").unwrap_or(0));
            file_kb = status_kb(pid, "RssFile:").unwrap_or(file_kb);
            if !nofile.contains("1024") {
                nofile = std::fs::read_to_string(format!("/proc/{pid}/limits"))
                    .unwrap_or_default()
                    .lines()
                    .find(|l| l.starts_with("Max open files"))
                    .unwrap_or_default()
                    .to_owned();
            }
            if start.elapsed() > RUN_LIMIT {
                child.kill().unwrap();
                panic!("orders did not answer within {RUN_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let wall = start.elapsed();
        let (stdout, stderr) = output.join();
        assert!(status.success(), "{stderr}");
        let response: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("orders answered no JSON ({e}): {stdout} {stderr}"));
        Run {
            response,
            stderr,
            peak_kb,
            // The larger of the sampled peak and VmHWM less the code: a
            // sample can miss the peak by a few ms.
            anon_kb: anon_kb.max(peak_kb.saturating_sub(file_kb)),
            file_kb,
            nofile,
            wall,
        }
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&file);
    run
}

/// The DynamoDB requests moto counted since its last reset, by operation.
async fn dynamodb_requests(moto: &Moto) -> Vec<(String, u64)> {
    let counts = moto.request_counts().await;
    counts
        .iter()
        .filter(|(op, _)| op.starts_with("DynamoDB"))
        .map(|(op, n)| (op.clone(), n.as_u64().unwrap()))
        .collect()
}

/// Checks one run: under the limit, no record failed, no descriptor ran out,
/// a peak RSS (VmHWM) was read, and the anonymous memory is within
/// [`MAX_RSS_KB`] less the release binary's code ([`CODE_KB`]).
fn check_run(what: &str, run: &Run) {
    let limit: Vec<&str> = run.nofile.split_whitespace().collect();
    assert_eq!(
        limit.get(3..5),
        Some(&["1024", "1024"][..]),
        "{what}: the binary ran under the limit: {}",
        run.nofile
    );
    assert_eq!(
        run.response["batchItemFailures"].as_array().map(Vec::len),
        Some(0),
        "{what}: no record failed: {}",
        &run.stderr[..run.stderr.len().min(2_000)]
    );
    assert!(
        !run.stderr.contains("os error 24"),
        "{what}: {}",
        run.stderr
    );
    assert!(
        run.peak_kb > 0 && run.anon_kb > 0,
        "{what}: VmHWM and RssAnon were read"
    );
    eprintln!(
        "big batch: {what}: {:.1} s, peak RSS (VmHWM) {:.1} MB, peak anonymous {:.1} MB, \
         code (RssFile) {:.1} MB",
        run.wall.as_secs_f64(),
        run.peak_kb as f64 / 1024.0,
        run.anon_kb as f64 / 1024.0,
        run.file_kb as f64 / 1024.0,
    );
    assert!(
        run.anon_kb <= MAX_RSS_KB - CODE_KB,
        "{what}: peak anonymous memory {} KB is over {} KB (VmHWM {} KB)",
        run.anon_kb,
        MAX_RSS_KB - CODE_KB,
        run.peak_kb
    );
}

/// One batch of `event`'s records, delivered twice: the first delivery
/// executes every record, the records sharing `TransactWriteItems` (batch
/// commits); the second
/// (`ApproximateReceiveCount` 2) replays every record from one
/// `BatchGetItem` per 100 keys. Each run: no failure, under 1,024 open
/// files, a peak RSS within [`MAX_RSS_KB`] (see [`check_run`]); one order item a record.
async fn batch_completes_once(what: &str, event: Value) {
    let records = event["Records"].as_array().unwrap().len();
    let bytes = serde_json::to_vec(&event).unwrap().len();
    assert!(
        bytes <= MAX_INVOCATION_PAYLOAD,
        "{what}: the event ({bytes} bytes) fits in one invocation"
    );
    // A server of its own: its request counts are this test's alone.
    let moto = Moto::start(&["--keep-alive"]);
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let orders = create_table(&ddb, "big-orders", "order_id", None).await;
    eprintln!("big batch: {what}: {records} records, {bytes} bytes");

    moto.reset_counts().await;
    let first = run_orders(&moto, &idempotency, &orders, &event).await;
    check_run(&format!("{what}, first delivery"), &first);
    // Batch commits: the records share transactions of up to 100 actions
    // (two a record: the order's Put and the record with its outbox), so at
    // least records / 50 of them and at most one per 10 records, as for a
    // 10-record batch; besides, only the store's one table check at start.
    let requests = dynamodb_requests(&moto).await;
    let transactions = requests
        .iter()
        .find(|(op, _)| op == "DynamoDB_20120810.TransactWriteItems")
        .map_or(0, |(_, n)| *n);
    assert_eq!(
        requests,
        vec![
            ("DynamoDB_20120810.DescribeTable".to_owned(), 1),
            (
                "DynamoDB_20120810.TransactWriteItems".to_owned(),
                transactions
            )
        ],
        "{what}, first delivery"
    );
    assert!(
        (records.div_ceil(50) as u64..=records.div_ceil(10) as u64).contains(&transactions),
        "{what}, first delivery: {transactions} transactions for {records} records"
    );
    eprintln!("big batch: {what}: {transactions} transactions for {records} records");

    let mut again = event;
    for r in again["Records"].as_array_mut().unwrap() {
        r["attributes"]["ApproximateReceiveCount"] = json!("2");
    }
    moto.reset_counts().await;
    let second = run_orders(&moto, &idempotency, &orders, &again).await;
    check_run(&format!("{what}, redelivery"), &second);
    // Every record a duplicate: the pre-read (100 keys a BatchGetItem)
    // finds them all completed, and nothing is written.
    assert_eq!(
        dynamodb_requests(&moto).await,
        vec![
            (
                "DynamoDB_20120810.BatchGetItem".to_owned(),
                records.div_ceil(100) as u64
            ),
            ("DynamoDB_20120810.DescribeTable".to_owned(), 1),
        ],
        "{what}, redelivery"
    );

    // Counted a page of 1,000 at a time: moto takes seconds to scan 10,000
    // items, past the client's operation timeout in one request.
    let pages: Vec<_> = ddb
        .scan()
        .table_name(&orders)
        .select(aws_sdk_dynamodb::types::Select::Count)
        .limit(1_000)
        .into_paginator()
        .send()
        .collect()
        .await;
    let count: i32 = pages.into_iter().map(|p| p.unwrap().count()).sum();
    assert_eq!(count as usize, records, "{what}: one order a record");
}

/// 7,000 records of SQS's real size: the 6 MB cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_6_mb_batch_of_7_000_orders_completes_once_under_1024_open_files() {
    let event = filled_to(orders_event(7_000, "cap"), MAX_INVOCATION_PAYLOAD);
    let bytes = serde_json::to_vec(&event).unwrap().len();
    assert!(
        bytes > MAX_INVOCATION_PAYLOAD - 7_000,
        "the event is at the cap: {bytes} bytes"
    );
    batch_completes_once("7,000 orders at 6 MB", event).await;
}

/// 10,000 smaller records (559 bytes each): SQS's largest batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_10_000_smaller_records_completes_once_under_1024_open_files() {
    batch_completes_once("10,000 orders", orders_event(10_000, "ten")).await;
}
