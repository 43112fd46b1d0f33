//! The Kinesis source on the memory store: stop-the-lane, shards in
//! parallel, coalescing of a producer's retries, a poison record holding
//! back only its own shard.

use super::*;
use crate::Outcome;
use crate::batch::BatchError;
use crate::batch::FailureReason;
use crate::testkit::*;
use crate::{HandlerError, KeySelector};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[derive(Debug, Deserialize)]
struct Reading {
    reading_id: String,
    n: i64,
}

/// A Kinesis record of `shard` at `seq` carrying `data`.
fn record(shard: &str, seq: &str, data: &str) -> Value {
    json!({
        "awsRegion": "us-east-1",
        "eventID": format!("shardId-00000000000{shard}:{seq}"),
        "eventName": "aws:kinesis:record",
        "eventSource": "aws:kinesis",
        "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/readings",
        "eventVersion": "1.0",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda-role",
        "kinesis": {
            "approximateArrivalTimestamp": 1795946400.123,
            "data": base64::engine::general_purpose::STANDARD.encode(data),
            "kinesisSchemaVersion": "1.0",
            "partitionKey": format!("pk-{shard}"),
            "sequenceNumber": seq,
        },
    })
}

fn reading(id: &str, n: i64) -> String {
    json!({"reading_id": id, "n": n}).to_string()
}

fn event(records: Vec<Value>) -> KinesisStreamEvent {
    parse_kinesis_event(json!({ "Records": records })).unwrap()
}

fn processor() -> KinesisProcessor {
    let (engine, _, _) = memory_engine();
    KinesisProcessor::new(engine, KeySelector::pointer("/reading_id"))
}

fn named(report: &BatchReport<Value>) -> Vec<String> {
    let response: KinesisEventResponse = report.response_as().unwrap();
    response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier.unwrap_or_default())
        .collect()
}

/// A handler that records the order it saw readings in, fails `n < 0`, and
/// sleeps a little so shards overlap.
#[derive(Default)]
struct Sink {
    seen: Mutex<Vec<(String, String)>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Sink {
    async fn handle(&self, r: KinesisRecord<Reading>) -> Result<Value, HandlerError> {
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(now, SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        self.in_flight.fetch_sub(1, SeqCst);
        self.seen.lock().unwrap().push((
            r.shard_id().unwrap_or_default().to_owned(),
            r.body.reading_id.clone(),
        ));
        if r.body.n < 0 {
            return Err(HandlerError::retryable(format!("negative {}", r.body.n)));
        }
        Ok(json!({"stored": r.body.reading_id, "seq": r.sequence_number()}))
    }

    fn seen(&self) -> Vec<(String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn after_a_failure_nothing_later_in_its_shard_runs_and_the_response_names_it() {
    let sink = Sink::default();
    let report = processor()
        .process(
            event(vec![
                record("0", "100", &reading("r-1", 1)),
                record("0", "101", &reading("r-2", -2)),
                record("0", "102", &reading("r-3", 3)),
                record("0", "103", &reading("r-4", 4)),
            ]),
            None,
            |r| sink.handle(r),
        )
        .await;
    let ids: Vec<_> = sink.seen().into_iter().map(|(_, id)| id).collect();
    assert_eq!(ids, ["r-1", "r-2"], "nothing after the failure ran");
    assert!(matches!(
        report.records[0].outcome,
        Ok(Outcome::Executed(_))
    ));
    assert!(matches!(
        &report.records[1].outcome,
        Err(FailureReason::Handler { message, .. }) if message == "negative -2"
    ));
    for later in &report.records[2..] {
        assert_eq!(
            later.outcome,
            Err(FailureReason::Skipped {
                after: "101".to_owned()
            })
        );
    }
    // Only the first failed record: Lambda checkpoints before it.
    assert_eq!(named(&report), ["101"]);
    assert_eq!(report.ordering(), Ordering::StopLane);
}

#[tokio::test]
async fn shards_run_in_parallel_each_in_sequence_order() {
    let sink = Sink::default();
    let mut records = Vec::new();
    for i in 0..4 {
        for shard in ["0", "1", "2"] {
            records.push(record(
                shard,
                &format!("{shard}0{i}"),
                &reading(&format!("s{shard}-{i}"), i),
            ));
        }
    }
    let report = processor()
        .process(event(records), None, |r| sink.handle(r))
        .await;
    assert!(report.is_success());
    assert!(named(&report).is_empty());
    assert!(
        sink.max_in_flight.load(SeqCst) >= 2,
        "shards overlap: {}",
        sink.max_in_flight.load(SeqCst)
    );
    for shard in ["0", "1", "2"] {
        let order: Vec<_> = sink
            .seen()
            .into_iter()
            .filter(|(s, _)| s.ends_with(shard))
            .map(|(_, id)| id)
            .collect();
        let expected: Vec<_> = (0..4).map(|i| format!("s{shard}-{i}")).collect();
        assert_eq!(order, expected, "shard {shard} in sequence order");
    }
}

#[tokio::test]
async fn a_poison_record_holds_back_only_its_own_shard() {
    let sink = Sink::default();
    let report = processor()
        .process(
            event(vec![
                record("0", "100", "not json {"),
                record("1", "200", &reading("b-1", 1)),
                record("0", "101", &reading("a-2", 2)),
                record("1", "201", &reading("b-2", 2)),
                record("0", "102", "\"no reading id\""),
                record("1", "202", &reading("b-3", 3)),
            ]),
            None,
            |r| sink.handle(r),
        )
        .await;
    let mut ran: Vec<_> = sink.seen().into_iter().map(|(_, id)| id).collect();
    ran.sort();
    assert_eq!(ran, ["b-1", "b-2", "b-3"]);
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("not JSON"))
    );
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::Skipped {
            after: "100".to_owned()
        })
    );
    assert_eq!(named(&report), ["100"]);
}

