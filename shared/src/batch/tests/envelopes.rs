//! Envelopes in bodies: opened only when asked, only when strict, and
//! then one document for the handler, the key and the payload hash.

use super::pipeline::OrderPlaced;
use super::test_source::*;
use crate::KeySelector;
use crate::Outcome;
use crate::batch::FailureReason;
use crate::batch::envelope::{Envelope, EnvelopeMode, Envelopes};
use crate::error::{HandlerError, KeyError};
use crate::testkit::memory_engine;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;

#[tokio::test]
async fn eventbridge_envelopes_in_the_body() {
    let file = || sample("orders-eventbridge-via-sqs.json");
    let unwrap = EnvelopeMode::Unwrap(Envelopes::EventBridge);
    // The event id as key; the detail as the handler's body.
    let (engine, _, _) = memory_engine();
    let processor = TestProcessor::new(engine, KeySelector::event_id()).envelope(unwrap);
    let seen = Mutex::new(Vec::new());
    let handler = |r: TestRecord<OrderPlaced>| {
        let seen = &seen;
        async move {
            let event = r.envelope.as_ref().and_then(Envelope::eventbridge);
            seen.lock().unwrap().push((
                event.map(|e| e.detail_type.clone()),
                event.and_then(|e| e.id.clone()),
                r.body.clone(),
            ));
            Ok::<_, HandlerError>(r.body.quantity)
        }
    };
    let report = processor.process(file(), None, handler).await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(1)));
    assert_eq!(report.records[1].outcome, Ok(Outcome::Executed(3)));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.contains(&(
        Some("OrderPlaced".into()),
        Some("a697c4db-1ab8-4770-838c-238a352f4433".into()),
        OrderPlaced {
            order_id: "ord-1201".into(),
            sku: "SKU-BLUE-PLATE".into(),
            quantity: 1
        }
    )));

    // EventBridge retried into the queue: new messageId, same event id.
    let mut retried = file();
    for r in &mut retried.records {
        let r = r.as_mut().unwrap();
        r.id = Some(format!("{}-again", r.id.clone().unwrap()));
    }
    let report = processor.process(retried, None, handler).await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Replayed(Some(1))));
    assert_eq!(seen.len(), 2);

    // A business key: the pointer reads the detail, the handler's document.
    let (engine, _, _) = memory_engine();
    let by_order = TestProcessor::new(engine, KeySelector::pointer("/order_id")).envelope(unwrap);
    let report = by_order
        .process(file(), None, |r: TestRecord<OrderPlaced>| async move {
            Ok::<_, HandlerError>(r.body.order_id)
        })
        .await;
    assert_eq!(
        report.records[1].outcome,
        Ok(Outcome::Executed("ord-1202".into()))
    );
    assert_ne!(report.records[0].key_hash, None);
    // The envelope's own fields are not the document.
    let (engine, _, _) = memory_engine();
    let by_envelope = TestProcessor::new(engine, KeySelector::pointer("/detail/order_id"))
        .envelope(unwrap)
        .process(file(), None, |r: TestRecord<OrderPlaced>| async move {
            Ok::<_, HandlerError>(r.body.order_id)
        })
        .await;
    assert!(
        matches!(&by_envelope.records[0].outcome, Err(FailureReason::Key(KeyError::Missing(p))) if p == "/detail/order_id"),
        "{:?}",
        by_envelope.records[0].outcome
    );

    // The default: bodies are not opened, the whole body is M, and the
    // event-id key is missing (a plain body has no envelope).
    let (engine, _, _) = memory_engine();
    let envelopes = Mutex::new(0);
    let raw = TestProcessor::new(engine, KeySelector::pointer("/detail/order_id"))
        .process(file(), None, |r: TestRecord<Value>| {
            *envelopes.lock().unwrap() += usize::from(r.envelope.is_some());
            async move { Ok::<_, HandlerError>(r.body["source"].clone()) }
        })
        .await;
    assert_eq!(
        raw.records[0].outcome,
        Ok(Outcome::Executed(json!("shop.orders")))
    );
    assert_eq!(*envelopes.lock().unwrap(), 0);
    let (engine, _, _) = memory_engine();
    let no_event_id = TestProcessor::new(engine, KeySelector::event_id())
        .process(file(), None, |_r: TestRecord<Value>| async {
            Ok::<_, HandlerError>(())
        })
        .await;
    assert!(
        matches!(&no_event_id.records[0].outcome, Err(FailureReason::Key(KeyError::Missing(m))) if m.contains("not opened")),
        "{:?}",
        no_event_id.records[0].outcome
    );

    // Envelopes required: a plain body fails, saying it is not one.
    let (engine, _, _) = memory_engine();
    let required = TestProcessor::new(engine, KeySelector::pointer("/event_id"))
        .envelope(EnvelopeMode::Require(Envelopes::EventBridge))
        .process(
            sample("orders-missing-key.json"),
            None,
            |_r: TestRecord<Value>| async { Ok::<_, HandlerError>(()) },
        )
        .await;
    assert!(
        matches!(&required.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("must be an EventBridge event") && m.contains("not an EventBridge event (it has no")),
        "{:?}",
        required.records[0].outcome
    );
}

