//! The README's "Run it" command: each function binary run as a process on
//! sample event files (`<function> --event events/x.json events/x.json`),
//! with no table variables (embedded in-memory stores) and, for payments and
//! inventory, against DynamoDB on moto through `AWS_ENDPOINT_URL`, and
//! inventory with its records on Valkey (a real redis-server).
//!
//! The binaries are the ones `tests/run` builds (`cargo build --workspace
//! --bins`) next to this test binary's directory: `target/debug/<name>`.

use aws_sdk_dynamodb::types::AttributeValue;
use test_kit::runtime_api::PipedOutput;
use test_kit::{create_idempotency_table, create_table, moto};

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Variables the binaries read; removed so that the runs use in-memory
/// stores (and are not pointed anywhere by the caller's environment).
const CLEARED: [&str; 23] = [
    "LOCAL_TIMEOUT_SECONDS",
    "MESSAGE_SIGNING_SECRET",
    "MESSAGE_SIGNING_SECRET_PARAMETER",
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_LOG_LEVEL",
    "IDEMPOTENCY_TABLE",
    "IDEMPOTENCY_DISABLED",
    "IDEMPOTENCY_STORE",
    "IDEMPOTENCY_KEY_PREFIX",
    "OUTBOX_ALLOWLIST",
    "VALKEY_URL",
    "REDIS_URL",
    "VALKEY_KEY_PREFIX",
    "ACCOUNTS_TABLE",
    "ORDERS_TABLE",
    "NOTIFICATIONS_QUEUE_URL",
    "STOCK_TABLE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
];

/// How long one run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/debug/<name>`: the directory above this test binary's (`deps/`).
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "the function binary {} is missing: run `tests/run` (it builds the binaries before \
         the tests) or `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// What a run printed.
struct Run {
    success: bool,
    /// stdout, one JSON value per line.
    responses: Vec<Value>,
    /// The JSON log lines of stderr (`AWS_LAMBDA_LOG_FORMAT=JSON`).
    logs: Vec<Value>,
    stderr: String,
}

impl Run {
    /// Log lines whose message starts with `message`, with their request id.
    fn logs_of(&self, message: &str) -> Vec<(String, &Value)> {
        self.logs
            .iter()
            .filter(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(message))
            })
            .map(|l| {
                let request = l["span"]["requestId"].as_str().unwrap_or_default();
                (request.to_owned(), &l["fields"])
            })
            .collect()
    }

    /// The binary refused to start: it failed before answering anything,
    /// saying `why` on stderr. `label` names the case in failures.
    fn assert_refused(&self, why: &str, label: &str) {
        assert!(!self.success, "{label}: {:?}", self.responses);
        assert!(self.responses.is_empty(), "{label}: {:?}", self.responses);
        assert!(self.stderr.contains(why), "{label}: {}", self.stderr);
    }

    /// The per-batch summary counts (`batch processed`) by request id.
    fn batch_summaries(&self) -> BTreeMap<String, [u64; 3]> {
        self.logs_of("batch processed")
            .into_iter()
            .map(|(request, f)| {
                let n = |k: &str| f[k].as_u64().unwrap();
                (request, [n("executed"), n("replayed"), n("failed")])
            })
            .collect()
    }
}

/// Runs `name --event FILE...` from the workspace root with `env` added to
/// a cleared environment; bounded by [`RUN_TIMEOUT`].
fn run_local(name: &str, events: &[&str], env: &[(&str, String)]) -> Run {
    let mut command = Command::new(binary(name));
    command
        .current_dir(workspace_root())
        .arg("--event")
        .args(events)
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in CLEARED {
        command.env_remove(var);
    }
    command.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let mut child = command.spawn().unwrap();
    let output = PipedOutput::read(&mut child);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > RUN_TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{name} did not finish within {RUN_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = output.join();
    Run {
        success: status.success(),
        responses: stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{name}: stdout line is not JSON ({e}): {l}"))
            })
            .collect(),
        // Log lines; anything else (a panic message) stays in `stderr`.
        logs: stderr
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        stderr,
    }
}