#[tokio::test]
async fn a_failure_in_each_of_two_shards_names_both() {
    let sink = Sink::default();
    let report = processor()
        .process(
            event(vec![
                record("0", "100", &reading("a-1", 1)),
                record("0", "101", &reading("a-2", -1)),
                record("1", "200", &reading("b-1", -1)),
                record("1", "201", &reading("b-2", 2)),
                record("0", "102", &reading("a-3", -3)),
            ]),
            None,
            |r| sink.handle(r),
        )
        .await;
    assert_eq!(named(&report), ["101", "200"]);
    assert_eq!(report.failures().count(), 4);
}

#[tokio::test]
async fn a_producers_retry_in_the_batch_runs_once() {
    // A `PutRecord` retried by its producer: the same data, a new sequence
    // number (here in another shard too: the partition key was the same,
    // the stream was resharded in between).
    let sink = Sink::default();
    let report = processor()
        .process(
            event(vec![
                record("0", "100", &reading("r-1", 1)),
                record("0", "101", &reading("r-2", 2)),
                record("1", "200", &reading("r-1", 1)),
            ]),
            None,
            |r| sink.handle(r),
        )
        .await;
    assert_eq!(sink.seen().len(), 2, "{:?}", sink.seen());
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(
        report.records[2].outcome.as_ref().unwrap().response(),
        Some(&json!({"stored": "r-1", "seq": "100"}))
    );
}

