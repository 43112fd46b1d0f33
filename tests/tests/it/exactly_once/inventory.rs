//! `inventory` end to end against moto: DynamoDB idempotency and stock
//! tables, EventBridge events as Lambda receives them (asynchronous
//! invocation: a retry is the same event delivered again). The stock
//! decrement commits in the same `TransactWriteItems` as the idempotency
//! record.

use aws_sdk_dynamodb::types::AttributeValue;
use inventory::{App, Reservation, Response, StockTable};
use lambda_idempotency::CommitMode;
use lambda_idempotency::batch::{FailureReason, Unfinished};
use lambda_idempotency::{DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use std::time::Duration;
use test_kit::capture::Capture;
use test_kit::{create_idempotency_table, create_table, moto};

struct Setup {
    app: App,
    ddb: aws_sdk_dynamodb::Client,
    idempotency_table: String,
    stock_table: String,
    /// Every request the function's client sends.
    capture: Capture,
}

async fn setup() -> Setup {
    let moto = moto();
    let sdk = moto.sdk_config().await;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let idempotency_table = create_idempotency_table(&ddb).await;
    let stock_table = create_table(&ddb, "stock", "sku", None).await;
    for (sku, level) in [("SKU-RED-MUG", 100), ("SKU-BLUE-PLATE", 40)] {
        set_level(&ddb, &stock_table, sku, level).await;
    }
    let capture = Capture::default();
    let client = capture.dynamodb_client(&sdk);
    let engine = Idempotency::new(
        DynamoDbStore::new(client.clone(), TableConfig::new(&idempotency_table)),
        App::config(),
    );
    let app = App::new(
        engine,
        StockTable::from_table(lambda_idempotency::Table::dynamodb(client, &stock_table)),
    );
    Setup {
        app,
        ddb,
        idempotency_table,
        stock_table,
        capture,
    }
}

async fn set_level(ddb: &aws_sdk_dynamodb::Client, table: &str, sku: &str, level: i64) {
    ddb.put_item()
        .table_name(table)
        .item("sku", AttributeValue::S(sku.to_owned()))
        .item("stock", AttributeValue::N(level.to_string()))
        .send()
        .await
        .unwrap();
}

/// The level read with the test's own client (not captured).
async fn level(ddb: &aws_sdk_dynamodb::Client, table: &str, sku: &str) -> Option<i64> {
    StockTable::from_table(lambda_idempotency::Table::dynamodb(ddb.clone(), table))
        .level(sku)
        .await
        .unwrap()
}

async fn invoke(app: &App, event: Value) -> Result<Response, lambda_runtime::Error> {
    let ctx = lambda_idempotency::runtime::local_context(0, Duration::from_secs(30));
    // As Lambda delivers it: the payload's text.
    let payload =
        lambda_idempotency::eventbridge::EventPayload::from_text(event.to_string()).unwrap();
    app.handle(LambdaEvent::new(payload, ctx)).await
}

fn sample(name: &str) -> Value {
    let text = match name {
        "order-placed" => include_str!("../../../../events/inventory-order-placed.json"),
        "insufficient" => include_str!("../../../../events/inventory-insufficient-stock.json"),
        other => panic!("no sample {other}"),
    };
    serde_json::from_str(text).unwrap()
}

fn reserved(order_id: &str, sku: &str, reserved: u32) -> Response {
    Response::Done(Reservation {
        order_id: order_id.into(),
        sku: sku.into(),
        reserved,
    })
}

/// The recorded refusal: `available` is the stock as it stood (`None`: no
/// such SKU).
fn rejected(sku: &str, quantity: u32, order_id: &str, available: Option<i64>) -> Response {
    let rejected = match available {
        None => format!("unknown SKU {sku}; order {order_id}"),
        Some(n) => format!(
            "insufficient stock for {sku}: {quantity} requested, {n} available; order {order_id}"
        ),
    };
    Response::Rejected { rejected }
}

/// An expression of a captured request with its `#name` and `:value`
/// placeholders substituted (numbers as their text), after checking that
/// every placeholder defined is used by one of the request's expressions.
fn resolved(request: &Value, expression: &str) -> String {
    let all: String = ["UpdateExpression", "ConditionExpression"]
        .iter()
        .filter_map(|k| request[*k].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let mut text = request[expression].as_str().unwrap().to_owned();
    let mut substitutions: Vec<(String, String)> = Vec::new();
    for (placeholder, name) in request["ExpressionAttributeNames"].as_object().unwrap() {
        substitutions.push((placeholder.clone(), name.as_str().unwrap().to_owned()));
    }
    for (placeholder, value) in request["ExpressionAttributeValues"].as_object().unwrap() {
        substitutions.push((placeholder.clone(), value["N"].as_str().unwrap().to_owned()));
    }
    // Longest first, so that `#n1` does not eat the start of `#n10`.
    substitutions.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    for (placeholder, _) in &substitutions {
        assert!(
            all.contains(placeholder.as_str()),
            "{placeholder} unused: {request}"
        );
    }
    for (placeholder, with) in &substitutions {
        text = text.replace(placeholder.as_str(), with);
    }
    text
}

/// The sample events: the order reserves once however often it is
/// delivered; the one asking for more than the stock is rejected, recorded,
/// and replayed without touching the stock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_events_reserve_once_and_reject_insufficient_stock() {
    let Setup {
        app,
        ddb,
        stock_table,
        ..
    } = setup().await;
    let first = invoke(&app, sample("order-placed")).await.unwrap();
    assert_eq!(first, reserved("ord-1001", "SKU-RED-MUG", 2));
    for _redelivery in 0..2 {
        assert_eq!(invoke(&app, sample("order-placed")).await.unwrap(), first);
    }
    assert_eq!(level(&ddb, &stock_table, "SKU-RED-MUG").await, Some(98));

    let refusal = invoke(&app, sample("insufficient")).await.unwrap();
    assert_eq!(refusal, rejected("SKU-RED-MUG", 1000, "ord-1004", Some(98)));
    assert_eq!(level(&ddb, &stock_table, "SKU-RED-MUG").await, Some(98));
    // Restocked since: a redelivery replays the recorded refusal and does
    // not reserve.
    set_level(&ddb, &stock_table, "SKU-RED-MUG", 5000).await;
    assert_eq!(invoke(&app, sample("insufficient")).await.unwrap(), refusal);
    assert_eq!(level(&ddb, &stock_table, "SKU-RED-MUG").await, Some(5000));
}

/// The guarded decrement on DynamoDB: exact stock down to zero, then a
/// refusal saying what was available; an unknown SKU is refused as such (the
/// cancelled transaction returns the item as it stood) and no item is
/// created for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_decrement_on_dynamodb() {
    let Setup {
        app,
        ddb,
        stock_table,
        ..
    } = setup().await;
    let event = |n: u32, sku: &str, quantity: u32| {
        let mut e = sample("order-placed");
        e["id"] = json!(format!("00000000-0000-4000-8000-{n:012}"));
        e["detail"] = json!({"order_id": format!("ord-{n}"), "sku": sku, "quantity": quantity});
        e
    };
    assert_eq!(
        invoke(&app, event(1, "SKU-BLUE-PLATE", 30)).await.unwrap(),
        reserved("ord-1", "SKU-BLUE-PLATE", 30)
    );
    assert_eq!(level(&ddb, &stock_table, "SKU-BLUE-PLATE").await, Some(10));
    assert_eq!(
        invoke(&app, event(2, "SKU-BLUE-PLATE", 10)).await.unwrap(),
        reserved("ord-2", "SKU-BLUE-PLATE", 10)
    );
    assert_eq!(
        invoke(&app, event(3, "SKU-BLUE-PLATE", 1)).await.unwrap(),
        rejected("SKU-BLUE-PLATE", 1, "ord-3", Some(0))
    );
    assert_eq!(
        invoke(&app, event(4, "SKU-NOPE", 1)).await.unwrap(),
        rejected("SKU-NOPE", 1, "ord-4", None)
    );
    assert_eq!(level(&ddb, &stock_table, "SKU-NOPE").await, None);
    assert_eq!(level(&ddb, &stock_table, "SKU-BLUE-PLATE").await, Some(0));
}

