//! Pins the exact requests the DynamoDB store sends, as captured on the wire
//! by an SDK interceptor, against moto.

use lambda_idempotency::{
    Config, DynamoDbStore, HandlerError, Idempotency, Outcome, clock::ManualClock,
    store::TableConfig,
};
use serde_json::{Value, json};
use test_kit::capture::Capture;
use test_kit::contract::START_MS;

async fn engine() -> (Idempotency, Capture, String) {
    let (engine, _, capture, table) = engine_and_store().await;
    (engine, capture, table)
}

async fn engine_and_store() -> (Idempotency, DynamoDbStore, Capture, String) {
    let moto = test_kit::moto();
    let sdk = moto.sdk_config().await;
    let plain = aws_sdk_dynamodb::Client::new(&sdk);
    let table = test_kit::create_idempotency_table(&plain).await;
    let capture = Capture::default();
    let client = capture.dynamodb_client(&sdk);
    let store = DynamoDbStore::new(client, TableConfig::new(&table));
    let engine = Idempotency::new(
        store.clone(),
        Config::with_prefix("pinned.handler").disabled(false),
    )
    .with_clock(ManualClock::new(START_MS));
    (engine, store, capture, table)
}

#[tokio::test]
async fn new_message_is_one_conditional_put_and_one_fenced_update() {
    let (engine, capture, table) = engine().await;
    let key = engine.key(&json!("pay-1")).unwrap();
    let out = engine
        .run(&key, Some(&json!({"amount": 1})), None, || async {
            Ok::<_, HandlerError>(json!({"ok": true}))
        })
        .await
        .unwrap();
    assert_eq!(out, Outcome::Executed(json!({"ok": true})));
    let requests = capture.requests();
    assert_eq!(capture.operations(), ["PutItem", "UpdateItem"]);

    let put = &requests[0].body;
    let owner = put["Item"]["owner_token"]["S"].as_str().unwrap().to_owned();
    let validation = put["Item"]["validation"]["S"].as_str().unwrap().to_owned();
    assert_eq!(
        put,
        &json!({
            "TableName": table,
            "Item": {
                "id": {"S": key.as_str()},
                "status": {"S": "INPROGRESS"},
                "expiration": {"N": (START_MS / 1000 + 3600).to_string()},
                "in_progress_expiration": {"N": (START_MS + 60_000).to_string()},
                "owner_token": {"S": owner},
                "validation": {"S": validation},
            },
            "ConditionExpression": "attribute_not_exists(#id) OR #expiration < :now OR (#status = :inprogress AND #in_progress_expiration < :now_ms)",
            "ExpressionAttributeNames": {
                "#id": "id",
                "#expiration": "expiration",
                "#status": "status",
                "#in_progress_expiration": "in_progress_expiration",
            },
            "ExpressionAttributeValues": {
                ":now": {"N": (START_MS / 1000).to_string()},
                ":now_ms": {"N": START_MS.to_string()},
                ":inprogress": {"S": "INPROGRESS"},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        })
    );

    let update = &requests[1].body;
    assert_eq!(
        update,
        &json!({
            "TableName": table,
            "Key": {"id": {"S": key.as_str()}},
            "UpdateExpression": "SET #status = :completed, #expiration = :expiration, #data = :data REMOVE #in_progress_expiration, #error, #outbox",
            "ConditionExpression": "#owner = :owner AND #status = :inprogress",
            "ExpressionAttributeNames": {
                "#owner": "owner_token",
                "#status": "status",
                "#expiration": "expiration",
                "#in_progress_expiration": "in_progress_expiration",
                "#data": "data",
                "#error": "error",
                "#outbox": "outbox",
            },
            "ExpressionAttributeValues": {
                ":owner": {"S": owner},
                ":inprogress": {"S": "INPROGRESS"},
                ":completed": {"S": "COMPLETED"},
                ":expiration": {"N": (START_MS / 1000 + 3600).to_string()},
                ":data": {"S": "{\"ok\":true}"},
            },
            // A lost fence returns the record that stands in the way.
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        })
    );
}

#[tokio::test]
async fn duplicate_costs_one_request() {
    let (engine, capture, _) = engine().await;
    let key = engine.key(&json!("pay-2")).unwrap();
    let run = || async { Ok::<_, HandlerError>(json!(7)) };
    engine.run(&key, None, None, run).await.unwrap();
    capture.clear();
    let out = engine.run(&key, None, None, run).await.unwrap();
    assert_eq!(out, Outcome::Replayed(Some(json!(7))));
    // The failed conditional put returns the old item (ALL_OLD): no GetItem.
    assert_eq!(capture.operations(), ["PutItem"]);
}

#[tokio::test]
async fn retryable_failure_is_a_fenced_delete() {
    let (engine, capture, table) = engine().await;
    let key = engine.key(&json!("pay-3")).unwrap();
    let err = engine
        .run(&key, None, None, || async {
            Err::<Value, _>(HandlerError::retryable("boom"))
        })
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    let requests = capture.requests();
    assert_eq!(capture.operations(), ["PutItem", "DeleteItem"]);
    let owner = requests[0].body["Item"]["owner_token"]["S"].clone();
    assert_eq!(
        requests[1].body,
        json!({
            "TableName": table,
            "Key": {"id": {"S": key.as_str()}},
            "ConditionExpression": "#owner = :owner AND #status = :inprogress",
            "ExpressionAttributeNames": {"#owner": "owner_token", "#status": "status"},
            "ExpressionAttributeValues": {
                ":owner": {"S": owner},
                ":inprogress": {"S": "INPROGRESS"},
            },
        })
    );
}

#[tokio::test]
async fn transactional_modes_cost_one_or_two_requests() {
    use lambda_idempotency::CommitMode;
    use lambda_idempotency::{Write, write::Staged};
    let (engine, engine_store, capture, table) = engine_and_store().await;
    let business = test_kit::create_table(
        &test_kit::moto().dynamodb().await,
        "pinned-business",
        "pk",
        None,
    )
    .await;
    let stage =
        |n: i64| {
            let business = business.clone();
            move || async move {
                Ok::<_, HandlerError>(Staged::new(json!(n)).write(
                    Write::update(&business, test_kit::contract::pk_key("a")).add("balance", n),
                ))
            }
        };

    let key = engine.key(&json!("tx-opt")).unwrap();
    let out = engine
        .in_mode(CommitMode::Optimistic)
        .run(&key, None, None, stage(1))
        .await
        .unwrap();
    assert_eq!(out, Outcome::Executed(json!(1)));
    assert_eq!(capture.operations(), ["TransactWriteItems"]);
    let tx = &capture.requests()[0].body["TransactItems"];
    assert_eq!(
        tx[0]["Update"]["UpdateExpression"],
        json!("ADD #n0 :v0"),
        "{tx}"
    );
    let record_put = &tx[1]["Put"];
    assert_eq!(record_put["TableName"], json!(table));
    assert_eq!(record_put["Item"]["status"]["S"], json!("COMPLETED"));
    assert_eq!(
        record_put["ConditionExpression"],
        json!(
            "attribute_not_exists(#id) OR #expiration < :now OR (#status = :inprogress AND #in_progress_expiration < :now_ms)"
        )
    );
    assert_eq!(
        record_put["ReturnValuesOnConditionCheckFailure"],
        json!("ALL_OLD")
    );

    // A duplicate: the record's condition cancels the transaction and its
    // ALL_OLD item is replayed: still one request, nothing applied twice.
    capture.clear();
    let dup = engine
        .in_mode(CommitMode::Optimistic)
        .run(&key, None, None, stage(1))
        .await
        .unwrap();
    assert_eq!(dup, Outcome::Replayed(Some(json!(1))));
    assert_eq!(capture.operations(), ["TransactWriteItems"]);

    capture.clear();
    let key = engine.key(&json!("tx-fenced")).unwrap();
    engine
        .in_mode(CommitMode::Fenced)
        .run(&key, None, None, stage(2))
        .await
        .unwrap();
    assert_eq!(capture.operations(), ["PutItem", "TransactWriteItems"]);
    let record_update = &capture.requests()[1].body["TransactItems"][1]["Update"];
    assert_eq!(
        record_update["ConditionExpression"],
        json!("#owner = :owner AND #status = :inprogress")
    );
    let owner = capture.requests()[0].body["Item"]["owner_token"].clone();
    assert_eq!(record_update["ExpressionAttributeValues"][":owner"], owner);

    // The pre-read: one BatchGetItem settles both completed keys.
    capture.clear();
    let k1 = engine.key(&json!("tx-opt")).unwrap();
    let found = lambda_idempotency::Store::get_many(
        &engine_store,
        &[k1.as_str().to_owned(), key.as_str().to_owned()],
    )
    .await
    .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(capture.operations(), ["BatchGetItem"]);
    assert_eq!(
        capture.requests()[0].body["RequestItems"][&table]["ConsistentRead"],
        json!(true)
    );
}

/// Claim-then-complete commits its one staged write before the record: a
/// plain conditional write (one write unit per KB), not a one-item
/// `TransactWriteItems` (two). A failed condition is the same rejection,
/// described from the item the failed write returned.
#[tokio::test]
async fn claim_then_complete_sends_its_staged_write_as_a_plain_conditional_write() {
    use lambda_idempotency::{
        CommitMode, Item, Write, value::AttrValue, write::Cond, write::Staged,
    };
    let (engine, _, capture, table) = engine_and_store().await;
    let engine = engine.in_mode(CommitMode::ClaimThenComplete);
    let business =
        test_kit::create_table(&test_kit::moto().dynamodb().await, "pinned-ctc", "pk", None).await;
    let debit = |n: i64| {
        Write::update(&business, test_kit::contract::pk_key("a"))
            .add("balance", -n)
            .when(Cond::ge("balance", n))
            .or_reject_with(|item: Option<&Item>| match item {
                Some(item) => format!("balance is only {:?}", item.get("balance")),
                None => "no such account".to_owned(),
            })
    };
    // Each kind of write on its own: the plain request, conditioned.
    for (id, write, operation) in [
        (
            "ctc-put",
            Write::put(
                &business,
                test_kit::contract::pk_key("a"),
                Item::from([("balance".to_owned(), AttrValue::n(5))]),
            )
            .when(Cond::not_exists("pk")),
            "PutItem",
        ),
        ("ctc-update", debit(2), "UpdateItem"),
        (
            "ctc-delete",
            Write::delete(&business, test_kit::contract::pk_key("gone")),
            "DeleteItem",
        ),
    ] {
        capture.clear();
        let key = engine.key(&json!(id)).unwrap();
        let staged = write.clone();
        let out = engine
            .run(&key, None, None, move || async move {
                Ok::<_, HandlerError>(Staged::new(json!(id)).write(staged))
            })
            .await
            .unwrap();
        assert_eq!(out, Outcome::Executed(json!(id)));
        assert_eq!(capture.operations(), ["PutItem", operation, "UpdateItem"]);
        let sent = &capture.requests()[1].body;
        assert_eq!(sent["TableName"], json!(business), "{sent}");
        assert!(sent.get("TransactItems").is_none(), "{sent}");
        if write.condition.is_some() {
            assert!(sent["ConditionExpression"].is_string(), "{sent}");
        }
        // The record's completion follows, on the idempotency table.
        assert_eq!(capture.requests()[2].body["TableName"], json!(table));
    }

    // The balance is 3: a debit of 5 fails its condition, and the
    // rejection reads the item the failed UpdateItem returned (ALL_OLD).
    capture.clear();
    let key = engine.key(&json!("ctc-rejected")).unwrap();
    let err = engine
        .run(&key, None, None, move || async move {
            Ok::<_, HandlerError>(Staged::new(json!(0)).write(debit(5)))
        })
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("balance is only Some(N(\"3\"))"),
        "{err}"
    );
    let ops = capture.operations();
    assert_eq!(ops[..2], ["PutItem", "UpdateItem"], "{ops:?}");
    assert!(!ops.contains(&"TransactWriteItems".to_owned()), "{ops:?}");
    assert_eq!(
        capture.requests()[1].body["ReturnValuesOnConditionCheckFailure"],
        json!("ALL_OLD")
    );
}

