//! The Kafka source on the memory store, through the sample events:
//! stop-the-lane per topic-partition, partitions in parallel, coalescing of
//! a producer's retries, a poison record holding back only its own
//! partition, keys from headers, the response's exact shape.

use super::*;
use crate::batch::FailureReason;
use crate::batch::{BatchError, Delivery};
use crate::testkit::*;
use crate::{HandlerError, KeySelector};
use crate::{MissingKey, Outcome};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[derive(Debug, Deserialize)]
struct Order {
    event_id: String,
    total_cents: i64,
}

/// `events/kafka-msk-orders.json`: `orders-0` offsets 41–43 (`evt-4001`,
/// `evt-4002`, `evt-4001` again), `orders-1` 17–18 (a poison value, then
/// `evt-4101`).
fn msk() -> KafkaStreamEvent {
    parse_kafka_event(event_json("kafka-msk-orders.json")).unwrap()
}

/// `events/kafka-self-managed-orders.json`: `orders-0` 1500–1501, `orders-2`
/// 88 (no key).
fn self_managed() -> KafkaStreamEvent {
    parse_kafka_event(event_json("kafka-self-managed-orders.json")).unwrap()
}

/// A sample event as `aws_lambda_events` types it, to edit its records.
fn typed(sample: &str) -> KafkaEvent {
    serde_json::from_value(event_json(sample)).unwrap()
}

fn processor() -> KafkaProcessor {
    let (engine, _, _) = memory_engine();
    KafkaProcessor::new(engine, KeySelector::pointer("/event_id"))
}

/// A processor in `Reported` mode: a record that can never be prepared
/// fails and holds back its partition (under the default `FailBatch`
/// without a parking it is parked in the log instead).
fn reporting() -> KafkaProcessor {
    processor().item_failures(KafkaItemFailures::Reported)
}

/// What a mapping in provisioned mode with `ReportBatchItemFailures` is
/// told to deliver again.
fn named(report: &BatchReport<Value>) -> Vec<(String, i64)> {
    let reported = processor().item_failures(KafkaItemFailures::Reported);
    let response = reported.response(report).unwrap();
    response
        .batch_item_failures
        .into_iter()
        .map(|f| (f.item_identifier.partition, f.item_identifier.offset))
        .collect()
}

/// The outcome of the record at `partition`@`offset`.
fn outcome<'r>(
    report: &'r BatchReport<Value>,
    id: &str,
) -> &'r Result<Outcome<Value>, FailureReason> {
    &report
        .records
        .iter()
        .find(|r| r.message_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no record {id}"))
        .outcome
}

/// A handler that records the order it saw records in, fails the event ids
/// it is told to, and sleeps a little so partitions overlap.
#[derive(Default)]
struct Sink {
    seen: Mutex<Vec<(String, i64, String)>>,
    fail: Vec<&'static str>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Sink {
    fn failing(fail: Vec<&'static str>) -> Self {
        Self {
            fail,
            ..Self::default()
        }
    }

    async fn handle(&self, m: KafkaMessage<Order>) -> Result<Value, HandlerError> {
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(now, SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        self.in_flight.fetch_sub(1, SeqCst);
        self.seen.lock().unwrap().push((
            m.delivery.partition.clone(),
            m.delivery.record.offset,
            m.body.event_id.clone(),
        ));
        if self.fail.contains(&m.body.event_id.as_str()) {
            return Err(HandlerError::retryable(format!(
                "{} failed",
                m.body.event_id
            )));
        }
        Ok(
            json!({"stored": m.body.event_id, "offset": m.delivery.record.offset, "cents": m.body.total_cents}),
        )
    }

    fn ran(&self) -> Vec<String> {
        let mut ran: Vec<_> = self
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|(p, o, _)| format!("{p}@{o}"))
            .collect();
        ran.sort();
        ran
    }
}

