//! The idempotency table's check at start (docs/stores/dynamodb.md, "Global tables"): one
//! `DescribeTable` when the store is built, never again per record. moto
//! does not model global tables (no replicas, no consistency mode), so the
//! refusal of an eventually consistent global table is tested on described
//! tables in `lambda-idempotency` (`store::dynamodb::table`); here, a plain table on
//! moto is accepted at the cost of one request, and a table that cannot be
//! described is refused with a clear error.

use lambda_idempotency::{
    Config, DynamoDbStore, HandlerError, Idempotency, Outcome, clock::ManualClock,
    store::TableConfig, store::dynamodb::TableCheck, store::dynamodb::TableCheckError,
};
use serde_json::json;
use test_kit::capture::Capture;
use test_kit::contract::START_MS;

async fn captured_client() -> (aws_sdk_dynamodb::Client, aws_sdk_dynamodb::Client, Capture) {
    let sdk = test_kit::moto().sdk_config().await;
    let plain = aws_sdk_dynamodb::Client::new(&sdk);
    let capture = Capture::default();
    let client = capture.dynamodb_client(&sdk);
    (plain, client, capture)
}

#[tokio::test]
async fn a_plain_table_is_accepted_at_the_cost_of_one_describe_table_at_start() {
    let (plain, client, capture) = captured_client().await;
    let table = test_kit::create_idempotency_table(&plain).await;
    let store = DynamoDbStore::checked(client, TableConfig::new(&table))
        .await
        .unwrap();
    assert_eq!(capture.operations(), ["DescribeTable"]);
    assert_eq!(capture.requests()[0].body, json!({"TableName": table}));
    assert_eq!(store.check().await, Ok(TableCheck::SingleRegion));

    let engine = Idempotency::new(
        store,
        Config::with_prefix("checked.handler").disabled(false),
    )
    .with_clock(ManualClock::new(START_MS));
    for _ in 0..2 {
        let key = engine.key(&json!("k-1")).unwrap();
        engine
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(json!(1))
            })
            .await
            .unwrap();
    }
    let key = engine.key(&json!("k-2")).unwrap();
    let out = engine
        .run(&key, None, None, || async {
            Ok::<_, HandlerError>(json!(2))
        })
        .await
        .unwrap();
    assert_eq!(out, Outcome::Executed(json!(2)));
    let describes = capture
        .operations()
        .iter()
        .filter(|op| op.as_str() == "DescribeTable")
        .count();
    // One at start and one from the explicit `check` above: none per record.
    assert_eq!(describes, 2, "{:?}", capture.operations());
}

#[tokio::test]
async fn a_table_that_cannot_be_described_is_refused_naming_it() {
    let (_, client, capture) = captured_client().await;
    let missing = test_kit::unique_name("absent");
    let err = DynamoDbStore::checked(client, TableConfig::new(&missing))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TableCheckError::Describe { table, .. } if *table == missing),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&missing) && text.contains("ResourceNotFoundException"),
        "{text}"
    );
    assert_eq!(capture.operations(), ["DescribeTable"]);
}

/// A table with a stream of new and old images may be a replica of a global
/// table of version 2017.11.29, which `DescribeTable` does not say: the
/// check asks `DescribeGlobalTable` too. moto has no such operation (it
/// answers an error), so whether the table is one stays unknown, and it is
/// refused, naming what to grant; the opt-in skips the question. A table
/// whose stream has new images only (the template's) costs no second
/// request. The decision on a legacy global table's answer is tested on
/// described tables in `lambda-idempotency` (`store::dynamodb::table`).
#[tokio::test]
async fn a_table_that_may_be_a_legacy_global_replica_is_asked_about_and_refused_when_unknown() {
    use aws_sdk_dynamodb::types::StreamViewType;
    let (plain, client, capture) = captured_client().await;
    let table = test_kit::unique_name("legacy");
    test_kit::create_idempotency_table_with_stream(&plain, &table, StreamViewType::NewAndOldImages)
        .await;
    let err = DynamoDbStore::checked(client.clone(), TableConfig::new(&table))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, TableCheckError::DescribeGlobal { table: t, .. } if *t == table),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("dynamodb:DescribeGlobalTable"), "{text}");
    let ops = capture.operations();
    assert_eq!(ops[0], "DescribeTable");
    assert!(
        ops[1..].iter().all(|op| op == "DescribeGlobalTable") && ops.len() > 1,
        "{ops:?}"
    );

    let routed = TableConfig::new(&table).claims_routed_to_one_region(true);
    let store = DynamoDbStore::checked(client.clone(), routed)
        .await
        .unwrap();
    assert_eq!(store.check().await, Ok(TableCheck::SingleRegion));

    let new_image = test_kit::unique_name("new-image");
    test_kit::create_idempotency_table_with_stream(&plain, &new_image, StreamViewType::NewImage)
        .await;
    let before = capture.operations().len();
    DynamoDbStore::checked(client, TableConfig::new(&new_image))
        .await
        .unwrap();
    assert_eq!(capture.operations()[before..], ["DescribeTable"]);
}

