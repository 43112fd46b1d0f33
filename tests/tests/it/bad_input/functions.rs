//! Bad input through the real functions (`payments` on a FIFO queue,
//! `orders` on a standard queue, idempotency records in DynamoDB on moto):
//! each bad record fails alone, listed in `batchItemFailures` with a clear
//! error in its log line, and every good record of the same batch is applied
//! (exactly once). Then the security properties: HMAC-signed bodies, stored
//! records holding hashes only, keys namespaced per function.
//!
//! The error text is read from the per-record log line (the functions return
//! only the batch response), captured with a thread-local subscriber: the
//! tests run on a current-thread runtime, where every record is processed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::sqs::{
    FailureReason, SqsBatchResponse, SqsProcessor, SqsRecord, parse_sqs_event,
};
use lambda_idempotency::testing::FailedIds as _;
use lambda_idempotency::{
    Config, DynamoDbStore, HandlerError, Idempotency, KeySelector, MemoryStore, Outcome,
    config::OversizedResponse, store::TableConfig,
};
use lambda_idempotency::{key::payload_hash, key::sha256_hex};
use lambda_runtime::LambdaEvent;
use lambda_runtime::tracing::subscriber::fmt::MakeWriter;
use lambda_runtime::tracing::subscriber::util::SubscriberInitExt;
use serde_json::{Value, json};
use test_kit::events::{Msg, sample, sqs_event};
use test_kit::{create_idempotency_table, create_table, moto, unique_name};

// ---------------------------------------------------------------------------
// Tooling: log capture, the functions over moto, table scans.

/// Log lines captured for the current thread (JSON, one object per line).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Logs {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> LogWriter {
        LogWriter(self.0.clone())
    }
}

impl Logs {
    /// Captures this thread's log lines until the guard drops.
    fn start() -> (Self, impl Drop) {
        let logs = Self::default();
        let guard = lambda_runtime::tracing::subscriber::fmt()
            .json()
            .with_max_level(lambda_runtime::tracing::Level::INFO)
            .with_writer(logs.clone())
            .finish()
            .set_default();
        (logs, guard)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }

    fn lines(&self) -> Vec<Value> {
        self.text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The per-record lines of message `id` (its `fields`).
    fn record_lines(&self, id: &str) -> Vec<Value> {
        self.lines()
            .into_iter()
            .map(|l| l["fields"].clone())
            .filter(|f| f["message_id"] == id && f.get("outcome").is_some())
            .collect()
    }

    /// The outcomes logged for message `id`.
    fn outcomes(&self, id: &str) -> Vec<String> {
        self.record_lines(id)
            .iter()
            .map(|f| f["outcome"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The errors logged for message `id` (failed records).
    fn errors(&self, id: &str) -> Vec<String> {
        self.record_lines(id)
            .iter()
            .filter(|f| f["outcome"] == "failed")
            .map(|f| f["error"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

fn context() -> lambda_runtime::Context {
    lambda_idempotency::runtime::local_context(0, Duration::from_secs(30))
}

/// `payments` with its idempotency and accounts tables on moto.
struct Payments {
    app: payments::App,
    ddb: aws_sdk_dynamodb::Client,
    table: String,
}

async fn payments_app(config: Config) -> Payments {
    let ddb = moto().dynamodb().await;
    let table = create_idempotency_table(&ddb).await;
    let accounts = create_table(&ddb, "accounts", "account_id", None).await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(table.clone())),
        config.disabled(false),
    );
    let app = payments::App::new(
        engine,
        payments::Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb.clone(), accounts)),
    );
    Payments { app, ddb, table }
}

impl Payments {
    async fn handle(&self, event: Value) -> Result<SqsBatchResponse, lambda_runtime::Error> {
        self.app.handle(LambdaEvent::new(event, context())).await
    }

    async fn balance(&self, account: &str) -> Option<i64> {
        self.app.accounts().balance(account).await.unwrap()
    }
}

/// `orders` with its idempotency table (or `table`) and its orders table on
/// moto; notifications are what the records' outboxes stage for the relay.
struct Orders {
    app: orders::App,
    ddb: aws_sdk_dynamodb::Client,
    table: String,
    orders_table: String,
}

async fn orders_app(table: Option<String>) -> Orders {
    let ddb = moto().dynamodb().await;
    let table = match table {
        Some(t) => t,
        None => create_idempotency_table(&ddb).await,
    };
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(table.clone())),
        orders::App::config().disabled(false),
    );
    let orders_table = test_kit::create_table(&ddb, "orders", "order_id", None).await;
    let app = orders::App::new(
        engine,
        lambda_idempotency::Table::dynamodb(ddb.clone(), &orders_table),
        "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo",
    );
    Orders {
        app,
        ddb,
        table,
        orders_table,
    }
}

impl Orders {
    async fn handle(&self, event: Value) -> Result<SqsBatchResponse, lambda_runtime::Error> {
        self.app.handle(LambdaEvent::new(event, context())).await
    }

    /// Notifications staged for the relay (in the records' outboxes),
    /// counted by event id.
    async fn notified(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for item in scan(&self.ddb, &self.table).await {
            let Some(AttributeValue::S(outbox)) = item.get("outbox") else {
                continue;
            };
            for entry in lambda_idempotency::outbox::decode(outbox).unwrap() {
                let body: orders::OrderConfirmed =
                    serde_json::from_str(&entry.message.body).unwrap();
                assert_eq!(entry.id, orders::notification_id(&body.event_id).unwrap());
                *counts.entry(body.event_id).or_insert(0) += 1;
            }
        }
        counts
    }
}

type Item = HashMap<String, AttributeValue>;

async fn scan(ddb: &aws_sdk_dynamodb::Client, table: &str) -> Vec<Item> {
    ddb.scan()
        .table_name(table)
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .items()
        .to_vec()
}

/// An attribute's value as text (what a reader of the table would see).
fn text_of(value: &AttributeValue) -> String {
    match value {
        AttributeValue::S(s) | AttributeValue::N(s) => s.clone(),
        AttributeValue::B(b) => String::from_utf8_lossy(b.as_ref()).into_owned(),
        other => format!("{other:?}"),
    }
}

fn s<'a>(item: &'a Item, name: &str) -> &'a str {
    match item.get(name) {
        Some(AttributeValue::S(s)) => s,
        other => panic!("{name}: {other:?} in {item:?}"),
    }
}

