//! `payments` end to end against moto: a FIFO queue with a DLQ, the event
//! source mapping loop, DynamoDB idempotency and accounts tables.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_idempotency::{DynamoDbStore, Idempotency, store::TableConfig};
use payments::{Accounts, App};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use test_kit::esm::{self, Queue};
use test_kit::{create_idempotency_table, create_table, moto};

struct Setup {
    app: App,
    sqs: aws_sdk_sqs::Client,
    queue: Queue,
}

async fn setup() -> Setup {
    let moto = moto();
    let ddb = moto.dynamodb().await;
    let idempotency = create_idempotency_table(&ddb).await;
    let accounts = create_table(&ddb, "accounts", "account_id", None).await;
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        App::config(),
    );
    let app = App::new(
        engine,
        Accounts::from_table(lambda_idempotency::Table::dynamodb(ddb, accounts)),
    );
    let sqs = moto.sqs().await;
    // A 3 s visibility timeout: under a loaded machine a batch can take over
    // 1 s, and a message back in view while its batch still runs is received
    // again (in progress), its receive count climbing towards the DLQ.
    let queue = esm::create_queue(&sqs, "payments", true, 3, 3).await;
    Setup { app, sqs, queue }
}

async fn invoke(
    app: &App,
    event: serde_json::Value,
) -> Result<aws_lambda_events::sqs::SqsBatchResponse, lambda_runtime::Error> {
    lambda_idempotency::testing::invoke(|e| app.handle(e), &event).await
}

/// Every account's balance is the sum of its unique payments, whatever is
/// redelivered; poison messages end in the DLQ; nothing else is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balances_are_exact_under_redelivery() {
    let Setup { app, sqs, queue } = setup().await;
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut poison = Vec::new();
    for i in 0..40u64 {
        let account = format!("acct-{}", i % 4);
        let payment = json!({"payment_id": format!("pay-{i}"), "account_id": account, "amount_cents": 100 + i});
        let body = payment.to_string();
        *expected.entry(account.clone()).or_default() += 100 + i as i64;
        esm::send(&sqs, &queue, &body, Some(&account), Some(&format!("d-{i}"))).await;
        // Every third payment is delivered again (a producer retry with a new
        // deduplication id: SQS does not catch it, the engine must).
        if i % 3 == 0 {
            esm::send(
                &sqs,
                &queue,
                &body,
                Some(&account),
                Some(&format!("d-{i}-again")),
            )
            .await;
        }
        if i % 13 == 5 {
            let bad = format!(
                "{{\"payment_id\":\"bad-{i}\",\"account_id\":\"{account}\",\"amount_cents\":-1}}"
            );
            esm::send(
                &sqs,
                &queue,
                &bad,
                Some(&account),
                Some(&format!("bad-{i}")),
            )
            .await;
            poison.push(bad);
        }
    }
    esm::send(&sqs, &queue, "not json {", Some("acct-1"), Some("garbage")).await;
    poison.push("not json {".to_owned());

    // The mapping stops once the queue is empty; the bound only caps a run
    // on a loaded machine (60 s ran out once at load 10).
    let stats = esm::run(&sqs, &queue, Duration::from_secs(180), |event| {
        invoke(&app, event)
    })
    .await;
    assert_eq!(stats.invocation_errors, 0, "{stats:?}");
    assert!(stats.reported_failures >= poison.len() * 3, "{stats:?}");

    let mut dlq = esm::drain_bodies(&sqs, queue.dlq_url.as_deref().unwrap()).await;
    dlq.sort();
    for (account, sum) in &expected {
        assert_eq!(
            app.accounts().balance(account).await.unwrap(),
            Some(*sum),
            "balance of {account} (the DLQ holds {dlq:?}; {stats:?})"
        );
    }
    poison.sort();
    assert_eq!(dlq, poison);
}

/// The sample events: a duplicate in one batch is applied once; a second
/// delivery of the whole batch is replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_duplicate_event_applies_once() {
    let Setup { app, .. } = setup().await;
    let event: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../events/payments-fifo-duplicate.json"
    ))
    .unwrap();
    for _ in 0..2 {
        let response = invoke(&app, event.clone()).await.unwrap();
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let mut sums: BTreeMap<String, i64> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for r in event["Records"].as_array().unwrap() {
        let body: serde_json::Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        if seen.insert(body["payment_id"].clone()) {
            *sums
                .entry(body["account_id"].as_str().unwrap().to_owned())
                .or_default() += body["amount_cents"].as_i64().unwrap();
        }
    }
    assert!(
        seen.len() < event["Records"].as_array().unwrap().len(),
        "the sample has a duplicate"
    );
    for (account, sum) in sums {
        assert_eq!(app.accounts().balance(&account).await.unwrap(), Some(sum));
    }
}

