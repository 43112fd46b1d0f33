//! Records packed by the Kinesis Producer Library (KPL aggregates), from
//! `events/kinesis-payments-kpl.json`, written by the awslabs aggregator
//! (`tests/kit/kpl/kinesis_payments_kpl.py`): an aggregate of 4 payments,
//! a plain record, an aggregate of 3 (one the producer's retry of the
//! first payment). Each user record is its own delivery.

use super::*;
use crate::parking::MemoryParking;
use std::collections::BTreeMap;

const STREAM: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/payments";
const SHARD: &str = "shardId-000000000002";

#[derive(Debug, Deserialize)]
struct Pay {
    payment_id: String,
    account_id: String,
}

/// The sample batch as delivered.
fn sample() -> Value {
    crate::testkit::event_json("kinesis-payments-kpl.json")
}

/// The sequence numbers of the sample's 3 Kinesis records.
fn sequence_numbers(event: &Value) -> Vec<String> {
    (event["Records"].as_array().unwrap().iter())
        .map(|r| r["kinesis"]["sequenceNumber"].as_str().unwrap().to_owned())
        .collect()
}

fn parsed(event: &Value) -> KinesisStreamEvent {
    parse_kinesis_event(event.clone()).unwrap()
}

fn payments() -> KinesisProcessor {
    let (engine, _, _) = memory_engine();
    KinesisProcessor::new(engine, KeySelector::pointer("/payment_id"))
}

/// The ids the processor's answer names.
fn answer(p: &KinesisProcessor, report: &BatchReport<Value>) -> Vec<String> {
    (p.response(report).unwrap().batch_item_failures.into_iter())
        .map(|f| f.item_identifier.unwrap_or_default())
        .collect()
}

fn ids(report: &BatchReport<Value>) -> Vec<String> {
    (report.records.iter())
        .map(|r| r.message_id.clone().unwrap_or_default())
        .collect()
}

fn labels(report: &BatchReport<Value>) -> Vec<&'static str> {
    report.records.iter().map(|r| r.label()).collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Record `i` of `event` with its `data` replaced by `data`.
fn with_data(event: &Value, i: usize, data: &[u8]) -> Value {
    let mut event = event.clone();
    event["Records"][i]["kinesis"]["data"] = json!(b64(data));
    event
}

/// What the handler saw: per payment, how often it ran, its partition key
/// and its place in its aggregate.
#[derive(Default)]
struct Seen {
    runs: Mutex<BTreeMap<String, usize>>,
    records: Mutex<Vec<(String, String, Option<Aggregated>)>>,
}

impl Seen {
    fn note(&self, r: &KinesisRecord<Pay>) {
        *(self.runs.lock().unwrap())
            .entry(r.body.payment_id.clone())
            .or_default() += 1;
        self.records.lock().unwrap().push((
            r.body.payment_id.clone(),
            r.record.kinesis.partition_key.clone(),
            r.aggregated.clone(),
        ));
    }

    fn runs(&self) -> BTreeMap<String, usize> {
        self.runs.lock().unwrap().clone()
    }
}

