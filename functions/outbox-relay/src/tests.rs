#![allow(clippy::unwrap_used, reason = "tests: a failed step is a failed test")]

use super::*;
use async_trait::async_trait;
use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_idempotency::batch::{BatchHook, Planned};
use lambda_idempotency::dynamodb_streams::DynamoDbRecord;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SAMPLE: &str = include_str!("../../../events/dynamodb-stream-outbox.json");
const FIFO: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";
const STANDARD: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications";

/// Records every request; answers from a script (by call number), else
/// everything published; each request takes `delay`.
#[derive(Debug, Default)]
struct Fake {
    calls: Mutex<Vec<(String, Vec<Value>)>>,
    script: Mutex<Vec<Option<Vec<Delivery>>>>,
    delay: Duration,
}

impl Fake {
    fn scripted(script: Vec<Option<Vec<Delivery>>>) -> Self {
        Self {
            script: Mutex::new(script),
            ..Self::default()
        }
    }

    fn calls(&self) -> Vec<(String, Vec<Value>)> {
        self.calls.lock().unwrap().clone()
    }

    fn targets(&self) -> Vec<String> {
        self.calls().into_iter().map(|(t, _)| t).collect()
    }
}

#[async_trait]
impl Publisher for Fake {
    async fn send(&self, request: &Request) -> Vec<Delivery> {
        tokio::time::sleep(self.delay).await;
        let json = serde_json::to_value(request).unwrap();
        let target = json
            .get("QueueUrl")
            .and_then(Value::as_str)
            .unwrap_or("events");
        let entries = json["Entries"].as_array().unwrap().clone();
        self.calls
            .lock()
            .unwrap()
            .push((target.to_owned(), entries));
        let mut script = self.script.lock().unwrap();
        let scripted = (!script.is_empty()).then(|| script.remove(0)).flatten();
        scripted.unwrap_or_else(|| vec![Delivery::Published; request.len()])
    }
}

/// Relays `event` through `fake` under `policy`, with no deadline.
async fn relay_with(
    fake: &Arc<Fake>,
    policy: Policy,
    event: Value,
) -> Result<Report, lambda_idempotency::batch::BatchError> {
    Relay::new(fake.clone(), policy).relay(event, None).await
}

/// Relays `event` through `fake`, every writer allowed everywhere.
async fn relay(
    event: &Value,
    fake: &Arc<Fake>,
) -> Result<Report, lambda_idempotency::batch::BatchError> {
    relay_with(fake, open(), event.clone()).await
}

fn sqs_entry(record: &str, index: usize, url: &str, group: Option<&str>) -> Value {
    let mut e = json!({
        "id": stable_id(record, index),
        "destination": {"sqs": {"queue_url": url}},
        "body": format!("{record} message {index}"),
    });
    if let Some(group) = group {
        e["group_id"] = json!(group);
    }
    e
}

fn stream_record(seq: u64, name: &str, key: &str, status: &str, outbox: Option<&Value>) -> Value {
    let mut image =
        json!({"id": {"S": key}, "status": {"S": status}, "expiration": {"N": "1796515200"}});
    if let Some(outbox) = outbox {
        image["outbox"] = json!({"S": outbox.to_string()});
    }
    json!({
        "eventID": format!("e{seq}"),
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1764547200.0,
            "Keys": {"id": {"S": key}},
            "NewImage": image,
            "SequenceNumber": format!("{seq:024}"),
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/idem/stream/2026-11-30T00:00:00.000",
    })
}

/// Every writer may publish everywhere (the allowlist has its own tests).
fn open() -> Policy {
    Policy::new(Allowlist::everything())
}

fn event(records: Vec<Value>) -> Value {
    json!({ "Records": records })
}

/// The handler's view of a stream record.
fn record_of(raw: Value) -> DynamoDbRecord {
    DynamoDbRecord::new(serde_json::from_value::<EventRecord>(raw).unwrap()).unwrap()
}

/// The plan of a stream record, its images valid.
fn plan_of(raw: Value) -> RecordPlan {
    plan(&record_of(raw), &open())
}

fn failures(report: &Report) -> Vec<String> {
    report
        .response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone().unwrap())
        .collect()
}

