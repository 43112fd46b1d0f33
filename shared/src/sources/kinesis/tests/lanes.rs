//! Lanes by partition key. Each test fails with shard-wide lanes
//! (`KinesisOrder::Shard`): there, a batch's records run and commit one
//! after another, and a failure holds back its whole shard.

use super::*;

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
    let key = r.record.kinesis.partition_key.clone();
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

/// A record of shard 0 at `seq` under `partition_key`, with `key` at
/// `/key` when given (reading `r<seq>`, `n`).
fn maybe_keyed(partition_key: &str, seq: u64, key: Option<&str>, n: i64) -> Value {
    let mut data = json!({"reading_id": format!("r{seq}"), "n": n});
    if let Some(key) = key {
        data["key"] = json!(key);
    }
    let mut r = record("0", &seq.to_string(), &data.to_string());
    r["kinesis"]["partitionKey"] = json!(partition_key);
    r
}

/// How often the handler ran each reading, over all deliveries.
fn runs(sink: &Sink, reading: &str) -> usize {
    sink.seen().iter().filter(|(_, id)| id == reading).count()
}

/// A record without a key runs unprotected: nothing would answer its
/// redelivery. So it waits behind every earlier record of its shard, not
/// only of its partition key, and does not run behind a failure of any of
/// them (nor do the later records of its key); the other keys go on. The
/// redelivery from the failure then runs it once. Before, `r103` (another
/// partition key than the failure) ran at once and again on the
/// redelivery.
#[tokio::test]
async fn a_record_without_a_key_waits_behind_any_earlier_failure_of_its_shard() {
    let (engine, _, _) = memory_engine();
    let p = KinesisProcessor::new(engine, KeySelector::pointer("/key"))
        .missing_key(crate::MissingKey::RunUnprotected);
    let batch = |n102: i64| {
        let mut other_shard = record("1", "200", &reading("r200", 1));
        other_shard["kinesis"]["partitionKey"] = json!("pk-e");
        vec![
            maybe_keyed("pk-a", 100, Some("a1"), 1),
            maybe_keyed("pk-b", 101, None, 1),
            maybe_keyed("pk-a", 102, Some("a2"), n102),
            maybe_keyed("pk-c", 103, None, 3),
            maybe_keyed("pk-c", 104, Some("c1"), 4),
            maybe_keyed("pk-d", 105, Some("d1"), 5),
            other_shard,
        ]
    };
    let sink = Sink::default();
    let report = p.process(event(batch(-2)), None, |r| sink.handle(r)).await;
    assert!(matches!(
        report.records[1].outcome,
        Ok(Outcome::Unprotected(_))
    ));
    // 104, of its key, is behind 103.
    for (r, after) in report.records[3..5].iter().zip(["102", "103"]) {
        assert_eq!(
            r.outcome,
            Err(FailureReason::Skipped {
                after: after.to_owned()
            }),
            "{:?}",
            r.message_id
        );
    }
    assert!(matches!(
        report.records[5].outcome,
        Ok(Outcome::Executed(_))
    ));
    assert!(matches!(
        report.records[6].outcome,
        Ok(Outcome::Unprotected(_))
    ));
    assert_eq!(named(&report), ["102"]);
    assert_eq!(runs(&sink, "r103"), 0, "not run behind 102");

    // Lambda redelivers from 102, which now succeeds.
    let report = p
        .process(event(batch(2)[2..6].to_vec()), None, |r| sink.handle(r))
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(runs(&sink, "r103"), 1, "once over both deliveries");
    assert_eq!(runs(&sink, "r105"), 1, "replayed");
}

/// With the kill switch on every record runs unprotected: each waits
/// behind every earlier record of its shard, as with
/// `KinesisOrder::Shard`, and nothing after a failure of the shard runs;
/// the other shard goes on. `UnprotectedOrder::Key` (a handler safe to run
/// again) keeps them in their keys' lanes.
#[tokio::test]
async fn with_the_kill_switch_nothing_runs_behind_a_failure_of_its_shard() {
    let config = crate::Config::with_prefix("test.lanes").disabled(true);
    let engine = crate::Idempotency::new(crate::MemoryStore::new(), config);
    let p = KinesisProcessor::new(engine, KeySelector::pointer("/reading_id"));
    let batch = || {
        let mut other_shard = record("1", "200", &reading("r200", 1));
        other_shard["kinesis"]["partitionKey"] = json!("pk-e");
        event(vec![
            maybe_keyed("pk-a", 100, None, 1),
            maybe_keyed("pk-b", 101, None, -2),
            maybe_keyed("pk-c", 102, None, 2),
            maybe_keyed("pk-a", 103, None, 3),
            other_shard,
        ])
    };
    let sink = Sink::default();
    let by_key = p
        .clone()
        .unprotected_order(crate::batch::UnprotectedOrder::Key);
    let report = by_key.process(batch(), None, |r| sink.handle(r)).await;
    let mut ran: Vec<_> = sink.seen().into_iter().map(|(_, id)| id).collect();
    ran.sort();
    assert_eq!(ran, ["r100", "r101", "r102", "r103", "r200"]);
    assert_eq!(named(&report), ["101"]);

    let sink = Sink::default();
    let report = p.process(batch(), None, |r| sink.handle(r)).await;
    let mut ran: Vec<_> = sink.seen().into_iter().map(|(_, id)| id).collect();
    ran.sort();
    assert_eq!(ran, ["r100", "r101", "r200"]);
    for r in &report.records[2..4] {
        assert_eq!(
            r.outcome,
            Err(FailureReason::Skipped {
                after: "101".to_owned()
            })
        );
    }
    assert_eq!(named(&report), ["101"]);
}