/// A payment as `payments` reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Payment {
    payment_id: String,
    amount_cents: i64,
}

/// One record of `body`.
fn payment_record(id: &str, body: &Value) -> TestMessage {
    rec(Some(id), &body.to_string())
}

/// The same payment delivered plain, inside an EventBridge event and inside
/// an SNS notification: with envelopes opened, all three are one document
/// and one key, credited once.
#[tokio::test]
async fn one_payment_plain_in_an_eventbridge_event_and_in_an_sns_notification_is_credited_once() {
    let payment = json!({"payment_id": "P", "amount_cents": 250});
    let event = json!({
        "version": "0", "id": "e-1", "detail-type": "PaymentReceived", "source": "shop.payments",
        "account": "123456789012", "time": "2026-12-01T00:00:00Z", "region": "us-east-1",
        "resources": [], "detail": payment,
    });
    let notification = json!({
        "Type": "Notification", "MessageId": "sns-1",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:payments",
        "Message": payment.to_string(), "Timestamp": "2026-12-01T00:00:00.000Z",
        "SignatureVersion": "1", "Signature": "EXAMPLE",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    });
    let (engine, _, _) = memory_engine();
    let processor = TestProcessor::new(engine, KeySelector::pointer("/payment_id"))
        .envelope(EnvelopeMode::Unwrap(Envelopes::Any));
    let credited = Mutex::new(Vec::new());
    let credit = |r: TestRecord<Payment>| {
        credited.lock().unwrap().push(r.body.clone());
        async move { Ok::<_, HandlerError>(r.body.amount_cents) }
    };
    // One batch, then each copy in a batch of its own.
    let all = batch_of(vec![
        payment_record("m-plain", &payment),
        payment_record("m-eventbridge", &event),
        payment_record("m-sns", &notification),
    ]);
    let report = processor.process(all, None, credit).await;
    assert!(report.is_success(), "{:?}", report.records);
    for body in [&payment, &event, &notification] {
        let report = processor
            .process(
                batch_of(vec![payment_record("m-again", body)]),
                None,
                credit,
            )
            .await;
        assert_eq!(report.records[0].outcome, Ok(Outcome::Replayed(Some(250))));
    }
    assert_eq!(
        *credited.lock().unwrap(),
        [Payment {
            payment_id: "P".into(),
            amount_cents: 250
        }]
    );
}

