#![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

use std::sync::Mutex;

use serde_json::{Value, json};

use super::*;
use crate::batch::UnprotectedOrder;
use crate::dynamodb_streams::{DynamoDbRecord, DynamoDbStreamsProcessor};
use crate::sqs::{SqsProcessor, SqsRecord};

/// What a hook saw, in order.
#[derive(Debug, Default)]
struct Seen {
    steps: Mutex<Vec<String>>,
    cutoff: Mutex<Option<Option<Instant>>>,
}

impl Seen {
    fn push(&self, step: String) {
        self.steps.lock().unwrap().push(step);
    }

    fn steps(&self) -> Vec<String> {
        self.steps.lock().unwrap().clone()
    }
}

/// Plans each record's `n` (or its failure), "sends" their sum in the
/// flush, and fails the records named in `fail` (by index) at the settle;
/// a record that was not prepared keeps its reason unless `skip_unprepared`.
#[derive(Debug, Default)]
struct Recording {
    seen: Seen,
    fail: Vec<usize>,
    skip_unprepared: bool,
}

#[derive(Debug)]
struct Plan {
    sum: u64,
    unprepared: Vec<(usize, FailureReason)>,
}

impl<Rec: Body> BatchHook<Rec> for Recording {
    type Plan = Plan;

    fn plan(&self, records: Vec<Planned<Rec>>) -> Plan {
        let mut plan = Plan {
            sum: 0,
            unprepared: Vec::new(),
        };
        let mut step = Vec::new();
        for p in records {
            let id = p.id.unwrap_or_default();
            match p.record {
                Ok(record) => {
                    plan.sum += record.n();
                    step.push(format!("{}:{id}", p.index));
                }
                Err(reason) => {
                    step.push(format!("{}:{id}:unprepared", p.index));
                    plan.unprepared.push((p.index, reason));
                }
            }
        }
        self.seen.push(format!("plan {}", step.join(" ")));
        plan
    }

    async fn flush(&self, plan: &Plan, cutoff: Option<Instant>) {
        *self.seen.cutoff.lock().unwrap() = Some(cutoff);
        tokio::task::yield_now().await;
        self.seen.push(format!("flush {}", plan.sum));
    }

    fn settle(&self, plan: &Plan, index: usize) -> Result<(), FailureReason> {
        self.seen.push(format!("settle {index}"));
        if let Some((_, reason)) = plan.unprepared.iter().find(|(i, _)| *i == index) {
            return match self.skip_unprepared {
                true => Ok(()),
                false => Err(reason.clone()),
            };
        }
        match self.fail.contains(&index) {
            true => Err(FailureReason::Handler {
                message: format!("record {index} not sent"),
                kind: crate::ErrorKind::Retryable,
            }),
            false => Ok(()),
        }
    }
}

/// The number a test record carries.
trait Body: Send {
    fn n(&self) -> u64;
}

impl Body for SqsRecord<Value> {
    fn n(&self) -> u64 {
        self.body["n"].as_u64().unwrap()
    }
}

impl Body for DynamoDbRecord {
    fn n(&self) -> u64 {
        let n = self.new_image.as_ref().unwrap()["n"].as_n().unwrap();
        n.parse().unwrap()
    }
}

fn sqs(bodies: &[&str]) -> crate::sqs::SqsStreamEvent {
    let records: Vec<Value> = (bodies.iter().enumerate())
        .map(|(i, body)| json!({"messageId": format!("m{i}"), "body": body, "eventSource": "aws:sqs"}))
        .collect();
    crate::sqs::parse_sqs_event(json!({ "Records": records })).unwrap()
}

fn failed_ids<T>(report: &BatchReport<T>) -> Vec<&str> {
    report.item_failures().unwrap()
}

