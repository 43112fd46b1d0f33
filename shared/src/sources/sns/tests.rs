//! SNS on the memory store, through the sample events: a subscribed
//! function (`events/sns-notification.json`) and notifications through a
//! queue (`events/sns-via-sqs.json`).

use super::*;
use crate::Outcome;
use crate::batch::BatchReport;
use crate::batch::{BatchError, FailureReason};
use crate::sqs::{Envelope, EnvelopeMode, Envelopes, SqsProcessor, SqsRecord};
use crate::testkit::*;
use crate::{HandlerError, KeySelector};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[derive(Debug, Deserialize)]
struct Order {
    event_id: String,
    order_id: String,
    total_cents: i64,
}

/// `events/sns-notification.json`: one notification, `Message`
/// `{"event_id":"evt-6001","order_id":"ord-6001","total_cents":3100}`.
fn direct() -> SnsStreamEvent {
    parse_sns_event(event_json("sns-notification.json")).unwrap()
}

const DIRECT_ID: &str = "8951f35d-8133-4281-bfa4-a5c87bfc8dfb";

fn processor(key: KeySelector) -> SnsProcessor {
    let (engine, _, _) = memory_engine();
    SnsProcessor::new(engine, key)
}

/// A handler counting its runs, failing while `fail` is set.
#[derive(Default)]
struct Counter {
    runs: AtomicUsize,
    fail: AtomicUsize,
}

impl Counter {
    async fn ship(&self, n: Notification<Order>) -> Result<Value, HandlerError> {
        self.runs.fetch_add(1, SeqCst);
        if self.fail.load(SeqCst) > 0 {
            self.fail.fetch_sub(1, SeqCst);
            return Err(HandlerError::retryable("warehouse down"));
        }
        Ok(json!({"shipped": n.body.order_id, "cents": n.body.total_cents}))
    }
}

#[tokio::test]
async fn a_subscribed_function_runs_a_notification_once_across_redeliveries() {
    let processor = processor(KeySelector::pointer("/Message/event_id"));
    let counter = Counter::default();
    let first = processor.process(direct(), None, |n| counter.ship(n)).await;
    assert!(matches!(first.records[0].outcome, Ok(Outcome::Executed(_))));
    assert_eq!(first.records[0].message_id.as_deref(), Some(DIRECT_ID));
    assert_eq!(first.ordering(), crate::batch::Ordering::Unordered);
    assert_eq!(answer(&first), Ok(()));
    // SNS delivers it again (or Lambda's async queue does).
    let again = processor.process(direct(), None, |n| counter.ship(n)).await;
    assert_eq!(
        again.records[0].outcome.as_ref().unwrap().response(),
        Some(&json!({"shipped": "ord-6001", "cents": 3100}))
    );
    assert!(matches!(again.records[0].outcome, Ok(Outcome::Replayed(_))));
    assert_eq!(counter.runs.load(SeqCst), 1);
}