#[tokio::test]
async fn the_msk_sample_a_poison_record_holds_back_only_its_partition() {
    let sink = Sink::default();
    let report = reporting().process(msk(), None, |m| sink.handle(m)).await;
    assert_eq!(
        sink.ran(),
        ["orders-0@41", "orders-0@42"],
        "43 is a copy; nothing of orders-1 ran"
    );
    assert!(
        matches!(outcome(&report, "orders-1@17"), Err(FailureReason::Parse(m)) if m.contains("not JSON")),
        "{:?}",
        outcome(&report, "orders-1@17")
    );
    assert_eq!(
        outcome(&report, "orders-1@18"),
        &Err(FailureReason::Skipped {
            after: "orders-1@17".to_owned()
        })
    );
    assert_eq!(
        named(&report),
        [("orders-1".to_owned(), 17), ("orders-1".to_owned(), 18)]
    );
    assert_eq!(report.ordering(), Ordering::StopLane);
    // Exactly what Lambda reads.
    let reported = processor().item_failures(KafkaItemFailures::Reported);
    let response = reported.response(&report).unwrap();
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": [
            {"itemIdentifier": {"partition": "orders-1", "offset": 17}},
            {"itemIdentifier": {"partition": "orders-1", "offset": 18}},
        ]})
    );
}

#[tokio::test]
async fn after_a_failure_nothing_later_in_its_partition_runs() {
    // evt-4002 fails at orders-0@42: 43 (a copy of 41, which succeeded)
    // is not even replayed, it waits behind 42.
    let sink = Sink::failing(vec!["evt-4002"]);
    let report = reporting().process(msk(), None, |m| sink.handle(m)).await;
    assert_eq!(sink.ran(), ["orders-0@41", "orders-0@42"]);
    assert!(matches!(
        outcome(&report, "orders-0@41"),
        Ok(Outcome::Executed(_))
    ));
    assert!(matches!(
        outcome(&report, "orders-0@42"),
        Err(FailureReason::Handler { message, .. }) if message == "evt-4002 failed"
    ));
    assert_eq!(
        outcome(&report, "orders-0@43"),
        &Err(FailureReason::Skipped {
            after: "orders-0@42".to_owned()
        })
    );
    // Every record not done, of each stopped partition.
    assert_eq!(
        named(&report),
        [
            ("orders-0".to_owned(), 42),
            ("orders-0".to_owned(), 43),
            ("orders-1".to_owned(), 17),
            ("orders-1".to_owned(), 18)
        ]
    );
    assert_eq!(report.failures().count(), 4);
}

#[tokio::test]
async fn partitions_run_in_parallel_each_in_offset_order() {
    let sink = Sink::default();
    let report = processor()
        .process(self_managed(), None, |m| sink.handle(m))
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert!(named(&report).is_empty());
    for mode in [KafkaItemFailures::FailBatch, KafkaItemFailures::Reported] {
        let response = processor().item_failures(mode).response(&report).unwrap();
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            json!({"batchItemFailures": []})
        );
    }
    assert_eq!(
        sink.max_in_flight.load(SeqCst),
        2,
        "orders-0 and orders-2 overlap; orders-0's two records do not"
    );
    let orders_0: Vec<_> = sink
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(p, _, _)| p == "orders-0")
        .map(|(_, o, _)| *o)
        .collect();
    assert_eq!(orders_0, [1500, 1501]);
}

#[tokio::test]
async fn a_producers_retry_at_a_new_offset_runs_once() {
    let sink = Sink::default();
    let report = processor().process(msk(), None, |m| sink.handle(m)).await;
    let runs_of_4001 = sink
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, id)| id == "evt-4001")
        .count();
    assert_eq!(runs_of_4001, 1);
    let copy = outcome(&report, "orders-0@43");
    assert!(matches!(copy, Ok(Outcome::Replayed(_))), "{copy:?}");
    assert_eq!(
        copy.as_ref().unwrap().response(),
        Some(&json!({"stored": "evt-4001", "offset": 41, "cents": 2500}))
    );
}