/// `prefix#` followed by 64 lowercase hex characters.
fn assert_hashed_id(id: &str, prefix: &str) {
    let hash = id
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('#'))
        .unwrap_or_else(|| panic!("{id:.80} does not start with {prefix}#"));
    assert_eq!(hash.len(), 64, "{id:.80}");
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{id:.80}"
    );
}

fn pay(payment_id: &str, account: &str, amount: u64) -> String {
    json!({"payment_id": payment_id, "account_id": account, "amount_cents": amount}).to_string()
}

fn order(event_id: &str, order_id: &str) -> String {
    json!({"event_id": event_id, "order_id": order_id, "customer_id": "cust-1",
           "amount_cents": 4999, "status": "PLACED"})
    .to_string()
}

/// Removes the `messageId` of record `i`.
fn without_message_id(mut event: Value, i: usize) -> Value {
    event["Records"][i]
        .as_object_mut()
        .unwrap()
        .remove("messageId");
    event
}

// ---------------------------------------------------------------------------
// The table of bad records.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Function {
    Payments,
    Orders,
}

/// One record of a case: `good` records must be applied exactly once (or,
/// held back behind a bad one, reported for redelivery).
struct Rec {
    id: String,
    body: String,
    group: Option<String>,
    good: bool,
}

fn good(id: &str, body: String, group: Option<&str>) -> Rec {
    Rec {
        id: id.into(),
        body,
        group: group.map(str::to_owned),
        good: true,
    }
}

fn bad(id: &str, body: impl Into<String>, group: Option<&str>) -> Rec {
    Rec {
        id: id.into(),
        body: body.into(),
        group: group.map(str::to_owned),
        good: false,
    }
}

struct Case {
    name: &'static str,
    function: Function,
    records: Vec<Rec>,
    /// The exact `batchItemFailures`, each with a piece of its logged error.
    failed: Vec<(&'static str, &'static str)>,
}