#[tokio::test]
async fn a_redelivered_batch_replays_what_was_done_and_runs_from_the_failure() {
    let processor = processor();
    let fail_at_2 = AtomicUsize::new(1);
    let runs = Mutex::new(Vec::new());
    let handler = |r: KinesisRecord<Reading>| {
        let (runs, fail) = (&runs, &fail_at_2);
        async move {
            runs.lock().unwrap().push(r.body.reading_id.clone());
            if r.body.n == 2 && fail.load(SeqCst) > 0 {
                fail.fetch_sub(1, SeqCst);
                return Err(HandlerError::retryable("downstream down"));
            }
            Ok::<_, HandlerError>(json!({"stored": r.body.reading_id}))
        }
    };
    let batch = || {
        event(vec![
            record("0", "100", &reading("r-1", 1)),
            record("0", "101", &reading("r-2", 2)),
            record("0", "102", &reading("r-3", 3)),
        ])
    };
    let first = processor.process(batch(), None, handler).await;
    assert_eq!(named(&first), ["101"]);
    // Lambda redelivers from the checkpoint; here the whole batch again.
    let second: BatchReport<Value> = processor.process(batch(), None, handler).await;
    assert!(second.is_success());
    assert!(matches!(
        second.records[0].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(*runs.lock().unwrap(), ["r-1", "r-2", "r-2", "r-3"]);
}

#[tokio::test]
async fn the_sequence_number_is_what_keyselector_id_keys_on() {
    // Documented as unsafe for producer retries: the same data twice under
    // two sequence numbers runs twice.
    let (engine, _, _) = memory_engine();
    let runs = AtomicUsize::new(0);
    let report = KinesisProcessor::new(engine, KeySelector::Id)
        .process(
            event(vec![
                record("0", "100", &reading("r-1", 1)),
                record("0", "101", &reading("r-1", 1)),
            ]),
            None,
            |_r: KinesisRecord<Value>| {
                runs.fetch_add(1, SeqCst);
                async { Ok::<_, HandlerError>(json!({})) }
            },
        )
        .await;
    assert!(report.is_success());
    assert_eq!(runs.load(SeqCst), 2);
}

#[test]
fn other_payloads_are_not_kinesis_events() {
    for (value, says) in [
        (json!({"Records": [{"eventSource": "aws:sqs"}]}), "aws:sqs"),
        (json!({"detail-type": "x"}), "no Records"),
        (json!({"Records": {}}), "not an array"),
    ] {
        let err = parse_kinesis_event(value).unwrap_err();
        assert!(
            matches!(&err, BatchError::WrongEvent { message, .. } if message.contains(says)),
            "{err}"
        );
        assert_eq!(crate::diagnostic::error_type(&err), "InvalidEvent");
    }
    assert!(
        parse_kinesis_event(json!({"Records": []}))
            .unwrap()
            .records
            .is_empty()
    );
}

/// A record whose `data` is not base64, in the middle of a batch, fails
/// alone: the event parses, the records before it run, the records after it
/// in its shard wait behind it, the other shard runs, and the response
/// names it by its sequence number.
#[tokio::test]
async fn a_record_whose_data_is_not_base64_fails_alone() {
    let sink = Sink::default();
    let mut bad = record("0", "101", "");
    bad["kinesis"]["data"] = json!("%%% not base64 %%%");
    let event = parse_kinesis_event(json!({"Records": [
        record("0", "100", &reading("r-1", 1)),
        record("1", "200", &reading("r-3", 3)),
        bad,
        record("0", "102", &reading("r-2", 2)),
        record("1", "201", &reading("r-4", 4)),
    ]}))
    .expect("one bad record does not fail the event");
    assert!(
        matches!(&event.records[2], Err(m) if m.id.as_deref() == Some("101")
        && m.lane.as_deref() == Some("shardId-000000000000"))
    );
    let report = processor().process(event, None, |r| sink.handle(r)).await;
    assert!(
        matches!(&report.records[2].outcome, Err(FailureReason::Parse(m)) if m.contains("not a Kinesis record")),
        "{:?}",
        report.records[2].outcome
    );
    assert!(matches!(
        report.records[3].outcome,
        Err(FailureReason::Skipped { .. })
    ));
    let mut seen: Vec<_> = sink.seen().into_iter().map(|(_, id)| id).collect();
    seen.sort();
    assert_eq!(seen, ["r-1", "r-3", "r-4"]);
    assert_eq!(named(&report), ["101"]);
}

#[tokio::test]
async fn a_record_without_a_shard_fails_with_every_later_record() {
    let sink = Sink::default();
    let mut no_shard = record("0", "101", &reading("r-2", 2));
    no_shard["eventID"] = json!("no-colon");
    let report = processor()
        .process(
            event(vec![
                record("0", "100", &reading("r-1", 1)),
                no_shard,
                record("1", "200", &reading("r-3", 3)),
            ]),
            None,
            |r| sink.handle(r),
        )
        .await;
    assert_eq!(sink.seen().len(), 1);
    assert!(
        matches!(&report.records[1].outcome, Err(FailureReason::NoLane(m)) if m.contains("shard"))
    );
    assert!(matches!(
        report.records[2].outcome,
        Err(FailureReason::Skipped { .. })
    ));
    // Both are named: the one without a shard, and the first of shard 1.
    assert_eq!(named(&report), ["101", "200"]);
}

#[tokio::test]
async fn a_key_function_sees_the_kinesis_record() {
    let (engine, _, _) = memory_engine();
    let selector = KeySelector::custom(|input| {
        let raw = input.raw::<KinesisEventRecord>().expect("a Kinesis record");
        assert_eq!(
            input.delivery.and_then(|d| d.lane()),
            Some("shardId-000000000000")
        );
        Ok(json!([
            raw.kinesis.partition_key,
            input.value["reading_id"]
        ]))
    });
    let report: BatchReport<Value> = KinesisProcessor::new(engine, selector)
        .process(
            event(vec![record("0", "100", &reading("r-1", 1))]),
            None,
            |_r: KinesisRecord<Value>| async { Ok::<_, HandlerError>(json!({})) },
        )
        .await;
    assert!(report.is_success(), "{:?}", report.records);
}

#[tokio::test]
async fn a_failed_record_without_a_sequence_number_fails_the_invocation() {
    let sink = Sink::default();
    let report = processor()
        .process(event(vec![record("0", "", "not json")]), None, |r| {
            sink.handle(r)
        })
        .await;
    let err = report.response_as::<KinesisEventResponse>().unwrap_err();
    assert!(
        matches!(
            &err,
            BatchError::NoItemIdentifier {
                position: 0,
                id: "sequenceNumber",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("has no sequenceNumber"), "{err}");
    assert_eq!(
        crate::diagnostic::error_type(&err),
        "UnreportableRecordFailure"
    );
}

#[tokio::test]
async fn a_copy_whose_first_failed_stops_its_own_shard_too() {
    // r-1 fails in shard 0; its copy in shard 1 takes that failure, so
    // shard 1 stops there as well and is redelivered from the copy.
    let sink = Sink::default();
    let report = processor()
        .process(
            event(vec![
                record("0", "100", &reading("r-1", -1)),
                record("1", "200", &reading("b-1", 1)),
                record("1", "201", &reading("r-1", -1)),
                record("1", "202", &reading("b-3", 3)),
            ]),
            None,
            |r| sink.handle(r),
        )
        .await;
    let mut ran: Vec<_> = sink.seen().into_iter().map(|(_, id)| id).collect();
    ran.sort();
    assert_eq!(ran, ["b-1", "r-1"], "the copy did not run, b-3 waits");
    assert!(matches!(
        &report.records[2].outcome,
        Err(FailureReason::DuplicateOf { first, .. }) if first == "100"
    ));
    assert_eq!(named(&report), ["100", "201"]);
}

/// The deadline margin holds on a stream too (the core pipeline): the first
/// record whose turn comes inside the margin fails as OutOfTime without
/// running, the rest of its shard is skipped, and the response names it, so
/// the stream resumes from the first record that did not run.
#[tokio::test]
async fn inside_the_deadline_margin_the_shard_stops_at_the_first_record_not_started() {
    let runs = AtomicUsize::new(0);
    let records = (0..10)
        .map(|i| record("0", &format!("{}", 100 + i), &reading(&format!("r-{i}"), i)))
        .collect();
    let report = processor()
        .deadline_margin(std::time::Duration::from_millis(200))
        .process(
            event(records),
            Some(std::time::Duration::from_millis(500)),
            |_r: KinesisRecord<Value>| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Ok::<_, HandlerError>(Value::Null)
                }
            },
        )
        .await;
    let ran = runs.load(SeqCst);
    assert!((1..10).contains(&ran), "{ran} of 10 ran");
    assert!(report.records[..ran].iter().all(|r| !r.is_failure()));
    let first = &report.records[ran];
    assert!(
        matches!(
            first.outcome,
            Err(FailureReason::OutOfTime { margin_ms: 200, .. })
        ),
        "{:?}",
        first.outcome
    );
    let id = format!("{}", 100 + ran);
    for later in &report.records[ran + 1..] {
        assert_eq!(
            later.outcome,
            Err(FailureReason::Skipped { after: id.clone() })
        );
    }
    assert_eq!(named(&report), [id]);
}

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

// Lanes by partition key (issue 29). Each test fails with shard-wide lanes
// (`KinesisOrder::Shard`, the lanes before): there, a batch's records run
// and commit one after another, and a failure holds back its whole shard.

/// A record of shard 0 at sequence number `seq` under `partition_key`.
fn keyed(partition_key: &str, seq: u64, id: &str, n: i64) -> Value {
    let mut r = record("0", &seq.to_string(), &reading(id, n));
    r["kinesis"]["partitionKey"] = json!(partition_key);
    r
}

/// 100 records over 10 partition keys (`k0`..`k9`, round robin), the
/// `i`-th at sequence number `1000 + i` with `n = i`.
fn hundred_over_ten_keys() -> Vec<Value> {
    (0..100)
        .map(|i| {
            keyed(
                &format!("k{}", i % 10),
                1000 + i,
                &format!("r{i}"),
                i as i64,
            )
        })
        .collect()
}

/// An optimistic processor (batch commits on) over a counting memory store.
fn counted() -> (KinesisProcessor, Counting) {
    let store = Counting::default();
    let config = crate::Config::with_prefix("test.lanes")
        .commit_mode(crate::CommitMode::Optimistic)
        .batch_commits(true)
        .disabled(false);
    let engine = crate::Idempotency::new(store.clone(), config);
    let processor = KinesisProcessor::new(engine, KeySelector::pointer("/reading_id"));
    (processor, store)
}

fn total_key(partition_key: &str) -> crate::write::Item {
    crate::write::Item::from([("pk".to_owned(), crate::value::AttrValue::s(partition_key))])
}

/// Adds `n` to its partition key's total and logs `(key, n)`; fails the
/// readings `n` of `fail` (retryable).
async fn add_to_total(
    r: KinesisRecord<Reading>,
    fail: &[i64],
    log: &Mutex<Vec<(String, i64)>>,
) -> Result<crate::write::Staged<Value>, HandlerError> {
    let key = r.partition_key().to_owned();
    log.lock().unwrap().push((key.clone(), r.body.n));
    if fail.contains(&r.body.n) {
        return Err(HandlerError::retryable(std::io::Error::other("not yet")));
    }
    let write = crate::write::Write::update("totals", total_key(&key)).add("total", r.body.n);
    Ok(crate::write::Staged::new(json!(r.body.n)).write(write))
}

fn total(store: &Counting, partition_key: &str) -> Option<i64> {
    store
        .inner
        .item("totals", &total_key(partition_key))?
        .get("total")?
        .as_i64()
}

#[tokio::test]
async fn a_batch_of_100_records_over_10_partition_keys_commits_in_at_most_10_transactions() {
    let (processor, store) = counted();
    let log = Mutex::new(Vec::new());
    let report = processor
        .process(event(hundred_over_ten_keys()), None, |r| {
            add_to_total(r, &[], &log)
        })
        .await;
    assert!(report.is_success(), "{report:?}");
    let transactions = store.take_transactions();
    assert!(
        transactions <= 10,
        "{transactions} transactions for 100 records over 10 keys"
    );
    for k in 0..10 {
        let expected = (0..10).map(|j| k + 10 * j).sum::<i64>();
        assert_eq!(total(&store, &format!("k{k}")), Some(expected), "k{k}");
    }
    // Each key's records ran in sequence order.
    let log = log.into_inner().unwrap();
    for k in 0..10 {
        let key = format!("k{k}");
        let ns: Vec<i64> = log.iter().filter(|(p, _)| *p == key).map(|e| e.1).collect();
        assert_eq!(ns, (0..10).map(|j| k + 10 * j).collect::<Vec<_>>(), "{key}");
    }
}

#[tokio::test]
async fn a_failure_in_one_keys_lane_holds_back_only_that_key_and_the_response_names_the_lowest_failed_sequence_number()
 {
    let (processor, store) = counted();
    let log = Mutex::new(Vec::new());
    // Readings 57 (key k7) and 35 (key k5) fail.
    let report = processor
        .process(event(hundred_over_ten_keys()), None, |r| {
            add_to_total(r, &[57, 35], &log)
        })
        .await;
    for (i, r) in report.records.iter().enumerate() {
        let (key, failed_at) = (
            i % 10,
            [(5, 35), (7, 57)].into_iter().find(|f| f.0 == i % 10),
        );
        match failed_at {
            Some((_, at)) if i == at => assert!(
                matches!(r.outcome, Err(FailureReason::Handler { .. })),
                "{i}: {:?}",
                r.outcome
            ),
            Some((_, at)) if i > at => assert_eq!(
                r.outcome,
                Err(FailureReason::Skipped {
                    after: (1000 + at).to_string()
                }),
                "{i}"
            ),
            _ => assert!(
                matches!(r.outcome, Ok(Outcome::Executed(_))),
                "{i} (key k{key}): {:?}",
                r.outcome
            ),
        }
    }
    assert_eq!(
        named(&report),
        ["1035"],
        "the lowest failed sequence number"
    );
    // Nothing of k5 after 35 ran, nothing of k7 after 57.
    let log = log.into_inner().unwrap();
    assert!(!log.iter().any(|(k, n)| k == "k5" && *n > 35));
    assert!(!log.iter().any(|(k, n)| k == "k7" && *n > 57));
    assert_eq!(total(&store, "k5"), Some(5 + 15 + 25));
    assert_eq!(total(&store, "k7"), Some(7 + 17 + 27 + 37 + 47));
    assert_eq!(total(&store, "k9"), Some((0..10).map(|j| 9 + 10 * j).sum()));
}

/// With a pre-read ([`PreRead::Always`](crate::batch::PreRead::Always)),
/// the redelivered batch costs one read and the records of other keys
/// replay without running; without one, they run again and their commits
/// are refused: applied once either way.
#[tokio::test]
async fn the_redelivery_from_the_lowest_failure_applies_nothing_twice() {
    let (processor, store) = counted();
    let processor = processor.pre_read(crate::batch::PreRead::Always);
    let records = hundred_over_ten_keys();
    let unlogged = Mutex::default();
    let first = processor
        .process(event(records.clone()), None, |r| {
            add_to_total(r, &[57, 35], &unlogged)
        })
        .await;
    assert_eq!(named(&first), ["1035"]);
    store.take_pre_reads();
    store.take_transactions();
    // Lambda checkpoints before 1035 and delivers from there; the records
    // of other keys after it committed already.
    let log = Mutex::new(Vec::new());
    let retry = processor
        .process(event(records[35..].to_vec()), None, |r| {
            add_to_total(r, &[], &log)
        })
        .await;
    assert!(retry.is_success(), "{retry:?}");
    for (r, i) in retry.records.iter().zip(35..) {
        let runs_again = (i % 10 == 5 && i >= 35) || (i % 10 == 7 && i >= 57);
        if runs_again {
            assert!(matches!(r.outcome, Ok(Outcome::Executed(_))), "{i}");
        } else {
            assert!(
                matches!(r.outcome, Ok(Outcome::Replayed(_))),
                "{i}: {:?}",
                r.outcome
            );
        }
    }
    let mut ran: Vec<i64> = log.into_inner().unwrap().into_iter().map(|e| e.1).collect();
    ran.sort_unstable();
    assert_eq!(ran, [35, 45, 55, 57, 65, 67, 75, 77, 85, 87, 95, 97]);
    assert_eq!(store.take_pre_reads(), 1);
    let transactions = store.take_transactions();
    assert!(transactions <= 7, "k5's 7 records in turn: {transactions}");
    for k in 0..10 {
        let expected = (0..10).map(|j| k + 10 * j).sum::<i64>();
        assert_eq!(
            total(&store, &format!("k{k}")),
            Some(expected),
            "k{k}, once"
        );
    }
    // The same redelivery again, without a pre-read: every record runs,
    // none applies.
    let again = processor
        .pre_read(crate::batch::PreRead::Never)
        .process(event(records[35..].to_vec()), None, |r| {
            add_to_total(r, &[], &unlogged)
        })
        .await;
    assert!(again.is_success(), "{again:?}");
    assert!(
        again
            .records
            .iter()
            .all(|r| matches!(r.outcome, Ok(Outcome::Replayed(_))))
    );
    for k in 0..10 {
        let expected = (0..10).map(|j| k + 10 * j).sum::<i64>();
        assert_eq!(
            total(&store, &format!("k{k}")),
            Some(expected),
            "k{k}, once"
        );
    }
}

#[tokio::test]
async fn shard_order_is_an_opt_in_that_stops_the_shard() {
    let (processor, store) = counted();
    let processor = processor.order(KinesisOrder::Shard);
    let unlogged = Mutex::default();
    let report = processor
        .process(event(hundred_over_ten_keys()[..20].to_vec()), None, |r| {
            add_to_total(r, &[3], &unlogged)
        })
        .await;
    assert_eq!(named(&report), ["1003"]);
    let skipped = report
        .records
        .iter()
        .filter(|r| matches!(r.outcome, Err(FailureReason::Skipped { .. })))
        .count();
    assert_eq!(skipped, 16, "everything after the failure, every key");
    assert_eq!(store.take_transactions(), 3, "one after another");
}

#[tokio::test]
async fn a_record_whose_partition_key_is_unreadable_keeps_its_shard_in_one_order() {
    let (processor, _store) = counted();
    let mut records = hundred_over_ten_keys()[..6].to_vec();
    // Not base64, and no partition key: its key lane is unknown.
    records[2]["kinesis"]["data"] = json!("%%%");
    records[2]["kinesis"]
        .as_object_mut()
        .unwrap()
        .remove("partitionKey");
    let unlogged = Mutex::default();
    let report = processor
        .process(event(records), None, |r| add_to_total(r, &[], &unlogged))
        .await;
    assert_eq!(named(&report), ["1002"]);
    for r in &report.records[3..] {
        assert_eq!(
            r.outcome,
            Err(FailureReason::Skipped {
                after: "1002".to_owned()
            })
        );
    }
}

/// The former module example: a poison record stops its partition key, and
/// the response names it.
#[tokio::test]
async fn a_poison_record_stops_its_key_and_is_named() {
    #[derive(Deserialize)]
    struct Reading {
        #[allow(dead_code)]
        reading_id: String,
        celsius: f64,
    }
    let (engine, _, _) = memory_engine();
    let processor = KinesisProcessor::new(engine, KeySelector::pointer("/reading_id"));
    let record = |seq: &str, data: &str| {
        json!({
            "eventSource": "aws:kinesis", "eventID": format!("shardId-000000000000:{seq}"),
            "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/readings",
            "kinesis": {
                "partitionKey": "sensor-1", "sequenceNumber": seq,
                "data": base64::engine::general_purpose::STANDARD.encode(data),
                "approximateArrivalTimestamp": 1795946400.0,
            },
        })
    };
    let event = parse_kinesis_event(json!({"Records": [
        record("101", r#"{"reading_id":"r-1","celsius":21.5}"#),
        record("102", "not json"),                               // poison: stops sensor-1
        record("103", r#"{"reading_id":"r-3","celsius":22.0}"#), // not run
    ]}))
    .expect("a Kinesis event");
    let report = processor
        .process(event, None, |r: KinesisRecord<Reading>| async move {
            Ok::<_, HandlerError>(json!({"stored": r.body.celsius}))
        })
        .await;
    assert_eq!(named(&report), ["102"]);
}