#[test]
fn stable_id_is_sha256_of_record_id_slash_index() {
    assert_eq!(
        stable_id("orders.confirm#evt-1001", 0),
        "9b0bd936d2284b1d110761971a8009b7c0257602bba9bb1c421f7990c06d5587"
    );
    assert_ne!(stable_id("a", 0), stable_id("a", 1));
    assert_eq!(stable_id("a", 3).len(), 64);
}

#[test]
fn the_sample_round_trips_through_the_event_type() {
    let raw: Value = serde_json::from_str(SAMPLE).unwrap();
    let parsed: Event = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(parsed.records.len(), 3);
    for (record, raw) in parsed
        .records
        .iter()
        .zip(raw["Records"].as_array().unwrap())
    {
        assert_eq!(record.event_id, raw["eventID"].as_str().unwrap());
        assert_eq!(record.event_name, raw["eventName"].as_str().unwrap());
        assert_eq!(record.event_source.as_deref(), Some("aws:dynamodb"));
        assert_eq!(record.event_version.as_deref(), Some("1.1"));
        assert_eq!(record.aws_region, "us-east-1");
        assert_eq!(
            record.event_source_arn.as_deref(),
            raw["eventSourceARN"].as_str()
        );
        let change = &record.change;
        assert_eq!(
            change.sequence_number.as_deref(),
            raw["dynamodb"]["SequenceNumber"].as_str()
        );
        assert_eq!(
            change.size_bytes,
            raw["dynamodb"]["SizeBytes"].as_i64().unwrap()
        );
        assert_eq!(
            change.approximate_creation_date_time.timestamp(),
            raw["dynamodb"]["ApproximateCreationDateTime"]
                .as_f64()
                .unwrap() as i64
        );
        // The images, re-serialised, are the sample's (compared as values).
        assert_eq!(
            serde_json::to_value(&change.new_image).unwrap(),
            raw["dynamodb"]["NewImage"]
        );
        assert_eq!(
            serde_json::to_value(&change.keys).unwrap(),
            raw["dynamodb"]["Keys"]
        );
    }
    // Serialised back and parsed again: the same values.
    let again: Event = serde_json::from_value(serde_json::to_value(&parsed).unwrap()).unwrap();
    assert_eq!(again, parsed);
}

#[test]
fn only_completed_records_with_an_outbox_are_planned() {
    let parsed: Event = serde_json::from_str(SAMPLE).unwrap();
    let plans: Vec<RecordPlan> = parsed
        .records
        .into_iter()
        .map(|r| plan(&DynamoDbRecord::new(r).unwrap(), &open()))
        .collect();
    assert_eq!(plans[0].ignored, Some("not COMPLETED"));
    assert!(plans[0].entries.is_empty());
    assert_eq!(plans[1].entries.len(), 2);
    assert_eq!(plans[1].key.as_deref(), Some("orders.confirm#evt-1001"));
    assert_eq!(
        plans[1].entries[0].id,
        stable_id("orders.confirm#evt-1001", 0)
    );
    assert_eq!(
        plans[1].entries[0].message.group_id.as_deref(),
        Some("acct-1")
    );
    assert_eq!(
        plans[1].entries[1].message.destination,
        Destination::EventBridge {
            bus: "default".into(),
            source: "orders".into(),
            detail_type: "OrderConfirmed".into()
        }
    );
    assert_eq!(plans[2].entries.len(), 1);
    assert!(plans.iter().all(|p| p.poison.is_empty()));

    let outbox = json!([sqs_entry("k", 0, STANDARD, None)]);
    for (name, status, ignored) in [
        ("REMOVE", "COMPLETED", Some("not an INSERT or MODIFY")),
        ("INSERT", "INPROGRESS", Some("not COMPLETED")),
        ("MODIFY", "COMPLETED", None),
    ] {
        let record = stream_record(1, name, "k", status, Some(&outbox));
        assert_eq!(plan_of(record).ignored, ignored, "{name} {status}");
    }
    let record = stream_record(1, "INSERT", "k", "COMPLETED", None);
    assert_eq!(plan_of(record).ignored, Some("no outbox"));
}

