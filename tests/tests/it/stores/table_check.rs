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