/// Each of the 8 user records is its own delivery, named
/// `<sequenceNumber>:<subSequenceNumber>` (the plain record by its sequence
/// number), with its own partition key and data: each payment runs once
/// (the producer's retry of `pay-3001` in the second aggregate replays the
/// first copy), and a redelivery of the batch replays all of them. Before:
/// 3 records, the two aggregates failing as data that is not UTF-8.
#[tokio::test]
async fn kpl_aggregates_run_each_user_record_once_under_its_own_partition_key() {
    let event = sample();
    let seq = sequence_numbers(&event);
    let p = payments();
    let seen = Seen::default();
    let handler = |r: KinesisRecord<Pay>| {
        seen.note(&r);
        async move { Ok::<_, HandlerError>(json!({"credited": r.body.payment_id})) }
    };
    let report = p.process(parsed(&event), None, handler).await;
    let expected_ids = [
        format!("{}:0", seq[0]),
        format!("{}:1", seq[0]),
        format!("{}:2", seq[0]),
        format!("{}:3", seq[0]),
        seq[1].clone(),
        format!("{}:0", seq[2]),
        format!("{}:1", seq[2]),
        format!("{}:2", seq[2]),
    ];
    assert_eq!(ids(&report), expected_ids);
    assert!(report.is_success(), "{:?}", report.records);
    assert!(answer(&p, &report).is_empty());
    assert!(
        report
            .records
            .iter()
            .all(|r| r.lane.as_deref() == Some(SHARD))
    );
    let runs = seen.runs();
    assert_eq!(
        runs.keys().collect::<Vec<_>>(),
        [
            "pay-3001", "pay-3002", "pay-3003", "pay-3004", "pay-3005", "pay-3006", "pay-3007"
        ]
    );
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
    assert_eq!(
        labels(&report).iter().filter(|l| **l == "executed").count(),
        7
    );
    for (payment, partition_key, _) in seen.records.lock().unwrap().iter() {
        let account = match payment.as_str() {
            "pay-3001" | "pay-3003" | "pay-3007" => "acct-1",
            "pay-3002" | "pay-3005" => "acct-2",
            _ => "acct-3",
        };
        assert_eq!(partition_key, account, "{payment}: its own partition key");
    }
    let records = seen.records.lock().unwrap().clone();
    let of = |id: &str| records.iter().find(|r| r.0 == id).unwrap().2.clone();
    let pay_3003 = of("pay-3003").expect("a user record");
    assert_eq!(pay_3003.sub_sequence_number, 2);
    assert_eq!(
        pay_3003.explicit_hash_key.as_deref(),
        Some("170141183460469231731687303715884105728")
    );
    assert_eq!(of("pay-3004").unwrap().explicit_hash_key, None);
    assert_eq!(of("pay-3005"), None, "a plain record");

    let again = p.process(parsed(&event), None, handler).await;
    assert_eq!(ids(&again), expected_ids);
    assert!(again.records.iter().all(|r| r.label() == "replayed"));
    assert!(seen.runs().values().all(|n| *n == 1));
}

/// `pay-3002` (user record 1 of the first aggregate, `acct-2`) fails once:
/// the answer names the aggregate's sequence number (what Kinesis can
/// checkpoint), `acct-2`'s later plain record waits, the other accounts go
/// on. The redelivery replays the aggregate's done user records and runs
/// the rest: every payment once in all.
#[tokio::test]
async fn a_failed_user_record_names_its_aggregate_and_the_retry_replays_the_done_ones() {
    let event = sample();
    let seq = sequence_numbers(&event);
    let p = payments();
    let seen = Seen::default();
    let fail = AtomicUsize::new(1);
    let handler = |r: KinesisRecord<Pay>| {
        seen.note(&r);
        let failing = r.body.payment_id == "pay-3002"
            && fail
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_ok();
        async move {
            match failing {
                true => Err(HandlerError::retryable(std::io::Error::other("busy"))),
                false => Ok(json!({"credited": r.body.payment_id})),
            }
        }
    };
    let report = p.process(parsed(&event), None, handler).await;
    assert_eq!(
        labels(&report),
        [
            "executed", "failed", "executed", "executed", "failed", "executed", "replayed",
            "executed"
        ]
    );
    assert_eq!(
        report.records[4].outcome,
        Err(FailureReason::Skipped {
            after: format!("{}:1", seq[0])
        })
    );
    assert_eq!(answer(&p, &report), [seq[0].clone()]);

    let again = p.process(parsed(&event), None, handler).await;
    assert_eq!(
        labels(&again),
        [
            "replayed", "executed", "replayed", "replayed", "executed", "replayed", "replayed",
            "replayed"
        ]
    );
    assert!(answer(&p, &again).is_empty());
    let runs = seen.runs();
    assert_eq!(runs["pay-3002"], 2, "failed, then ran again");
    for (payment, n) in runs.iter().filter(|(p, _)| *p != "pay-3002") {
        assert_eq!(*n, 1, "{payment}");
    }
    assert_eq!(runs.len(), 7);
}