#[tokio::test]
async fn the_message_id_keys_redeliveries_a_business_key_also_a_second_publication() {
    // The publisher publishes the same order twice: a new MessageId.
    let republished = || {
        let mut event = direct();
        event.records[0].as_mut().unwrap().sns.message_id =
            "0c5d8c1b-second-publication".to_owned();
        event
    };
    let counter = Counter::default();
    let by_id = processor(KeySelector::Id);
    by_id.process(direct(), None, |n| counter.ship(n)).await;
    let redelivered = by_id.process(direct(), None, |n| counter.ship(n)).await;
    assert!(matches!(
        redelivered.records[0].outcome,
        Ok(Outcome::Replayed(_))
    ));
    by_id
        .process(republished(), None, |n| counter.ship(n))
        .await;
    assert_eq!(
        counter.runs.load(SeqCst),
        2,
        "KeySelector::Id runs it again"
    );

    let counter = Counter::default();
    let by_business_key = processor(KeySelector::pointer("/Message/event_id"));
    by_business_key
        .process(direct(), None, |n| counter.ship(n))
        .await;
    let second = by_business_key
        .process(republished(), None, |n| counter.ship(n))
        .await;
    // The payload is the Message: a new MessageId is no payload mismatch.
    assert!(matches!(
        second.records[0].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(counter.runs.load(SeqCst), 1);
    // `/MessageId` on the notification is the same key as KeySelector::Id.
    let by_pointer = processor(KeySelector::pointer("/MessageId"));
    let report = by_pointer
        .process(direct(), None, |n| counter.ship(n))
        .await;
    assert_eq!(
        report.records[0].key_hash, redelivered.records[0].key_hash,
        "same prefix, same MessageId, same key"
    );
}

#[tokio::test]
async fn a_failed_notification_fails_the_invocation_for_lambdas_async_retry() {
    let processor = processor(KeySelector::pointer("/Message/event_id"));
    let counter = Counter::default();
    counter.fail.store(1, SeqCst);
    let report = processor.process(direct(), None, |n| counter.ship(n)).await;
    let err = answer(&report).unwrap_err();
    assert!(
        matches!(&err, SnsError::Failed { message_id, failed: 1, reason: FailureReason::Handler { .. }, .. } if message_id == DIRECT_ID),
        "{err}"
    );
    assert_eq!(crate::diagnostic::error_type(&err), "HandlerFailed");
    assert!(err.to_string().contains("warehouse down"), "{err}");
    // Lambda's retry: it runs now.
    let retry = processor.process(direct(), None, |n| counter.ship(n)).await;
    assert_eq!(answer(&retry), Ok(()));
    assert_eq!(counter.runs.load(SeqCst), 2);
}

#[tokio::test]
async fn a_message_that_is_not_json_is_its_text() {
    let mut event = direct();
    event.records[0].as_mut().unwrap().sns.message = "Order ord-6001 shipped".to_owned();
    let seen = Mutex::new(Vec::new());
    let report: BatchReport<Value> = processor(KeySelector::Id)
        .process(event.clone(), None, |n: Notification<String>| {
            seen.lock().unwrap().push(n.body.clone());
            async { Ok::<_, HandlerError>(json!({})) }
        })
        .await;
    assert_eq!(answer(&report), Ok(()));
    assert_eq!(*seen.lock().unwrap(), ["Order ord-6001 shipped"]);
    // A handler of a JSON type fails it, saying why.
    let counter = Counter::default();
    let report = processor(KeySelector::Id)
        .process(event.clone(), None, |n| counter.ship(n))
        .await;
    let err = answer(&report).unwrap_err();
    assert!(
        matches!(&err, SnsError::Failed { reason: FailureReason::Parse(m), .. } if m.contains("is not JSON") && m.contains(DIRECT_ID)),
        "{err}"
    );
    assert_eq!(crate::diagnostic::error_type(&err), "InvalidEvent");
    assert_eq!(counter.runs.load(SeqCst), 0);
    // A key in a text Message is missing.
    let report: BatchReport<Value> = processor(KeySelector::pointer("/Message/event_id"))
        .process(event, None, |_n: Notification<String>| async {
            Ok::<_, HandlerError>(json!({}))
        })
        .await;
    assert_eq!(
        crate::diagnostic::error_type(&answer(&report).unwrap_err()),
        "InvalidKey"
    );
}

#[tokio::test]
async fn message_attributes_are_attributes() {
    let seen = Mutex::new(Vec::new());
    let report: BatchReport<Value> = processor(KeySelector::attribute("event_type"))
        .process(direct(), None, |n: Notification<Order>| {
            let sns = &n.record.sns;
            seen.lock().unwrap().push((
                sns.message_attributes
                    .get("priority")
                    .map(|a| a.value.clone()),
                sns.subject.clone(),
                sns.topic_arn.clone(),
                n.body.event_id.clone(),
            ));
            async { Ok::<_, HandlerError>(json!({})) }
        })
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            Some("2".to_owned()),
            Some("OrderPlaced".to_owned()),
            "arn:aws:sns:us-east-1:123456789012:order-events".to_owned(),
            "evt-6001".to_owned()
        )]
    );
}

