//! The memory parking.

use super::*;

#[tokio::test]
async fn the_memory_parking_keeps_or_refuses() {
    let parking = MemoryParking::new();
    let p = ParkedRecord {
        id: "arn:s/l/1".to_owned(),
        source: "aws:kinesis".to_owned(),
        event_source_arn: Some("arn:s".to_owned()),
        lane: Some("l".to_owned()),
        position: "1".to_owned(),
        reason: "poison".to_owned(),
        record: Some(serde_json::json!({"n": 1})),
        record_bytes: 7,
        parked_at_ms: 1,
    };
    parking.park(&p).await.unwrap();
    parking.fail(true);
    assert!(parking.park(&p).await.is_err());
    assert_eq!(parking.parked(), [p]);
}