/// A body shaped like an EventBridge event whose top level names payment Q
/// while its `detail` is payment P: keyed and applied from one document,
/// never keyed on one and applied from the other.
#[tokio::test]
async fn a_lookalike_envelope_is_keyed_and_applied_from_one_document() {
    let p = json!({"payment_id": "P", "amount_cents": 100});
    let lookalike = json!({
        "version": "0", "id": "e-2", "detail-type": "PaymentReceived", "source": "shop.payments",
        "time": "2026-12-01T00:00:00Z", "region": "us-east-1", "resources": [],
        "detail": p, "payment_id": "Q", "amount_cents": 900,
    });
    for mode in [
        EnvelopeMode::Never,
        EnvelopeMode::Unwrap(Envelopes::Any),
        EnvelopeMode::Require(Envelopes::Any),
    ] {
        let (engine, _, _) = memory_engine();
        let processor =
            TestProcessor::new(engine, KeySelector::pointer("/payment_id")).envelope(mode);
        let credited = Mutex::new(Vec::new());
        let batch = batch_of(vec![
            payment_record("m-p", &p),
            payment_record("m-lookalike", &lookalike),
        ]);
        let report = processor
            .process(batch, None, |r: TestRecord<Payment>| {
                credited.lock().unwrap().push(r.body.clone());
                async move { Ok::<_, HandlerError>(r.body.payment_id) }
            })
            .await;
        let credited = credited.lock().unwrap().clone();
        let ps = credited.iter().filter(|c| c.payment_id == "P").count();
        let qs: Vec<_> = credited.iter().filter(|c| c.payment_id == "Q").collect();
        assert_eq!(
            ps,
            usize::from(mode != EnvelopeMode::Require(Envelopes::Any)),
            "{mode:?}: P credited once, by its own message"
        );
        match mode {
            EnvelopeMode::Require(_) => {
                // Neither the plain P nor the lookalike is an envelope.
                assert!(qs.is_empty(), "{mode:?}");
                for r in &report.records {
                    assert!(
                        matches!(&r.outcome, Err(FailureReason::Parse(m)) if m.contains("must be")),
                        "{mode:?}: {:?}",
                        r.outcome
                    );
                }
            }
            _ => {
                // Not a strict envelope: the lookalike is payment Q, whole.
                assert_eq!(qs.len(), 1, "{mode:?}");
                assert_eq!(qs[0].amount_cents, 900, "{mode:?}");
                assert_eq!(
                    report.records[1].outcome,
                    Ok(Outcome::Executed("Q".into())),
                    "{mode:?}"
                );
            }
        }
    }
    // A lookalike that is no payment of its own fails alone, saying why.
    let mut no_payment = lookalike.clone();
    let fields = no_payment.as_object_mut().unwrap();
    fields.remove("payment_id");
    fields.remove("amount_cents");
    fields.insert("note".into(), json!("x"));
    let (engine, _, _) = memory_engine();
    let report = TestProcessor::new(engine, KeySelector::pointer("/payment_id"))
        .envelope(EnvelopeMode::Unwrap(Envelopes::Any))
        .process(
            batch_of(vec![
                payment_record("m-note", &no_payment),
                payment_record("m-p", &p),
            ]),
            None,
            |r: TestRecord<Payment>| async move { Ok::<_, HandlerError>(r.body.payment_id) },
        )
        .await;
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("does not parse as") && m.contains("not an EventBridge event (it has fields of its own at the top level: note)")),
        "{:?}",
        report.records[0].outcome
    );
    assert_eq!(report.records[1].outcome, Ok(Outcome::Executed("P".into())));
}

/// A number beyond `u64` in the `detail` of an EventBridge event in a
/// body reaches a `u128` field exactly, as it does from a plain body and
/// from an SNS notification's `Message`.
#[tokio::test]
async fn a_number_beyond_u64_in_an_envelope_reaches_the_handler_exactly() {
    #[derive(Debug, Deserialize)]
    struct Big {
        payment_id: String,
        amount: u128,
    }
    let amount: u128 = 123_456_789_012_345_678_901_234_567_890;
    let payment = format!(r#"{{"payment_id":"P","amount":{amount}}}"#);
    let event = format!(
        r#"{{"version":"0","id":"e-big","detail-type":"PaymentReceived","source":"shop.payments","account":"123456789012","time":"2026-12-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{payment}}}"#
    );
    let notification = json!({
        "Type": "Notification", "MessageId": "sns-big",
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:payments",
        "Message": payment, "Timestamp": "2026-12-01T00:00:00.000Z",
        "SignatureVersion": "1", "Signature": "EXAMPLE",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    })
    .to_string();
    for (what, body) in [
        ("plain", &payment),
        ("eventbridge", &event),
        ("sns", &notification),
    ] {
        let (engine, _, _) = memory_engine();
        let report = TestProcessor::new(engine, KeySelector::pointer("/amount"))
            .envelope(EnvelopeMode::Unwrap(Envelopes::Any))
            .process(
                batch_of(vec![rec(Some("m-big"), body)]),
                None,
                |r: TestRecord<Big>| async move {
                    Ok::<_, HandlerError>(format!("{} {}", r.body.payment_id, r.body.amount))
                },
            )
            .await;
        assert_eq!(
            report.records[0].outcome,
            Ok(Outcome::Executed(format!("P {amount}"))),
            "{what}"
        );
    }
}
