//! The Kinesis source on the memory store: stop-the-lane, shards in
//! parallel, coalescing of a producer's retries, a poison record holding
//! back only its own shard.

use super::*;
use crate::Outcome;
use crate::batch::BatchError;
use crate::batch::BatchReport;
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
        Ok(json!({"stored": r.body.reading_id, "seq": r.record.kinesis.sequence_number}))
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
        let raw = &input
            .raw::<KinesisDelivery>()
            .expect("a Kinesis record")
            .record;
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

mod aggregates;
mod lanes;
mod parking;
