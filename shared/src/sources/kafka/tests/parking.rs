//! Parked records on a Kafka partition: a poison record is parked and its
//! partition goes on; a failed parking stops it as without parking.

use super::*;

/// With parking, the MSK sample's poison value (`orders-1@17`) is parked
/// (the record as delivered, its cluster, topic-partition and offset, the
/// reason) and `orders-1@18` runs; the response names nothing. Without
/// parking (today), `orders-1` stopped at 17.
#[tokio::test]
async fn with_parking_a_poison_record_is_parked_and_its_partition_goes_on() {
    let sink = Sink::default();
    let parking = crate::parking::MemoryParking::new();
    let event = msk();
    let arn = event_json("kafka-msk-orders.json")["eventSourceArn"].clone();
    let arn = arn.as_str().unwrap().to_owned();
    let report = processor()
        .parking(parking.clone())
        .process(event, None, |m| sink.handle(m))
        .await;
    assert_eq!(
        sink.ran(),
        ["orders-0@41", "orders-0@42", "orders-1@18"],
        "43 is a copy"
    );
    assert!(matches!(
        outcome(&report, "orders-1@17"),
        Ok(Outcome::Parked { .. })
    ));
    assert!(named(&report).is_empty());
    let parked = parking.parked();
    assert_eq!(parked.len(), 1);
    let p = &parked[0];
    assert_eq!(p.id, format!("{arn}/orders-1/17"));
    assert_eq!(
        (p.lane.as_deref(), p.position.as_str()),
        (Some("orders-1"), "17")
    );
    assert_eq!(p.source, MSK_EVENT_SOURCE);
    assert!(p.reason.contains("not JSON"), "{}", p.reason);
    let raw = event_json("kafka-msk-orders.json");
    let delivered = raw["records"]["orders-1"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["offset"] == 17)
        .unwrap();
    let kept = p.record.as_ref().unwrap();
    assert_eq!(kept["value"], delivered["value"], "its value as delivered");
    assert_eq!(kept["topic"], delivered["topic"]);
}

/// When parking fails, the poison fails and stops its partition, as
/// without parking.
#[tokio::test]
async fn when_parking_fails_the_poison_stops_its_partition() {
    let sink = Sink::default();
    let parking = crate::parking::MemoryParking::new();
    parking.fail(true);
    let report = processor()
        .parking(parking.clone())
        .process(msk(), None, |m| sink.handle(m))
        .await;
    assert_eq!(sink.ran(), ["orders-0@41", "orders-0@42"]);
    // The poison and the record skipped behind it (the reported mode names
    // both).
    assert_eq!(
        named(&report),
        [("orders-1".to_owned(), 17), ("orders-1".to_owned(), 18)]
    );
    assert!(parking.parked().is_empty());
}

/// `two_partitions` with `orders-0@11` a poison value and `orders-0@12`
/// not a Kafka record.
fn with_two_poisons() -> Value {
    use base64::Engine as _;
    let mut json = two_partitions_json();
    json["records"]["orders-0"][1]["value"] =
        json!(base64::engine::general_purpose::STANDARD.encode("not json {"));
    json["records"]["orders-0"][2] = json!({"topic": "orders", "partition": 0, "offset": 12});
    json
}

/// Behind a retryable failure of its partition, a poison value and a record
/// that is not a Kafka record are skipped like any other record: not
/// parked while the failed one is retried, parked once their turn comes.
/// Before, both were parked at once, and again on every retry.
#[tokio::test]
async fn behind_a_failure_a_poison_record_is_skipped_and_parked_when_its_turn_comes() {
    let parking = crate::parking::MemoryParking::new();
    let p = processor().parking(parking.clone());
    let event = || parse_kafka_event(with_two_poisons()).unwrap();
    let sink = Sink::failing(vec!["evt-10"]);
    let report = p.process(event(), None, |m| sink.handle(m)).await;
    for id in ["orders-0@11", "orders-0@12", "orders-0@13"] {
        assert_eq!(
            outcome(&report, id),
            &Err(FailureReason::Skipped {
                after: "orders-0@10".to_owned()
            }),
            "{id}"
        );
    }
    assert!(parking.parked().is_empty(), "{:?}", parking.parked());
    let offsets: Vec<_> = named(&report).into_iter().map(|(_, o)| o).collect();
    assert_eq!(offsets, [10, 11, 12, 13, 14]);

    // The retry, 10 now done: the two are parked, once.
    let sink = Sink::default();
    let report = p.process(event(), None, |m| sink.handle(m)).await;
    assert!(report.is_success(), "{:?}", report.records);
    let positions: Vec<_> = (parking.parked().into_iter()).map(|p| p.position).collect();
    assert_eq!(positions, ["11", "12"]);
}

/// A poison value and a record that is not a Kafka record are parked alike:
/// the offset is the position and the id `<eventSourceArn>/<topic-partition>/<offset>`.
/// Before, the malformed one's position was `orders-0@12` (and its id
/// ended in `orders-0/orders-0@12`).
#[tokio::test]
async fn a_malformed_record_is_parked_with_its_offset_as_a_readable_one_is() {
    let arn = "arn:aws:kafka:us-east-1:123456789012:cluster/orders/abc";
    let mut json = with_two_poisons();
    json["eventSourceArn"] = json!(arn);
    let parking = crate::parking::MemoryParking::new();
    let p = processor().parking(parking.clone());
    let sink = Sink::default();
    let event = parse_kafka_event(json).unwrap();
    let report = p.process(event, None, |m| sink.handle(m)).await;
    assert!(report.is_success(), "{:?}", report.records);
    let parked = parking.parked();
    let shown: Vec<_> = parked.iter().map(|p| (&*p.id, &*p.position)).collect();
    assert_eq!(
        shown,
        [
            (&*format!("{arn}/orders-0/11"), "11"),
            (&*format!("{arn}/orders-0/12"), "12")
        ]
    );
}

/// A self-managed cluster has no ARN: its bootstrap servers name it in the
/// parked id, so that the records of two clusters with the same
/// topic-partition and offset never share an id (a FIFO parking queue would
/// drop the second as a copy). Before, both were `orders-0/1500`.
#[tokio::test]
async fn a_self_managed_clusters_parked_ids_carry_its_bootstrap_servers() {
    use base64::Engine as _;
    let sink = Sink::default();
    let mut json = event_json("kafka-self-managed-orders.json");
    json["records"]["orders-0"][0]["value"] =
        json!(base64::engine::general_purpose::STANDARD.encode("not json {"));
    let servers = json["bootstrapServers"].as_str().unwrap().to_owned();
    let mut other = json.clone();
    other["bootstrapServers"] = json!("kafka-1.other.example.com:9092");
    let parking = crate::parking::MemoryParking::new();
    let p = processor().parking(parking.clone());
    for json in [json, other] {
        let event = parse_kafka_event(json).unwrap();
        p.process(event, None, |m| sink.handle(m)).await;
    }
    let ids: Vec<_> = parking.parked().into_iter().map(|p| p.id).collect();
    assert_eq!(
        ids,
        [
            format!("{servers}/orders-0/1500"),
            "kafka-1.other.example.com:9092/orders-0/1500".to_owned()
        ]
    );
}