/// The same event delivered twice at once (two concurrent invocations),
/// ten times, in both commit modes. Optimistic (the function's mode): both
/// stage the decrement, exactly one transaction commits and the other
/// replays it. Fenced: the second may instead be told the event is in
/// progress (an error, so Lambda retries it), and its retry replays. Either
/// way the stock is taken once per event. (Needs the serialized moto
/// launcher: plain moto lets two concurrent transactions both win.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_deliveries_reserve_once() {
    for mode in [CommitMode::Optimistic, CommitMode::Fenced] {
        let Setup {
            app,
            ddb,
            stock_table,
            capture,
            ..
        } = setup().await;
        let app = app.with_commit_mode(mode);
        let mut in_progress = 0;
        let mut expected_level = 100;
        for n in 0..10u32 {
            let mut event = sample("order-placed");
            event["id"] = json!(format!("10000000-0000-4000-8000-{n:012}"));
            event["detail"]["order_id"] = json!(format!("ord-c{n}"));
            expected_level -= 2;
            let expected = reserved(&format!("ord-c{n}"), "SKU-RED-MUG", 2);
            capture.clear();
            let (a, b) = tokio::join!(invoke(&app, event.clone()), invoke(&app, event.clone()));
            if mode == CommitMode::Optimistic {
                // Both committed their own transaction; one was cancelled by
                // the other's record, and nothing else was sent.
                assert_eq!(
                    capture.operations(),
                    ["TransactWriteItems", "TransactWriteItems"]
                );
            }
            let mut ok = 0;
            for result in [a, b] {
                match result {
                    Ok(response) => {
                        assert_eq!(response, expected, "{mode:?}");
                        ok += 1;
                    }
                    Err(err) => {
                        match err.downcast_ref::<Unfinished>() {
                            Some(
                                e @ Unfinished::Failed {
                                    reason: FailureReason::InProgress { .. },
                                    ..
                                },
                            ) => assert!(e.is_retryable()),
                            other => panic!("{mode:?}: {other:?}: {err}"),
                        }
                        assert_eq!(mode, CommitMode::Fenced, "optimistic mode has no claim");
                        in_progress += 1;
                        // Lambda's retry (after the first finished).
                        assert_eq!(invoke(&app, event.clone()).await.unwrap(), expected);
                    }
                }
            }
            assert!(ok >= 1, "one of the two deliveries reserved");
            assert_eq!(
                level(&ddb, &stock_table, "SKU-RED-MUG").await,
                Some(expected_level),
                "{mode:?}"
            );
        }
        eprintln!("{mode:?}: {in_progress} of 10 pairs met an in-progress claim");
    }
}