#[tokio::test]
async fn the_batch_is_planned_once_flushed_then_each_record_settled() {
    let hook = Recording {
        fail: vec![1],
        ..Recording::default()
    };
    let event = sqs(&[r#"{"n": 2}"#, r#"{"n": 3}"#, r#"{"n": 4}"#]);
    let processor = SqsProcessor::plain();
    let (report, plan) = processor.process_hooked(event, None, &hook).await;
    assert_eq!(plan.sum, 9);
    assert_eq!(
        hook.seen.steps(),
        [
            "plan 0:m0 1:m1 2:m2",
            "flush 9",
            "settle 0",
            "settle 1",
            "settle 2"
        ]
    );
    assert_eq!(failed_ids(&report), ["m1"]);
    let reason = report.records[1].outcome.as_ref().unwrap_err();
    assert!(reason.to_string().contains("record 1 not sent"), "{reason}");
    // Done records ran unprotected: no key, nothing stored.
    let done = |i: usize| {
        matches!(
            report.records[i].outcome,
            Ok(crate::Outcome::Unprotected(()))
        )
    };
    assert!(done(0) && done(2), "{:?}", report.records);
    assert_eq!(report.records[0].key_hash, None);
}

#[tokio::test]
async fn a_record_not_prepared_is_planned_with_its_reason_and_settled_by_the_hook() {
    let event = || sqs(&[r#"{"n": 2}"#, "not json", r#"{"n": 4}"#]);
    let processor = SqsProcessor::plain();
    // Kept: the record fails with its own reason.
    let hook = Recording::default();
    let (report, plan) = processor.process_hooked(event(), None, &hook).await;
    assert_eq!(hook.seen.steps()[0], "plan 0:m0 1:m1:unprepared 2:m2");
    assert!(matches!(
        plan.unprepared[..],
        [(1, FailureReason::Parse(_))]
    ));
    assert_eq!(failed_ids(&report), ["m1"]);
    assert!(matches!(
        report.records[1].outcome,
        Err(FailureReason::Parse(_))
    ));
    // Skipped by the hook: done.
    let hook = Recording {
        skip_unprepared: true,
        ..Recording::default()
    };
    let (report, _) = processor.process_hooked(event(), None, &hook).await;
    assert!(report.is_success(), "{:?}", report.records);
}

fn stream_record(seq: u64, item: &str, n: u64) -> Value {
    json!({
        "eventID": format!("e{seq}"),
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": {"id": {"S": item}},
            "NewImage": {"id": {"S": item}, "n": {"N": n.to_string()}},
            "SequenceNumber": seq.to_string(),
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/s",
    })
}

/// On an ordered source a settled failure is a failure as any other: the
/// stream retries the shard from it, and the later records it holds are
/// skipped: those of its item (`UnprotectedOrder::Key`), or of its whole
/// shard (the default, `UnprotectedOrder::Lane`: the records run
/// unprotected).
#[tokio::test]
async fn on_a_stream_a_failed_record_holds_the_later_records_of_its_item() {
    let records = vec![
        stream_record(1, "a", 1),
        stream_record(2, "b", 2),
        stream_record(3, "a", 3),
    ];
    let event = || {
        let records = json!({ "Records": records.clone() });
        crate::dynamodb_streams::parse_dynamodb_event(records).unwrap()
    };
    let skipped = |outcome: &Result<_, FailureReason>| matches!(outcome, Err(FailureReason::Skipped { after }) if after == "1");
    for order in [UnprotectedOrder::Key, UnprotectedOrder::Lane] {
        let hook = Recording {
            fail: vec![0],
            ..Recording::default()
        };
        let processor = DynamoDbStreamsProcessor::plain().unprotected_order(order);
        let (report, plan) = processor
            .process_hooked::<DynamoDbRecord, _>(event(), None, &hook)
            .await;
        assert_eq!(plan.sum, 6, "the images as the source converted them");
        assert_eq!(failed_ids(&report), ["1"], "{order:?}");
        let outcomes: Vec<_> = report.records.iter().map(|r| &r.outcome).collect();
        match order {
            UnprotectedOrder::Key => assert!(outcomes[1].is_ok(), "{outcomes:?}"),
            _ => assert!(skipped(outcomes[1]), "{outcomes:?}"),
        }
        assert!(skipped(outcomes[2]), "{order:?}: {outcomes:?}");
    }
}

/// The flush's cutoff is the processor's deadline margin before the end
/// of the remaining time; unknown without one.
#[tokio::test]
async fn the_flush_cutoff_is_the_deadline_margin_before_the_end() {
    let cutoff = |processor: SqsProcessor, remaining: Option<Duration>| async move {
        let hook = Recording::default();
        let start = Instant::now();
        let _ = processor
            .process_hooked::<SqsRecord<Value>, _>(sqs(&[r#"{"n": 1}"#]), remaining, &hook)
            .await;
        let cutoff = hook.seen.cutoff.lock().unwrap().unwrap();
        cutoff.map(|c| c.saturating_duration_since(start))
    };
    let s = Duration::from_secs;
    let within = |got: Option<Duration>, want: Duration| {
        let got = got.unwrap();
        let off = got.max(want) - got.min(want);
        assert!(off < Duration::from_millis(300), "{got:?} for {want:?}");
    };
    let set = SqsProcessor::plain().deadline_margin(s(3));
    within(cutoff(set, Some(s(10))).await, s(7));
    // The default: 1 s, at most a tenth of the time left.
    within(cutoff(SqsProcessor::plain(), Some(s(10))).await, s(9));
    within(
        cutoff(SqsProcessor::plain(), Some(s(5))).await,
        Duration::from_millis(4500),
    );
    assert_eq!(cutoff(SqsProcessor::plain(), None).await, None);
}