/// The payments cases: every record in its own account (its FIFO group),
/// unless the case is about groups.
fn payment_cases() -> Vec<Case> {
    let p = Function::Payments;
    let ok = |id: &str, n: u64| {
        let account = format!("acct-{id}");
        good(
            id,
            pay(&format!("pay-{id}"), &account, 100 + n),
            Some(&account),
        )
    };
    let huge_key = "k".repeat(200_000);
    let mega_key = "m".repeat(1 << 20);
    vec![
        Case {
            name: "payments: body not JSON",
            function: p,
            records: vec![ok("a", 1), bad("bad", "not json {", Some("acct-x")), ok("b", 2)],
            failed: vec![("bad", "body of message bad is not JSON")],
        },
        Case {
            name: "payments: JSON array",
            function: p,
            records: vec![
                ok("a", 1),
                bad(
                    "bad",
                    r#"[{"payment_id":"pay-1","account_id":"acct-x","amount_cents":5}]"#,
                    Some("acct-x"),
                ),
            ],
            // serde reads a struct from an array field by field: the first
            // element is taken as payment_id.
            failed: vec![(
                "bad",
                "does not parse as payments::Payment: invalid type: map, expected a string",
            )],
        },
        Case {
            name: "payments: JSON string",
            function: p,
            records: vec![bad("bad", r#""pay-1""#, Some("acct-x")), ok("a", 1)],
            failed: vec![("bad", "does not parse as payments::Payment: invalid type: string")],
        },
        Case {
            name: "payments: missing key",
            function: p,
            records: vec![
                ok("a", 1),
                bad("bad", r#"{"account_id":"acct-x","amount_cents":5}"#, Some("acct-x")),
            ],
            failed: vec![("bad", "missing field `payment_id`")],
        },
        Case {
            name: "payments: key is an object",
            function: p,
            records: vec![
                ok("a", 1),
                bad(
                    "bad",
                    r#"{"payment_id":{"id":"pay-1"},"account_id":"acct-x","amount_cents":5}"#,
                    Some("acct-x"),
                ),
            ],
            failed: vec![("bad", "invalid type: map, expected a string")],
        },
        Case {
            name: "payments: key is a boolean",
            function: p,
            records: vec![
                ok("a", 1),
                bad(
                    "bad",
                    r#"{"payment_id":true,"account_id":"acct-x","amount_cents":5}"#,
                    Some("acct-x"),
                ),
            ],
            failed: vec![("bad", "invalid type: boolean `true`, expected a string")],
        },
        Case {
            name: "payments: empty-string key",
            function: p,
            records: vec![bad("bad", pay("", "acct-x", 5), Some("acct-x")), ok("a", 1)],
            failed: vec![("bad", "no usable idempotency key: idempotency key is empty")],
        },
        Case {
            name: "payments: a 200 KB key is a key like any other",
            function: p,
            records: vec![
                good("huge", pay(&huge_key, "acct-h", 7), Some("acct-h")),
                ok("a", 1),
            ],
            failed: vec![],
        },
        Case {
            name: "payments: a 1 MB key makes a body over the limit",
            function: p,
            records: vec![
                bad("mega", pay(&mega_key, "acct-x", 7), Some("acct-x")),
                ok("a", 1),
            ],
            failed: vec![("mega", "over the 262144-byte limit")],
        },
        Case {
            name: "payments: body over 256 KB, and one just under",
            function: p,
            records: vec![
                bad(
                    "big",
                    json!({"payment_id": "pay-big", "account_id": "acct-x", "amount_cents": 5,
                           "note": "n".repeat(300_000)})
                    .to_string(),
                    Some("acct-x"),
                ),
                good(
                    "under",
                    json!({"payment_id": "pay-under", "account_id": "acct-u", "amount_cents": 9,
                           "note": "n".repeat(250_000)})
                    .to_string(),
                    Some("acct-u"),
                ),
            ],
            failed: vec![("big", "bytes is over the 262144-byte limit")],
        },
        Case {
            name: "payments: duplicate messageIds, same body",
            function: p,
            records: vec![
                good("m-dup", pay("pay-d", "acct-d", 5), Some("acct-d")),
                ok("a", 1),
                good("m-dup", pay("pay-d", "acct-d", 5), Some("acct-d")),
            ],
            failed: vec![],
        },
        Case {
            name: "payments: duplicate messageIds, failing, reported once",
            function: p,
            records: vec![
                bad("m-dup", "not json", Some("acct-x")),
                ok("a", 1),
                bad("m-dup", "not json", Some("acct-x")),
            ],
            failed: vec![("m-dup", "is not JSON")],
        },
        Case {
            name: "payments: FIFO record without MessageGroupId",
            function: p,
            records: vec![
                ok("a", 1),
                bad("no-group", pay("pay-n", "acct-n", 5), None),
                // Good, but after a record whose group is unknown: held back
                // and reported, not lost.
                bad("after", pay("pay-after", "acct-after", 5), Some("acct-after")),
            ],
            failed: vec![
                ("no-group", "FIFO record without a MessageGroupId"),
                ("after", "not run: an earlier record it must follow (no-group) failed"),
            ],
        },
        Case {
            name: "payments: unicode, escaped and reordered copies in one batch",
            function: p,
            records: vec![
                good(
                    "u-1",
                    r#"{"payment_id":"pay-ünï-😀","account_id":"acct-ü","amount_cents":70}"#.into(),
                    Some("acct-ü"),
                ),
                good(
                    "u-2",
                    r#"{"amount_cents":70,"account_id":"acct-\u00fc","payment_id":"pay-\u00fcn\u00ef-\ud83d\ude00"}"#
                        .into(),
                    Some("acct-ü"),
                ),
            ],
            failed: vec![],
        },
    ]
}

/// The orders cases (standard queue: no groups).
fn order_cases() -> Vec<Case> {
    let o = Function::Orders;
    let ok = |id: &str| good(id, order(&format!("evt-{id}"), &format!("ord-{id}")), None);
    vec![
        Case {
            name: "orders: body not JSON",
            function: o,
            records: vec![ok("a"), bad("bad", "{\"event_id\": \"evt-", None), ok("b")],
            failed: vec![("bad", "body of message bad is not JSON")],
        },
        Case {
            name: "orders: JSON array and JSON string",
            function: o,
            records: vec![
                bad("array", r#"["evt-1"]"#, None),
                ok("a"),
                bad("string", r#""evt-1""#, None),
            ],
            failed: vec![
                ("array", "does not parse as orders::OrderEvent: invalid length 1, expected struct OrderEvent"),
                ("string", "does not parse as orders::OrderEvent: invalid type: string"),
            ],
        },
        Case {
            name: "orders: missing key",
            function: o,
            records: vec![
                ok("a"),
                bad(
                    "bad",
                    r#"{"order_id":"ord-x","customer_id":"c","amount_cents":1,"status":"PLACED"}"#,
                    None,
                ),
            ],
            failed: vec![("bad", "missing field `event_id`")],
        },
        Case {
            name: "orders: key of the wrong type",
            function: o,
            records: vec![
                bad(
                    "object",
                    r#"{"event_id":{"id":1},"order_id":"ord-x","customer_id":"c","amount_cents":1,"status":"PLACED"}"#,
                    None,
                ),
                bad(
                    "bool",
                    r#"{"event_id":false,"order_id":"ord-y","customer_id":"c","amount_cents":1,"status":"PLACED"}"#,
                    None,
                ),
                ok("a"),
            ],
            failed: vec![
                ("object", "invalid type: map, expected a string"),
                ("bool", "invalid type: boolean `false`, expected a string"),
            ],
        },
        Case {
            name: "orders: empty-string key",
            function: o,
            records: vec![ok("a"), bad("bad", order("", "ord-x"), None)],
            failed: vec![("bad", "no usable idempotency key: idempotency key is empty")],
        },
        Case {
            name: "orders: body over 256 KB",
            function: o,
            records: vec![
                ok("a"),
                bad(
                    "big",
                    json!({"event_id": "evt-big", "order_id": "ord-big", "customer_id": "c",
                           "amount_cents": 1, "status": "PLACED", "note": "n".repeat(262_144)})
                    .to_string(),
                    None,
                ),
            ],
            failed: vec![("big", "over the 262144-byte limit")],
        },
        Case {
            name: "orders: duplicate messageIds",
            function: o,
            records: vec![
                good("m-dup", order("evt-d", "ord-d"), None),
                bad("m-bad", "nope", None),
                good("m-dup", order("evt-d", "ord-d"), None),
                bad("m-bad", "nope", None),
            ],
            failed: vec![("m-bad", "is not JSON")],
        },
        Case {
            name: "orders: unicode, escaped and reordered copies in one batch",
            function: o,
            records: vec![
                good(
                    "u-1",
                    r#"{"event_id":"evt-ü","order_id":"ord-ü","customer_id":"Zoë 😀","amount_cents":5,"status":"PLACED"}"#.into(),
                    None,
                ),
                good(
                    "u-2",
                    "{ \"status\": \"PLACED\",\n  \"amount_cents\": 5, \"customer_id\": \"Zo\\u00eb \\ud83d\\ude00\",\n  \"order_id\": \"ord-\\u00fc\", \"event_id\": \"evt-\\u00fc\" }".into(),
                    None,
                ),
            ],
            failed: vec![],
        },
    ]
}

fn case_event(case: &Case) -> Value {
    let queue = match case.function {
        Function::Payments => "payments.fifo",
        Function::Orders => "orders",
    };
    let msgs: Vec<Msg> = case
        .records
        .iter()
        .map(|r| {
            let m = Msg::new(r.id.clone(), r.body.clone());
            match &r.group {
                Some(g) => m.in_group(g.clone()),
                None => m,
            }
        })
        .collect();
    sqs_event(queue, &msgs)
}

/// Runs one case on a fresh function and checks: the exact failures, their
/// logged errors, that every good record was applied once and no bad one
/// left an effect.
async fn run_case(case: &Case, logs: &Logs) {
    let name = case.name;
    logs.clear();
    let event = case_event(case);
    let expected: Vec<&str> = case.failed.iter().map(|(id, _)| *id).collect();
    let parsed: Vec<(bool, Value)> = case
        .records
        .iter()
        .map(|r| (r.good, serde_json::from_str(&r.body).unwrap_or(Value::Null)))
        .collect();
    match case.function {
        Function::Payments => {
            let p = payments_app(payments::App::config()).await;
            let response = p
                .handle(event)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(response.failed_ids(), expected, "{name}");
            // Every good record applied once; nothing from the bad ones.
            let mut expected_balance: BTreeMap<String, i64> = BTreeMap::new();
            let mut seen = BTreeSet::new();
            for (is_good, body) in &parsed {
                let Some(account) = body["account_id"].as_str() else {
                    continue;
                };
                let entry = expected_balance.entry(account.to_owned()).or_insert(0);
                if *is_good && seen.insert(body["payment_id"].to_string()) {
                    *entry += body["amount_cents"].as_i64().unwrap();
                }
            }
            for (account, sum) in expected_balance {
                let want = (sum > 0).then_some(sum);
                assert_eq!(p.balance(&account).await, want, "{name}: {account}");
            }
        }
        Function::Orders => {
            let o = orders_app(None).await;
            let response = o
                .handle(event)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(response.failed_ids(), expected, "{name}");
            let mut want_notified = BTreeMap::new();
            for (is_good, body) in &parsed {
                let Some(order_id) = body["order_id"].as_str() else {
                    continue;
                };
                let stored = orders::table::get(o.app.orders(), order_id).await.unwrap();
                if *is_good {
                    let stored = stored.unwrap_or_else(|| panic!("{name}: {order_id} lost"));
                    assert_eq!(serde_json::to_value(&stored).unwrap(), *body, "{name}");
                    want_notified.insert(stored.event_id, 1);
                } else {
                    assert_eq!(stored, None, "{name}: {order_id} from a bad record");
                }
            }
            assert_eq!(
                o.notified().await,
                want_notified,
                "{name}: one notification each"
            );
        }
    }
    // Each failure's log line says why; each good record's says it was done.
    for (id, why) in &case.failed {
        let errors = logs.errors(id);
        assert!(
            errors.iter().any(|e| e.contains(why)),
            "{name}: {id}: expected {why:?} in {errors:?}"
        );
    }
    for r in case.records.iter().filter(|r| r.good) {
        let outcomes = logs.outcomes(&r.id);
        assert!(
            !outcomes.is_empty() && outcomes.iter().all(|o| o == "executed" || o == "replayed"),
            "{name}: {}: {outcomes:?}",
            r.id
        );
    }
    // Nothing lost: every record is either done (good) or reported.
    for r in &case.records {
        assert!(
            r.good || expected.contains(&r.id.as_str()),
            "{name}: {} neither applied nor reported",
            r.id
        );
    }
}

/// Every kind of bad record through both functions: it fails alone, with a
/// clear error, and the good records of its batch are applied once.
#[tokio::test]
async fn bad_records_fail_alone_with_a_clear_error() {
    let (logs, _guard) = Logs::start();
    for case in payment_cases().iter().chain(order_cases().iter()) {
        run_case(case, &logs).await;
    }
}

/// A record without `messageId`: processed when it succeeds; when it fails
/// it cannot be named in `batchItemFailures`, so the invocation fails with an
/// error naming its position and Lambda retries the whole batch, in which
/// the good records replay (applied once).
#[tokio::test]
async fn a_record_without_message_id() {
    let (logs, _guard) = Logs::start();
    let p = payments_app(payments::App::config()).await;
    let event = without_message_id(
        sqs_event(
            "payments.fifo",
            &[
                Msg::new("m-1", pay("pay-n1", "acct-n1", 100)).in_group("acct-n1"),
                Msg::new("", pay("pay-n2", "acct-n2", 200)).in_group("acct-n2"),
            ],
        ),
        1,
    );
    assert!(event["Records"][1].get("messageId").is_none());
    let response = p.handle(event).await.unwrap();
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(p.balance("acct-n1").await, Some(100));
    assert_eq!(p.balance("acct-n2").await, Some(200));

    let event = without_message_id(
        sqs_event(
            "payments.fifo",
            &[
                Msg::new("m-3", pay("pay-n3", "acct-n3", 300)).in_group("acct-n3"),
                Msg::new("", "not json").in_group("acct-x"),
                Msg::new("m-5", pay("pay-n5", "acct-n5", 500)).in_group("acct-n5"),
            ],
        ),
        1,
    );
    for delivery in 0..2 {
        logs.clear();
        let err = p.handle(event.clone()).await.unwrap_err().to_string();
        for part in [
            "record at position 1 failed",
            "record #1 (no messageId) is not JSON",
            "has no messageId, so it cannot be listed in batchItemFailures",
            "Lambda retries the whole batch",
        ] {
            assert!(err.contains(part), "{part:?} not in {err}");
        }
        let expected = if delivery == 0 {
            "executed"
        } else {
            "replayed"
        };
        assert_eq!(logs.outcomes("m-3"), [expected]);
        assert_eq!(logs.outcomes("m-5"), [expected]);
        assert_eq!(logs.outcomes("record #1 (no messageId)"), ["failed"]);
        assert_eq!(p.balance("acct-n3").await, Some(300), "applied once");
        assert_eq!(p.balance("acct-n5").await, Some(500), "applied once");
    }
    assert_eq!(p.balance("acct-x").await, None);
}

/// An event that is neither SQS nor EventBridge (or the other one) fails the
/// invocation with an error naming what was received, and touches nothing.
#[tokio::test]
async fn events_of_the_wrong_kind_fail_the_invocation_clearly() {
    let p = payments_app(payments::App::config()).await;
    let o = orders_app(None).await;
    let sns = json!({"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0",
                                  "Sns": {"Message": "hello", "MessageId": "sns-1"}}]});
    let s3 = json!({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                                 "s3": {"bucket": {"name": "b"}}}]});
    let not_sqs = [
        (
            sample("inventory-order-placed.json"),
            "this is an EventBridge event (detail-type \"OrderPlaced\"), not an SQS batch",
        ),
        (sns.clone(), "record 0 comes from aws:sns, expected aws:sqs"),
        (s3, "record 0 comes from aws:s3, expected aws:sqs"),
        (json!({"hello": "world"}), "no Records array"),
        (json!({"Records": "x"}), "Records is a string, not an array"),
        (json!([1, 2]), "no Records array in an array"),
        (json!(42), "no Records array in a number"),
        (Value::Null, "no Records array in null"),
    ];
    for (event, why) in not_sqs {
        for err in [
            p.handle(event.clone()).await.unwrap_err().to_string(),
            o.handle(event.clone()).await.unwrap_err().to_string(),
        ] {
            assert!(
                err.starts_with("not an SQS event: ") && err.contains(why),
                "{why:?} not in {err}"
            );
        }
    }
    assert!(scan(&p.ddb, &p.table).await.is_empty());
    assert!(scan(&o.ddb, &o.table).await.is_empty());
    assert!(scan(&o.ddb, &o.orders_table).await.is_empty());
    assert!(o.notified().await.is_empty());

    // The EventBridge function, given something else.
    let store = MemoryStore::new();
    let inventory = inventory::App::new(
        Idempotency::new(store.clone(), inventory::App::config().disabled(false)),
        inventory::StockTable::sample(store.clone()),
    );
    let not_eventbridge = [
        (sample("orders-standard.json"), "it has a Records array"),
        (sns, "it has a Records array"),
        (
            json!({"hello": "world"}),
            "missing detail-type, source, detail",
        ),
        (json!("text"), "expected a JSON object, got a string"),
    ];
    for (event, why) in not_eventbridge {
        let err = inventory
            .handle(LambdaEvent::new(event.into(), context()))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("not an EventBridge event: ") && err.contains(why),
            "{why:?} not in {err}"
        );
    }
}