#[test]
fn a_modify_that_keeps_a_published_outbox_is_ignored() {
    let outbox = json!([sqs_entry("k", 0, STANDARD, None)]);
    let mut raw = stream_record(2, "MODIFY", "k", "COMPLETED", Some(&outbox));
    raw["dynamodb"]["OldImage"] = raw["dynamodb"]["NewImage"].clone();
    raw["dynamodb"]["StreamViewType"] = json!("NEW_AND_OLD_IMAGES");
    assert!(plan_of(raw).ignored.is_some());
}

#[test]
fn poison_entries_are_named_and_the_rest_kept() {
    let mut no_group = sqs_entry("k", 1, FIFO, None);
    no_group["group_id"] = Value::Null;
    let outbox = json!([
        sqs_entry("k", 0, FIFO, Some("g")),
        no_group,
        {"id": stable_id("k", 2), "destination": {"sns": {"topic": "x"}}, "body": "b"},
        {"id": "not-hex", "destination": {"sqs": {"queue_url": STANDARD}}, "body": "b"},
        {"id": stable_id("k", 4), "destination": {"eventbridge": {"bus": "b", "source": "s", "detail_type": "d"}}, "body": "[1]"},
        sqs_entry("k", 0, FIFO, Some("g")),
        sqs_entry("k", 6, STANDARD, None),
    ]);
    let plan = plan_of(stream_record(1, "INSERT", "k", "COMPLETED", Some(&outbox)));
    let kept: Vec<&str> = plan.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(kept, [stable_id("k", 0), stable_id("k", 6)]);
    let reasons: Vec<&str> = plan.poison.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    assert!(reasons[0].contains("no group id"), "{reasons:?}");
    assert!(reasons[1].contains("not an outbox entry"), "{reasons:?}");
    assert!(reasons[2].contains("64 lowercase hex"), "{reasons:?}");
    assert!(reasons[3].contains("not a JSON object"), "{reasons:?}");
    assert!(reasons[4].contains("second entry"), "{reasons:?}");

    for bad in ["{not json", "{\"a\":1}"] {
        let mut raw = stream_record(1, "INSERT", "k", "COMPLETED", None);
        raw["dynamodb"]["NewImage"]["outbox"] = json!({ "S": bad });
        let plan = plan_of(raw);
        assert!(plan.entries.is_empty());
        assert_eq!(plan.poison.len(), 1, "{bad}");
    }
}

fn many(records: usize, per_record: usize, url: &str) -> Value {
    event(
        (0..records)
            .map(|r| {
                let key = format!("k{r}");
                let outbox: Vec<Value> = (0..per_record)
                    .map(|i| sqs_entry(&key, i, url, Some("g")))
                    .collect();
                stream_record(
                    r as u64 + 1,
                    "INSERT",
                    &key,
                    "COMPLETED",
                    Some(&json!(outbox)),
                )
            })
            .collect(),
    )
}

#[tokio::test]
async fn messages_are_batched_ten_per_request_in_stream_order() {
    let fake = Arc::new(Fake::default());
    let report = relay(&many(25, 1, FIFO), &fake).await.unwrap();
    assert_eq!(report.published, 25);
    assert_eq!(report.requests, 3);
    assert!(failures(&report).is_empty());
    let calls = fake.calls();
    let sizes: Vec<usize> = calls.iter().map(|(_, e)| e.len()).collect();
    assert_eq!(sizes, [10, 10, 5]);
    let ids: Vec<String> = calls
        .iter()
        .flat_map(|(_, e)| {
            e.iter()
                .map(|v| v["MessageDeduplicationId"].as_str().unwrap().to_owned())
        })
        .collect();
    let expected: Vec<String> = (0..25).map(|r| stable_id(&format!("k{r}"), 0)).collect();
    assert_eq!(ids, expected);
    assert_eq!(calls[0].1[0]["Id"], "0");
    assert_eq!(calls[1].1[9]["Id"], "9");
}