#[test]
fn other_payloads_are_not_sns_events() {
    for (value, says) in [
        (
            json!({"Records": [{"eventSource": "aws:sqs"}]}),
            "no EventSource",
        ),
        (json!({"Records": [{"EventSource": "aws:sqs"}]}), "aws:sqs"),
        (json!({"detail-type": "x"}), "no Records"),
        (json!({"Records": {}}), "not an array"),
    ] {
        let err = parse_sns_event(value).unwrap_err();
        assert!(
            matches!(&err, BatchError::WrongEvent { message, .. } if message.contains(says)),
            "{err}"
        );
        assert_eq!(crate::diagnostic::error_type(&err), "InvalidEvent");
    }
    // An SNS record that does not parse is a record that fails, not another
    // payload.
    let event = parse_sns_event(json!({"Records": [{"EventSource": "aws:sns"}]})).unwrap();
    assert!(matches!(&event.records[0], Err(m) if m.error.contains("is not an SNS record")));
}

#[cfg(feature = "lambda")]
#[tokio::test]
async fn handle_succeeds_or_fails_the_invocation() {
    let ctx = lambda_runtime::Context::default();
    let processor = processor(KeySelector::pointer("/Message/event_id"));
    let counter = Counter::default();
    counter.fail.store(1, SeqCst);
    let invoke = |payload: Value| {
        processor.handle(
            lambda_runtime::LambdaEvent::new(payload, ctx.clone()),
            |n| counter.ship(n),
        )
    };
    let failed = invoke(event_json("sns-notification.json"))
        .await
        .unwrap_err();
    assert_eq!(crate::diagnostic::error_type(&*failed), "HandlerFailed");
    invoke(event_json("sns-notification.json")).await.unwrap();
    let wrong = invoke(event_json("kafka-msk-orders.json"))
        .await
        .unwrap_err();
    assert_eq!(crate::diagnostic::error_type(&*wrong), "InvalidEvent");
    assert_eq!(counter.runs.load(SeqCst), 2);
}

// --- SNS notifications through an SQS queue ---------------------------------

/// `events/sns-via-sqs.json`: `evt-6101` (SNS `MessageId` `c3bd7917-…`),
/// `evt-6102`, and `evt-6101` again: the same SNS `MessageId` under a new
/// SQS `messageId`.
fn via_sqs() -> crate::sqs::SqsEvent {
    sqs_event("sns-via-sqs.json")
}

/// A queue subscribed to the topic: notifications in bodies are opened.
fn queue(key: KeySelector) -> SqsProcessor {
    let (engine, _, _) = memory_engine();
    SqsProcessor::new(engine, key).envelope(EnvelopeMode::Unwrap(Envelopes::Sns))
}

/// Records the bodies and notifications an SQS handler saw.
#[derive(Default)]
struct Queue {
    seen: Mutex<Vec<(String, Option<String>)>>,
}

impl Queue {
    async fn ship(&self, r: SqsRecord<Order>) -> Result<Value, HandlerError> {
        self.seen.lock().unwrap().push((
            r.body.event_id.clone(),
            r.envelope
                .as_ref()
                .and_then(Envelope::sns)
                .map(|n| n.message_id.clone()),
        ));
        Ok(json!({"shipped": r.body.order_id}))
    }

    fn events(&self) -> Vec<String> {
        let mut ids: Vec<_> = self
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|(e, _)| e.clone())
            .collect();
        ids.sort();
        ids
    }
}