/// On the wire: a new event is exactly one `TransactWriteItems` holding the
/// guarded stock `Update` and the completed record's conditional `Put`; a
/// redelivery is one cancelled transaction; a refusal is the cancelled
/// transaction plus the `PutItem` recording it, and its redelivery one
/// cancelled transaction. (These are also the actions the template grants:
/// `UpdateItem` on the stock table, `PutItem` on the idempotency table.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_event_costs_exactly_one_transact_write_items() {
    let Setup {
        app,
        ddb,
        idempotency_table,
        stock_table,
        capture,
    } = setup().await;
    let first = invoke(&app, sample("order-placed")).await.unwrap();
    assert_eq!(first, reserved("ord-1001", "SKU-RED-MUG", 2));
    assert_eq!(capture.operations(), ["TransactWriteItems"]);
    let items = capture.requests()[0].body["TransactItems"].clone();
    assert_eq!(items.as_array().unwrap().len(), 2, "{items}");
    let update = &items[0]["Update"];
    assert_eq!(update["TableName"], json!(stock_table));
    assert_eq!(update["Key"], json!({"sku": {"S": "SKU-RED-MUG"}}));
    // The item comes back with a failed condition, for the refusal's text.
    assert_eq!(
        update["ReturnValuesOnConditionCheckFailure"],
        json!("ALL_OLD")
    );
    assert_eq!(
        update.as_object().unwrap().len(),
        7,
        "nothing else: {update}"
    );
    assert_eq!(
        resolved(update, "UpdateExpression"),
        "ADD stock -2",
        "{update}"
    );
    assert_eq!(
        resolved(update, "ConditionExpression"),
        "(attribute_exists(sku)) AND (stock >= 2)",
        "{update}"
    );
    let put = &items[1]["Put"];
    assert_eq!(put["TableName"], json!(idempotency_table));
    assert_eq!(put["Item"]["status"], json!({"S": "COMPLETED"}));
    assert_eq!(
        serde_json::from_str::<Value>(put["Item"]["data"]["S"].as_str().unwrap()).unwrap(),
        json!({"order_id": "ord-1001", "sku": "SKU-RED-MUG", "reserved": 2})
    );
    assert!(
        put["ConditionExpression"]
            .as_str()
            .unwrap()
            .starts_with("attribute_not_exists(#id)"),
        "{put}"
    );
    assert_eq!(put["ReturnValuesOnConditionCheckFailure"], json!("ALL_OLD"));
    assert_eq!(level(&ddb, &stock_table, "SKU-RED-MUG").await, Some(98));

    capture.clear();
    assert_eq!(invoke(&app, sample("order-placed")).await.unwrap(), first);
    assert_eq!(capture.operations(), ["TransactWriteItems"]);
    assert_eq!(level(&ddb, &stock_table, "SKU-RED-MUG").await, Some(98));

    capture.clear();
    let refusal = invoke(&app, sample("insufficient")).await.unwrap();
    assert_eq!(refusal, rejected("SKU-RED-MUG", 1000, "ord-1004", Some(98)));
    assert_eq!(capture.operations(), ["TransactWriteItems", "PutItem"]);
    let record = &capture.requests()[1].body;
    assert_eq!(record["TableName"], json!(idempotency_table));
    assert_eq!(
        record["Item"]["error"]["S"],
        json!("insufficient stock for SKU-RED-MUG: 1000 requested, 98 available; order ord-1004")
    );

    capture.clear();
    assert_eq!(invoke(&app, sample("insufficient")).await.unwrap(), refusal);
    assert_eq!(capture.operations(), ["TransactWriteItems"]);
    assert_eq!(level(&ddb, &stock_table, "SKU-RED-MUG").await, Some(98));
}

