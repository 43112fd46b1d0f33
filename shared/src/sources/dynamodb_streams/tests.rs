//! The DynamoDB Streams source on the memory store, through the sample
//! event (`events/dynamodb-stream-subscriptions.json`: an INSERT, a MODIFY,
//! a REMOVE by a writer and a Time to Live deletion): stop-the-item,
//! in-batch duplicates coalesced, a poison record failing alone, TTL
//! deletions recognised, images converted exactly.

use super::*;
use crate::HandlerError;
use crate::batch::BatchError;
use crate::batch::BatchReport;
use crate::batch::FailureReason;
use crate::testkit::*;
use crate::value::AttrValue;
use crate::{MissingKey, Outcome};
use serde_json::{Value, json};
use std::sync::Mutex;

const SAMPLE: &str = "dynamodb-stream-subscriptions.json";

fn sample() -> Value {
    event_json(SAMPLE)
}

fn sample_records() -> Vec<Value> {
    sample()["Records"].as_array().unwrap().clone()
}

fn event(records: Vec<Value>) -> DynamoDbStreamEvent {
    parse_dynamodb_event(json!({ "Records": records })).unwrap()
}

fn processor() -> DynamoDbStreamsProcessor {
    let (engine, _, _) = memory_engine();
    DynamoDbStreamsProcessor::new(engine, keys_and("version"))
}

fn named<T>(report: &BatchReport<T>) -> Vec<String> {
    let response: DynamoDbEventResponse = report.response_as().unwrap();
    response
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier.unwrap_or_default())
        .collect()
}