#[tokio::test]
async fn a_redelivered_batch_replays_what_was_done_and_runs_from_the_failure() {
    let processor = processor();
    let first = processor
        .process(msk(), None, |m| {
            Sink::failing(vec!["evt-4002"]).handle_owned(m)
        })
        .await;
    assert_eq!(named(&first)[0], ("orders-0".to_owned(), 42));
    let sink = Sink::default();
    let second = processor.process(msk(), None, |m| sink.handle(m)).await;
    assert!(matches!(
        outcome(&second, "orders-0@41"),
        Ok(Outcome::Replayed(_))
    ));
    assert!(matches!(
        outcome(&second, "orders-0@42"),
        Ok(Outcome::Executed(_))
    ));
    assert_eq!(sink.ran(), ["orders-0@42"]);
}

impl Sink {
    async fn handle_owned(self, m: KafkaMessage<Order>) -> Result<Value, HandlerError> {
        self.handle(m).await
    }
}

#[tokio::test]
async fn the_offset_is_what_keyselector_id_keys_on() {
    // Documented as unsafe for producer retries: evt-4001 at 41 and at 43
    // runs twice.
    let (engine, _, _) = memory_engine();
    let sink = Sink::default();
    let report = KafkaProcessor::new(engine, KeySelector::Id)
        .item_failures(KafkaItemFailures::Reported)
        .process(msk(), None, |m| sink.handle(m))
        .await;
    assert!(matches!(
        outcome(&report, "orders-0@43"),
        Ok(Outcome::Executed(_))
    ));
    assert_eq!(sink.ran(), ["orders-0@41", "orders-0@42", "orders-0@43"]);
}

#[tokio::test]
async fn a_header_is_a_key_and_gives_the_same_key_as_the_value() {
    let (engine, _, _) = memory_engine();
    let sink = Sink::default();
    use base64::Engine as _;
    // orders-1@17 has no `idempotency-key` header; its poison value is made
    // a valid order, so that only the header is missing.
    let mut event = event_json("kafka-msk-orders.json");
    event["records"]["orders-1"][0]["value"] = json!(
        base64::engine::general_purpose::STANDARD
            .encode(r#"{"event_id":"evt-4100","total_cents":5}"#)
    );
    let event = parse_kafka_event(event).unwrap();
    let by_header = KafkaProcessor::new(engine.clone(), KeySelector::attribute("idempotency-key"))
        .item_failures(KafkaItemFailures::Reported)
        .process(event, None, |m| sink.handle(m))
        .await;
    assert!(matches!(
        outcome(&by_header, "orders-0@43"),
        Ok(Outcome::Replayed(_))
    ));
    assert!(
        matches!(
            outcome(&by_header, "orders-1@17"),
            Err(FailureReason::Key(crate::KeyError::Missing(at))) if at.contains("idempotency-key")
        ),
        "{:?}",
        outcome(&by_header, "orders-1@17")
    );
    assert!(!sink.ran().contains(&"orders-1@17".to_owned()));
    // The header carries the value's event_id: keyed by pointer, the same
    // records are replays.
    let again = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"))
        .process(msk(), None, |m| sink.handle(m))
        .await;
    assert!(matches!(
        outcome(&again, "orders-0@41"),
        Ok(Outcome::Replayed(_))
    ));
}

#[tokio::test]
async fn a_key_function_sees_the_headers_the_key_and_the_partition() {
    let (engine, _, _) = memory_engine();
    let selector = KeySelector::custom(|input| {
        let delivery = input.raw::<KafkaDelivery>().expect("a Kafka record");
        assert_eq!(input.delivery.and_then(Delivery::lane), Some("orders-0"));
        assert_eq!(
            delivery.header("event-type"),
            Some(b"OrderPlaced".as_slice())
        );
        let customer = std::str::from_utf8(delivery.message_key.as_deref().unwrap()).unwrap();
        Ok(json!([customer, input.value["event_id"]]))
    });
    let seen = Mutex::new(Vec::new());
    let mut event = typed("kafka-msk-orders.json");
    event.records.remove("orders-1");
    let report: BatchReport<Value> = KafkaProcessor::new(engine, selector)
        .process(event, None, |m: KafkaMessage<Value>| {
            seen.lock().unwrap().push((
                m.delivery.message_key.clone(),
                m.delivery.record.topic.clone(),
            ));
            async { Ok::<_, HandlerError>(json!({})) }
        })
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    // 41 and 43: the same customer and event id, one run.
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (Some(b"cust-11".to_vec()), Some("orders".to_owned())),
            (Some(b"cust-12".to_vec()), Some("orders".to_owned())),
        ]
    );
}