#[tokio::test]
async fn through_sqs_one_sns_message_id_delivered_twice_runs_once() {
    let queue_handler = Queue::default();
    let report = queue(KeySelector::event_id())
        .process(via_sqs(), None, |r| queue_handler.ship(r))
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(queue_handler.events(), ["evt-6101", "evt-6102"]);
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(
        queue_handler.seen.lock().unwrap()[0].1.as_deref(),
        Some("c3bd7917-dfab-4136-a222-2c15f0b4d61a"),
        "the handler gets the notification beside its parsed Message"
    );
    // A business key in the Message (the opened document) does the same.
    let by_business_key = Queue::default();
    let report = queue(KeySelector::pointer("/event_id"))
        .process(via_sqs(), None, |r| by_business_key.ship(r))
        .await;
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(by_business_key.events(), ["evt-6101", "evt-6102"]);
    // The SQS messageId differs between the copies.
    let by_sqs_id = Queue::default();
    queue(KeySelector::Id)
        .process(via_sqs(), None, |r| by_sqs_id.ship(r))
        .await;
    assert_eq!(by_sqs_id.events(), ["evt-6101", "evt-6101", "evt-6102"]);
}

#[tokio::test]
async fn through_sqs_a_message_that_is_not_json() {
    let mut event = via_sqs();
    let mut body: Value = serde_json::from_str(event.records[0].body.as_deref().unwrap()).unwrap();
    body["Message"] = json!("Order ord-6101 shipped");
    event.records[0].body = Some(body.to_string());
    let queue_handler = Queue::default();
    let report = queue(KeySelector::event_id())
        .process(event.clone(), None, |r| queue_handler.ship(r))
        .await;
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("is not JSON") && m.contains("befe1076")),
        "{:?}",
        report.records[0].outcome
    );
    // Only that record: the others run.
    assert!(report.records[1].outcome.is_ok() && report.records[2].outcome.is_ok());
    assert_eq!(queue_handler.events(), ["evt-6101", "evt-6102"]);
    // A text handler gets the text.
    let texts = Mutex::new(Vec::new());
    let report: BatchReport<Value> = queue(KeySelector::event_id())
        .process(
            crate::testkit::batch(vec![event.records[0].clone()]),
            None,
            |r: SqsRecord<String>| {
                texts.lock().unwrap().push(r.body.clone());
                async { Ok::<_, HandlerError>(json!({})) }
            },
        )
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(*texts.lock().unwrap(), ["Order ord-6101 shipped"]);
}

#[tokio::test]
async fn raw_message_delivery_is_an_ordinary_body() {
    // With raw message delivery on, the body is the Message itself.
    let mut event = via_sqs();
    for record in &mut event.records {
        let body: Value = serde_json::from_str(record.body.as_deref().unwrap()).unwrap();
        record.body = Some(body["Message"].as_str().unwrap().to_owned());
    }
    let queue_handler = Queue::default();
    let report = queue(KeySelector::pointer("/event_id"))
        .process(event, None, |r| queue_handler.ship(r))
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Replayed(_))
    ));
    let seen = queue_handler.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|(_, sns)| sns.is_none()));
}

