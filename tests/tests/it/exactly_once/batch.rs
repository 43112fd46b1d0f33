//! The batch adapters over the DynamoDB store on moto: in-batch duplicates,
//! FIFO groups, and processors racing over overlapping batches.

use lambda_idempotency::sqs::{SqsProcessor, SqsRecord, parse_sqs_event};
use lambda_idempotency::testing::FailedIds as _;
use lambda_idempotency::{
    Config, DynamoDbStore, HandlerError, Idempotency, KeySelector, Outcome, store::TableConfig,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use test_kit::events::{Msg, sample, sqs_event};
use test_kit::{create_idempotency_table, moto};

/// Effects applied, per key: what must end at exactly one each.
#[derive(Debug, Clone, Default)]
struct Effects(Arc<Mutex<HashMap<String, usize>>>);

impl Effects {
    fn apply(&self, key: &str) {
        *self.0.lock().unwrap().entry(key.to_owned()).or_default() += 1;
    }
    fn counts(&self) -> HashMap<String, usize> {
        self.0.lock().unwrap().clone()
    }
}

/// An engine on its own client, over one shared table (as separate Lambda
/// instances would be).
async fn engine(table: &str) -> Idempotency {
    let client = moto().dynamodb().await;
    Idempotency::new(
        DynamoDbStore::new(client, TableConfig::new(table)),
        Config::with_prefix("it.batch").disabled(false),
    )
}

async fn table() -> String {
    create_idempotency_table(&moto().dynamodb().await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_batch_duplicate_and_poison_on_dynamodb() {
    let engine = engine(&table().await).await;
    let effects = Effects::default();
    let event = parse_sqs_event(sample("orders-standard.json")).unwrap();
    let ids: Vec<String> = event
        .records
        .iter()
        .map(|r| r.as_ref().unwrap().message_id.clone().unwrap())
        .collect();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/event_id"));
    let handler = |r: SqsRecord<Value>| {
        let effects = effects.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            effects.apply(r.body["event_id"].as_str().unwrap_or_default());
            Ok::<_, HandlerError>(json!({"order": r.body["order_id"]}))
        }
    };
    let report = processor.process(event.clone(), None, handler).await;
    let response = report
        .response_as::<lambda_idempotency::sqs::SqsBatchResponse>()
        .unwrap();
    let failed = response.failed_ids();
    assert_eq!(failed.len(), 1, "only the poison record: {failed:?}");
    assert!(ids.contains(&failed[0]));
    let counts = effects.counts();
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");

    // The whole batch again: every good record replays, nothing runs.
    let again = processor.process(event, None, handler).await;
    let replayed = again
        .records
        .iter()
        .filter(|r| matches!(r.outcome, Ok(Outcome::Replayed(Some(_)))))
        .count();
    assert_eq!(replayed, 4);
    assert_eq!(effects.counts(), counts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_groups_on_dynamodb_keep_order_and_skip_after_failure() {
    let engine = engine(&table().await).await;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let messages: Vec<Msg> = (0..9)
        .map(|i| {
            let group = format!("g{}", i % 3);
            let body = if i == 4 {
                "{not json".to_owned()
            } else {
                json!({"id": format!("m{i}"), "group": group}).to_string()
            };
            Msg::new(format!("m{i}"), body).in_group(group)
        })
        .collect();
    let event = parse_sqs_event(sqs_event("q.fifo", &messages)).unwrap();
    let report = SqsProcessor::new(engine, KeySelector::pointer("/id"))
        .process(event, None, |r: SqsRecord<Value>| {
            let seen = seen.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                seen.lock()
                    .unwrap()
                    .push(r.body["id"].as_str().unwrap().to_owned());
                Ok::<_, HandlerError>(())
            }
        })
        .await;
    let failed = report
        .response_as::<lambda_idempotency::sqs::SqsBatchResponse>()
        .unwrap()
        .failed_ids();
    // g1 = m1, m4 (poison), m7 (held back); g0 and g2 complete.
    assert_eq!(failed, ["m4", "m7"]);
    let seen = seen.lock().unwrap().clone();
    let order = |g: &[&str]| -> Vec<String> {
        seen.iter()
            .filter(|s| g.contains(&s.as_str()))
            .cloned()
            .collect()
    };
    assert_eq!(order(&["m0", "m3", "m6"]), ["m0", "m3", "m6"]);
    assert_eq!(order(&["m2", "m5", "m8"]), ["m2", "m5", "m8"]);
    assert_eq!(order(&["m1", "m4", "m7"]), ["m1"]);
}

/// Two processors (separate clients, one table) handle overlapping batches at
/// the same time, standard and FIFO; failed records (a key in progress at the
/// other processor) are redelivered until none is left. Each key's effect
/// happens exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_batches_race_to_exactly_once() {
    for queue in ["orders", "payments.fifo"] {
        let table = table().await;
        let effects = Effects::default();
        let batch = |range: std::ops::Range<u32>, tag: &str| {
            test_kit::events::keyed_batch(queue, range, tag)
        };
        let mut pending = vec![batch(0..10, "a"), batch(5..15, "b")];
        let processors = [
            SqsProcessor::new(engine(&table).await, KeySelector::pointer("/key")),
            SqsProcessor::new(engine(&table).await, KeySelector::pointer("/key")),
        ];
        let mut rounds = 0;
        while pending.iter().any(|b| !b.is_empty()) {
            rounds += 1;
            assert!(rounds <= 20, "still pending after 20 rounds: {pending:?}");
            let run = |i: usize| {
                let event = parse_sqs_event(sqs_event(queue, &pending[i])).unwrap();
                let effects = effects.clone();
                processors[i].process(event, None, move |r: SqsRecord<Value>| {
                    let effects = effects.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(15)).await;
                        effects.apply(r.body["key"].as_str().unwrap());
                        Ok::<_, HandlerError>(())
                    }
                })
            };
            let (a, b) = tokio::join!(run(0), run(1));
            let reports = [a, b];
            pending = reports
                .into_iter()
                .zip(&pending)
                .map(|(report, msgs)| {
                    let failed = report
                        .response_as::<lambda_idempotency::sqs::SqsBatchResponse>()
                        .unwrap()
                        .failed_ids();
                    msgs.iter()
                        .filter(|m| failed.contains(&m.id))
                        .cloned()
                        .collect()
                })
                .collect();
        }
        let counts = effects.counts();
        assert_eq!(counts.len(), 15, "{queue}: {counts:?}");
        assert!(counts.values().all(|&n| n == 1), "{queue}: {counts:?}");
    }
}