#[tokio::test]
async fn queues_and_buses_get_their_own_requests() {
    let fake = Arc::new(Fake::default());
    let raw: Value = serde_json::from_str(SAMPLE).unwrap();
    let report = relay(&raw, &fake).await.unwrap();
    assert_eq!(
        (report.published, report.requests, report.poison),
        (3, 3, 0)
    );
    assert_eq!(fake.targets(), [FIFO, "events", STANDARD]);
}

#[tokio::test]
async fn the_first_record_with_an_unpublished_message_is_reported() {
    // 25 records, one message each: the second request (records 11-20) has
    // entry 3 failing (record 14): records 14.. are retried, so the third
    // request (records 21-25, which the stream sends again from record 14)
    // is not sent, on a standard queue as on a FIFO one.
    for queue in [STANDARD, FIFO] {
        let mut answer = vec![Delivery::Published; 10];
        answer[3] = Delivery::Retry("throttled".into());
        let fake = Arc::new(Fake::scripted(vec![None, Some(answer)]));
        let report = relay(&many(25, 1, queue), &fake).await.unwrap();
        assert_eq!(failures(&report), [format!("{:024}", 14)], "{queue}");
        assert_eq!(
            (report.published, report.unpublished, report.requests),
            (19, 6, 2),
            "{queue}"
        );
        assert_eq!(fake.calls().len(), 2);
    }
}

#[tokio::test]
async fn a_failure_on_one_target_holds_the_later_records_of_the_others() {
    // Records 1-10 to the standard queue, 11-30 to the FIFO queue: the
    // standard queue's only request fails at record 4; the FIFO queue's
    // requests (records 11.., all after it) are not sent, but for one that
    // may start before the failure is known (records of other items, and
    // targets, run concurrently).
    let records = two_targets();
    let mut answer = vec![Delivery::Published; 10];
    answer[3] = Delivery::Retry("throttled".into());
    let fake = Arc::new(Fake::scripted(vec![Some(answer)]));
    let report = relay(&event(records), &fake).await.unwrap();
    assert_eq!(failures(&report), [format!("{:024}", 4)]);
    let targets = fake.targets();
    assert!(targets.len() <= 2, "{targets:?}");
    assert_eq!(targets[0], STANDARD);
    assert_eq!(report.published + report.unpublished, 30);
    assert!(report.unpublished >= 11, "{report:?}");
}

#[tokio::test]
async fn entries_the_allowlist_does_not_give_their_writer_are_refused() {
    let allowlist = Allowlist::parse(&format!(
        r#"{{"orders.record": ["{FIFO}"], "payments.credit": ["{STANDARD}", "default"]}}"#
    ))
    .unwrap();
    let policy = Policy::new(allowlist);
    let event_entry = |record: &str| {
        json!({
            "id": stable_id(record, 1),
            "destination": {"eventbridge": {"bus": "default", "source": "s", "detail_type": "d"}},
            "body": "{}",
        })
    };
    let rec = |seq: u64, key: &str, outbox: Value| {
        stream_record(seq, "INSERT", key, "COMPLETED", Some(&outbox))
    };
    let records = vec![
        // Allowed: orders to the FIFO queue.
        rec(
            1,
            "orders.record#aa",
            json!([sqs_entry("orders.record#aa", 0, FIFO, Some("g"))]),
        ),
        // orders to the standard queue and the default bus: refused; its
        // FIFO entry still goes.
        rec(
            2,
            "orders.record#bb",
            json!([
                sqs_entry("orders.record#bb", 0, STANDARD, None),
                event_entry("orders.record#bb"),
                sqs_entry("orders.record#bb", 2, FIFO, Some("g"))
            ]),
        ),
        // A prefix the allowlist does not name, and a lookalike.
        rec(
            3,
            "inventory.reserve#cc",
            json!([sqs_entry("inventory.reserve#cc", 0, FIFO, Some("g"))]),
        ),
        rec(
            4,
            "orders.recordx#dd",
            json!([sqs_entry("orders.recordx#dd", 0, FIFO, Some("g"))]),
        ),
        // payments to its own queue and bus.
        rec(
            5,
            "payments.credit#ee",
            json!([
                sqs_entry("payments.credit#ee", 0, STANDARD, None),
                event_entry("payments.credit#ee")
            ]),
        ),
    ];
    let fake = Arc::new(Fake::default());
    let report = relay_with(&fake, policy, event(records)).await.unwrap();
    assert_eq!(report.refused, 4);
    assert_eq!(report.published, 4);
    assert_eq!((report.poison, report.unpublished), (0, 0));
    assert!(
        failures(&report).is_empty(),
        "refused entries are never retried"
    );
    let sent: BTreeSet<String> = fake
        .calls()
        .iter()
        .flat_map(|(_, entries)| entries.iter().map(|e| e.to_string()))
        .collect();
    for refused in [
        stable_id("orders.record#bb", 0),
        stable_id("orders.record#bb", 1),
        stable_id("inventory.reserve#cc", 0),
        stable_id("orders.recordx#dd", 0),
    ] {
        assert!(
            !sent.iter().any(|e| e.contains(&refused)),
            "{refused} was sent"
        );
    }
    assert!(report.metrics().contains(&("OutboxRefused", 4)));
}