#[tokio::test]
async fn a_record_without_a_key_and_headers_of_any_bytes() {
    let mut event = typed("kafka-self-managed-orders.json");
    let record = &mut event.records.get_mut("orders-2").unwrap()[0];
    assert_eq!(record.key, None, "the sample's orders-2@88 has no key");
    // Java's signed bytes: "é" is C3 A9, sent as -61, -87.
    record.headers = vec![
        [("who".to_owned(), vec![-61, -87])].into(),
        [("bin".to_owned(), vec![-1])].into(),
    ];
    let delivery = KafkaDelivery::new("orders-2", record.clone());
    assert_eq!(delivery.message_key, None);
    assert_eq!(
        delivery.attribute("who"),
        Some(crate::batch::Attribute::Text("é"))
    );
    assert_eq!(
        delivery.attribute("bin"),
        Some(crate::batch::Attribute::Binary)
    );
    assert_eq!(delivery.attribute("none"), None);
    let (engine, _, _) = memory_engine();
    let report: BatchReport<Value> = KafkaProcessor::new(engine, KeySelector::attribute("who"))
        .missing_key(MissingKey::RunUnprotected)
        .process(event, None, |_m: KafkaMessage<Value>| async {
            Ok::<_, HandlerError>(json!({}))
        })
        .await;
    assert!(matches!(
        outcome(&report, "orders-2@88"),
        Ok(Outcome::Executed(_))
    ));
    assert!(matches!(
        outcome(&report, "orders-0@1500"),
        Ok(Outcome::Unprotected(_))
    ));
}

#[tokio::test]
async fn undecodable_values_and_tombstones() {
    let mut event = typed("kafka-self-managed-orders.json");
    let orders_0 = event.records.get_mut("orders-0").unwrap();
    orders_0[0].value = Some("%%% not base64".to_owned());
    orders_0[1].value = None; // a tombstone
    let sink = Sink::default();
    let report = reporting().process(event, None, |m| sink.handle(m)).await;
    assert!(
        matches!(outcome(&report, "orders-0@1500"), Err(FailureReason::Parse(m)) if m.contains("value is not base64")),
        "{:?}",
        outcome(&report, "orders-0@1500")
    );
    assert_eq!(sink.ran(), ["orders-2@88"]);

    // A tombstone is `null`: a handler of `Option<_>` gets `None`.
    let mut event = typed("kafka-self-managed-orders.json");
    event.records.get_mut("orders-0").unwrap()[1].value = None;
    let (engine, _, _) = memory_engine();
    let tombstones = AtomicUsize::new(0);
    let report: BatchReport<Value> = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"))
        .missing_key(MissingKey::RunUnprotected)
        .process(event, None, |m: KafkaMessage<Option<Order>>| {
            if m.body.is_none() {
                tombstones.fetch_add(1, SeqCst);
            }
            async { Ok::<_, HandlerError>(json!({})) }
        })
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(tombstones.load(SeqCst), 1);
}