#[tokio::test]
async fn envelope_modes_and_a_broken_notification() {
    // Never (the default): the handler gets the notification itself, and
    // SNS's second delivery (another Signature) is a payload mismatch: the
    // whole body is the payload.
    let (engine, _, _) = memory_engine();
    let types = Mutex::new(Vec::new());
    let opened = AtomicUsize::new(0);
    let report: BatchReport<Value> = SqsProcessor::new(engine, KeySelector::pointer("/MessageId"))
        .process(via_sqs(), None, |r: SqsRecord<Value>| {
            types.lock().unwrap().push(r.body["Type"].clone());
            opened.fetch_add(usize::from(r.envelope.is_some()), SeqCst);
            async { Ok::<_, HandlerError>(json!({})) }
        })
        .await;
    assert!(report.records[0].outcome.is_ok(), "{:?}", report.records[0]);
    assert!(report.records[1].outcome.is_ok(), "{:?}", report.records[1]);
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::PayloadMismatch)
    );
    assert_eq!(
        *types.lock().unwrap(),
        [json!("Notification"), json!("Notification")]
    );
    assert_eq!(opened.load(SeqCst), 0, "no body is opened by default");
    // Required: a notification passes, another body fails.
    let mut event = via_sqs();
    event.records[1].body = Some(r#"{"event_id":"evt-1","order_id":"o","total_cents":1}"#.into());
    let queue_handler = Queue::default();
    let (engine, _, _) = memory_engine();
    let report = SqsProcessor::new(engine, KeySelector::pointer("/event_id"))
        .envelope(EnvelopeMode::Require(Envelopes::Sns))
        .process(event, None, |r| queue_handler.ship(r))
        .await;
    assert!(report.records[0].outcome.is_ok());
    assert!(
        matches!(&report.records[1].outcome, Err(FailureReason::Parse(m)) if m.contains("must be an SNS notification") && m.contains("it has no Type")),
        "{:?}",
        report.records[1].outcome
    );
    // Shaped like a notification, without what SNS always writes: not an
    // envelope, and not an order either.
    let mut event = via_sqs();
    event.records[0].body = Some(
        json!({"Type": "Notification", "MessageId": "m", "TopicArn": "t", "Message": "{}"})
            .to_string(),
    );
    let report = queue(KeySelector::event_id())
        .process(event, None, |r| queue_handler.ship(r))
        .await;
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("does not parse as") && m.contains("not an SNS notification (it has no Timestamp")),
        "{:?}",
        report.records[0].outcome
    );
}

#[tokio::test]
async fn through_sqs_a_second_publication_is_no_payload_mismatch() {
    // The publisher publishes evt-6101 again: a new SNS MessageId,
    // Timestamp and Signature, the same Message.
    let mut event = via_sqs();
    let mut body: Value = serde_json::from_str(event.records[2].body.as_deref().unwrap()).unwrap();
    body["MessageId"] = json!("a-second-publication");
    body["Timestamp"] = json!("2026-12-01T00:05:00.000Z");
    event.records[2].body = Some(body.to_string());
    let queue_handler = Queue::default();
    let report = queue(KeySelector::pointer("/event_id"))
        .process(event, None, |r| queue_handler.ship(r))
        .await;
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(queue_handler.events(), ["evt-6101", "evt-6102"]);
}

/// The former module example: a notification SNS delivers twice runs once,
/// and the second delivery replays.
#[tokio::test]
async fn a_notification_delivered_twice_replays() {
    #[derive(serde::Deserialize)]
    struct Order {
        order_id: String,
    }
    let (engine, _, _) = memory_engine();
    let processor = SnsProcessor::new(engine, KeySelector::pointer("/Message/order_id"));
    let event = || {
        parse_sns_event(json!({"Records": [{
            "EventSource": "aws:sns", "EventVersion": "1.0",
            "EventSubscriptionArn": "arn:aws:sns:us-east-1:123456789012:orders:5f1c",
            "Sns": {
                "Type": "Notification", "MessageId": "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
                "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
                "Message": r#"{"order_id":"ord-1"}"#, "Timestamp": "2026-12-01T00:00:00.000Z",
                "SignatureVersion": "1", "Signature": "EXAMPLE",
                "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem",
                "UnsubscribeUrl": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
                "MessageAttributes": {},
            },
        }]}))
        .expect("an SNS event")
    };
    let ship = |n: Notification<Order>| async move {
        Ok::<_, HandlerError>(json!({"shipped": n.body.order_id}))
    };
    let first = processor.process(event(), None, ship).await;
    assert!(answer(&first).is_ok());
    let again = processor.process(event(), None, ship).await; // SNS delivered it twice
    assert!(matches!(
        again.records[0].outcome,
        Ok(crate::Outcome::Replayed(_))
    ));
}