/// Records beside the team's items in one table (partition key `pk`, sort
/// key `sk`, the spread layout): a new message is still one conditional
/// `PutItem` and one fenced `UpdateItem`, each on the record's composite
/// key; a duplicate one request; a staged write to the team's item in the
/// same table commits with the record in one `TransactWriteItems`, and the
/// pre-read is one `BatchGetItem` of composite keys.
#[tokio::test]
async fn records_beside_the_teams_items_cost_the_same_requests() {
    use lambda_idempotency::store::KeyLayout;
    use lambda_idempotency::{CommitMode, Item, Write, value::AttrValue, write::Staged};
    let sdk = test_kit::moto().sdk_config().await;
    let plain = aws_sdk_dynamodb::Client::new(&sdk);
    let table = test_kit::create_composite_table(&plain, "pinned-single").await;
    let capture = Capture::default();
    let config = TableConfig::new(&table)
        .partition_key("pk")
        .key_layout(KeyLayout::Spread {
            sort_key: "sk".into(),
        });
    let store = DynamoDbStore::new(capture.dynamodb_client(&sdk), config);
    let engine = Idempotency::new(
        store.clone(),
        Config::with_prefix("pinned.handler").disabled(false),
    )
    .with_clock(ManualClock::new(START_MS));
    let key = engine.key(&json!("pay-1")).unwrap();
    let record_key = json!({
        "pk": {"S": format!("IDEMPOTENCY#{}", key.as_str())},
        "sk": {"S": "IDEMPOTENCY"},
    });
    for delivery in 0..2 {
        let out = engine
            .run(&key, None, None, || async {
                Ok::<_, HandlerError>(json!({"ok": true}))
            })
            .await
            .unwrap();
        if delivery == 0 {
            assert_eq!(out, Outcome::Executed(json!({"ok": true})));
            assert_eq!(capture.operations(), ["PutItem", "UpdateItem"]);
        } else {
            assert_eq!(out, Outcome::Replayed(Some(json!({"ok": true}))));
            assert_eq!(capture.operations(), ["PutItem"]);
        }
        let requests = capture.requests();
        let put = &requests[0].body["Item"];
        assert_eq!(put["pk"], record_key["pk"], "{put}");
        assert_eq!(put["sk"], record_key["sk"], "{put}");
        assert!(put.get("id").is_none(), "{put}");
        if delivery == 0 {
            assert_eq!(requests[1].body["Key"], record_key);
        }
        capture.clear();
    }

    // The team's item in the same table, credited with the record.
    let theirs = Item::from([
        ("pk".to_owned(), AttrValue::s("ACCOUNT#a")),
        ("sk".to_owned(), AttrValue::s("BALANCE")),
    ]);
    let credit = {
        let (table, theirs) = (table.clone(), theirs.clone());
        move || {
            let write = Write::update(&table, theirs.clone()).add("balance", 5);
            async move { Ok::<_, HandlerError>(Staged::new(json!(5)).write(write)) }
        }
    };
    let key = engine.key(&json!("pay-2")).unwrap();
    for (delivery, expected) in [
        (0, Outcome::Executed(json!(5))),
        (1, Outcome::Replayed(Some(json!(5)))),
    ] {
        let out = engine
            .in_mode(CommitMode::Optimistic)
            .run(&key, None, None, credit.clone())
            .await
            .unwrap();
        assert_eq!(out, expected, "delivery {delivery}");
        assert_eq!(capture.operations(), ["TransactWriteItems"]);
        let tx = &capture.requests()[0].body["TransactItems"];
        assert_eq!(tx[0]["Update"]["TableName"], json!(table));
        assert_eq!(tx[1]["Put"]["TableName"], json!(table));
        assert_eq!(
            tx[1]["Put"]["Item"]["pk"]["S"],
            json!(format!("IDEMPOTENCY#{}", key.as_str()))
        );
        capture.clear();
    }
    let item = plain
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("ACCOUNT#a".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("BALANCE".into()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        item.item().and_then(|i| i.get("balance")),
        Some(&aws_sdk_dynamodb::types::AttributeValue::N("5".into())),
        "credited once"
    );

    // The pre-read: one BatchGetItem of composite keys.
    let first = engine.key(&json!("pay-1")).unwrap();
    let found = lambda_idempotency::Store::get_many(
        &store,
        &[first.as_str().to_owned(), key.as_str().to_owned()],
    )
    .await
    .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(capture.operations(), ["BatchGetItem"]);
    let keys = &capture.requests()[0].body["RequestItems"][&table]["Keys"];
    assert!(keys.as_array().unwrap().contains(&record_key), "{keys}");
}
