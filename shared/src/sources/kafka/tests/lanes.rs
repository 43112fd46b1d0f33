//! Lanes by record key (`KafkaOrder::RecordKey`): the record key is what a
//! record keeps its order with, so a failure holds back only its key (lanes
//! cut by key in general: `batch::tests::lanes`).

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
