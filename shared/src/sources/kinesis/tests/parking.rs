//! Parked records on a Kinesis stream: a poison record is parked and its
//! shard goes on; a failed parking stops the shard as without parking.

use super::*;

/// A handler that fails `n == -1` terminally and `n < -1` retryably.
async fn terminal_or_retryable(r: KinesisRecord<Reading>) -> Result<Value, HandlerError> {
    match r.body.n {
        -1 => Err(HandlerError::terminal(std::io::Error::other(
            "reading refused for good",
        ))),
        n if n < -1 => Err(HandlerError::retryable(std::io::Error::other(
            "sensor busy",
        ))),
        n => Ok(json!({"stored": r.body.reading_id, "n": n})),
    }
}

const STREAM: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/readings";
const SHARD_0: &str = "shardId-000000000000";

/// The outcome labels of a report, in batch order.
fn labels(report: &BatchReport<Value>) -> Vec<&'static str> {
    report.records.iter().map(|r| r.label()).collect()
}

/// Shard 0 holds three records that can never succeed: `data` that is not
/// JSON, `data` that is not base64, a terminal rejection by the handler.
/// With parking, each is parked (its record as delivered, its position, the
/// reason), the records after each run and commit, and the response names
/// none; shard 1 is untouched. Without parking (today), shard 0 stopped at
/// its first poison and the response named it.
#[tokio::test]
async fn with_parking_poison_records_are_parked_and_their_shard_goes_on() {
    let parking = crate::parking::MemoryParking::new();
    let p = processor().parking(parking.clone());
    let mut not_base64 = record("0", "103", "");
    not_base64["kinesis"]["data"] = json!("%%% not base64 %%%");
    let batch = vec![
        record("0", "100", &reading("r-100", 1)),
        record("0", "101", "not json {"),
        record("1", "200", &reading("r-200", 1)),
        record("0", "102", &reading("r-102", 2)),
        not_base64.clone(),
        record("0", "104", &reading("r-104", -1)),
        record("0", "105", &reading("r-105", 5)),
    ];
    let report = p
        .process(event(batch.clone()), None, terminal_or_retryable)
        .await;
    assert_eq!(
        labels(&report),
        [
            "executed", "parked", "executed", "executed", "parked", "parked", "executed"
        ]
    );
    assert!(named(&report).is_empty(), "{:?}", named(&report));
    assert_eq!(report.counts().parked, 3);

    let parked = parking.parked();
    let positions: Vec<_> = parked.iter().map(|p| p.position.as_str()).collect();
    assert_eq!(positions, ["101", "103", "104"]);
    for (p, raw) in parked.iter().zip([&batch[1], &not_base64, &batch[5]]) {
        assert_eq!(p.id, format!("{STREAM}/{SHARD_0}/{}", p.position));
        assert_eq!(p.source, "aws:kinesis");
        assert_eq!(p.event_source_arn.as_deref(), Some(STREAM));
        assert_eq!(p.lane.as_deref(), Some(SHARD_0));
        let kept = p.record.as_ref().expect("the record, not a reference");
        assert_eq!(kept["kinesis"]["data"], raw["kinesis"]["data"], "its data");
        assert_eq!(
            kept["kinesis"]["partitionKey"],
            raw["kinesis"]["partitionKey"]
        );
    }
    assert!(
        parked[0].reason.contains("not JSON"),
        "{}",
        parked[0].reason
    );
    assert!(
        parked[1].reason.contains("not a Kinesis record"),
        "{}",
        parked[1].reason
    );
    assert!(
        parked[2].reason.contains("terminal") && parked[2].reason.contains("refused for good"),
        "{}",
        parked[2].reason
    );
    assert_eq!(
        report.records[1].outcome,
        Ok(Outcome::Parked {
            id: format!("{STREAM}/{SHARD_0}/101"),
            reason: parked[0].reason.clone(),
        })
    );

    // A redelivery (a crash after parking) parks them again under the same
    // ids, and replays what committed.
    let again = p
        .process(event(batch.clone()), None, terminal_or_retryable)
        .await;
    assert_eq!(
        labels(&again),
        [
            "replayed", "parked", "replayed", "replayed", "parked", "parked", "replayed"
        ]
    );
    let ids: Vec<_> = parking.parked().into_iter().map(|p| p.id).collect();
    assert_eq!(ids[3..], ids[..3], "the copies carry the same ids");
}

