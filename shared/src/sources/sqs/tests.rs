use super::*;
use crate::KeySelector;
use crate::batch::Delivery;
use crate::error::HandlerError;
use crate::testkit::*;
use aws_lambda_events::eventbridge::EventBridgeEvent;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

mod bodies;
mod envelopes;

const SQS_FILES: [&str; 6] = [
    "orders-standard.json",
    "orders-missing-key.json",
    "orders-eventbridge-via-sqs.json",
    "payments-fifo.json",
    "payments-fifo-poison.json",
    "payments-fifo-duplicate.json",
];
const EVENTBRIDGE_FILES: [&str; 2] = [
    "inventory-order-placed.json",
    "inventory-insufficient-stock.json",
];

#[test]
fn event_files_round_trip_through_the_aws_types() {
    for name in SQS_FILES {
        let original = event_json(name);
        let parsed: SqsEvent = serde_json::from_value(original.clone()).unwrap();
        assert!(!parsed.records.is_empty(), "{name}");
        let once = serde_json::to_value(&parsed).unwrap();
        let again: SqsEvent = serde_json::from_value(once.clone()).unwrap();
        assert_eq!(parsed, again, "{name}");
        assert_eq!(once, serde_json::to_value(&again).unwrap(), "{name}");
        // Nothing the adapters read is lost on the way.
        for (record, raw) in parsed
            .records
            .iter()
            .zip(original["Records"].as_array().unwrap())
        {
            assert_eq!(
                record.message_id.as_deref(),
                raw["messageId"].as_str(),
                "{name}"
            );
            assert_eq!(record.body.as_deref(), raw["body"].as_str(), "{name}");
            assert_eq!(
                record.event_source_arn.as_deref(),
                raw["eventSourceARN"].as_str(),
                "{name}"
            );
            assert_eq!(
                serde_json::to_value(&record.attributes).unwrap(),
                raw["attributes"],
                "{name}"
            );
        }
        assert_eq!(parse_sqs_event(original).unwrap(), parsed.into(), "{name}");
    }
    for name in EVENTBRIDGE_FILES {
        let original = event_json(name);
        let parsed: EventBridgeEvent<Value> = serde_json::from_value(original.clone()).unwrap();
        let once = serde_json::to_value(&parsed).unwrap();
        let again: EventBridgeEvent<Value> = serde_json::from_value(once.clone()).unwrap();
        assert_eq!(parsed, again, "{name}");
        assert_eq!(once, serde_json::to_value(&again).unwrap(), "{name}");
        assert_eq!(once["id"], original["id"], "{name}");
        assert_eq!(once["detail"], original["detail"], "{name}");
        assert_eq!(once["detail-type"], original["detail-type"], "{name}");
    }
}

