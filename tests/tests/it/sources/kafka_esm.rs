//! The in-memory Kafka event source mapping (`test_kit::kafka_esm`):
//! batches over partitions in order, shaped as the Kafka event type reads
//! them, and the Kafka partial batch response read as Lambda reads it.

use aws_lambda_events::kafka::KafkaEvent;
use lambda_idempotency::testing::events::Kafka;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;
use test_kit::kafka_esm::{self, Options, Outcome, Topic, records, response};

fn topic() -> Topic {
    let mut t = Topic::new("orders", 2);
    for n in 0..4 {
        let value = json!({"event_id": format!("evt-{n}")}).to_string();
        t.produce(
            0,
            Some(b"cust-1"),
            value.as_bytes(),
            &[("event-type", b"OrderPlaced")],
        );
    }
    t.produce(1, None, b"not json {", &[]);
    t.produce(1, Some(b"cust-2"), b"{\"event_id\":\"evt-9\"}", &[]);
    t
}

/// (partition key, offset) of each invocation.
fn offsets(calls: &Mutex<Vec<Value>>) -> Vec<Vec<(String, i64)>> {
    calls
        .lock()
        .unwrap()
        .iter()
        .map(|e| records(e).into_iter().map(|(p, o, _)| (p, o)).collect())
        .collect()
}

fn at(p: &str, o: i64) -> (String, i64) {
    (p.to_owned(), o)
}

#[tokio::test]
async fn a_partial_response_resumes_the_listed_partition_and_commits_the_others() {
    let topic = topic();
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let options = Options {
        source: Kafka::SelfManaged,
        item_failures: true,
        ..Options::default()
    };
    let stats = kafka_esm::run(&topic, &options, |event| async move {
        let typed: KafkaEvent = serde_json::from_value(event.clone()).unwrap();
        assert_eq!(typed.event_source.as_deref(), Some("SelfManagedKafka"));
        let first = {
            let mut calls = calls_ref.lock().unwrap();
            calls.push(event);
            calls.len() == 1
        };
        // The first answer fails orders-0 at offsets 3 and 2 and orders-1's
        // poison at 0.
        let answer = if first {
            response(&[at("orders-0", 3), at("orders-0", 2), at("orders-1", 0)])
        } else {
            json!({"batchItemFailures": []})
        };
        Ok::<_, lambda_runtime::Error>(answer)
    })
    .await;
    let all = vec![
        at("orders-0", 0),
        at("orders-0", 1),
        at("orders-0", 2),
        at("orders-0", 3),
        at("orders-1", 0),
        at("orders-1", 1),
    ];
    assert_eq!(
        offsets(&calls),
        vec![
            all.clone(),
            vec![
                at("orders-0", 2),
                at("orders-0", 3),
                at("orders-1", 0),
                at("orders-1", 1)
            ]
        ]
    );
    assert_eq!(
        stats.log[0].1,
        Outcome::Partial(BTreeMap::from([
            ("orders-0".to_owned(), 2),
            ("orders-1".to_owned(), 0)
        ]))
    );
    assert_eq!(
        stats.committed,
        BTreeMap::from([("orders-0".to_owned(), 4), ("orders-1".to_owned(), 2)])
    );
    assert_eq!(stats.partial_failures, 1);
}

#[tokio::test]
async fn a_poison_record_stops_at_the_retry_bound_while_its_partition_alone_waits() {
    let topic = topic();
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let options = Options {
        max_retries: 2,
        item_failures: true,
        ..Options::default()
    };
    let stats = kafka_esm::run(&topic, &options, |event| async move {
        let typed: KafkaEvent = serde_json::from_value(event.clone()).unwrap();
        assert_eq!(typed.event_source.as_deref(), Some("aws:kafka"));
        let failed: Vec<(String, i64)> = records(&event)
            .into_iter()
            .filter(|(_, _, r)| {
                let value = r["value"].as_str().unwrap();
                value == "bm90IGpzb24gew==" // "not json {"
            })
            .map(|(p, o, _)| (p, o))
            .collect();
        calls_ref.lock().unwrap().push(event);
        Ok::<_, lambda_runtime::Error>(response(&failed))
    })
    .await;
    let calls = offsets(&calls);
    assert_eq!(calls.len(), 3, "the first try and 2 retries");
    assert_eq!(calls[0].len(), 6);
    // orders-0 committed on the first try; only orders-1 is retried.
    for retry in &calls[1..] {
        assert_eq!(retry, &vec![at("orders-1", 0), at("orders-1", 1)]);
    }
    assert_eq!(stats.skipped, vec![at("orders-1", 0), at("orders-1", 1)]);
    assert_eq!(stats.committed["orders-0"], 4);
    assert_eq!(stats.committed["orders-1"], 2);
}