/// A table whose key is not the configured one is refused at start, naming
/// both, at the cost of the one `DescribeTable`: a table of records alone
/// configured with a sort key, and a composite table configured without
/// one. The composite table configured as it is keyed is accepted.
#[tokio::test]
async fn a_table_keyed_otherwise_than_configured_is_refused_naming_both_keys() {
    use lambda_idempotency::store::KeyLayout;
    let (plain, client, capture) = captured_client().await;
    let own = test_kit::create_idempotency_table(&plain).await;
    let composite = test_kit::create_composite_table(&plain, "single").await;
    let spread = |table: &str| {
        TableConfig::new(table)
            .partition_key("pk")
            .key_layout(KeyLayout::Spread {
                sort_key: "sk".into(),
            })
    };
    for (config, expected, found) in [
        (
            spread(&own),
            "partition key pk, sort key sk",
            "partition key id",
        ),
        (
            TableConfig::new(&composite),
            "partition key id",
            "partition key pk, sort key sk",
        ),
    ] {
        capture.clear();
        let table = config.table_name.clone();
        let err = DynamoDbStore::checked(client.clone(), config)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            TableCheckError::KeySchema {
                table: table.clone(),
                expected: expected.into(),
                found: found.into(),
            }
        );
        let text = err.to_string();
        for says in [table.as_str(), expected, found, "IDEMPOTENCY_SORT_KEY_ATTR"] {
            assert!(text.contains(says), "{says:?} in {text}");
        }
        assert_eq!(capture.operations(), ["DescribeTable"]);
    }
    capture.clear();
    DynamoDbStore::checked(client, spread(&composite))
        .await
        .unwrap();
    assert_eq!(capture.operations(), ["DescribeTable"]);
}

/// The environment lays records out under a sort key in a real function:
/// the `inventory` binary, given `IDEMPOTENCY_PARTITION_KEY_ATTR` and
/// `IDEMPOTENCY_SORT_KEY_ATTR` on a composite table, reserves once for two
/// deliveries of an event, its record under `IDEMPOTENCY#<id>` with the sort
/// key `IDEMPOTENCY`. Without the sort key variable it stops at start,
/// naming both keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_keeps_its_records_under_a_sort_key_as_its_environment_says() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use std::time::Duration;
    use test_kit::now_ms;
    use test_kit::runtime_api::{Invocation, RuntimeApi, function_command, spawn_function};

    let plain = test_kit::moto().dynamodb().await;
    let table = test_kit::create_composite_table(&plain, "single-fn").await;
    let stock = test_kit::create_table(&plain, "stock", "sku", None).await;
    plain
        .put_item()
        .table_name(&stock)
        .item("sku", AttributeValue::S("SKU-RED-MUG".into()))
        .item("stock", AttributeValue::N("100".into()))
        .send()
        .await
        .unwrap();
    let event = r#"{"version":"0","id":"7c1f3f2b-5f43-4d1e-9a43-9b0e8e1c6a10","detail-type":"OrderPlaced",
        "source":"shop.orders","account":"123456789012","time":"2026-11-29T10:00:00Z",
        "region":"us-east-1","resources":[],
        "detail":{"order_id":"ord-9","sku":"SKU-RED-MUG","quantity":3}}"#;

    let api = RuntimeApi::start().await;
    let mut child = spawn_function(
        "inventory",
        &api,
        &[
            ("IDEMPOTENCY_TABLE", &table),
            ("IDEMPOTENCY_PARTITION_KEY_ATTR", "pk"),
            ("IDEMPOTENCY_SORT_KEY_ATTR", "sk"),
            ("STOCK_TABLE", &stock),
        ],
    );
    let mut answers = Vec::new();
    for _ in 0..2 {
        let answer = api
            .invoke_text(event.to_owned(), now_ms() + 30_000, Duration::from_secs(20))
            .await;
        answers.push(answer);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        matches!(&answers[0], Some(Invocation::Response(_))),
        "{answers:?}"
    );
    assert_eq!(answers[0], answers[1], "the second delivery replays");
    let items = plain.scan().table_name(&table).send().await.unwrap();
    let keys: Vec<(String, String)> = items
        .items()
        .iter()
        .map(|i| {
            let s = |n: &str| i[n].as_s().unwrap().clone();
            (s("pk"), s("sk"))
        })
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].0.starts_with("IDEMPOTENCY#"), "{keys:?}");
    assert_eq!(keys[0].1, "IDEMPOTENCY");
    let level = plain
        .get_item()
        .table_name(&stock)
        .key("sku", AttributeValue::S("SKU-RED-MUG".into()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        level.item().and_then(|i| i.get("stock")),
        Some(&AttributeValue::N("97".into())),
        "reserved once"
    );

    // The same table without the sort key variable: refused at start.
    let api = RuntimeApi::start().await;
    let child = function_command("inventory", &api)
        .env("IDEMPOTENCY_TABLE", &table)
        .env("IDEMPOTENCY_PARTITION_KEY_ATTR", "pk")
        .env("STOCK_TABLE", &stock)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the inventory binary");
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await
    .expect("the function stops at start")
    .unwrap()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for says in [
        table.as_str(),
        "partition key pk, sort key sk",
        "expects partition key pk",
    ] {
        assert!(stderr.contains(says), "{says:?} in {stderr}");
    }
}