/// A redelivery of the same payment written differently (keys reordered,
/// unicode escaped, whitespace) is the same payload: it replays. Another
/// amount under the same id is a payload mismatch (the check is live).
#[tokio::test]
async fn reordered_and_escaped_redeliveries_replay() {
    let (logs, _guard) = Logs::start();
    let p = payments_app(payments::App::config()).await;
    let deliveries = [
        (
            "m-1",
            r#"{"payment_id":"pay-ünï-😀","account_id":"acct-ü","amount_cents":700}"#,
            "executed",
        ),
        (
            "m-2",
            r#"{"amount_cents":700,"account_id":"acct-\u00fc","payment_id":"pay-\u00fcn\u00ef-\ud83d\ude00"}"#,
            "replayed",
        ),
        (
            "m-3",
            "{\n  \"account_id\" : \"acct-ü\",\n  \"amount_cents\" : 700,\n  \"payment_id\" : \"pay-\\u00FCnï-😀\"\n}",
            "replayed",
        ),
        (
            "m-4",
            r#"{"payment_id":"pay-ünï-😀","account_id":"acct-ü","amount_cents":701}"#,
            "failed",
        ),
    ];
    for (id, body, outcome) in deliveries {
        logs.clear();
        let event = sqs_event("payments.fifo", &[Msg::new(id, body).in_group("acct-ü")]);
        let response = p.handle(event).await.unwrap();
        assert_eq!(logs.outcomes(id), [outcome], "{id}");
        if outcome == "failed" {
            assert_eq!(response.failed_ids(), [id]);
            let errors = logs.errors(id);
            assert!(
                errors[0].contains("already used with a different payload"),
                "{errors:?}"
            );
        } else {
            assert!(
                response.batch_item_failures.is_empty(),
                "{id}: {response:?}"
            );
        }
        assert_eq!(p.balance("acct-ü").await, Some(700), "{id}");
    }
    assert_eq!(scan(&p.ddb, &p.table).await.len(), 1);
}