#[tokio::test]
async fn entries_that_break_the_library_check_are_poison() {
    // Staged by an older version or another writer: what the library now
    // refuses at staging is poison here, by the same check.
    let bad = |i: usize, message: Value| {
        let mut e = json!({"id": stable_id("w#1", i)});
        e.as_object_mut()
            .unwrap()
            .extend(message.as_object().unwrap().clone());
        e
    };
    let q = json!({"sqs": {"queue_url": STANDARD}});
    let outbox = json!([
        bad(0, json!({"destination": q, "body": ""})),
        bad(
            1,
            json!({"destination": {"sqs": {"queue_url": FIFO}}, "body": "b", "group_id": "has space"})
        ),
        bad(
            2,
            json!({"destination": q, "body": "b", "attributes": {"AWS.x": "v"}})
        ),
        bad(3, json!({"destination": q, "body": "a\u{FFFF}"})),
        bad(
            4,
            json!({"destination": {"eventbridge": {"bus": "b", "source": "", "detail_type": "d"}}, "body": "{}"})
        ),
        bad(5, json!({"destination": q, "body": "fine"})),
    ]);
    let records = vec![stream_record(
        1,
        "INSERT",
        "w#1",
        "COMPLETED",
        Some(&outbox),
    )];
    let fake = Arc::new(Fake::default());
    let report = relay(&event(records), &fake).await.unwrap();
    assert_eq!((report.poison, report.published), (5, 1));
}

#[tokio::test]
async fn a_fifo_queue_stops_after_a_failed_request() {
    let fake = Arc::new(Fake::scripted(vec![
        None,
        Some(vec![Delivery::Retry("500".into()); 10]),
    ]));
    let report = relay(&many(25, 1, FIFO), &fake).await.unwrap();
    assert_eq!(report.requests, 2, "the third request is not sent");
    assert_eq!((report.published, report.unpublished), (10, 15));
    assert_eq!(failures(&report), [format!("{:024}", 11)]);
}

#[tokio::test]
async fn the_earliest_failure_across_targets_wins() {
    // Record 1: standard queue (fails); record 2: FIFO queue (succeeds).
    let records = vec![
        stream_record(
            1,
            "INSERT",
            "a",
            "COMPLETED",
            Some(&json!([sqs_entry("a", 0, FIFO, Some("g"))])),
        ),
        stream_record(
            2,
            "INSERT",
            "b",
            "COMPLETED",
            Some(&json!([sqs_entry("b", 0, STANDARD, None)])),
        ),
        stream_record(
            3,
            "INSERT",
            "c",
            "COMPLETED",
            Some(&json!([sqs_entry("c", 0, FIFO, Some("g"))])),
        ),
    ];
    let fake = Arc::new(Fake::scripted(vec![
        None,
        Some(vec![Delivery::Retry("reset".into())]),
    ]));
    let report = relay(&event(records), &fake).await.unwrap();
    assert_eq!(failures(&report), [format!("{:024}", 2)]);
}

