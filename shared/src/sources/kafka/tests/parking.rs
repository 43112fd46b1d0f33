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