/// Huge keys are hashed: the record id is `prefix#sha256`, whatever the
/// key's size, and the raw key is stored nowhere.
#[tokio::test]
async fn huge_keys_are_hashed_never_stored() {
    // Through payments (a 200 KB key fits in a body under the limit), with
    // responses off (the response would echo the payment id).
    let p = payments_app(payments::App::config().store_responses(false)).await;
    let key = "huge-key-".repeat(200_000 / 9);
    let event = sqs_event(
        "payments.fifo",
        &[Msg::new("m-1", pay(&key, "acct-h", 7)).in_group("acct-h")],
    );
    for _ in 0..2 {
        let response = p.handle(event.clone()).await.unwrap();
        assert!(response.batch_item_failures.is_empty());
    }
    assert_eq!(p.balance("acct-h").await, Some(7), "applied once");
    let items = scan(&p.ddb, &p.table).await;
    assert_eq!(items.len(), 1);
    let id = s(&items[0], "id");
    assert_hashed_id(id, "payments.credit");
    assert_eq!(
        id,
        format!("payments.credit#{}", sha256_hex(key.as_bytes()))
    );
    for (name, value) in &items[0] {
        let text = text_of(value);
        assert!(!text.contains("huge-key-huge-key"), "{name} holds the key");
        assert!(text.len() <= 80, "{name} is {} bytes", text.len());
    }

    // A 1 MB key, through a processor that accepts 2 MB bodies.
    let ddb = moto().dynamodb().await;
    let table = create_idempotency_table(&ddb).await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(table.clone())),
        Config::with_prefix("bad_input.huge").disabled(false),
    );
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/id")).max_body_bytes(2 << 20);
    let mega = "mega-key-".repeat((1 << 20) / 9 + 1);
    assert!(mega.len() > 1 << 20);
    let body = json!({"id": mega}).to_string();
    let event = parse_sqs_event(sqs_event("plain", &[Msg::new("m-1", body)])).unwrap();
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let handler = |_r: SqsRecord<Value>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, HandlerError>(json!({"ok": true}))
        }
    };
    let first = processor.process(event.clone(), None, handler).await;
    assert_eq!(
        first.records[0].outcome,
        Ok(Outcome::Executed(json!({"ok": true})))
    );
    let second = processor.process(event, None, handler).await;
    assert_eq!(
        second.records[0].outcome,
        Ok(Outcome::Replayed(Some(json!({"ok": true}))))
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let items = scan(&ddb, &table).await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        s(&items[0], "id"),
        format!("bad_input.huge#{}", sha256_hex(mega.as_bytes()))
    );
    for (name, value) in &items[0] {
        assert!(
            !text_of(value).contains("mega-key-mega-key"),
            "{name} holds the key"
        );
    }
}