fn sample(name: &str) -> Value {
    let text = std::fs::read_to_string(workspace_root().join("events").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Each account's sum over the unique payments of an SQS event file.
fn sums(event: &Value) -> BTreeMap<String, i64> {
    let mut seen = std::collections::HashSet::new();
    let mut sums = BTreeMap::new();
    for r in event["Records"].as_array().unwrap() {
        let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        if seen.insert(body["payment_id"].clone()) {
            *sums
                .entry(body["account_id"].as_str().unwrap().to_owned())
                .or_insert(0) += body["amount_cents"].as_i64().unwrap();
        }
    }
    sums
}

/// A local invocation's time (`LOCAL_TIMEOUT_SECONDS`) that Lambda could
/// not have fails the run before any event is handled, naming the variable
/// and the range; a good one runs as usual.
#[test]
fn a_bad_local_timeout_fails_the_run_with_its_reason() {
    let file = "events/payments-fifo.json";
    for bad in ["0", "901", "30s"] {
        let run = run_local(
            "payments",
            &[file],
            &[("LOCAL_TIMEOUT_SECONDS", bad.to_owned())],
        );
        assert!(!run.success, "{bad}: {}", run.stderr);
        assert!(run.responses.is_empty(), "{bad}: nothing was handled");
        assert!(
            run.stderr.contains("LOCAL_TIMEOUT_SECONDS") && run.stderr.contains("1 to 900"),
            "{bad}: {}",
            run.stderr
        );
    }
    let run = run_local(
        "payments",
        &[file],
        &[("LOCAL_TIMEOUT_SECONDS", "900".to_owned())],
    );
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 1);
}

/// payments, in memory: the second delivery of the batch gets the same
/// response and every record is replayed (the handler did not run, so the
/// balances did not move).
#[test]
fn payments_second_delivery_is_replayed() {
    let file = "events/payments-fifo.json";
    let run = run_local("payments", &[file, file], &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 2, "{:?}", run.responses);
    assert_eq!(
        run.responses[0],
        serde_json::json!({"batchItemFailures": []})
    );
    assert_eq!(run.responses[1], run.responses[0]);
    let records = sample("payments-fifo.json")["Records"]
        .as_array()
        .unwrap()
        .len() as u64;
    assert_eq!(
        run.batch_summaries(),
        BTreeMap::from([
            ("local-1".to_owned(), [records, 0, 0]),
            ("local-2".to_owned(), [0, records, 0]),
        ]),
        "{}",
        run.stderr
    );
    let replayed = run.logs_of("duplicate record");
    assert_eq!(replayed.len() as u64, records);
    assert!(
        replayed
            .iter()
            .all(|(request, f)| request == "local-2" && f["outcome"] == "replayed")
    );
    assert_eq!(run.logs_of("IDEMPOTENCY_TABLE not set").len(), 1);
}

/// ledger, in memory, on the two Kinesis samples: shard 0's producer retry
/// (`pay-2001` twice) credits once and its second delivery replays every
/// record; shard 1's poison record is named (its sequence number), so
/// Lambda would retry that shard from it, and only its account's record
/// after it waits.
#[test]
fn ledger_replays_a_producer_retry_and_names_the_poison_of_its_shard() {
    let (shard0, shard1) = (
        "events/kinesis-payments-shard-0.json",
        "events/kinesis-payments-shard-1.json",
    );
    let run = run_local("ledger", &[shard0, shard0, shard1], &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 3, "{:?}", run.responses);
    let none = serde_json::json!({"batchItemFailures": []});
    assert_eq!(run.responses[0], none);
    assert_eq!(run.responses[1], none);
    let poison =
        &sample("kinesis-payments-shard-1.json")["Records"][1]["kinesis"]["sequenceNumber"];
    assert_eq!(
        run.responses[2],
        serde_json::json!({"batchItemFailures": [{"itemIdentifier": poison}]})
    );
    let records = sample("kinesis-payments-shard-0.json")["Records"]
        .as_array()
        .unwrap()
        .len() as u64;
    let summaries = run.batch_summaries();
    // 4 records, 3 payments: the retry replays its first copy's outcome.
    assert_eq!(summaries["local-1"], [records - 1, 1, 0], "{}", run.stderr);
    assert_eq!(summaries["local-2"], [0, records, 0], "{}", run.stderr);
    let [executed, replayed, failed] = summaries["local-3"];
    // Changed with lanes by partition key (issue 29): `pay-2103` (acct-4,
    // after the poison of acct-2) ran too; it was held back with the shard.
    assert_eq!(
        (executed, replayed),
        (2, 0),
        "the record before the poison of its account, and the other account's"
    );
    assert!(failed >= 1, "{}", run.stderr);
}

/// orders, in memory: each unique event is confirmed once (the memory store
/// logs the outbox entry the relay would publish, under its stable id), the
/// poison record is reported both times, and the second delivery replays
/// everything else.
#[test]
fn orders_second_delivery_is_replayed() {
    let file = "events/orders-standard.json";
    let run = run_local("orders", &[file, file], &[]);
    assert!(run.success, "{}", run.stderr);
    let poison = sample("orders-standard.json")["Records"][3]["messageId"].clone();
    let expected = serde_json::json!({"batchItemFailures": [{"itemIdentifier": poison}]});
    assert_eq!(run.responses, [expected.clone(), expected]);
    assert_eq!(
        run.batch_summaries(),
        BTreeMap::from([
            ("local-1".to_owned(), [3, 1, 1]),
            ("local-2".to_owned(), [0, 4, 1]),
        ]),
        "{}",
        run.stderr
    );
    let notes = run.logs_of("would publish (memory store: no relay)");
    let mut events: Vec<String> = notes
        .iter()
        .map(|(request, f)| {
            assert_eq!(request, "local-1");
            let body: Value = serde_json::from_str(f["body"].as_str().unwrap()).unwrap();
            assert_eq!(body["type"], "OrderConfirmed");
            assert_eq!(f["group_id"], body["order_id"]);
            let event_id = body["event_id"].as_str().unwrap();
            assert_eq!(
                f["outbox_id"].as_str(),
                Some(orders::notification_id(event_id).unwrap().as_str())
            );
            assert!(
                f["destination"]
                    .as_str()
                    .unwrap()
                    .contains(orders::LOCAL_NOTIFICATIONS_QUEUE_URL),
                "{f:?}"
            );
            event_id.to_owned()
        })
        .collect();
    events.sort();
    assert_eq!(events, ["evt-5c1e0a11", "evt-5c1e0a12", "evt-5c1e0a13"]);
}

/// inventory, in memory (sample stock, in the same store as the records, so
/// the decrement commits in one transaction with the record): the order
/// reserves once and its redelivery gets the same response; the order for
/// more than the stock is rejected, and its redelivery replays the rejection.
#[test]
fn inventory_second_delivery_is_replayed() {
    let placed = "events/inventory-order-placed.json";
    let short = "events/inventory-insufficient-stock.json";
    let run = run_local("inventory", &[placed, placed, short, short], &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 4, "{:?}", run.responses);
    assert_eq!(
        run.responses[0],
        serde_json::json!({"order_id": "ord-1001", "sku": "SKU-RED-MUG", "reserved": 2})
    );
    assert_eq!(run.responses[1], run.responses[0]);
    assert_eq!(
        run.responses[2],
        serde_json::json!({
            "rejected": "insufficient stock for SKU-RED-MUG: 1000 requested, 98 available; \
                         order ord-1004"
        })
    );
    assert_eq!(run.responses[3], run.responses[2]);
    let outcomes: Vec<(String, String, bool)> = run
        .logs
        .iter()
        .filter(|l| l["fields"]["event_id"].is_string())
        .map(|l| {
            (
                l["span"]["requestId"].as_str().unwrap().to_owned(),
                l["fields"]["outcome"].as_str().unwrap().to_owned(),
                l["fields"]["replayed"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let o = |r: &str, outcome: &str, replayed| (r.to_owned(), outcome.to_owned(), replayed);
    assert_eq!(
        outcomes,
        [
            o("local-1", "executed", false),
            o("local-2", "replayed", false),
            o("local-3", "rejected", false),
            o("local-4", "rejected", true),
        ],
        "{}",
        run.stderr
    );
    assert_eq!(run.logs_of("IDEMPOTENCY_TABLE not set").len(), 1);
}

/// inventory with only one of its two tables configured refuses to start:
/// the decrement and the record commit in one transaction, so both must be
/// in the same store.
#[test]
fn inventory_needs_both_tables_or_neither() {
    refuses_one_table_alone(
        "inventory",
        "events/inventory-order-placed.json",
        "STOCK_TABLE",
    );
}

/// `function` with only one of `IDEMPOTENCY_TABLE` and its business table
/// `table` set refuses to start, naming both.
fn refuses_one_table_alone(function: &str, event: &str, table: &str) {
    for var in ["IDEMPOTENCY_TABLE", table] {
        let run = run_local(function, &[event], &[(var, "some-table".to_owned())]);
        run.assert_refused(
            &format!("set both IDEMPOTENCY_TABLE and {table}, or neither"),
            &format!("{function}: {var} alone"),
        );
    }
}

/// The functions that commit their effect in one transaction with the
/// record refuse `IDEMPOTENCY_STORE=valkey` at start instead of ignoring it.
#[test]
fn transactional_functions_refuse_the_valkey_store() {
    for (function, event) in [
        ("payments", "events/payments-fifo.json"),
        ("payments-api", "events/payments-api-http.json"),
        ("orders", "events/orders-standard.json"),
        ("ledger", "events/kinesis-payments-shard-0.json"),
    ] {
        let run = run_local(
            function,
            &[event],
            &[
                ("IDEMPOTENCY_STORE", "valkey".to_owned()),
                ("VALKEY_URL", "redis://127.0.0.1:1".to_owned()),
            ],
        );
        run.assert_refused("IDEMPOTENCY_STORE=valkey cannot do that", function);
    }
}

/// orders with only one of its two tables configured refuses to start (the
/// order and the record commit in one transaction), and with both it needs
/// the notifications queue (the destination of every outbox entry).
#[test]
fn orders_needs_both_tables_or_neither_and_a_queue_with_them() {
    let file = "events/orders-standard.json";
    refuses_one_table_alone("orders", file, "ORDERS_TABLE");
    let both = [
        ("IDEMPOTENCY_TABLE", "idem".to_owned()),
        ("ORDERS_TABLE", "orders".to_owned()),
    ];
    let run = run_local("orders", &[file], &both);
    run.assert_refused(
        "NOTIFICATIONS_QUEUE_URL is required with DynamoDB tables",
        "both tables, no queue",
    );
}

/// Without `--event` and outside Lambda, a binary says how to run it.
#[test]
fn usage_without_event_or_runtime_api() {
    let run = Command::new(binary("inventory"))
        .env_remove("AWS_LAMBDA_RUNTIME_API")
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("--event") && stderr.contains("AWS_LAMBDA_RUNTIME_API"),
        "{stderr}"
    );
}

/// payments with `IDEMPOTENCY_TABLE` and `ACCOUNTS_TABLE` set runs on
/// DynamoDB, reached through `AWS_ENDPOINT_URL` (moto): the balances in the
/// table are the sums of the unique payments after two deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_on_dynamodb_through_aws_endpoint_url() {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let accounts = create_table(&ddb, "accounts", "account_id", None).await;
    let mut env = vec![
        ("IDEMPOTENCY_TABLE", idempotency.clone()),
        ("ACCOUNTS_TABLE", accounts.clone()),
    ];
    env.extend(moto.env());
    let file = "events/payments-fifo.json";
    let run = tokio::task::spawn_blocking(move || run_local("payments", &[file, file], &env))
        .await
        .unwrap();
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 2);
    assert!(
        run.responses
            .iter()
            .all(|r| r == &serde_json::json!({"batchItemFailures": []}))
    );
    assert!(
        !run.stderr.contains("kept in memory"),
        "the tables were not used: {}",
        run.stderr
    );
    let records = sample("payments-fifo.json")["Records"]
        .as_array()
        .unwrap()
        .len() as u64;
    assert_eq!(
        run.batch_summaries()["local-2"],
        [0, records, 0],
        "{}",
        run.stderr
    );

    let table =
        payments::Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb.clone(), accounts));
    let expected = sums(&sample("payments-fifo.json"));
    assert!(!expected.is_empty());
    for (account, sum) in expected {
        assert_eq!(
            table.balance(&account).await.unwrap(),
            Some(sum),
            "balance of {account}"
        );
    }
    let items = item_count(&ddb, &idempotency).await;
    assert_eq!(items as u64, records, "one idempotency record per payment");
}