/// The poison sample: the bad records and the record held back behind one
/// are reported; the other groups go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_poison_event_fails_only_its_group() {
    let Setup { app, .. } = setup().await;
    let event: serde_json::Value =
        serde_json::from_str(include_str!("../../../../events/payments-fifo-poison.json")).unwrap();
    let response = invoke(&app, event.clone()).await.unwrap();
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    let records = event["Records"].as_array().unwrap();
    let id = |i: usize| records[i]["messageId"].as_str().unwrap().to_owned();
    // acct-1: good, poison, held back; acct-2: two good; acct-3: negative amount.
    assert_eq!(failed, vec![id(2), id(3), id(5)]);
    assert_eq!(app.accounts().balance("acct-1").await.unwrap(), Some(1250));
    assert_eq!(app.accounts().balance("acct-2").await.unwrap(), Some(5000));
    assert_eq!(app.accounts().balance("acct-3").await.unwrap(), None);
}

/// A credit whose result does not fit `i64` (balance 1 + `i64::MAX`) is
/// applied once in every commit mode: DynamoDB holds 38 digits, the engine
/// reads nothing back, and no error after the effect releases the claim
/// (which would credit again on each redelivery).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credit_past_i64_is_applied_once_in_every_mode() {
    use lambda_idempotency::CommitMode;
    use test_kit::events::{Msg, sqs_event};
    let moto = moto();
    let ddb = moto.dynamodb().await;
    for mode in [
        CommitMode::ClaimThenComplete,
        CommitMode::Fenced,
        CommitMode::Optimistic,
    ] {
        let idempotency = create_idempotency_table(&ddb).await;
        let accounts = create_table(&ddb, "accounts", "account_id", None).await;
        ddb.put_item()
            .table_name(&accounts)
            .item("account_id", AttributeValue::S("acct-big".into()))
            .item("balance_cents", AttributeValue::N("1".into()))
            .send()
            .await
            .unwrap();
        let engine = Idempotency::new(
            DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
            App::config().commit_mode(mode),
        );
        let app = App::new(
            engine,
            Accounts::from_table(lambda_idempotency::Table::dynamodb(
                ddb.clone(),
                accounts.clone(),
            )),
        );
        let body =
            json!({"payment_id": "pay-max", "account_id": "acct-big", "amount_cents": i64::MAX})
                .to_string();
        for delivery in 0..3 {
            let event = sqs_event(
                "payments.fifo",
                &[Msg::new(format!("m-{delivery}"), body.clone()).in_group("acct-big")],
            );
            let response = invoke(&app, event).await.unwrap();
            assert!(
                response.batch_item_failures.is_empty(),
                "{mode:?} delivery {delivery}: {response:?}"
            );
        }
        let item = ddb
            .get_item()
            .table_name(&accounts)
            .key("account_id", AttributeValue::S("acct-big".into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        let balance = item.item().and_then(|i| i.get("balance_cents")).cloned();
        assert_eq!(
            balance,
            Some(AttributeValue::N("9223372036854775808".into())),
            "{mode:?}: credited exactly once"
        );
    }
}

/// A body shaped like an EventBridge event, whose top level is payment Q
/// while its `detail` is payment P, is one document: `payments` opens no
/// envelope, so it is keyed on Q and credits Q. 200 payments, 21 of them
/// such lookalikes wrapping an earlier payment, each batch delivered twice:
/// every payment is credited once (before the fix, the 21 wrapped payments
/// were credited twice and the 21 lookalikes never).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_lookalike_is_keyed_and_credited_from_one_document() {
    use test_kit::events::{Msg, sqs_event};
    let Setup { app, .. } = setup().await;
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    let mut messages = Vec::new();
    for i in 0..200u64 {
        let account = format!("acct-{}", i % 10);
        let amount = 100 + i;
        *expected.entry(account.clone()).or_default() += amount as i64;
        let body = if i >= 10 && i % 9 == 0 {
            // Wraps the plain payment sent ten before, in the same account.
            let wrapped = json!({"payment_id": format!("pay-{}", i - 10), "account_id": account,
                                 "amount_cents": 100 + i - 10});
            json!({
                "version": "0", "id": format!("evt-{i}"), "detail-type": "PaymentReceived",
                "source": "shop.payments", "account": "123456789012",
                "time": "2026-12-01T00:00:00Z", "region": "us-east-1", "resources": [],
                "detail": wrapped,
                "payment_id": format!("pay-{i}"), "account_id": account, "amount_cents": amount,
            })
        } else {
            json!({"payment_id": format!("pay-{i}"), "account_id": account, "amount_cents": amount})
        };
        messages.push(Msg::new(format!("m-{i}"), body.to_string()).in_group(account));
    }
    for delivery in 0..2 {
        for (n, batch) in messages.chunks(10).enumerate() {
            let response = invoke(&app, sqs_event("payments.fifo", batch))
                .await
                .unwrap();
            assert!(
                response.batch_item_failures.is_empty(),
                "delivery {delivery}, batch {n}: {response:?}"
            );
        }
    }
    for (account, sum) in &expected {
        assert_eq!(
            app.accounts().balance(account).await.unwrap(),
            Some(*sum),
            "balance of {account}: every payment credited once"
        );
    }
}