fn seq(record: &Value) -> String {
    record["dynamodb"]["SequenceNumber"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// What the handler saw: (sequence number, event name, TTL deletion).
#[derive(Default)]
struct Sink {
    seen: Mutex<Vec<(String, String, bool)>>,
}

impl Sink {
    /// Fails the records whose image has `plan` = `fail_plan`.
    async fn handle(&self, r: DynamoDbRecord, fail_plan: &str) -> Result<Value, HandlerError> {
        self.seen.lock().unwrap().push((
            r.sequence_number().unwrap_or_default().to_owned(),
            r.event_name.clone(),
            r.is_ttl_deletion(),
        ));
        let plan = r
            .image()
            .and_then(|i| i.get("plan"))
            .and_then(AttrValue::as_s);
        if plan == Some(fail_plan) {
            return Err(HandlerError::retryable(std::io::Error::other(format!(
                "plan {fail_plan} refused"
            ))));
        }
        Ok(json!({"seq": r.sequence_number()}))
    }

    fn seqs(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.0.clone())
            .collect()
    }
}

#[test]
fn the_sample_parses_with_its_images_as_items() {
    let event = parse_dynamodb_event(sample()).unwrap();
    assert_eq!(event.records.len(), 4);
    let records: Vec<DynamoDbRecord> = event
        .records
        .into_iter()
        .map(|r| DynamoDbRecord::new(r.unwrap()).unwrap())
        .collect();
    let names: Vec<&str> = records.iter().map(|r| r.event_name.as_str()).collect();
    assert_eq!(names, ["INSERT", "MODIFY", "REMOVE", "REMOVE"]);
    let modify = &records[1];
    assert_eq!(modify.keys["subscription_id"], AttrValue::s("sub-1001"));
    let new = modify.new_image.as_ref().unwrap();
    assert_eq!(new["version"], AttrValue::N("2".into()));
    assert_eq!(new["plan"], AttrValue::s("pro"));
    assert_eq!(
        new["features"],
        AttrValue::Ss(vec!["api".into(), "reports".into()])
    );
    assert_eq!(
        modify.old_image.as_ref().unwrap()["plan"],
        AttrValue::s("basic")
    );
    assert_eq!(modify.sequence_number(), Some("700000000042417803611"));
    // A REMOVE has no NewImage: `image` is the OldImage.
    assert!(records[2].new_image.is_none());
    assert_eq!(
        records[2].image().unwrap()["version"],
        AttrValue::N("3".into())
    );
}

#[test]
fn ttl_deletions_are_recognised_by_their_user_identity() {
    let parsed = parse_dynamodb_event(sample()).unwrap();
    let ttl: Vec<bool> = parsed
        .records
        .iter()
        .map(|r| {
            DynamoDbRecord::new(r.clone().unwrap())
                .unwrap()
                .is_ttl_deletion()
        })
        .collect();
    assert_eq!(ttl, [false, false, false, true]);
    // The same identity on a MODIFY, or another principal on a REMOVE, is not.
    let mut records = sample_records();
    records[1]["userIdentity"] = records[3]["userIdentity"].clone();
    records[2]["userIdentity"] = json!({"type": "Service", "principalId": "example.amazonaws.com"});
    let changed = event(records);
    let ttl: Vec<bool> = changed
        .records
        .iter()
        .map(|r| {
            DynamoDbRecord::new(r.clone().unwrap())
                .unwrap()
                .is_ttl_deletion()
        })
        .collect();
    assert_eq!(ttl, [false, false, false, true]);
}

#[tokio::test]
async fn the_handler_sees_every_record_in_order_and_knows_the_ttl_deletion() {
    let sink = Sink::default();
    let report = processor()
        .process(event(sample_records()), None, |r| sink.handle(r, "none"))
        .await;
    assert!(report.is_success(), "{report:?}");
    let seen = sink.seen.lock().unwrap().clone();
    let expected: Vec<(String, String, bool)> = sample_records()
        .iter()
        .map(|r| {
            let name = r["eventName"].as_str().unwrap().to_owned();
            (seq(r), name, r.get("userIdentity").is_some())
        })
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(report.ordering(), Ordering::StopLane);
    assert!(named(&report).is_empty());
}

/// Changed with item lanes (issue 29): it asserted that the two REMOVEs
/// after the failed MODIFY did not run. They change other items
/// (`sub-1002`, `sub-0917`), and DynamoDB Streams orders per item, so they
/// now run; the response still names the MODIFY (the shard's checkpoint),
/// and the retry from it replays them.
#[tokio::test]
async fn after_a_failure_nothing_later_of_its_item_runs_and_the_response_names_it() {
    let sink = Sink::default();
    let records = sample_records();
    // The MODIFY of sub-1001 (plan "pro") fails: the REMOVEs of the other
    // items run all the same.
    let report = processor()
        .process(event(records.clone()), None, |r| sink.handle(r, "pro"))
        .await;
    let mut seen = sink.seqs();
    seen.sort();
    assert_eq!(seen, records.iter().map(seq).collect::<Vec<_>>());
    assert!(matches!(
        report.records[0].outcome,
        Ok(Outcome::Executed(_))
    ));
    assert!(matches!(
        &report.records[1].outcome,
        Err(FailureReason::Handler { message, .. }) if message == "plan pro refused"
    ));
    for later in &report.records[2..] {
        assert!(matches!(later.outcome, Ok(Outcome::Executed(_))));
    }
    assert_eq!(named(&report), [seq(&records[1])]);

    // Lambda retries from the failed record: the first one is not in the
    // retry; once the handler accepts, the MODIFY runs and the REMOVEs
    // replay.
    let sink = Sink::default();
    let p = processor();
    let first = p
        .process(event(records.clone()), None, |r| sink.handle(r, "pro"))
        .await;
    assert_eq!(named(&first), [seq(&records[1])]);
    let retry = p
        .process(event(records[1..].to_vec()), None, |r| {
            sink.handle(r, "none")
        })
        .await;
    assert!(retry.is_success());
    assert!(named(&retry).is_empty());
    assert_eq!(sink.seqs().len(), 4 + 1);
    for replayed in &retry.records[1..] {
        assert!(matches!(replayed.outcome, Ok(Outcome::Replayed(_))));
    }
}

#[tokio::test]
async fn in_batch_copies_of_a_change_run_once_and_a_redelivery_replays() {
    // The INSERT read again under another sequence number (a new stream of
    // the table, a replica): the same change, the same key.
    let mut records = sample_records();
    let mut copy = records[0].clone();
    copy["dynamodb"]["SequenceNumber"] = json!("700000000042417803999");
    copy["eventID"] = json!("copy");
    records.push(copy);
    let sink = Sink::default();
    let p = processor();
    let report = p
        .process(event(records.clone()), None, |r| sink.handle(r, "none"))
        .await;
    assert!(report.is_success(), "{report:?}");
    assert_eq!(sink.seqs().len(), 4, "the copy did not run");
    assert!(matches!(
        report.records[4].outcome,
        Ok(Outcome::Replayed(Some(_)))
    ));
    assert_eq!(report.records[4].key_hash, report.records[0].key_hash);
    // Each change of the item is its own key (INSERT v1, MODIFY v2).
    assert_ne!(report.records[0].key_hash, report.records[1].key_hash);

    // The whole batch delivered again: every record replays.
    let again = p
        .process(event(records), None, |r| sink.handle(r, "none"))
        .await;
    assert_eq!(sink.seqs().len(), 4, "nothing ran twice");
    assert!(
        again
            .records
            .iter()
            .all(|r| matches!(r.outcome, Ok(Outcome::Replayed(_)))),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_poison_record_fails_alone_and_stops_what_follows_it() {
    let mut records = sample_records();
    // Not a stream record (no eventName, no SizeBytes) but it has a
    // sequence number: named in the response, the batch is not failed.
    let mut broken = json!({
        "eventID": "broken", "eventSource": "aws:dynamodb",
        "eventSourceARN": records[0]["eventSourceARN"],
        "dynamodb": {"SequenceNumber": "700000000042417803650"},
    });
    records.insert(2, broken.take());
    let sink = Sink::default();
    let report = processor()
        .process(event(records.clone()), None, |r| sink.handle(r, "none"))
        .await;
    assert_eq!(sink.seqs(), [seq(&records[0]), seq(&records[1])]);
    assert!(matches!(
        &report.records[2].outcome,
        Err(FailureReason::Parse(m)) if m.contains("not a DynamoDB stream record")
    ));
    assert_eq!(named(&report), ["700000000042417803650"]);

    // An image with a value DynamoDB never sends (a number that is not
    // one) fails that record, by name.
    let mut records = sample_records();
    records[1]["dynamodb"]["NewImage"]["seats"] = json!({"N": "five"});
    let report = processor()
        .process(event(records.clone()), None, |r| sink.handle(r, "none"))
        .await;
    assert!(matches!(
        &report.records[1].outcome,
        Err(FailureReason::Parse(m)) if m.contains("NewImage.seats")
    ));
    assert_eq!(named(&report), [seq(&records[1])]);

    // A broken record without a sequence number cannot be named: the
    // invocation fails (Lambda retries the batch).
    let report = processor()
        .process(
            event(vec![
                json!({"eventSource": "aws:dynamodb", "eventSourceARN": "arn"}),
            ]),
            None,
            |r| sink.handle(r, "none"),
        )
        .await;
    assert!(matches!(
        report.response_as::<DynamoDbEventResponse>(),
        Err(BatchError::NoItemIdentifier {
            id: "SequenceNumber",
            ..
        })
    ));
}

#[tokio::test]
async fn the_key_needs_its_attribute() {
    let mut records = sample_records();
    records.truncate(2);
    records[1]["dynamodb"]["NewImage"]
        .as_object_mut()
        .unwrap()
        .remove("version");
    let sink = Sink::default();
    let report = processor()
        .process(event(records.clone()), None, |r| sink.handle(r, "none"))
        .await;
    assert!(matches!(
        &report.records[1].outcome,
        Err(FailureReason::Key(crate::KeyError::Missing(at))) if at.contains("version")
    ));
    let (engine, _, _) = memory_engine();
    let unprotected = DynamoDbStreamsProcessor::new(engine, keys_and("version"))
        .missing_key(MissingKey::RunUnprotected)
        .process(event(records), None, |r| sink.handle(r, "none"))
        .await;
    assert!(matches!(
        unprotected.records[1].outcome,
        Ok(Outcome::Unprotected(_))
    ));
}

#[test]
fn numbers_convert_exactly_and_the_json_view_keeps_their_text() {
    let mut raw = sample_records()[0].clone();
    let big = "12345678901234567890123456789012345678";
    raw["dynamodb"]["NewImage"]["price"] = json!({"N": "12.50"});
    raw["dynamodb"]["NewImage"]["big"] = json!({"N": big});
    raw["dynamodb"]["NewImage"]["ns"] = json!({"NS": ["1.0", "2"]});
    raw["dynamodb"]["NewImage"]["m"] =
        json!({"M": {"l": {"L": [{"NULL": true}, {"BOOL": false}]}}});
    raw["dynamodb"]["NewImage"]["b"] = json!({"B": "aGk="});
    let record: EventRecord = serde_json::from_value(raw).unwrap();
    let record = DynamoDbRecord::new(record).unwrap();
    let image = record.new_image.as_ref().unwrap();
    assert_eq!(image["price"], AttrValue::N("12.5".into()));
    assert_eq!(image["big"].as_decimal().unwrap().to_string(), big);
    assert_eq!(image["ns"], AttrValue::Ns(vec!["1".into(), "2".into()]));
    assert_eq!(image["b"], AttrValue::B(b"hi".to_vec()));
    let view = record_json(&record);
    assert_eq!(view["NewImage"]["big"], json!(big));
    assert_eq!(view["NewImage"]["price"], json!("12.5"));
    assert_eq!(view["NewImage"]["m"], json!({"l": [null, false]}));
    assert_eq!(view["NewImage"]["b"], json!("aGk="));
    assert_eq!(view["Keys"], json!({"subscription_id": "sub-1001"}));
    assert_eq!(view["eventName"], json!("INSERT"));
    assert!(view.get("OldImage").is_none());

    // 39 digits is more than DynamoDB keeps: a clear error.
    let mut raw = sample_records()[0].clone();
    raw["dynamodb"]["NewImage"]["big"] = json!({"N": format!("{big}9")});
    let record: EventRecord = serde_json::from_value(raw).unwrap();
    let err = DynamoDbRecord::new(record).unwrap_err();
    assert!(err.starts_with("NewImage.big"), "{err}");
}

#[test]
fn other_payloads_are_rejected() {
    let kinesis = json!({"Records": [{"eventSource": "aws:kinesis", "kinesis": {}}]});
    for payload in [
        kinesis,
        json!({"nope": 1}),
        json!({"Records": {}}),
        json!([]),
    ] {
        assert!(
            matches!(
                parse_dynamodb_event(payload.clone()),
                Err(BatchError::WrongEvent {
                    expected: "a DynamoDB Streams",
                    ..
                })
            ),
            "{payload}"
        );
    }
    assert!(
        parse_dynamodb_event(json!({"Records": []}))
            .unwrap()
            .records
            .is_empty()
    );
}

#[tokio::test]
async fn the_removal_of_a_version_is_not_a_copy_of_the_change_that_wrote_it() {
    // MODIFY to version 2, then REMOVE of that version 2 (its OldImage):
    // same keys, same version, two changes.
    let records = sample_records();
    let modify = records[1].clone();
    let mut remove = records[2].clone();
    remove["dynamodb"]["Keys"] = modify["dynamodb"]["Keys"].clone();
    remove["dynamodb"]["OldImage"] = modify["dynamodb"]["NewImage"].clone();
    let sink = Sink::default();
    let report = processor()
        .process(event(vec![modify, remove]), None, |r| {
            sink.handle(r, "none")
        })
        .await;
    assert!(
        report
            .records
            .iter()
            .all(|r| matches!(r.outcome, Ok(Outcome::Executed(_)))),
        "{report:?}"
    );
    assert_eq!(sink.seqs().len(), 2);
}

/// Refuses plan `pro` for good (a terminal error), accepts the rest.
async fn refuse_pro(r: DynamoDbRecord) -> Result<Value, HandlerError> {
    let plan = r
        .image()
        .and_then(|i| i.get("plan"))
        .and_then(AttrValue::as_s)
        .map(str::to_owned);
    if plan.as_deref() == Some("pro") {
        return Err(HandlerError::terminal(std::io::Error::other(
            "plan pro is not sold",
        )));
    }
    Ok(json!({"seq": r.sequence_number()}))
}

/// The sample with a record that is not a stream record after the MODIFY
/// (plan `pro`, which the handler refuses for good).
fn with_poison() -> Vec<Value> {
    let mut records = sample_records();
    records.insert(
        2,
        json!({
            "eventID": "broken", "eventSource": "aws:dynamodb",
            "eventSourceARN": records[0]["eventSourceARN"],
            "dynamodb": {"SequenceNumber": "700000000042417803650"},
        }),
    );
    records
}

/// With parking, the terminal rejection and the broken record are parked
/// (the record as delivered, its stream and sequence number, the reason),
/// and the records after them run and commit; the response names none.
/// Without parking (today), the batch stopped at the MODIFY.
#[tokio::test]
async fn with_parking_poison_records_are_parked_and_the_stream_goes_on() {
    let records = with_poison();
    let parking = crate::parking::MemoryParking::new();
    let report = processor()
        .parking(parking.clone())
        .process(event(records.clone()), None, refuse_pro)
        .await;
    let labels: Vec<_> = report.records.iter().map(|r| r.label()).collect();
    assert_eq!(
        labels,
        ["executed", "parked", "parked", "executed", "executed"]
    );
    assert!(named(&report).is_empty());
    let parked = parking.parked();
    assert_eq!(parked.len(), 2);
    let arn = records[0]["eventSourceARN"].as_str().unwrap();
    for (p, raw) in parked.iter().zip([&records[1], &records[2]]) {
        assert_eq!(p.source, "aws:dynamodb");
        assert_eq!(p.position, seq(raw));
        assert_eq!(p.id, format!("{arn}/{}", seq(raw)), "the lane is the ARN");
        let kept = p.record.as_ref().unwrap();
        assert_eq!(
            kept["dynamodb"]["SequenceNumber"],
            raw["dynamodb"]["SequenceNumber"]
        );
        assert_eq!(kept["dynamodb"]["Keys"], raw["dynamodb"]["Keys"]);
    }
    assert_eq!(
        parked[0].record.as_ref().unwrap()["dynamodb"]["NewImage"]["plan"],
        json!({"S": "pro"})
    );
    assert!(
        parked[0].reason.contains("plan pro is not sold"),
        "{}",
        parked[0].reason
    );
    assert!(parked[1].reason.contains("not a DynamoDB stream record"));
}

/// When parking fails, the first poison fails and stops the stream, as
/// without parking.
#[tokio::test]
async fn when_parking_fails_the_stream_stops_at_the_poison() {
    let records = with_poison();
    let parking = crate::parking::MemoryParking::new();
    parking.fail(true);
    let report = processor()
        .parking(parking.clone())
        .process(event(records.clone()), None, refuse_pro)
        .await;
    let labels: Vec<_> = report.records.iter().map(|r| r.label()).collect();
    assert_eq!(labels, ["executed", "failed", "failed", "failed", "failed"]);
    assert_eq!(named(&report), [seq(&records[1])]);
    assert!(parking.parked().is_empty());
}

// Lanes by item (issue 29). Each test fails with the lanes before (the
// whole stream one lane: a batch's records run and commit one after
// another, and a failure holds back every later record).

/// A MODIFY of item `id` (`N`, written as `id_text`: `"5"` and `"5.0"` are
/// one item) at sequence number `seq`, its `NewImage` with `version` and
/// `n` both `n`.
fn change(id_text: &str, seq: u64, n: i64) -> Value {
    json!({
        "eventID": format!("e{seq}"), "eventName": "MODIFY", "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/items/stream/2026-11-30T00:00:00.000",
        "dynamodb": {
            "Keys": {"id": {"N": id_text}},
            "NewImage": {"id": {"N": id_text}, "version": {"N": n.to_string()}, "n": {"N": n.to_string()}},
            "SequenceNumber": seq.to_string(), "SizeBytes": 40, "StreamViewType": "NEW_IMAGE",
        },
    })
}

/// 100 changes over 10 items (`0`..`9`, round robin; every other change
/// of an item writes its key as `<id>.0`), the `i`-th at sequence number
/// `1000 + i` with `n = i`.
fn hundred_over_ten_items() -> Vec<Value> {
    (0..100)
        .map(|i| {
            let id = if (i / 10) % 2 == 0 {
                format!("{}", i % 10)
            } else {
                format!("{}.0", i % 10)
            };
            change(&id, 1000 + i, i as i64)
        })
        .collect()
}

/// An optimistic processor (batch commits on) over a counting memory store.
fn counted() -> (DynamoDbStreamsProcessor, Counting) {
    let store = Counting::default();
    let config = crate::Config::with_prefix("test.items")
        .commit_mode(crate::CommitMode::Optimistic)
        .batch_commits(true)
        .disabled(false);
    let engine = crate::Idempotency::new(store.clone(), config);
    (
        DynamoDbStreamsProcessor::new(engine, keys_and("version")),
        store,
    )
}

/// Adds `n` to its item's total and logs `(item, n)`; fails the changes
/// `n` of `fail` (retryable).
async fn add_to_total(
    r: DynamoDbRecord,
    fail: &[i64],
    log: &Mutex<Vec<(String, i64)>>,
) -> Result<crate::write::Staged<Value>, HandlerError> {
    let n = r
        .new_image
        .as_ref()
        .and_then(|i| i.get("n"))
        .and_then(AttrValue::as_i64)
        .unwrap();
    let id = r.keys["id"].clone();
    log.lock().unwrap().push((format!("{id:?}"), n));
    if fail.contains(&n) {
        return Err(HandlerError::retryable(std::io::Error::other("not yet")));
    }
    let key = crate::write::Item::from([("id".to_owned(), id)]);
    let write = crate::write::Write::update("totals", key).add("total", n);
    Ok(crate::write::Staged::new(json!(n)).write(write))
}

fn item_total(store: &Counting, id: i64) -> Option<i64> {
    let key = crate::write::Item::from([("id".to_owned(), AttrValue::n(id))]);
    store.inner.item("totals", &key)?.get("total")?.as_i64()
}

fn all_of(id: i64) -> i64 {
    (0..10).map(|j| id + 10 * j).sum()
}

#[tokio::test]
async fn a_batch_of_100_changes_over_10_items_commits_in_at_most_10_transactions() {
    let (processor, store) = counted();
    let log = Mutex::new(Vec::new());
    let report = processor
        .process(event(hundred_over_ten_items()), None, |r| {
            add_to_total(r, &[], &log)
        })
        .await;
    assert!(report.is_success(), "{report:?}");
    let transactions = store.take_transactions();
    assert!(
        transactions <= 10,
        "{transactions} transactions for 100 changes of 10 items"
    );
    for id in 0..10 {
        assert_eq!(item_total(&store, id), Some(all_of(id)), "item {id}");
    }
    // Each item's changes ran in stream order.
    let log = log.into_inner().unwrap();
    for id in 0..10 {
        let item = format!("{:?}", AttrValue::n(id));
        let ns: Vec<i64> = log
            .iter()
            .filter(|(i, _)| *i == item)
            .map(|e| e.1)
            .collect();
        assert_eq!(
            ns,
            (0..10).map(|j| id + 10 * j).collect::<Vec<_>>(),
            "{item}"
        );
    }
}

#[tokio::test]
async fn a_failure_of_one_item_holds_back_only_that_item_and_the_response_names_the_lowest_failed_sequence_number()
 {
    let (processor, store) = counted();
    // Changes 57 (item 7) and 35 (item 5, written `5.0`) fail; item 5's
    // later changes written `5` are held back too: one item.
    let unlogged = Mutex::default();
    let report = processor
        .process(event(hundred_over_ten_items()), None, |r| {
            add_to_total(r, &[57, 35], &unlogged)
        })
        .await;
    for (i, r) in report.records.iter().enumerate() {
        match [(5, 35), (7, 57)].into_iter().find(|f| f.0 == i % 10) {
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
                "{i}: {:?}",
                r.outcome
            ),
        }
    }
    assert_eq!(
        named(&report),
        ["1035"],
        "the lowest failed sequence number"
    );
    assert_eq!(item_total(&store, 5), Some(5 + 15 + 25));
    assert_eq!(item_total(&store, 7), Some(7 + 17 + 27 + 37 + 47));
    assert_eq!(item_total(&store, 9), Some(all_of(9)));
}

#[tokio::test]
async fn the_redelivery_from_the_lowest_failed_change_applies_nothing_twice() {
    let (processor, store) = counted();
    let processor = processor.pre_read(crate::batch::PreRead::Always);
    let records = hundred_over_ten_items();
    let unlogged = Mutex::default();
    let first = processor
        .process(event(records.clone()), None, |r| {
            add_to_total(r, &[57, 35], &unlogged)
        })
        .await;
    assert_eq!(named(&first), ["1035"]);
    store.take_pre_reads();
    let log = Mutex::new(Vec::new());
    let retry = processor
        .process(event(records[35..].to_vec()), None, |r| {
            add_to_total(r, &[], &log)
        })
        .await;
    assert!(retry.is_success(), "{retry:?}");
    for (r, i) in retry.records.iter().zip(35..) {
        let runs_again = (i % 10 == 5 && i >= 35) || (i % 10 == 7 && i >= 57);
        let expected = if runs_again { "executed" } else { "replayed" };
        assert_eq!(r.label(), expected, "{i}");
    }
    let mut ran: Vec<i64> = log.into_inner().unwrap().into_iter().map(|e| e.1).collect();
    ran.sort_unstable();
    assert_eq!(ran, [35, 45, 55, 57, 65, 67, 75, 77, 85, 87, 95, 97]);
    assert_eq!(store.take_pre_reads(), 1, "one pre-read for the redelivery");
    for id in 0..10 {
        assert_eq!(item_total(&store, id), Some(all_of(id)), "item {id}, once");
    }
}

/// The former module example: the handler refuses a change, its item stops
/// there, and the response names it.
#[tokio::test]
async fn a_refused_change_stops_its_item_and_is_named() {
    let (engine, _, _) = memory_engine();
    let processor = DynamoDbStreamsProcessor::new(engine, keys_and("version"));
    let record = |seq: &str, version: &str, plan: &str| {
        json!({
            "eventID": format!("e{seq}"), "eventName": "MODIFY", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "us-east-1",
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/subs/stream/2026-11-30T00:00:00.000",
            "dynamodb": {
                "Keys": {"id": {"S": "sub-1"}},
                "NewImage": {"id": {"S": "sub-1"}, "version": {"N": version}, "plan": {"S": plan}},
                "SequenceNumber": seq, "SizeBytes": 40, "StreamViewType": "NEW_IMAGE",
            },
        })
    };
    let event = parse_dynamodb_event(json!({"Records": [
        record("101", "1", "basic"),
        record("102", "2", "gold"), // the handler refuses it: sub-1 stops here
        record("103", "3", "pro"),  // not run
    ]}))
    .expect("a DynamoDB Streams event");
    let report = processor
        .process(event, None, |r: DynamoDbRecord| async move {
            let plan = r
                .new_image
                .as_ref()
                .and_then(|i| i["plan"].as_s())
                .unwrap_or_default()
                .to_owned();
            if plan == "gold" {
                return Err(HandlerError::retryable(std::io::Error::other(
                    "no such plan yet",
                )));
            }
            Ok(json!({"plan": plan}))
        })
        .await;
    assert_eq!(named(&report), ["102"]);
}

#[tokio::test]
async fn a_pointer_key_reads_the_json_view_even_without_payload_validation() {
    // The view is built only when the key or the payload hash reads it:
    // a pointer does, whatever the payload scope. The sample's two REMOVEs
    // share their eventName, so the second is the first's copy.
    let (engine, _, _) = memory_engine();
    let processor = DynamoDbStreamsProcessor::new(engine, KeySelector::pointer("/eventName"))
        .payload(crate::PayloadScope::None);
    let sink = Sink::default();
    let report = processor
        .process(event(sample_records()), None, |r| sink.handle(r, "none"))
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(
        sink.seqs().len(),
        3,
        "the second REMOVE is the first's copy"
    );
    assert!(matches!(
        report.records[3].outcome,
        Ok(Outcome::Replayed(_))
    ));
}