/// The items of `table` (one `Scan`).
async fn item_count(ddb: &aws_sdk_dynamodb::Client, table: &str) -> i32 {
    ddb.scan().table_name(table).send().await.unwrap().count()
}

/// A stock table on moto holding 100 `SKU-RED-MUG`.
async fn stock_table(ddb: &aws_sdk_dynamodb::Client) -> String {
    let stock = create_table(ddb, "stock", "sku", None).await;
    ddb.put_item()
        .table_name(&stock)
        .item("sku", AttributeValue::S("SKU-RED-MUG".into()))
        .item("stock", AttributeValue::N("100".into()))
        .send()
        .await
        .unwrap();
    stock
}

/// inventory's answers to its two samples on [`stock_table`]: the order
/// placed reserves 2 mugs, the order of 1,000 is refused.
fn inventory_answers() -> (Value, Value) {
    let reserved = serde_json::json!({"order_id": "ord-1001", "sku": "SKU-RED-MUG", "reserved": 2});
    let rejected = serde_json::json!({
        "rejected": "insufficient stock for SKU-RED-MUG: 1000 requested, 98 available; \
                     order ord-1004"
    });
    (reserved, rejected)
}

/// inventory with `IDEMPOTENCY_TABLE` and `STOCK_TABLE` set runs on DynamoDB
/// through `AWS_ENDPOINT_URL` (moto): the decrement commits with the record
/// in one transaction there too; the redelivery replays and the refusal is
/// recorded, so the stock is taken once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_on_dynamodb_through_aws_endpoint_url() {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let stock = stock_table(&ddb).await;
    let mut env = vec![
        ("IDEMPOTENCY_TABLE", idempotency.clone()),
        ("STOCK_TABLE", stock.clone()),
    ];
    env.extend(moto.env());
    let placed = "events/inventory-order-placed.json";
    let short = "events/inventory-insufficient-stock.json";
    let run = tokio::task::spawn_blocking(move || {
        run_local("inventory", &[placed, placed, short, short], &env)
    })
    .await
    .unwrap();
    assert!(run.success, "{}", run.stderr);
    assert!(
        !run.stderr.contains("kept in memory"),
        "the tables were not used: {}",
        run.stderr
    );
    let (reserved, rejected) = inventory_answers();
    assert_eq!(
        run.responses,
        [reserved.clone(), reserved, rejected.clone(), rejected]
    );
    let level =
        inventory::StockTable::from_table(lambda_idempotency::Table::dynamodb(ddb.clone(), stock))
            .level("SKU-RED-MUG")
            .await
            .unwrap();
    assert_eq!(level, Some(98));
    let items = item_count(&ddb, &idempotency).await;
    assert_eq!(items, 2, "one idempotency record per event");
}

