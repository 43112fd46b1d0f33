//! Parked records on any ordered source: a record that can never succeed
//! (it does not parse, or its handler rejects it for good) is parked and
//! its lane goes on; a failed parking, or a retryable failure, stops the
//! lane as without parking; behind a failure, a record that cannot run is
//! skipped and parked only when its turn comes.

use super::test_source::*;
use crate::batch::{BatchReport, FailureReason, Ordering};
use crate::error::HandlerError;
use crate::parking::MemoryParking;
use crate::testkit::memory_engine;
use crate::{KeySelector, Outcome};
use serde_json::{Value, json};

/// A record `id` of `lane` whose body is `{"id": id, "n": n}`.
fn reading(id: &str, lane: &str, n: i64) -> TestMessage {
    laned(id, Some(lane), &json!({"id": id, "n": n}).to_string())
}

/// A handler that fails `n == -1` terminally and `n < -1` retryably.
async fn terminal_or_retryable(r: TestRecord<Value>) -> Result<Value, HandlerError> {
    match r.body["n"].as_i64().unwrap_or_default() {
        -1 => Err(HandlerError::terminal(std::io::Error::other(
            "refused for good",
        ))),
        n if n < -1 => Err(HandlerError::retryable(std::io::Error::other("busy"))),
        n => Ok(json!({"stored": r.body["id"], "n": n})),
    }
}

/// A stop-lane processor parking in `parking`.
fn parking_processor(parking: &MemoryParking) -> TestProcessor {
    TestProcessor::new(memory_engine().0, KeySelector::pointer("/id"))
        .ordering(Ordering::StopLane)
        .parking(parking.clone())
}

/// The outcome labels of a report, in batch order.
fn labels(report: &BatchReport<Value>) -> Vec<&'static str> {
    report.records.iter().map(|r| r.label()).collect()
}

/// Lane `L0` holds three records that can never succeed: a body that is not
/// JSON, a record that is not a record of the source, a terminal rejection.
/// Each is parked (its record as delivered, its position, the reason), the
/// records after each run, and the answer names none; lane `L1` is
/// untouched. A redelivery parks them again under the same ids and replays
/// the rest.
#[tokio::test]
async fn with_parking_poison_records_are_parked_and_their_lane_goes_on() {
    let parking = MemoryParking::new();
    let p = parking_processor(&parking);
    let mut records: Vec<Value> = [
        reading("r0", "L0", 1),
        laned("r1", Some("L0"), "not json {"),
        reading("r2", "L1", 1),
        reading("r3", "L0", 2),
        reading("r4", "L0", 0),
        reading("r5", "L0", -1),
        reading("r6", "L0", 5),
    ]
    .iter()
    .map(raw)
    .collect();
    // Not a record of the source (an unknown field): it fails alone.
    records[4]["unexpected"] = json!(true);
    let event = || {
        <TestSource as crate::batch::Source>::parse(json!({ "Records": records.clone() })).unwrap()
    };
    let report = p.process(event(), None, terminal_or_retryable).await;
    assert_eq!(
        labels(&report),
        [
            "executed", "parked", "executed", "executed", "parked", "parked", "executed"
        ]
    );
    assert!(failed(&report).is_empty(), "{:?}", failed(&report));
    assert_eq!(report.counts().parked, 3);
    let parked = parking.parked();
    let positions: Vec<_> = parked.iter().map(|p| p.position.as_str()).collect();
    assert_eq!(positions, ["r1", "r4", "r5"]);
    for p in &parked {
        assert_eq!(p.source, EVENT_SOURCE);
        assert_eq!(p.lane.as_deref(), Some("L0"));
        let kept = p.record.as_ref().expect("the record, not a reference");
        assert_eq!(kept["id"], json!(p.position), "the record as delivered");
    }
    assert!(
        parked[0].reason.contains("not JSON"),
        "{}",
        parked[0].reason
    );
    assert!(
        parked[1].reason.contains("not a test record"),
        "{}",
        parked[1].reason
    );
    assert!(
        parked[2].reason.contains("refused for good"),
        "{}",
        parked[2].reason
    );
    assert_eq!(
        report.records[1].outcome,
        Ok(Outcome::Parked {
            id: parked[0].id.clone(),
            reason: parked[0].reason.clone(),
        })
    );

    let again = p.process(event(), None, terminal_or_retryable).await;
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
/// answer, and nothing after it in its lane runs. A retryable failure stops
/// its lane even with parking working, and is not parked.
#[tokio::test]
async fn when_parking_fails_the_record_fails_and_its_lane_stops_as_without_parking() {
    let parking = MemoryParking::new();
    parking.fail(true);
    let p = parking_processor(&parking);
    let batch = batch_of(vec![
        reading("r0", "L0", 1),
        laned("r1", Some("L0"), "not json {"),
        reading("r2", "L0", 2),
        reading("r3", "L1", 1),
    ]);
    let report = p.process(batch, None, terminal_or_retryable).await;
    assert!(
        matches!(&report.records[1].outcome, Err(FailureReason::Parse(m)) if m.contains("not JSON"))
    );
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::Skipped {
            after: "r1".to_owned()
        })
    );
    assert_eq!(labels(&report)[3], "executed");
    assert_eq!(failed(&report), ["r1"]);
    assert!(parking.parked().is_empty());

    parking.fail(false);
    let batch = batch_of(vec![reading("r10", "L0", -2), reading("r11", "L0", 1)]);
    let report = p.process(batch, None, terminal_or_retryable).await;
    assert_eq!(labels(&report), ["failed", "failed"]);
    assert_eq!(
        failed(&report),
        ["r10"],
        "a retryable failure is not parked"
    );
    assert!(parking.parked().is_empty());
}

/// Behind a retryable failure of its lane, a record that cannot run is
/// skipped like any other, not parked; when the redelivery from the failure
/// runs, it is parked, once.
#[tokio::test]
async fn behind_a_failure_a_record_that_cannot_run_is_skipped_and_parked_when_its_turn_comes() {
    let parking = MemoryParking::new();
    let p = parking_processor(&parking);
    let batch = |first: i64| {
        batch_of(vec![
            reading("r10", "L0", first),
            laned("r11", Some("L0"), "not json {"),
            reading("r12", "L0", 2),
            reading("r20", "L1", 1),
        ])
    };
    let report = p.process(batch(-2), None, terminal_or_retryable).await;
    assert_eq!(labels(&report), ["failed", "failed", "failed", "executed"]);
    assert_eq!(
        report.records[1].outcome,
        Err(FailureReason::Skipped {
            after: "r10".to_owned()
        })
    );
    assert_eq!(failed(&report), ["r10"]);
    assert!(parking.parked().is_empty(), "{:?}", parking.parked());

    let report = p.process(batch(1), None, terminal_or_retryable).await;
    assert_eq!(
        labels(&report),
        ["executed", "parked", "executed", "replayed"]
    );
    let positions: Vec<_> = parking.parked().into_iter().map(|p| p.position).collect();
    assert_eq!(positions, ["r11"]);
}