/// The first aggregate with its MD5 digest's last byte flipped is one
/// poison record: parked (under its sequence number, as delivered, with
/// the reason) and the shard goes on; without parking, it fails, its user
/// records' partition keys are unknown, so the whole shard after it waits
/// and the answer names it.
#[tokio::test]
async fn a_kpl_aggregate_whose_md5_does_not_match_is_one_poison_record() {
    let event = sample();
    let seq = sequence_numbers(&event);
    let data = event["Records"][0]["kinesis"]["data"].as_str().unwrap();
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    *bytes.last_mut().unwrap() ^= 0x01;
    let corrupted = with_data(&event, 0, &bytes);
    let ok = |r: KinesisRecord<Pay>| async move { Ok::<_, HandlerError>(json!(r.body.payment_id)) };

    let parking = MemoryParking::new();
    let p = payments().parking(parking.clone());
    let report = p.process(parsed(&corrupted), None, ok).await;
    assert_eq!(
        labels(&report),
        ["parked", "executed", "executed", "executed", "executed"]
    );
    assert_eq!(ids(&report)[0], seq[0]);
    assert!(answer(&p, &report).is_empty());
    let parked = parking.parked();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].id, format!("{STREAM}/{SHARD}/{}", seq[0]));
    assert!(
        parked[0].reason.contains("KPL aggregate") && parked[0].reason.contains("MD5"),
        "{}",
        parked[0].reason
    );
    let kept = parked[0].record.as_ref().unwrap();
    assert_eq!(kept["kinesis"]["data"], json!(b64(&bytes)), "as delivered");

    let p = payments();
    let report = p.process(parsed(&corrupted), None, ok).await;
    assert_eq!(
        labels(&report),
        ["failed", "failed", "failed", "failed", "failed"]
    );
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("MD5"))
    );
    assert_eq!(answer(&p, &report), [seq[0].clone()]);
}

/// Aggregates with a good digest whose protobuf cannot be read: bytes that
/// are no protobuf, a user record naming a partition key the table does
/// not have, no user record at all, and the magic bytes alone. Each is one
/// poison record saying why; a record without the magic bytes is a plain
/// record.
#[tokio::test]
async fn an_aggregate_whose_protobuf_does_not_decode_is_one_poison_record() {
    use md5::Digest as _;
    let event = sample();
    let mut garbage = aggregate::KPL_MAGIC.to_vec();
    let body = [0x1a, 0xff, 0xff, 0x01];
    garbage.extend_from_slice(&body);
    garbage.extend_from_slice(&md5::Md5::digest(body));
    let payment = br#"{"payment_id":"pay-1","account_id":"acct-1"}"#;
    let past_the_table = aggregate::pack(&["acct-1"], &[(5, None, payment)]);
    let empty = aggregate::pack(&["acct-1"], &[]);
    for (data, says) in [
        (garbage, "protobuf does not decode"),
        (
            past_the_table,
            "partition key index 5, past the table's 1 entries",
        ),
        (empty, "no user record"),
        (aggregate::KPL_MAGIC.to_vec(), "too short"),
    ] {
        let report = payments()
            .process(
                parsed(&with_data(&event, 0, &data)),
                None,
                |_: KinesisRecord<Pay>| async { Ok::<_, HandlerError>(json!({})) },
            )
            .await;
        let first = &report.records[0];
        assert!(
            matches!(&first.outcome, Err(FailureReason::Parse(m))
                if m.contains("KPL aggregate that cannot be read") && m.contains(says)),
            "{says}: {:?}",
            first.outcome
        );
        assert_eq!(report.records.len(), 5, "{says}: one record for it");
    }

    // A user record naming an explicit hash key reads it from its table.
    let good = aggregate::pack(&["acct-1"], &[(0, Some(0), payment)]);
    let seen = Seen::default();
    let report = payments()
        .process(parsed(&with_data(&event, 0, &good)), None, |r| {
            seen.note(&r);
            async { Ok::<_, HandlerError>(json!({})) }
        })
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    let records = seen.records.lock().unwrap().clone();
    assert_eq!(records[0].0, "pay-1");
    assert!(records[0].2.as_ref().unwrap().explicit_hash_key.is_some());
}