#[tokio::test]
async fn poison_is_skipped_not_retried() {
    let records = vec![
        stream_record(
            1,
            "INSERT",
            "a",
            "COMPLETED",
            Some(&json!([sqs_entry("a", 0, FIFO, None)])),
        ),
        stream_record(
            2,
            "INSERT",
            "b",
            "COMPLETED",
            Some(&json!([sqs_entry("b", 0, STANDARD, None)])),
        ),
        json!({"eventID": "broken", "dynamodb": {"SequenceNumber": "3"}}),
    ];
    let fake = Arc::new(Fake::scripted(vec![Some(vec![Delivery::Poison(
        "too large".into(),
    )])]));
    let report = relay(&event(records), &fake).await.unwrap();
    assert!(failures(&report).is_empty());
    assert_eq!((report.published, report.poison), (0, 3));
}

#[tokio::test]
async fn nothing_to_publish_sends_nothing() {
    let fake = Arc::new(Fake::default());
    let records = vec![stream_record(1, "INSERT", "a", "INPROGRESS", None)];
    let report = relay(&event(records), &fake).await.unwrap();
    assert_eq!(report.requests, 0);
    assert!(fake.calls().is_empty());
    assert!(relay(&json!({"nope": 1}), &fake).await.is_err());
}

#[test]
fn the_response_is_the_partial_batch_shape() {
    let mut failure = DynamoDbBatchItemFailure::default();
    failure.item_identifier = Some("42".into());
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures = vec![failure];
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": [{"itemIdentifier": "42"}]})
    );
}

