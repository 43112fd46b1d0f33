//! The bill against moto: the launcher's ledger of one payment in each
//! commit mode, priced by `test_kit::bill`.

use lambda_idempotency::{CommitMode, DynamoDbStore, Idempotency, store::TableConfig};
use lambda_runtime::LambdaEvent;
use payments::{Accounts, App};
use serde_json::{Value, json};
use std::time::Duration;
use test_kit::bill::Bill;
use test_kit::events::{Msg, sqs_event};
use test_kit::{create_idempotency_table, create_table, moto};

/// The ledger's entries that touch one of `tables` (tests run side by
/// side on one moto).
fn entries_of(ledger: &[Value], tables: &[&str]) -> Vec<Value> {
    ledger
        .iter()
        .filter(|e| {
            let text = e["request"].to_string();
            tables.iter().any(|t| text.contains(&format!("\"{t}\"")))
        })
        .cloned()
        .collect()
}

/// What one mode sends and costs: a new payment, then its duplicate.
struct Expected {
    mode: CommitMode,
    new_ops: &'static [&'static str],
    new_wru: f64,
    dup_ops: &'static [&'static str],
    dup_wru: f64,
}

fn operations(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| {
            let t = e["target"].as_str().unwrap_or_default();
            t.rsplit('.').next().unwrap_or_default().to_owned()
        })
        .collect()
}

/// One new payment, then the same payment redelivered, in each mode: the
/// requests and units the ledger prices. Claim-then-complete's credit is
/// a plain conditional `UpdateItem` (1 write unit), not a one-item
/// `TransactWriteItems` (2); a duplicate in optimistic mode is a cancelled
/// transaction, billed as applied and reported apart. (The only test that
/// keeps the launcher's ledger: one test, so no other resets it midway.)
#[tokio::test]
async fn one_payment_costs_what_each_mode_sends() {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let body =
        json!({"payment_id": "pay-bill", "account_id": "acct-bill", "amount_cents": 5}).to_string();
    let event = |id: &str| {
        sqs_event(
            "payments.fifo",
            &[Msg::new(id, body.clone()).in_group("acct-bill")],
        )
    };
    let expected = [
        Expected {
            mode: CommitMode::ClaimThenComplete,
            new_ops: &["PutItem", "UpdateItem", "UpdateItem"],
            new_wru: 3.0,
            dup_ops: &["PutItem"],
            dup_wru: 1.0,
        },
        Expected {
            mode: CommitMode::Fenced,
            new_ops: &["PutItem", "TransactWriteItems"],
            new_wru: 5.0,
            dup_ops: &["PutItem"],
            dup_wru: 1.0,
        },
        Expected {
            mode: CommitMode::Optimistic,
            new_ops: &["TransactWriteItems"],
            new_wru: 4.0,
            dup_ops: &["TransactWriteItems"],
            dup_wru: 4.0,
        },
    ];
    moto.reset_ledger().await;
    the_ledger_shows_items_before_and_after().await;
    for Expected {
        mode,
        new_ops,
        new_wru,
        dup_ops,
        dup_wru,
    } in expected
    {
        let idempotency = create_idempotency_table(&ddb).await;
        let accounts = create_table(&ddb, "bill-accounts", "account_id", None).await;
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(&idempotency)),
            App::config().commit_mode(mode),
        );
        let app = App::new(
            engine,
            Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb.clone(), &accounts)),
        );
        let tables = [idempotency.as_str(), accounts.as_str()];
        let mut bills = Vec::new();
        for id in ["m-1", "m-2"] {
            let before = moto.ledger().await.len();
            let ctx = lambda_idempotency::runtime::local_context(0, Duration::from_secs(30));
            let response = app.handle(LambdaEvent::new(event(id), ctx)).await.unwrap();
            assert!(
                response.batch_item_failures.is_empty(),
                "{mode:?}: {response:?}"
            );
            let ledger = moto.ledger().await;
            bills.push(entries_of(&ledger[before..], &tables));
        }
        let (new, dup) = (&bills[0], &bills[1]);
        assert_eq!(operations(new), new_ops, "{mode:?}: new");
        let bill = Bill::of(new).unwrap();
        assert_eq!(
            (bill.wru, bill.rru),
            (new_wru, 0.0),
            "{mode:?}: new {bill:?}"
        );
        assert_eq!(operations(dup), dup_ops, "{mode:?}: duplicate");
        let bill = Bill::of(dup).unwrap();
        assert_eq!(
            (bill.wru, bill.rru),
            (dup_wru, 0.0),
            "{mode:?}: duplicate {bill:?}"
        );
        let cancelled = if mode == CommitMode::Optimistic {
            dup_wru
        } else {
            0.0
        };
        assert_eq!(bill.wru_cancelled, cancelled, "{mode:?}");
    }
    moto.stop_ledger().await;
}

/// The ledger holds the items a request names as they stood before and
/// after it, read from moto's tables (the ledger is on).
async fn the_ledger_shows_items_before_and_after() {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let table = create_table(&ddb, "bill-items", "pk", None).await;
    let before = moto.ledger().await.len();
    ddb.put_item()
        .table_name(&table)
        .item("pk", aws_sdk_dynamodb::types::AttributeValue::S("a".into()))
        .item("n", aws_sdk_dynamodb::types::AttributeValue::N("1".into()))
        .send()
        .await
        .unwrap();
    ddb.update_item()
        .table_name(&table)
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S("a".into()))
        .update_expression("ADD n :one")
        .expression_attribute_values(
            ":one",
            aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
        )
        .send()
        .await
        .unwrap();
    let ledger = moto.ledger().await;
    let entries = entries_of(&ledger[before..], &[&table]);
    assert_eq!(operations(&entries), ["PutItem", "UpdateItem"]);
    assert_eq!(entries[0]["items"][0]["before"], Value::Null);
    assert_eq!(entries[0]["items"][0]["after"]["n"], json!({"N": "1"}));
    assert_eq!(entries[1]["items"][0]["before"]["n"], json!({"N": "1"}));
    assert_eq!(entries[1]["items"][0]["after"]["n"], json!({"N": "2"}));
}