/// `deaggregate(false)`: an aggregate is one record whose `data` is the
/// packed bytes, as before deaggregation (here it does not parse as JSON).
#[tokio::test]
async fn with_deaggregation_off_an_aggregate_is_one_record_as_before() {
    let event = sample();
    let seq = sequence_numbers(&event);
    let p = payments().deaggregate(false);
    let report = p
        .process(parsed(&event), None, |_: KinesisRecord<Pay>| async {
            Ok::<_, HandlerError>(json!({}))
        })
        .await;
    assert_eq!(ids(&report), seq);
    assert_eq!(labels(&report), ["failed", "executed", "failed"]);
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("not UTF-8")),
        "{:?}",
        report.records[0].outcome
    );
    assert_eq!(answer(&p, &report), [seq[0].clone()]);
}

/// With `KeySelector::Id`, a user record's key is its
/// `<sequenceNumber>:<subSequenceNumber>`: the same on every redelivery of
/// its aggregate (the producer's retry of `pay-3001`, another user record,
/// runs again: the id is no business key). A user record that can never
/// succeed is parked under that id, its record the user record's (its own
/// partition key and data, its place in the aggregate).
#[tokio::test]
async fn a_user_record_is_keyed_and_parked_by_its_sequence_and_sub_sequence_number() {
    let event = sample();
    let seq = sequence_numbers(&event);
    let (engine, _, _) = memory_engine();
    let parking = MemoryParking::new();
    let p = KinesisProcessor::new(engine, KeySelector::Id).parking(parking.clone());
    let seen = Seen::default();
    let handler = |r: KinesisRecord<Pay>| {
        seen.note(&r);
        let refused = r.body.payment_id == "pay-3004";
        async move {
            match refused {
                true => Err(HandlerError::terminal(std::io::Error::other("closed"))),
                false => Ok(json!({"credited": r.body.account_id})),
            }
        }
    };
    let report = p.process(parsed(&event), None, handler).await;
    assert_eq!(
        labels(&report),
        [
            "executed", "executed", "executed", "parked", "executed", "executed", "executed",
            "executed"
        ]
    );
    assert_eq!(seen.runs()["pay-3001"], 2, "two ids, two keys");
    let parked = parking.parked();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].position, format!("{}:3", seq[0]));
    assert_eq!(parked[0].id, format!("{STREAM}/{SHARD}/{}:3", seq[0]));
    let kept = parked[0].record.as_ref().unwrap();
    assert_eq!(kept["kinesis"]["sequenceNumber"], json!(seq[0]));
    assert_eq!(kept["kinesis"]["subSequenceNumber"], json!(3));
    assert_eq!(kept["kinesis"]["aggregated"], json!(true));
    assert_eq!(kept["kinesis"]["partitionKey"], json!("acct-3"));
    let data = base64::engine::general_purpose::STANDARD
        .decode(kept["kinesis"]["data"].as_str().unwrap())
        .unwrap();
    let data: Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(
        data["payment_id"],
        json!("pay-3004"),
        "the user record's data"
    );

    let again = p.process(parsed(&event), None, handler).await;
    assert_eq!(
        labels(&again),
        [
            "replayed", "replayed", "replayed", "parked", "replayed", "replayed", "replayed",
            "replayed"
        ]
    );
    assert_eq!(seen.runs()["pay-3001"], 2);
}