/// The `inventory` binary under the local Lambda Runtime API reads the
/// invocation's text, not a `Value` parsed from it: two deliveries of one
/// event id whose `detail`s differ only in a number past what `f64` holds
/// (`12345678901234567890123` and `...124`) are told apart (the second is a
/// `PayloadMismatch`, not a replay of the first's reservation), and the
/// first delivered again, byte for byte, replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_hashes_the_detail_with_exact_numbers() {
    use test_kit::now_ms;
    use test_kit::runtime_api::{Invocation, RuntimeApi, function_binary, lambda_command};

    let s = setup().await;
    let api = RuntimeApi::start().await;
    let mut command = lambda_command(&function_binary("inventory"), "inventory", &api);
    moto().apply_env(&mut command);
    let mut child = command
        .env("IDEMPOTENCY_TABLE", &s.idempotency_table)
        .env("STOCK_TABLE", &s.stock_table)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start the inventory binary");
    let event = |reference: &str| {
        format!(
            r#"{{"version":"0","id":"9b0e8e1c-5f43-4d1e-9a43-7c1f3f2b6a10","detail-type":"OrderPlaced",
            "source":"shop.orders","account":"123456789012","time":"2026-11-29T10:00:00Z",
            "region":"us-east-1","resources":[],
            "detail":{{"order_id":"ord-7","sku":"SKU-RED-MUG","quantity":3,"reference":{reference}}}}}"#
        )
    };
    let invoke = |text: String| api.invoke_text(text, now_ms() + 30_000, Duration::from_secs(20));
    let first = invoke(event("12345678901234567890123")).await;
    let reservation = json!({"order_id": "ord-7", "sku": "SKU-RED-MUG", "reserved": 3});
    assert_eq!(first, Some(Invocation::Response(reservation.clone())));
    let other = invoke(event("12345678901234567890124")).await;
    let Some(Invocation::Error(error)) = &other else {
        panic!("another detail must not replay the first's reservation: {other:?}");
    };
    assert_eq!(error["errorType"], "PayloadMismatch", "{error}");
    let again = invoke(event("12345678901234567890123")).await;
    assert_eq!(again, Some(Invocation::Response(reservation)));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        level(&s.ddb, &s.stock_table, "SKU-RED-MUG").await,
        Some(97),
        "reserved once"
    );
}

/// The `inventory` binary under Lambda's asynchronous invocation
/// (`test_kit::async_invoke`, as EventBridge invokes it): the first two
/// attempts reserve, or find the reservation, but their answers are lost
/// (a timeout after the commit: Lambda sees an error) and the same event is
/// sent again up to the bound. Stock is reserved once, and every attempt
/// answers the first reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_retries_after_lost_answers_reserve_once() {
    use test_kit::async_invoke::{Options, invoke};
    use test_kit::now_ms;
    use test_kit::runtime_api::{RuntimeApi, spawn_function};

    let s = setup().await;
    let api = RuntimeApi::start().await;
    let mut child = spawn_function(
        "inventory",
        &api,
        &[
            ("IDEMPOTENCY_TABLE", &s.idempotency_table),
            ("STOCK_TABLE", &s.stock_table),
        ],
    );
    let answers = std::sync::Mutex::new(Vec::new());
    let stats = invoke(&sample("order-placed"), &Options::default(), |event| {
        let (api, answers) = (&api, &answers);
        async move {
            let answer = api
                .invoke(event, now_ms() + 30_000, Duration::from_secs(20))
                .await;
            let attempt = {
                let mut answers = answers.lock().unwrap();
                answers.push(answer);
                answers.len()
            };
            if attempt < 3 {
                Err(lambda_runtime::Error::from("the answer was lost"))
            } else {
                Ok(())
            }
        }
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((stats.attempts, stats.errors), (3, 2));
    let reservation =
        serde_json::to_value(reserved("ord-1001", "SKU-RED-MUG", 2)).expect("a response");
    assert_eq!(
        *answers.lock().unwrap(),
        vec![Some(test_kit::runtime_api::Invocation::Response(reservation)); 3],
        "every attempt answers the first reservation"
    );
    assert_eq!(
        level(&s.ddb, &s.stock_table, "SKU-RED-MUG").await,
        Some(98),
        "reserved once"
    );
}
