//! Lanes by record key (`KafkaOrder::RecordKey`): a failure holds back only
//! its key.

use super::*;

/// A record of `orders-0` at `offset`, produced with `key` (`None`: no
/// key).
fn keyed_record(offset: i64, key: Option<&str>, event_id: &str) -> Value {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "topic": "orders", "partition": 0, "offset": offset,
        "timestamp": 1796083200104_i64, "timestampType": "CREATE_TIME",
        "key": key.map(b64),
        "value": b64(&json!({"event_id": event_id, "total_cents": offset}).to_string()),
        "headers": [],
    })
}

/// Records of keys `a`, `b`, and none, interleaved in `orders-0`; `a`'s
/// first fails.
fn keyed_event() -> KafkaStreamEvent {
    let records: Vec<Value> = [
        (10, Some("a"), "e10"),
        (11, Some("b"), "e11"),
        (12, None, "e12"),
        (13, Some("a"), "e13"),
        (14, Some("b"), "e14"),
        (15, None, "e15"),
    ]
    .into_iter()
    .map(|(offset, key, id)| keyed_record(offset, key, id))
    .collect();
    parse_kafka_event(json!({
        "eventSource": "aws:kafka",
        "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/orders/abc",
        "bootstrapServers": "b-1:9092",
        "records": {"orders-0": records},
    }))
    .unwrap()
}

/// With [`KafkaOrder::RecordKey`] a failure holds back only its key (and
/// the keyless records keep their own order); the answer still names the
/// partition's records from the lowest failed offset on that did not run.
/// With the default ([`KafkaOrder::Partition`]) the whole partition stops.
#[tokio::test]
async fn with_record_key_order_a_failure_holds_back_only_its_key() {
    let sink = Sink::failing(vec!["e10"]);
    let report = processor()
        .order(KafkaOrder::RecordKey)
        .process(keyed_event(), None, |m| sink.handle(m))
        .await;
    for done in ["orders-0@11", "orders-0@12", "orders-0@14", "orders-0@15"] {
        assert!(
            matches!(outcome(&report, done), Ok(Outcome::Executed(_))),
            "{done}"
        );
    }
    assert_eq!(
        outcome(&report, "orders-0@13"),
        &Err(FailureReason::Skipped {
            after: "orders-0@10".to_owned()
        })
    );
    assert_eq!(
        named(&report),
        [("orders-0".to_owned(), 10), ("orders-0".to_owned(), 13)]
    );

    let sink = Sink::failing(vec!["e10"]);
    let report = processor()
        .process(keyed_event(), None, |m| sink.handle(m))
        .await;
    assert_eq!(sink.seen.lock().unwrap().len(), 1, "the partition stopped");
    assert_eq!(named(&report).len(), 6);
}

/// With record-key lanes, a record without an idempotency key (run
/// unprotected, so nothing answers its redelivery) waits behind every
/// earlier record of its partition and does not run behind a failure of
/// any of them, nor do the later records of its record key; protected
/// records of other keys go on. Before, `orders-0@11` ran while
/// `orders-0@10` failed, and ran again on every retry.
#[tokio::test]
async fn a_record_without_an_idempotency_key_waits_behind_any_earlier_failure_of_its_partition() {
    let selector = KeySelector::custom(|input| match input.value["event_id"].as_str() {
        Some("e11") | None => Err(crate::KeyError::Missing("/event_id".to_owned())),
        Some(id) => Ok(json!(id)),
    });
    let (engine, _, _) = memory_engine();
    let p = KafkaProcessor::new(engine, selector)
        .order(KafkaOrder::RecordKey)
        .missing_key(MissingKey::RunUnprotected);
    let sink = Sink::failing(vec!["e10"]);
    let report = p.process(keyed_event(), None, |m| sink.handle(m)).await;
    // 14, of record key b, is behind 11 in its key.
    for (skipped, after) in [(11, 10), (13, 10), (14, 11)] {
        assert_eq!(
            outcome(&report, &format!("orders-0@{skipped}")),
            &Err(FailureReason::Skipped {
                after: format!("orders-0@{after}")
            }),
            "{skipped}"
        );
    }
    for done in ["orders-0@12", "orders-0@15"] {
        assert!(
            matches!(outcome(&report, done), Ok(Outcome::Executed(_))),
            "{done}"
        );
    }
    assert_eq!(sink.ran(), ["orders-0@10", "orders-0@12", "orders-0@15"]);

    // The kill switch runs every record unprotected: nothing after the
    // failure runs.
    let config = crate::Config::with_prefix("test.kafka").disabled(true);
    let engine = crate::Idempotency::new(crate::MemoryStore::new(), config);
    let sink = Sink::failing(vec!["e10"]);
    let report = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"))
        .order(KafkaOrder::RecordKey)
        .process(keyed_event(), None, |m| sink.handle(m))
        .await;
    assert_eq!(sink.ran(), ["orders-0@10"]);
    assert_eq!(named(&report).len(), 6);
}