#[tokio::test]
async fn an_error_or_a_bad_identifier_retries_the_whole_batch() {
    let topic = topic();
    let calls = Mutex::new(Vec::new());
    let calls_ref = &calls;
    let options = Options {
        batch_size: 3,
        item_failures: true,
        ..Options::default()
    };
    let stats = kafka_esm::run(&topic, &options, |event| async move {
        let n = {
            let mut calls = calls_ref.lock().unwrap();
            calls.push(event);
            calls.len()
        };
        match n {
            1 => Err(lambda_runtime::Error::from("function crashed")),
            // Kinesis-style string identifiers are not Kafka's.
            2 => Ok(json!({"batchItemFailures": [{"itemIdentifier": "orders-0:1"}]})),
            // An offset that is not in the batch.
            3 => Ok(response(&[at("orders-0", 3)])),
            _ => Ok(Value::Null),
        }
    })
    .await;
    let first = vec![at("orders-0", 0), at("orders-0", 1), at("orders-0", 2)];
    let calls = offsets(&calls);
    assert_eq!(calls[..4], vec![first.clone(); 4]);
    assert_eq!(stats.invocation_errors, 1);
    assert_eq!(stats.bad_responses, 2);
    // Batches of 3 over the partitions: [0-0..0-2], [0-3, 1-0, 1-1].
    assert_eq!(calls.len(), 5);
    assert_eq!(
        calls[4],
        vec![at("orders-0", 3), at("orders-1", 0), at("orders-1", 1)]
    );
    assert!(stats.skipped.is_empty());
}

/// A topic of two partitions: `orders-0` evt-0..evt-5, `orders-1`
/// evt-10..evt-13, each value `{"event_id": ..}`.
fn clean_topic() -> Topic {
    let mut t = Topic::new("orders", 2);
    for (partition, ids) in [(0, 0..6), (1, 10..14)] {
        for n in ids {
            let value = json!({"event_id": format!("evt-{n}")}).to_string();
            t.produce(partition, Some(b"cust"), value.as_bytes(), &[]);
        }
    }
    t
}

/// The `KafkaProcessor` in `mode` through the mapping: `evt-2` fails the
/// first `failures` times it runs. Returns the mapping's stats and how many
/// times each event id's effect was applied.
async fn through_the_mapping(
    mode: lambda_idempotency::kafka::KafkaItemFailures,
    options: &Options,
    failures: usize,
) -> (test_kit::kafka_esm::Stats, BTreeMap<String, usize>) {
    use lambda_idempotency::kafka::{KafkaMessage, KafkaProcessor};
    use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
    let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.kafka"));
    let processor =
        KafkaProcessor::new(engine, KeySelector::pointer("/event_id")).item_failures(mode);
    let applied = Mutex::new(BTreeMap::<String, usize>::new());
    let failed = Mutex::new(0_usize);
    let (processor, applied_ref, failed_ref) = (&processor, &applied, &failed);
    let stats = kafka_esm::run(&clean_topic(), options, |event| async move {
        let ctx = lambda_runtime::Context::default();
        processor
            .handle(
                lambda_runtime::LambdaEvent::new(event, ctx),
                |m: KafkaMessage<Value>| async move {
                    let id = m.body["event_id"].as_str().unwrap_or_default().to_owned();
                    if id == "evt-2" {
                        let mut failed = failed_ref.lock().unwrap();
                        if *failed < failures {
                            *failed += 1;
                            return Err(HandlerError::retryable("evt-2: the ledger is busy"));
                        }
                    }
                    *applied_ref.lock().unwrap().entry(id).or_default() += 1;
                    Ok::<_, HandlerError>(json!({"ok": true}))
                },
            )
            .await
    })
    .await;
    (stats, applied.into_inner().unwrap())
}

fn every_event_once() -> BTreeMap<String, usize> {
    (0..6)
        .chain(10..14)
        .map(|n| (format!("evt-{n}"), 1))
        .collect()
}

