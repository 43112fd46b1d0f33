//! The in-memory Kafka event source mapping (`test_kit::kafka_esm`):
//! batches over partitions in order, shaped as the Kafka event type reads
//! them, and the Kafka partial batch response read as Lambda reads it.

use aws_lambda_events::kafka::KafkaEvent;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;
use test_kit::kafka_esm::{self, Options, Outcome, Topic, records, response};
use test_kit::source_events::Kafka;

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