#[test]
fn other_payloads_are_not_kafka_events() {
    for (value, says) in [
        (
            json!({"Records": [{"eventSource": "aws:sqs"}]}),
            "no eventSource",
        ),
        (json!({"eventSource": "aws:sqs", "records": {}}), "aws:sqs"),
        (json!({"eventSource": "aws:kafka"}), "no records"),
        (
            json!({"eventSource": "aws:kafka", "records": []}),
            "not an object",
        ),
        (
            json!({"eventSource": "SelfManagedKafka", "records": {"t-0": {}}}),
            "records of t-0 is an object",
        ),
    ] {
        let err = parse_kafka_event(value).unwrap_err();
        assert!(
            matches!(&err, BatchError::WrongEvent { message, .. } if message.contains(says)),
            "{err}"
        );
        assert_eq!(crate::diagnostic::error_type(&err), "InvalidEvent");
    }
    let empty = json!({"eventSource": "aws:kafka", "records": {}});
    assert!(parse_kafka_event(empty).unwrap().records.is_empty());
}

/// A record that is not a Kafka record (its headers missing) in the middle
/// of a batch fails alone: the event parses, the records before it run, the
/// later ones of its partition wait behind it, the other partition runs, and
/// the response names it. One whose offset cannot be read cannot be named:
/// the invocation fails (Lambda retries the batch; the records done replay).
#[tokio::test]
async fn a_record_that_is_not_a_kafka_record_fails_alone() {
    let mut json = two_partitions_json();
    json["records"]["orders-0"][2] = json!({"topic": "orders", "partition": 0, "offset": 12});
    let event = parse_kafka_event(json.clone()).expect("a bad record does not fail the event");
    let malformed = event.records[2].as_ref().unwrap_err();
    assert_eq!(malformed.id.as_deref(), Some("orders-0@12"));
    assert_eq!(malformed.lane.as_deref(), Some("orders-0"));
    let sink = Sink::default();
    let report = reporting().process(event, None, |m| sink.handle(m)).await;
    assert!(
        matches!(outcome(&report, "orders-0@12"), Err(FailureReason::Parse(m)) if m.contains("not a Kafka record")),
        "{:?}",
        report.records[2].outcome
    );
    let ran = [
        "orders-0@10",
        "orders-0@11",
        "orders-1@20",
        "orders-1@21",
        "orders-1@22",
    ];
    assert_eq!(sink.ran(), ran);
    let named_0 = |o| ("orders-0".to_owned(), o);
    assert_eq!(named(&report), [named_0(12), named_0(13), named_0(14)]);

    json["records"]["orders-1"][0]["offset"] = json!("twenty");
    let report = reporting()
        .process(parse_kafka_event(json).unwrap(), None, |m| sink.handle(m))
        .await;
    let reported = processor().item_failures(KafkaItemFailures::Reported);
    let err = reported.response(&report).unwrap_err();
    assert!(err.to_string().contains("record #5 (no offset)"), "{err}");
}

/// A batch of `orders-0` offsets 10–14 and `orders-1` offsets 20–22, each
/// value `{"event_id": "evt-<offset>"}`.
fn two_partitions() -> KafkaStreamEvent {
    parse_kafka_event(two_partitions_json()).unwrap()
}

fn two_partitions_json() -> Value {
    use base64::Engine as _;
    let record = |partition: i64, offset: i64| {
        let value = json!({"event_id": format!("evt-{offset}"), "total_cents": 100}).to_string();
        json!({
            "topic": "orders", "partition": partition, "offset": offset,
            "timestamp": 1796083200104_i64, "timestampType": "CREATE_TIME",
            "value": base64::engine::general_purpose::STANDARD.encode(value), "headers": [],
        })
    };
    json!({
        "eventSource": "aws:kafka", "bootstrapServers": "b-1.example:9098",
        "records": {
            "orders-0": (10..15).map(|o| record(0, o)).collect::<Vec<_>>(),
            "orders-1": (20..23).map(|o| record(1, o)).collect::<Vec<_>>(),
        },
    })
}

mod lanes;
mod parking;
mod responses;
