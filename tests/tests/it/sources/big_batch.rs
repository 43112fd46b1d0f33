//! A large SQS batch on DynamoDB (moto): the orders binary on one event of
//! thousands of records, under Lambda's quota of 1,024 open files (`ulimit
//! -n 1024` around the binary), completes every record with one request
//! each (as a small batch does), within a bounded peak RSS. The full-size
//! run (10,000 records, 5.8 MB) is `bench bigbatch`: moto slows down past a
//! few thousand items per table.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use test_kit::events::orders_event;
use test_kit::runtime_api::function_binary;
use test_kit::{Moto, create_idempotency_table, create_table};

/// Records in the CI-sized batch: more than 1,024 (each in flight once held
/// a descriptor; a batch's default concurrency was its size).
const RECORDS: usize = 2_500;

/// Peak RSS the run may reach (Lambda's smallest functions have 128 MB).
const MAX_RSS_KB: u64 = 64 * 1024;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_under_1024_open_files_completes_with_one_request_a_record() {
    // A server of its own: its request counts are this test's alone.
    let moto = Moto::start(&["--keep-alive"]);
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let orders = create_table(&ddb, "big-orders", "order_id", None).await;
    let event = orders_event(RECORDS, "big");
    let file = std::env::temp_dir().join(format!("big-batch-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_vec(&event).unwrap()).unwrap();
    moto.reset_counts().await;

    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(r#"ulimit -n 1024 && exec "$0" "$@""#)
        .arg(function_binary("orders"))
        .arg("--event")
        .arg(&file)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("IDEMPOTENCY_TABLE", &idempotency)
        .env("ORDERS_TABLE", &orders)
        .env(
            "NOTIFICATIONS_QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo",
        )
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (status, stdout, stderr, peak_kb, nofile) = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        let pid = child.id();
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).map(|_| s)
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            err.read_to_string(&mut s).map(|_| s)
        });
        let (mut peak, mut nofile) = (0, String::new());
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            peak = peak.max(status_kb(pid, "VmHWM:").unwrap_or(0));
            if nofile.is_empty() || !nofile.contains("1024") {
                nofile = std::fs::read_to_string(format!("/proc/{pid}/limits"))
                    .unwrap_or_default()
                    .lines()
                    .find(|l| l.starts_with("Max open files"))
                    .unwrap_or_default()
                    .to_owned();
            }
            if start.elapsed() > Duration::from_secs(120) {
                child.kill().unwrap();
                panic!("orders did not answer within 120 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = out.join().unwrap().unwrap();
        let stderr = err.join().unwrap().unwrap();
        (status, stdout, stderr, peak, nofile)
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&file);
    let limit: Vec<&str> = nofile.split_whitespace().collect();
    assert_eq!(
        limit.get(3..5),
        Some(&["1024", "1024"][..]),
        "the binary ran under the limit: {nofile}"
    );
    assert!(status.success(), "{stderr}");
    let response: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        response["batchItemFailures"].as_array().map(Vec::len),
        Some(0),
        "no record failed: {}",
        &stderr[..stderr.len().min(2_000)]
    );
    assert!(!stderr.contains("os error 24"), "{stderr}");

    // One TransactWriteItems a record (order + outbox + record), as for a
    // 10-record batch; besides, only the store's one table check at start.
    let counts = moto.request_counts().await;
    let dynamodb: Vec<(&String, u64)> = counts
        .iter()
        .filter(|(op, _)| op.starts_with("DynamoDB"))
        .map(|(op, n)| (op, n.as_u64().unwrap()))
        .collect();
    assert_eq!(
        dynamodb,
        vec![
            (&"DynamoDB_20120810.DescribeTable".to_owned(), 1),
            (
                &"DynamoDB_20120810.TransactWriteItems".to_owned(),
                RECORDS as u64
            )
        ],
        "{counts:?}"
    );
    let items = ddb
        .scan()
        .table_name(&orders)
        .select(aws_sdk_dynamodb::types::Select::Count)
        .send()
        .await
        .unwrap();
    assert_eq!(items.count() as usize, RECORDS, "one order item a record");
    assert!(peak_kb > 0, "VmHWM was read");
    eprintln!(
        "big batch: {RECORDS} records, peak RSS {:.1} MB",
        peak_kb as f64 / 1024.0
    );
    assert!(
        peak_kb <= MAX_RSS_KB,
        "peak RSS {peak_kb} KB is over {MAX_RSS_KB} KB"
    );
}