/// When parking fails, the poison fails as without parking: named in the
/// response, and nothing after it in its shard runs. A retryable failure
/// stops its shard even with parking working.
#[tokio::test]
async fn when_parking_fails_the_record_fails_and_its_shard_stops_as_without_parking() {
    let parking = crate::parking::MemoryParking::new();
    parking.fail(true);
    let p = processor().parking(parking.clone());
    let batch = vec![
        record("0", "100", &reading("r-100", 1)),
        record("0", "101", "not json {"),
        record("0", "102", &reading("r-102", 2)),
        record("1", "200", &reading("r-200", 1)),
    ];
    let report = p.process(event(batch), None, terminal_or_retryable).await;
    assert!(
        matches!(&report.records[1].outcome, Err(FailureReason::Parse(m)) if m.contains("not JSON"))
    );
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::Skipped {
            after: "101".to_owned()
        })
    );
    assert_eq!(named(&report), ["101"]);
    assert!(parking.parked().is_empty());

    parking.fail(false);
    let report = p
        .process(
            event(vec![
                record("0", "110", &reading("r-110", -2)),
                record("0", "111", &reading("r-111", 1)),
            ]),
            None,
            terminal_or_retryable,
        )
        .await;
    assert_eq!(labels(&report), ["failed", "failed"]);
    assert_eq!(named(&report), ["110"], "a retryable failure is not parked");
    assert!(parking.parked().is_empty());
}

/// A record whose message would be over the parking's size limit is parked
/// as a reference: its source position, its size, no content.
#[tokio::test]
async fn a_record_too_large_for_a_message_is_parked_as_a_reference() {
    let parking = crate::parking::MemoryParking::new().with_max_message_bytes(2_000);
    let p = processor().max_data_bytes(500).parking(parking.clone());
    let big = reading(&"x".repeat(3_000), 1);
    let report = p
        .process(
            event(vec![
                record("0", "100", &big),
                record("0", "101", &reading("r-101", 1)),
            ]),
            None,
            terminal_or_retryable,
        )
        .await;
    assert_eq!(labels(&report), ["parked", "executed"]);
    let parked = parking.parked();
    assert_eq!(parked.len(), 1);
    assert!(
        parked[0].reason.contains("over the 500-byte limit"),
        "{}",
        parked[0].reason
    );
    assert_eq!(parked[0].record, None, "a reference only");
    assert!(parked[0].record_bytes > 3_000, "{}", parked[0].record_bytes);
    assert_eq!(parked[0].id, format!("{STREAM}/{SHARD_0}/100"));
    assert!(serde_json::to_string(&parked[0]).unwrap().len() < 2_000);
}

/// Behind a retryable failure of its key, a record that cannot run (`data`
/// not JSON, not base64, too large) is skipped like any other: not parked
/// while the record before it is redelivered, so it is parked once, when
/// its turn comes. Before, each was parked at once (reported done) and
/// parked again on every retry from 110.
#[tokio::test]
async fn behind_a_failure_a_record_that_cannot_run_is_skipped_and_parked_when_its_turn_comes() {
    let parking = crate::parking::MemoryParking::new();
    let p = processor().max_data_bytes(500).parking(parking.clone());
    let mut not_base64 = record("0", "112", "");
    not_base64["kinesis"]["data"] = json!("%%% not base64 %%%");
    let batch = |first: i64| {
        vec![
            record("0", "110", &reading("r-110", first)),
            record("0", "111", "not json {"),
            not_base64.clone(),
            record("0", "113", &reading(&"x".repeat(600), 1)),
            record("0", "114", &reading("r-114", 4)),
            record("1", "200", &reading("r-200", 1)),
        ]
    };
    let report = p
        .process(event(batch(-2)), None, terminal_or_retryable)
        .await;
    assert_eq!(
        labels(&report),
        ["failed", "failed", "failed", "failed", "failed", "executed"]
    );
    for r in &report.records[1..5] {
        assert_eq!(
            r.outcome,
            Err(FailureReason::Skipped {
                after: "110".to_owned()
            }),
            "{:?}",
            r.message_id
        );
    }
    assert_eq!(named(&report), ["110"]);
    assert!(parking.parked().is_empty(), "{:?}", parking.parked());

    // The retry from 110, which now runs: the three are parked, once.
    let report = p
        .process(event(batch(1)), None, terminal_or_retryable)
        .await;
    assert_eq!(
        labels(&report),
        [
            "executed", "parked", "parked", "parked", "executed", "replayed"
        ]
    );
    let positions: Vec<_> = (parking.parked().into_iter()).map(|p| p.position).collect();
    assert_eq!(positions, ["111", "112", "113"]);
}