/// inventory with `IDEMPOTENCY_STORE=valkey` runs its records on a real
/// redis-server and its stock on DynamoDB (moto), in claim-then-complete
/// mode: the redelivery replays and the refusal is recorded, in this process
/// and in the next one (another execution environment), so the stock is
/// taken once; the records are hashes under the configured prefix with a TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_on_valkey_with_stock_on_dynamodb() {
    let moto = moto();
    let valkey = test_kit::valkey::valkey();
    let ddb = moto.dynamodb().await;
    let stock = stock_table(&ddb).await;
    let prefix = format!("{}:", test_kit::unique_name("inventory"));
    let mut env = vec![
        ("IDEMPOTENCY_STORE", "valkey".to_owned()),
        ("VALKEY_URL", valkey.url()),
        ("VALKEY_KEY_PREFIX", prefix.clone()),
        ("STOCK_TABLE", stock.clone()),
    ];
    env.extend(moto.env());
    let placed = "events/inventory-order-placed.json";
    let short = "events/inventory-insufficient-stock.json";
    let first_env = env.clone();
    let run = tokio::task::spawn_blocking(move || {
        run_local("inventory", &[placed, placed, short, short], &first_env)
    })
    .await
    .unwrap();
    assert!(run.success, "{}", run.stderr);
    assert!(!run.stderr.contains("kept in memory"), "{}", run.stderr);
    let (reserved, rejected) = inventory_answers();
    assert_eq!(
        run.responses,
        [
            reserved.clone(),
            reserved.clone(),
            rejected.clone(),
            rejected.clone()
        ]
    );
    // Another process: the records are in Valkey, not in its memory.
    let again = tokio::task::spawn_blocking(move || run_local("inventory", &[placed, short], &env))
        .await
        .unwrap();
    assert!(again.success, "{}", again.stderr);
    assert_eq!(again.responses, [reserved, rejected]);
    let level =
        inventory::StockTable::from_table(lambda_idempotency::Table::dynamodb(ddb.clone(), stock))
            .level("SKU-RED-MUG")
            .await
            .unwrap();
    assert_eq!(level, Some(98), "the stock is taken once");

    let mut conn = valkey.connection().await;
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    keys.sort();
    assert_eq!(keys.len(), 2, "one record per event: {keys:?}");
    for key in &keys {
        assert!(
            key.starts_with(&format!("{prefix}inventory.reserve#")),
            "{key}"
        );
        let status: String = redis::cmd("HGET")
            .arg(key)
            .arg("status")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(status, "COMPLETED");
        let ttl_s: i64 = redis::cmd("TTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let lifetime = inventory::RECORD_LIFETIME.as_secs() as i64;
        assert!(
            ttl_s > lifetime - 60 && ttl_s <= lifetime + 1,
            "{key}: TTL {ttl_s}"
        );
    }
}

