//! `inventory` end to end against moto: DynamoDB idempotency and stock
//! tables, EventBridge events as Lambda receives them (asynchronous
//! invocation: a retry is the same event delivered again).

use aws_sdk_dynamodb::types::AttributeValue;
use integration_tests::{create_idempotency_table, create_table, moto};
use inventory::{App, DynamoDbStock, Reservation, Response};
use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use shared::{DynamoDbStore, EventError, Idempotency, TableConfig};
use std::sync::Arc;
use std::time::Duration;

struct Setup {
    app: App,
    ddb: aws_sdk_dynamodb::Client,
    stock_table: String,
}

async fn setup() -> Setup {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let stock_table = create_table(&ddb, "stock", "sku", None).await;
    for (sku, level) in [("SKU-RED-MUG", 100), ("SKU-BLUE-PLATE", 40)] {
        set_level(&ddb, &stock_table, sku, level).await;
    }
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        App::config(),
    );
    let app = App::new(
        engine,
        Arc::new(DynamoDbStock::new(ddb.clone(), &stock_table)),
    );
    Setup {
        app,
        ddb,
        stock_table,
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

async fn invoke(app: &App, event: Value) -> Result<Response, lambda_runtime::Error> {
    let ctx = shared::runtime::local_context(0, Duration::from_secs(30));
    app.handle(LambdaEvent::new(event, ctx)).await
}

fn sample(name: &str) -> Value {
    let text = match name {
        "order-placed" => include_str!("../../../events/inventory-order-placed.json"),
        "insufficient" => include_str!("../../../events/inventory-insufficient-stock.json"),
        other => panic!("no sample {other}"),
    };
    serde_json::from_str(text).unwrap()
}

fn reserved(order_id: &str, sku: &str, reserved: u32, remaining: i64) -> Response {
    Response::Reserved(Reservation {
        order_id: order_id.into(),
        sku: sku.into(),
        reserved,
        remaining,
    })
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
    } = setup().await;
    let stock = app.stock();
    let first = invoke(&app, sample("order-placed")).await.unwrap();
    assert_eq!(first, reserved("ord-1001", "SKU-RED-MUG", 2, 98));
    for _redelivery in 0..2 {
        assert_eq!(invoke(&app, sample("order-placed")).await.unwrap(), first);
    }
    assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(98));

    let rejected = invoke(&app, sample("insufficient")).await.unwrap();
    assert_eq!(
        rejected,
        Response::Rejected {
            rejected: "insufficient stock for SKU-RED-MUG: 1000 requested, 98 available \
                       (order ord-1004)"
                .into()
        }
    );
    assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(98));
    // Restocked since: a redelivery replays the recorded refusal and does
    // not reserve.
    set_level(&ddb, &stock_table, "SKU-RED-MUG", 5000).await;
    assert_eq!(
        invoke(&app, sample("insufficient")).await.unwrap(),
        rejected
    );
    assert_eq!(stock.level("SKU-RED-MUG").await.unwrap(), Some(5000));
}

/// The conditional decrement on DynamoDB: exact stock down to zero, then a
/// refusal that reports what is left; an unknown SKU is told apart (the
/// failed condition returns no item) and no item is created for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_decrement_on_dynamodb() {
    let Setup { app, .. } = setup().await;
    let event = |n: u32, sku: &str, quantity: u32| {
        let mut e = sample("order-placed");
        e["id"] = json!(format!("00000000-0000-4000-8000-{n:012}"));
        e["detail"] = json!({"order_id": format!("ord-{n}"), "sku": sku, "quantity": quantity});
        e
    };
    assert_eq!(
        invoke(&app, event(1, "SKU-BLUE-PLATE", 30)).await.unwrap(),
        reserved("ord-1", "SKU-BLUE-PLATE", 30, 10)
    );
    assert_eq!(
        invoke(&app, event(2, "SKU-BLUE-PLATE", 10)).await.unwrap(),
        reserved("ord-2", "SKU-BLUE-PLATE", 10, 0)
    );
    assert_eq!(
        invoke(&app, event(3, "SKU-BLUE-PLATE", 1)).await.unwrap(),
        Response::Rejected {
            rejected: "insufficient stock for SKU-BLUE-PLATE: 1 requested, 0 available \
                       (order ord-3)"
                .into()
        }
    );
    assert_eq!(
        invoke(&app, event(4, "SKU-NOPE", 1)).await.unwrap(),
        Response::Rejected {
            rejected: "unknown sku SKU-NOPE (order ord-4)".into()
        }
    );
    assert_eq!(app.stock().level("SKU-NOPE").await.unwrap(), None);
    assert_eq!(app.stock().level("SKU-BLUE-PLATE").await.unwrap(), Some(0));
}

/// The same event delivered twice at once (two concurrent invocations):
/// one reserves; the other replays it or is told the event is in progress
/// (an error, so Lambda retries it), and its retry replays the reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_deliveries_reserve_once() {
    let Setup { app, .. } = setup().await;
    let mut in_progress = 0;
    let mut expected_level = 100;
    for n in 0..10u32 {
        let mut event = sample("order-placed");
        event["id"] = json!(format!("10000000-0000-4000-8000-{n:012}"));
        event["detail"]["order_id"] = json!(format!("ord-c{n}"));
        expected_level -= 2;
        let expected = reserved(&format!("ord-c{n}"), "SKU-RED-MUG", 2, expected_level);
        let (a, b) = tokio::join!(invoke(&app, event.clone()), invoke(&app, event.clone()));
        let mut ok = 0;
        for result in [a, b] {
            match result {
                Ok(response) => {
                    assert_eq!(response, expected);
                    ok += 1;
                }
                Err(err) => {
                    match err.downcast_ref::<EventError>() {
                        Some(e @ EventError::InProgress { .. }) => assert!(e.is_retryable()),
                        other => panic!("{other:?}: {err}"),
                    }
                    in_progress += 1;
                    // Lambda's retry (after the first finished).
                    assert_eq!(invoke(&app, event.clone()).await.unwrap(), expected);
                }
            }
        }
        assert!(ok >= 1, "one of the two deliveries reserved");
        assert_eq!(
            app.stock().level("SKU-RED-MUG").await.unwrap(),
            Some(expected_level)
        );
    }
    eprintln!("concurrent deliveries: {in_progress} of 10 pairs met an in-progress claim");
}