/// A message that is not an SQS message (a field of the wrong type) fails
/// alone, named by its `messageId` when that much can be read; the batch's
/// other messages run.
#[tokio::test]
async fn a_malformed_message_fails_alone_and_the_others_run() {
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/id"));
    let arn = "arn:aws:sqs:us-east-1:123456789012:orders";
    let good = |id: &str| json!({"messageId": id, "body": format!(r#"{{"id":"{id}"}}"#), "eventSource": "aws:sqs", "eventSourceARN": arn});
    let bad =
        json!({"messageId": "m-2", "body": 7, "eventSource": "aws:sqs", "eventSourceARN": arn});
    let event = parse_sqs_event(json!({"Records": [good("m-1"), bad, good("m-3")]})).unwrap();
    assert!(matches!(&event.records[1], Err(m) if m.id.as_deref() == Some("m-2")));
    let ran = std::sync::Mutex::new(Vec::new());
    let report = processor
        .process(event, None, |r: SqsRecord<Value>| {
            ran.lock().unwrap().push(r.message.message_id.unwrap());
            async { Ok::<_, HandlerError>(()) }
        })
        .await;
    assert_eq!(*ran.lock().unwrap(), ["m-1", "m-3"]);
    match &report.records[1].outcome {
        Err(FailureReason::Parse(m)) => assert!(m.contains("is not an SQS message"), "{m}"),
        other => panic!("{other:?}"),
    }
    let response = processor.response(&report).unwrap();
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m-2"]);
}

#[test]
fn wrong_shapes_are_not_sqs_events() {
    let eventbridge = event_json("inventory-order-placed.json");
    let cases = [
        (eventbridge, "EventBridge event"),
        (json!(42), "no Records array in a number"),
        (json!("Records"), "no Records array in a string"),
        (json!({}), "no Records array"),
        (json!({"Records": {}}), "not an array"),
        (
            json!({"Records": [{"EventSource": "aws:sns", "Sns": {}}]}),
            "aws:sns",
        ),
        (
            json!({"Records": [{"eventSource": "aws:s3", "s3": {}}]}),
            "aws:s3",
        ),
        (
            json!({"Records": [{"messageId": "m-1", "body": "{}"}]}),
            "no eventSource",
        ),
    ];
    for (value, expected) in cases {
        let err = parse_sqs_event(value.clone()).unwrap_err();
        assert!(
            matches!(
                err,
                BatchError::WrongEvent {
                    expected: "an SQS",
                    ..
                }
            ),
            "{value}"
        );
        assert!(err.to_string().contains(expected), "{value}: {err}");
    }
    assert!(
        parse_sqs_event(json!({"Records": []}))
            .unwrap()
            .records
            .is_empty()
    );
}

#[tokio::test]
async fn empty_batch_gives_an_empty_response() {
    let (engine, store, _) = memory_engine();
    let runs = AtomicUsize::new(0);
    let report = SqsProcessor::new(engine, KeySelector::Id)
        .process(batch(vec![]), None, |_r: SqsRecord<Value>| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, HandlerError>(())
        })
        .await;
    assert!(report.records.is_empty() && report.is_success());
    let response = report
        .response_as::<crate::sqs::SqsBatchResponse>()
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": []})
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(store.is_empty());
}

#[tokio::test]
async fn records_without_message_id() {
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/id"));
    let handler = |_r: SqsRecord<Value>| async { Ok::<_, HandlerError>(()) };
    // A record without messageId that succeeds needs no reporting.
    let ok = processor
        .process(
            batch(vec![
                message(None, r#"{"id":"a"}"#),
                message(Some(""), r#"{"id":"b"}"#),
            ]),
            None,
            handler,
        )
        .await;
    assert!(ok.is_success());
    assert!(
        ok.response_as::<crate::sqs::SqsBatchResponse>()
            .unwrap()
            .batch_item_failures
            .is_empty()
    );
    // One that fails (None or empty id) makes the whole invocation fail.
    for id in [None, Some("")] {
        let report = processor
            .process(
                batch(vec![
                    message(Some("m-1"), r#"{"id":"c"}"#),
                    message(id, "poison"),
                ]),
                None,
                handler,
            )
            .await;
        assert!(!report.records[0].is_failure());
        match processor.response(&report) {
            Err(BatchError::NoItemIdentifier {
                position: 1,
                id: "messageId",
                reason: FailureReason::Parse(m),
            }) => assert!(m.contains("record #1 (no messageId)"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn duplicate_message_ids_are_reported_once() {
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/id"));
    let event = batch(vec![
        message(Some("m-1"), "poison"),
        message(Some("m-2"), r#"{"id":"x"}"#),
        message(Some("m-1"), "poison again"),
        message(Some("m-3"), "{"),
    ]);
    let report = processor
        .process(event, None, |_r: SqsRecord<Value>| async {
            Ok::<_, HandlerError>(())
        })
        .await;
    assert_eq!(report.failures().count(), 3);
    let response = report
        .response_as::<crate::sqs::SqsBatchResponse>()
        .unwrap();
    assert_eq!(failed_ids(&response), ["m-1", "m-3"]);
}

#[test]
fn record_accessors() {
    let event = sqs_event("payments-fifo-duplicate.json");
    let record = SqsRecord::new((), event.records[0].clone());
    let message = &record.message;
    assert_eq!(
        message.message_id.as_deref(),
        Some("704d72db-5ef2-45e6-9d4b-ef8bdd197e76")
    );
    assert_eq!(record.group_id(), Some("acct-1"));
    assert_eq!(message.deduplication_id(), Some("pay-9d04c0de"));
    assert_eq!(message.receive_count(), Some(2));
}

#[test]
fn process_future_is_send() {
    fn assert_send<F: Future + Send>(_: F) {}
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::Id);
    assert_send(
        processor.process(batch(vec![]), None, |r: SqsRecord<Value>| async move {
            Ok::<_, HandlerError>(r.body)
        }),
    );
}

/// The former module example: an in-batch duplicate runs once and only the
/// poison record is reported.
#[tokio::test]
async fn a_duplicate_runs_once_and_only_the_poison_record_is_reported() {
    #[derive(serde::Deserialize)]
    struct Order {
        #[allow(dead_code)]
        event_id: String,
        amount_cents: i64,
    }
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/event_id"));
    let record = |id: &str, body: &str| {
        json!({
            "messageId": id, "body": body, "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
        })
    };
    let event = parse_sqs_event(json!({"Records": [
        record("m-1", r#"{"event_id":"evt-1","amount_cents":100}"#),
        record("m-2", r#"{"event_id":"evt-1","amount_cents":100}"#), // duplicate
        record("m-3", "not json"),                                   // poison
    ]}))
    .expect("an SQS event");
    let runs = AtomicUsize::new(0);
    let report = processor
        .process(event, None, |r: SqsRecord<Order>| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, HandlerError>(json!({"charged": r.body.amount_cents})) }
        })
        .await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let response = processor
        .response(&report)
        .expect("every failed record has a messageId");
    assert_eq!(failed_ids(&response), ["m-3"]);
}