/// payments with a signing secret: the sample event's records carry no
/// signature, so each fails (permanently, payload not logged); signed copies
/// of the same records go through.
#[test]
fn payments_checks_signatures_when_a_secret_is_configured() {
    let secret = "local-signing-secret";
    let file = "events/payments-fifo.json";
    let unsigned = run_local(
        "payments",
        &[file],
        &[("MESSAGE_SIGNING_SECRET", secret.to_owned())],
    );
    assert!(unsigned.success, "{}", unsigned.stderr);
    let event = sample("payments-fifo.json");
    let ids: Vec<Value> = event["Records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::json!({"itemIdentifier": r["messageId"]}))
        .collect();
    assert_eq!(
        unsigned.responses,
        [serde_json::json!({"batchItemFailures": ids})]
    );
    assert!(
        !unsigned.stderr.contains("amount_cents"),
        "{}",
        unsigned.stderr
    );

    let verifier = lambda_idempotency::Verifier::new(secret).unwrap();
    let mut signed = event.clone();
    for r in signed["Records"].as_array_mut().unwrap() {
        let signature = verifier.sign(r["body"].as_str().unwrap().as_bytes());
        r["messageAttributes"]["signature"] = serde_json::json!({
            "stringValue": signature, "stringListValues": [], "binaryListValues": [], "dataType": "String"
        });
    }
    let path = std::env::temp_dir().join(format!("signed-{}.json", std::process::id()));
    std::fs::write(&path, signed.to_string()).unwrap();
    let run = run_local(
        "payments",
        &[path.to_str().unwrap()],
        &[("MESSAGE_SIGNING_SECRET", secret.to_owned())],
    );
    let _ = std::fs::remove_file(&path);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(
        run.responses,
        [serde_json::json!({"batchItemFailures": []})]
    );
}

/// payments-api, in memory (docs/sources/http.md's example): the HTTP API sample
/// twice answers 201 then the same 201 replayed; the function URL sample
/// (base64 body, quoted key, IAM caller) answers its own 201.
#[test]
fn payments_api_second_request_is_replayed() {
    let http = "events/payments-api-http.json";
    let url = "events/payments-api-function-url.json";
    let run = run_local("payments-api", &[http, http, url], &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 3, "{:?}", run.responses);
    let [first, again, other] = [&run.responses[0], &run.responses[1], &run.responses[2]];
    assert_eq!(first["statusCode"], 201, "{first}");
    assert_eq!(first["headers"]["location"], "/payments/pay-1001");
    assert_eq!(first["headers"].get("idempotent-replayed"), None);
    assert_eq!(again["statusCode"], 201);
    assert_eq!(again["body"], first["body"], "byte for byte");
    assert_eq!(again["headers"]["idempotent-replayed"], "true");
    assert_eq!(other["statusCode"], 201, "{other}");
    let body: Value = serde_json::from_str(other["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["account_id"], "acct-8");
    assert_eq!(body["amount_cents"], 999);
    assert!(body["payment_id"].as_str().is_some_and(|id| !id.is_empty()));
}

/// payments-api run locally as a tenant's (`--tenant-id`, as Lambda's
/// tenant isolation mode hands it): its requests replay as before, each
/// request's log line names the tenant, and its EMF lines count it under
/// `service` and `tenant`.
#[test]
fn a_local_run_as_a_tenant_names_it_in_logs_and_metrics() {
    let http = "events/payments-api-http.json";
    let env = [("IDEMPOTENCY_METRICS", "on".to_owned())];
    let run = run_local(
        "payments-api",
        &[http, http, "--tenant-id", "tenant-a"],
        &env,
    );
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses.len(), 2, "{:?}", run.responses);
    assert_eq!(run.responses[0]["statusCode"], 201);
    assert_eq!(run.responses[1]["headers"]["idempotent-replayed"], "true");
    let requests: Vec<&Value> = run
        .logs
        .iter()
        .filter(|l| l["fields"]["outcome"].is_string())
        .collect();
    assert_eq!(requests.len(), 2, "{}", run.stderr);
    for line in requests {
        assert_eq!(line["fields"]["tenant"], "tenant-a", "{line}");
    }
    let emf: Vec<&Value> = run.logs.iter().filter(|l| l["_aws"].is_object()).collect();
    assert_eq!(emf.len(), 2, "{}", run.stderr);
    for line in emf {
        assert_eq!(line["tenant"], "tenant-a", "{line}");
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            serde_json::json!([["service"], ["service", "tenant"]])
        );
    }
}

/// payments-api's caller settings from the environment: an unknown
/// anonymous policy stops it at start; the Lambda authorizer sample is 401
/// until the context key that names the caller is set, then 201.
#[test]
fn payments_api_reads_its_caller_settings_from_the_environment() {
    let lambda = "events/payments-api-lambda-authorizer.json";
    let run = run_local(
        "payments-api",
        &[lambda],
        &[(lambda_idempotency::http::ANONYMOUS_ENV, "shared".to_owned())],
    );
    run.assert_refused(
        lambda_idempotency::http::ANONYMOUS_ENV,
        "an unknown anonymous policy",
    );
    let run = run_local("payments-api", &[lambda], &[]);
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses[0]["statusCode"], 401, "{:?}", run.responses);
    let run = run_local(
        "payments-api",
        &[lambda],
        &[(
            lambda_idempotency::http::LAMBDA_PRINCIPAL_ENV,
            "/userId".to_owned(),
        )],
    );
    assert!(run.success, "{}", run.stderr);
    assert_eq!(run.responses[0]["statusCode"], 201, "{:?}", run.responses);
}