/// No request starts when the time is up: every record's message is
/// reported, the first record named.
#[tokio::test]
async fn no_request_starts_after_the_cutoff() {
    let fake = Arc::new(Fake::default());
    let relay = Relay::new(fake.clone(), open());
    let report = relay
        .relay(many(25, 1, STANDARD), Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(report.requests, 0);
    assert_eq!(report.unpublished, 25);
    assert_eq!(failures(&report), [format!("{:024}", 1)]);
    // Without a deadline (`None`: unknown), no cut-off.
    let report = relay.relay(many(25, 1, FIFO), None).await.unwrap();
    assert_eq!((report.requests, report.published), (3, 25));
}

/// The deadline margin (the processor's, and the requests' cut-off): no
/// request starts when less than half the time left at the start (at most
/// `REQUEST_BUDGET`) remains; the records not sent are reported from the
/// first.
#[tokio::test]
async fn no_record_starts_within_the_deadline_margin() {
    let fake = Arc::new(Fake {
        delay: Duration::from_millis(600),
        ..Fake::default()
    });
    let relay = Relay::new(fake.clone(), open());
    let report = relay
        .relay(many(25, 1, STANDARD), Some(Duration::from_secs(1)))
        .await
        .unwrap();
    // The first request (records 1-10) takes 600 ms; the second's turn
    // comes with 400 ms left, under the 500 ms margin: the stream retries
    // from record 11.
    assert_eq!(failures(&report), [format!("{:024}", 11)]);
    assert_eq!((report.requests, report.published), (1, 10));
    assert_eq!(report.unpublished, 15);
    // With time, all of it: REQUEST_BUDGET of 30 s kept in hand.
    let fast = Arc::new(Fake::default());
    let relay = Relay::new(fast.clone(), open());
    let report = relay
        .relay(many(25, 1, FIFO), Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!((report.requests, report.published), (3, 25));
    assert_eq!(REQUEST_BUDGET, Duration::from_secs(9));
}

/// A record the library cannot read as a `DynamoDbRecord` (a number that
/// is not a number in its image) is poison: skipped, counted, the shard
/// goes on.
#[tokio::test]
async fn a_record_with_an_invalid_image_is_poison_and_the_shard_goes_on() {
    let mut records = Vec::new();
    for r in 0..3u64 {
        let key = format!("k{r}");
        let outbox = json!([sqs_entry(&key, 0, STANDARD, None)]);
        records.push(stream_record(
            r + 1,
            "INSERT",
            &key,
            "COMPLETED",
            Some(&outbox),
        ));
    }
    records[1]["dynamodb"]["NewImage"]["expiration"] = json!({"N": "soon"});
    let fake = Arc::new(Fake::default());
    let report = relay(&event(records), &fake).await.unwrap();
    assert!(failures(&report).is_empty());
    assert_eq!((report.published, report.poison), (2, 1));
    let ids: Vec<String> = fake.calls()[0]
        .1
        .iter()
        .map(|e| {
            e["MessageAttributes"]["outbox_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, [stable_id("k0", 0), stable_id("k2", 0)]);
}

#[tokio::test]
async fn another_trigger_fails_the_invocation_instead_of_being_skipped() {
    // A Kinesis batch sent to the relay (a miswired trigger) is a deployment
    // fault to be seen (the invocation fails with `InvalidEvent`), not a
    // batch of poison records skipped in silence.
    let kinesis = json!({"Records": [{
        "eventSource": "aws:kinesis", "eventID": "shardId-000000000000:1",
        "kinesis": {"sequenceNumber": "1", "partitionKey": "p", "data": "e30="},
    }]});
    let fake = Arc::new(Fake::default());
    let err = relay(&kinesis, &fake).await.unwrap_err();
    assert_eq!(
        lambda_idempotency::diagnostic::error_type(&err),
        "InvalidEvent"
    );
    assert!(fake.calls().is_empty());
}

/// Records 1-10 to the standard queue, 11-30 to the FIFO queue.
fn two_targets() -> Vec<Value> {
    (0..30usize)
        .map(|r| {
            let key = format!("k{r}");
            let (url, group) = if r < 10 {
                (STANDARD, None)
            } else {
                (FIFO, Some("g"))
            };
            let outbox = json!([sqs_entry(&key, 0, url, group)]);
            stream_record(r as u64 + 1, "INSERT", &key, "COMPLETED", Some(&outbox))
        })
        .collect()
}

/// The batch's records as the processor hands them to the hook.
fn planned(records: &[Value]) -> Vec<Planned<DynamoDbRecord>> {
    let each = records.iter().enumerate().map(|(i, raw)| {
        let record = record_of(raw.clone());
        let id = record.sequence_number().map(str::to_owned);
        Planned::new(i, id, Ok(record))
    });
    each.collect()
}

/// The flush sends each target's requests once, in stream order, and
/// every record is settled by its own messages.
#[tokio::test]
async fn the_flush_sends_each_targets_requests_once_in_stream_order() {
    let records = two_targets();
    let (fake, policy) = (Fake::default(), open());
    let hook = crate::publish::Relaying {
        publisher: &fake,
        policy: &policy,
    };
    let batch = hook.plan(planned(&records));
    hook.flush(&batch, None).await;
    let mut firsts: Vec<(String, Value)> = fake
        .calls()
        .into_iter()
        .map(|(t, e)| (t, e[0]["MessageAttributes"]["outbox_id"].clone()))
        .collect();
    // The targets go at once: their requests interleave, each in order.
    firsts.sort_by_key(|(t, _)| t != STANDARD);
    assert_eq!(
        firsts,
        [
            (STANDARD.to_owned(), json!(stable_id("k0", 0))),
            (FIFO.to_owned(), json!(stable_id("k10", 0))),
            (FIFO.to_owned(), json!(stable_id("k20", 0)))
        ]
    );
    for index in 0..records.len() {
        assert_eq!(hook.settle(&batch, index), Ok(()), "record {index}");
    }
    let report = batch.report(DynamoDbEventResponse::default());
    assert_eq!((report.requests, report.published), (3, 30));
}

/// After a message of record 4 fails, a request whose messages all belong
/// to later records is not sent, on any target; record 4 is settled with
/// its message's failure, a later record as held, an earlier one done.
#[tokio::test]
async fn after_a_failure_no_request_of_later_records_is_sent() {
    let records = two_targets();
    let mut answer = vec![Delivery::Published; 10];
    answer[3] = Delivery::Retry("throttled".into());
    let (fake, policy) = (Fake::scripted(vec![Some(answer)]), open());
    let hook = crate::publish::Relaying {
        publisher: &fake,
        policy: &policy,
    };
    let batch = hook.plan(planned(&records));
    hook.flush(&batch, None).await;
    let failed = hook.settle(&batch, 3).unwrap_err();
    assert!(failed.to_string().contains("throttled"), "{failed}");
    assert!(!failed.is_terminal(), "retried with its record");
    // The FIFO queue's first request (records 11-20) may have started with
    // the standard queue's; its second (records 21-30) is held.
    let held = hook.settle(&batch, 24).unwrap_err();
    assert!(held.to_string().contains("earlier record"), "{held}");
    assert_eq!(hook.settle(&batch, 1), Ok(()));
    let targets = fake.targets();
    assert_eq!(targets.len(), 2, "{targets:?}");
    assert!(targets.contains(&STANDARD.to_owned()), "{targets:?}");
}

/// Nothing starts at or after the cutoff the processor gives the flush:
/// every record is settled as not sent, retried from the first.
#[tokio::test]
async fn the_flush_keeps_the_cutoff() {
    let records = two_targets();
    let (fake, policy) = (Fake::default(), open());
    let hook = crate::publish::Relaying {
        publisher: &fake,
        policy: &policy,
    };
    let batch = hook.plan(planned(&records));
    hook.flush(&batch, Some(std::time::Instant::now())).await;
    assert!(fake.calls().is_empty());
    let held = hook.settle(&batch, 0).unwrap_err();
    assert!(held.to_string().contains("time is nearly up"), "{held}");
}

/// A deadline already past when the invocation starts (`cargo lambda
/// watch` gives 600000) is unknown, not a cut-off that publishes nothing;
/// with no deadline (0) there is none either.
#[tokio::test]
async fn a_deadline_already_past_is_unknown() {
    for deadline in [600_000, 0] {
        let fake = Arc::new(Fake::default());
        let mut ctx = lambda_runtime::Context::default();
        ctx.deadline = deadline;
        let event = lambda_runtime::LambdaEvent::new(many(25, 1, FIFO), ctx);
        let response = Relay::new(fake.clone(), open())
            .handle(event)
            .await
            .unwrap();
        assert!(response.batch_item_failures.is_empty(), "{deadline}");
        assert_eq!(fake.calls().len(), 3, "{deadline}");
    }
}

/// `raw` moved into a table with a partition key `pk` and a sort key `sk`:
/// its key replaced by (`pk`, `sk`) in the keys and the new image.
fn composite(mut raw: Value, pk: &str, sk: &str) -> Value {
    let key = json!({"pk": {"S": pk}, "sk": {"S": sk}});
    let change = &mut raw["dynamodb"];
    change["Keys"] = key.clone();
    let image = change["NewImage"].as_object_mut().unwrap();
    image.remove("id");
    image.extend(key.as_object().unwrap().clone());
    raw
}

/// In a table shared with the team's items (partition key `pk`, sort key
/// `sk`), the relay reads a record's key by the table's layout and relays
/// only records: a team's own item with an `outbox` attribute is not one.
#[test]
fn under_a_sort_key_only_records_in_the_layout_are_relayed() {
    use lambda_idempotency::store::{KeyLayout, TableConfig};
    let outbox = json!([sqs_entry("orders#1", 0, STANDARD, None)]);
    let record = stream_record(1, "INSERT", "orders#1", "COMPLETED", Some(&outbox));
    for (layout, pk, sk) in [
        (
            KeyLayout::Spread {
                sort_key: "sk".into(),
            },
            "IDEMPOTENCY#orders#1",
            "IDEMPOTENCY",
        ),
        (
            KeyLayout::FixedPartition {
                sort_key: "sk".into(),
                partition_value: "IDEMPOTENCY".into(),
            },
            "IDEMPOTENCY",
            "orders#1",
        ),
    ] {
        let table = TableConfig::new("app")
            .partition_key("pk")
            .key_layout(layout.clone());
        let policy = open().for_table(&table);
        let plan = crate::plan(&record_of(composite(record.clone(), pk, sk)), &policy);
        assert_eq!(plan.key.as_deref(), Some("orders#1"), "{layout:?}");
        assert_eq!(plan.entries.len(), 1, "{plan:?}");
        let theirs = composite(record.clone(), "ORDER#1", "ITEM");
        let plan = crate::plan(&record_of(theirs), &policy);
        assert_eq!(plan.ignored, Some("not an idempotency record"), "{plan:?}");
        assert!(plan.entries.is_empty());
    }
}