/// A mapping that does not act on `batchItemFailures` (not provisioned
/// mode, no `ReportBatchItemFailures`: a mapping's default) commits a batch
/// whose invocation succeeds. By default the processor fails the invocation
/// when a record is not done, so Lambda retries the batch: every event is
/// applied once (the done ones replay), none is committed unapplied.
#[tokio::test]
async fn by_default_a_failed_record_retries_the_batch_and_none_is_lost() {
    let options = Options::default();
    assert!(!options.item_failures, "a mapping's default");
    let (stats, applied) = through_the_mapping(
        lambda_idempotency::kafka::KafkaItemFailures::FailBatch,
        &options,
        2,
    )
    .await;
    assert_eq!(applied, every_event_once());
    assert_eq!(stats.invocation_errors, 2, "{:?}", stats.log);
    assert_eq!(stats.invocations, 3);
    assert!(stats.committed_failed.is_empty() && stats.skipped.is_empty());
    assert_eq!(
        stats.committed,
        BTreeMap::from([("orders-0".to_owned(), 6), ("orders-1".to_owned(), 4)])
    );
}

/// With the mapping in provisioned mode and `ReportBatchItemFailures`, the
/// reported mode names every record not done: the failed one and those
/// behind it are delivered again, the rest commit, every event once. The
/// same mode on a mapping that does not act on the list loses `evt-2` and
/// the records behind it: why it is not the default.
#[tokio::test]
async fn the_reported_mode_needs_a_mapping_that_acts_on_item_failures() {
    let reported = lambda_idempotency::kafka::KafkaItemFailures::Reported;
    let acting = Options {
        item_failures: true,
        ..Options::default()
    };
    let (stats, applied) = through_the_mapping(reported, &acting, 2).await;
    assert_eq!(applied, every_event_once());
    assert_eq!(stats.invocation_errors, 0);
    assert_eq!(stats.partial_failures, 2);
    let named = || Outcome::Partial(BTreeMap::from([("orders-0".to_owned(), 2)]));
    assert_eq!(stats.log[0].1, named());
    // The retry starts at evt-2: orders-1 and evt-0..1 were committed.
    assert_eq!(
        stats.log[1].0,
        (2..6).map(|o| at("orders-0", o)).collect::<Vec<_>>()
    );

    let (stats, applied) = through_the_mapping(reported, &Options::default(), 2).await;
    assert_eq!(
        stats.committed_failed,
        (2..6).map(|o| at("orders-0", o)).collect::<Vec<_>>(),
        "committed unapplied"
    );
    for lost in ["evt-2", "evt-3", "evt-4", "evt-5"] {
        assert!(!applied.contains_key(lost), "{lost}: {applied:?}");
    }
}

/// A value no retry can decode, through a mapping that does not act on
/// `batchItemFailures` (whose retries, outside provisioned mode, have no
/// limit): by default the processor parks it in the log and its partition
/// goes on in the first invocation, so nothing stalls and every other
/// record is applied once.
#[tokio::test]
async fn by_default_an_undecodable_value_is_parked_in_the_log_and_never_stalls_its_partition() {
    use lambda_idempotency::kafka::{KafkaMessage, KafkaProcessor};
    use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
    let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.kafka"));
    let processor = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"));
    let applied = Mutex::new(BTreeMap::<String, usize>::new());
    let (processor, applied_ref) = (&processor, &applied);
    let stats = kafka_esm::run(&topic(), &Options::default(), |event| async move {
        let ctx = lambda_runtime::Context::default();
        processor
            .handle(
                lambda_runtime::LambdaEvent::new(event, ctx),
                |m: KafkaMessage<Value>| async move {
                    let id = m.body["event_id"].as_str().unwrap_or_default().to_owned();
                    *applied_ref.lock().unwrap().entry(id).or_default() += 1;
                    Ok::<_, HandlerError>(json!({"ok": true}))
                },
            )
            .await
    })
    .await;
    assert_eq!(stats.invocations, 1, "{:?}", stats.log);
    assert_eq!(stats.invocation_errors, 0);
    assert!(stats.skipped.is_empty(), "{:?}", stats.skipped);
    assert_eq!(
        stats.committed,
        BTreeMap::from([("orders-0".to_owned(), 4), ("orders-1".to_owned(), 2)])
    );
    let every = ["evt-0", "evt-1", "evt-2", "evt-3", "evt-9"];
    let once: BTreeMap<String, usize> = every.iter().map(|e| (e.to_string(), 1)).collect();
    assert_eq!(applied.into_inner().unwrap(), once);
}