/// A response over DynamoDB's 400 KB item limit: by default the completion
/// is recorded without it (a duplicate replays no body); with
/// `OversizedResponse::Fail` it is a terminal error decided before anything
/// commits (recorded here, so duplicates get that rejection). Either way
/// the handler ran once and the other records of the batch are unaffected.
#[tokio::test]
async fn responses_over_the_item_limit() {
    let (logs, _guard) = Logs::start();
    let big = "r".repeat(450_000);
    for policy in [OversizedResponse::StoreWithoutBody, OversizedResponse::Fail] {
        logs.clear();
        let ddb = moto().dynamodb().await;
        let table = create_idempotency_table(&ddb).await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(table.clone())),
            Config::with_prefix("bad_input.response")
                .on_oversized(policy)
                .on_terminal_error(lambda_idempotency::config::TerminalErrors::Record)
                .disabled(false),
        );
        let processor = SqsProcessor::new(engine, KeySelector::pointer("/id"));
        let event = parse_sqs_event(sqs_event(
            "plain",
            &[
                Msg::new("m-big", r#"{"id":"k-big","big":true}"#),
                Msg::new("m-small", r#"{"id":"k-small","big":false}"#),
            ],
        ))
        .unwrap();
        let runs = std::sync::atomic::AtomicUsize::new(0);
        let handler = |r: SqsRecord<Value>| {
            let (runs, big) = (&runs, &big);
            async move {
                runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, HandlerError>(if r.body["big"] == true {
                    json!({"blob": big})
                } else {
                    json!({"small": 1})
                })
            }
        };
        let first = processor.process(event.clone(), None, handler).await;
        let second = processor.process(event, None, handler).await;
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::SeqCst),
            2,
            "{policy:?}"
        );
        assert_eq!(
            first.records[1].outcome,
            Ok(Outcome::Executed(json!({"small": 1})))
        );
        assert_eq!(
            second.records[1].outcome,
            Ok(Outcome::Replayed(Some(json!({"small": 1}))))
        );
        let items = scan(&ddb, &table).await;
        assert_eq!(items.len(), 2);
        let big_item = items
            .iter()
            .find(|i| !i.contains_key("data"))
            .expect("the big response is not stored");
        assert_eq!(s(big_item, "status"), "COMPLETED");
        assert!(
            logs.text()
                .contains("response too large for the idempotency record")
        );
        match policy {
            OversizedResponse::StoreWithoutBody => {
                assert_eq!(
                    first.records[0].outcome,
                    Ok(Outcome::Executed(json!({"blob": big})))
                );
                assert_eq!(second.records[0].outcome, Ok(Outcome::Replayed(None)));
                assert!(first.is_success() && second.is_success());
            }
            _ => {
                match &first.records[0].outcome {
                    Ok(Outcome::Rejected {
                        replayed: false,
                        error,
                    }) => assert!(
                        error.contains("exceeds the 400000 byte record limit"),
                        "{error}"
                    ),
                    other => panic!("{other:?}"),
                }
                assert!(matches!(
                    &second.records[0].outcome,
                    Ok(Outcome::Rejected { replayed: true, error }) if error.contains("exceeds")
                ));
                assert!(first.is_success(), "a recorded rejection is done");
                assert!(second.is_success(), "the redelivery is done");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Security.

mod security {
    use super::*;
    use lambda_idempotency::{Verifier, signature::SecretError};

    /// PutParameter on moto, as a raw request (this crate has no SSM client).
    async fn put_ssm_parameter(name: &str, value: &str) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = json!({"Name": name, "Value": value, "Type": "SecureString", "Overwrite": true})
            .to_string();
        let request = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: AmazonSSM.PutParameter\r\n\
             Content-Type: application/x-amz-json-1.1\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/ssm/aws4_request, \
             SignedHeaders=host, Signature=0\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", moto().port()))
            .await
            .unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }

    fn with_signature(mut event: Value, i: usize, signature: &str) -> Value {
        event["Records"][i]["messageAttributes"]["signature"] = json!({"stringValue": signature, "stringListValues": [], "binaryListValues": [],
                   "dataType": "String"});
        event
    }

    /// Signed payments with the secret from an SSM SecureString: signed
    /// records are applied; unsigned, tampered or wrongly signed ones fail
    /// permanently, before parsing, logged with their message id and the
    /// reason only, never the body.
    #[tokio::test]
    async fn signed_bodies_with_a_secret_from_ssm() {
        let (logs, _guard) = Logs::start();
        let moto = moto();
        let sdk = moto.sdk_config().await;
        let parameter = format!("/{}/signing-secret", unique_name("bad-input"));
        put_ssm_parameter(&parameter, "s3cr3t-from-ssm").await;
        let verifier = Verifier::from_ssm_with(&sdk, &parameter).await.unwrap();
        // Decrypted: the same MAC as the plain secret.
        let plain = Verifier::new("s3cr3t-from-ssm").unwrap();
        assert_eq!(verifier.sign(b"x"), plain.sign(b"x"));
        let missing = Verifier::from_ssm_with(&sdk, "/no/such/parameter")
            .await
            .unwrap_err();
        assert!(matches!(&missing, SecretError::Ssm { name, .. } if name == "/no/such/parameter"));
        assert!(
            lambda_idempotency::report(&missing).contains("ParameterNotFound"),
            "{}",
            lambda_idempotency::report(&missing)
        );

        // The payments function's processing, with signatures on.
        let ddb = moto.dynamodb().await;
        let table = create_idempotency_table(&ddb).await;
        let accounts_table = create_table(&ddb, "accounts", "account_id", None).await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(table.clone())),
            payments::App::config().disabled(false),
        );
        let accounts = payments::Accounts::from_table(lambda_idempotency::Table::dynamodb(
            ddb.clone(),
            accounts_table,
        ));
        let processor = SqsProcessor::new(engine, KeySelector::pointer("/payment_id"))
            .verify_signatures(verifier.clone());

        let good = pay("pay-signed", "acct-s", 100);
        let unsigned = pay("pay-UNSIGNED-PII", "acct-PII-1", 111);
        let tampered = pay("pay-TAMPERED-PII", "acct-PII-2", 999_999);
        let other_secret = pay("pay-OTHER-PII", "acct-PII-3", 333);
        let event = sqs_event(
            "payments.fifo",
            &[
                Msg::new("m-good", good.clone()).in_group("acct-s"),
                Msg::new("m-unsigned", unsigned).in_group("acct-PII-1"),
                Msg::new("m-tampered", tampered).in_group("acct-PII-2"),
                Msg::new("m-other", other_secret.clone()).in_group("acct-PII-3"),
            ],
        );
        let event = with_signature(event, 0, &verifier.sign(good.as_bytes()));
        // Signed for 1 cent, altered to 999999.
        let event = with_signature(
            event,
            2,
            &verifier.sign(pay("pay-TAMPERED-PII", "acct-PII-2", 1).as_bytes()),
        );
        let forged = Verifier::new("guessed").unwrap();
        let event = with_signature(event, 3, &forged.sign(other_secret.as_bytes()));
        let event = parse_sqs_event(event).unwrap();

        let report = processor
            .process(event, None, |r: SqsRecord<payments::Payment>| {
                let accounts = &accounts;
                async move { payments::stage_payment(accounts, &r.body, r.group_id()) }
            })
            .await;
        let response = report.response_as::<SqsBatchResponse>().unwrap();
        assert_eq!(
            response.failed_ids(),
            ["m-unsigned", "m-tampered", "m-other"]
        );
        for (i, expected) in [
            (1, "is missing"),
            (2, "does not match"),
            (3, "does not match"),
        ] {
            match &report.records[i].outcome {
                Err(reason @ FailureReason::BadSignature(_)) => {
                    assert!(reason.to_string().contains(expected), "{reason}");
                    assert!(reason.to_string().contains("permanent"), "{reason}");
                }
                other => panic!("record {i}: {other:?}"),
            }
        }
        assert_eq!(accounts.balance("acct-s").await.unwrap(), Some(100));
        for account in ["acct-PII-1", "acct-PII-2", "acct-PII-3"] {
            assert_eq!(accounts.balance(account).await.unwrap(), None);
        }
        for id in ["m-unsigned", "m-tampered", "m-other"] {
            let errors = logs.errors(id);
            assert_eq!(errors.len(), 1, "{id}");
            assert!(
                errors[0].contains("signature check failed")
                    && errors[0].contains("message attribute signature"),
                "{id}: {errors:?}"
            );
        }
        let text = logs.text();
        assert!(!text.is_empty());
        for secret_part in ["PII", "999999", "s3cr3t"] {
            let shown: Vec<&str> = text.lines().filter(|l| l.contains(secret_part)).collect();
            assert!(shown.is_empty(), "the log shows {secret_part}: {shown:#?}");
        }
        assert_eq!(scan(&ddb, &table).await.len(), 1, "only the signed record");
    }

    /// The idempotency table holds the key and payload as hashes: no
    /// attribute shows the payment id, account or amount, except the stored
    /// response (`data`), which `store_responses(false)` leaves out.
    #[tokio::test]
    async fn stored_records_hold_hashes_not_payment_data() {
        let payment_id = "pay-PII-7f3a91";
        let account = "acct-PII-c0ffee";
        let amount = 987_654_321u64;
        let body = pay(payment_id, account, amount);
        let secrets = [payment_id, account, "987654321"];
        for store_responses in [true, false] {
            let p = payments_app(payments::App::config().store_responses(store_responses)).await;
            let event = sqs_event(
                "payments.fifo",
                &[
                    Msg::new("m-1", body.clone()).in_group(account),
                    // A redelivery, so the replay path writes nothing raw either.
                    Msg::new("m-2", body.clone()).in_group(account),
                ],
            );
            for _ in 0..2 {
                let response = p.handle(event.clone()).await.unwrap();
                assert!(response.batch_item_failures.is_empty());
            }
            assert_eq!(p.balance(account).await, Some(amount as i64));
            let items = scan(&p.ddb, &p.table).await;
            assert_eq!(items.len(), 1);
            let item = &items[0];
            assert_eq!(
                s(item, "id"),
                format!("payments.credit#{}", sha256_hex(payment_id.as_bytes()))
            );
            assert_hashed_id(s(item, "id"), "payments.credit");
            let parsed: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(s(item, "validation"), payload_hash(&parsed));
            for (name, value) in item {
                let text = text_of(value);
                if name == "data" {
                    // The stored response is the one place the payment shows.
                    assert!(store_responses && text.contains(payment_id), "{text}");
                    continue;
                }
                for secret in secrets {
                    assert!(!text.contains(secret), "{name} = {text} shows {secret}");
                }
            }
            assert_eq!(item.contains_key("data"), store_responses);
        }
    }

    /// Two functions (payments and orders) over one idempotency table, fed
    /// the same key material, never share a record: each runs its handler,
    /// each record is under its own prefix, each replays its own.
    #[tokio::test]
    async fn keys_are_namespaced_per_function_and_handler() {
        let p = payments_app(payments::App::config()).await;
        let o = orders_app(Some(p.table.clone())).await;
        let shared_key = "evt-shared-42";
        let payment = sqs_event(
            "payments.fifo",
            &[Msg::new("m-p", pay(shared_key, "acct-ns", 250)).in_group("acct-ns")],
        );
        let order_event = sqs_event("orders", &[Msg::new("m-o", order(shared_key, "ord-ns"))]);
        for _ in 0..2 {
            assert!(
                p.handle(payment.clone())
                    .await
                    .unwrap()
                    .batch_item_failures
                    .is_empty()
            );
            assert!(
                o.handle(order_event.clone())
                    .await
                    .unwrap()
                    .batch_item_failures
                    .is_empty()
            );
        }
        assert_eq!(p.balance("acct-ns").await, Some(250), "applied once");
        assert_eq!(
            o.notified().await,
            BTreeMap::from([(shared_key.to_owned(), 1)])
        );
        let hash = sha256_hex(shared_key.as_bytes());
        let mut ids: Vec<String> = scan(&p.ddb, &p.table)
            .await
            .iter()
            .map(|i| s(i, "id").to_owned())
            .collect();
        ids.sort();
        assert_eq!(
            ids,
            [
                format!("orders.record#{hash}"),
                format!("payments.credit#{hash}")
            ]
        );

        // Two handlers of one function (Config::new: `<function>.<handler>`).
        let store = MemoryStore::new();
        let charge = Idempotency::new(store.clone(), Config::new("charge").disabled(false));
        let refund = Idempotency::new(store.clone(), Config::new("refund").disabled(false));
        let material = json!(shared_key);
        let (a, b) = (
            charge.key(&material).unwrap(),
            refund.key(&material).unwrap(),
        );
        assert_ne!(a, b);
        assert_eq!(a.hash(), b.hash());
        for engine in [&charge, &refund] {
            let key = engine.key(&material).unwrap();
            let outcome = engine
                .run(&key, Some(&material), None, || async {
                    Ok::<_, HandlerError>(1)
                })
                .await
                .unwrap();
            assert_eq!(outcome, lambda_idempotency::Outcome::Executed(1), "{key}");
        }
        assert_eq!(store.len(), 2);
    }
}