/// Transactional batches on moto: the new records of a batch share
/// `TransactWriteItems` (optimistic, batch commits), two records on one
/// account never in the same one: 10 records on 2 accounts take 5; a
/// redelivered batch is settled by one `BatchGetItem` and applies nothing
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_batch_and_pre_read_request_counts() {
    use lambda_idempotency::{Write, write::Staged};
    use test_kit::capture::Capture;
    use test_kit::contract::pk_key;

    let sdk = moto().sdk_config().await;
    let plain = aws_sdk_dynamodb::Client::new(&sdk);
    let table = create_idempotency_table(&plain).await;
    let accounts = test_kit::create_table(&plain, "accounts", "pk", None).await;
    let capture = Capture::default();
    let client = capture.dynamodb_client(&sdk);
    let engine = Idempotency::new(
        DynamoDbStore::new(client, TableConfig::new(&table)),
        Config::with_prefix("it.tx-batch")
            .disabled(false)
            .commit_mode(lambda_idempotency::CommitMode::Optimistic)
            .batch_commits(true),
    );
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/id"));
    let messages: Vec<Msg> = (0..10)
        .map(|i| {
            Msg::new(
                format!("m{i}"),
                json!({"id": format!("pay-{i}"), "account": format!("a{}", i % 2)}).to_string(),
            )
        })
        .collect();
    let handler = |r: SqsRecord<Value>| {
        let accounts = accounts.clone();
        async move {
            let account = r.body["account"].as_str().unwrap_or_default().to_owned();
            Ok::<_, HandlerError>(
                Staged::new(json!("ok"))
                    .write(Write::update(&accounts, pk_key(&account)).add("balance", 10)),
            )
        }
    };
    let first = parse_sqs_event(sqs_event("payments", &messages)).unwrap();
    let report = processor.process(first, None, handler).await;
    assert!(report.is_success());
    let ops = capture.operations();
    assert_eq!(ops.len(), 5, "{ops:?}");
    assert!(ops.iter().all(|o| o == "TransactWriteItems"), "{ops:?}");

    // The same batch redelivered (receive count 2): one read settles it.
    capture.clear();
    let mut again = sqs_event("payments", &messages);
    for r in again["Records"].as_array_mut().unwrap() {
        r["attributes"]["ApproximateReceiveCount"] = json!("2");
    }
    let report = processor
        .process(parse_sqs_event(again).unwrap(), None, handler)
        .await;
    assert!(
        report
            .records
            .iter()
            .all(|r| matches!(r.outcome, Ok(Outcome::Replayed(Some(_)))))
    );
    assert_eq!(capture.operations(), ["BatchGetItem"]);

    for account in ["a0", "a1"] {
        let item = lambda_idempotency::Table::dynamodb(plain.clone(), &accounts)
            .get(&pk_key(account))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(item["balance"].as_n(), Some("50"), "{account}");
    }
}
