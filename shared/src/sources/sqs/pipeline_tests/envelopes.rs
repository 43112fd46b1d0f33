//! Envelopes in SQS bodies: opened only when asked, only when strict, and
//! then one document for the handler, the key and the payload hash.

use super::{OrderPlaced, memory_engine, sqs_event};
use crate::KeySelector;
use crate::Outcome;
use crate::error::{HandlerError, KeyError};
use crate::sqs::{
    Envelope, EnvelopeMode, Envelopes, FailureReason, SqsMessage, SqsProcessor, SqsRecord,
};
use crate::testkit::message;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;

#[tokio::test]
async fn eventbridge_envelopes_in_the_body() {
    let file = || sqs_event("orders-eventbridge-via-sqs.json");
    let unwrap = EnvelopeMode::Unwrap(Envelopes::EventBridge);
    // The event id as key; the detail as the handler's body.
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::event_id()).envelope(unwrap);
    let seen = Mutex::new(Vec::new());
    let handler = |r: SqsRecord<OrderPlaced>| {
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
        r.message_id = Some(format!("{}-again", r.message_id.clone().unwrap()));
    }
    let report = processor.process(retried, None, handler).await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Replayed(Some(1))));
    assert_eq!(seen.len(), 2);

    // A business key: the pointer reads the detail, the handler's document.
    let (engine, _, _) = memory_engine();
    let by_order = SqsProcessor::new(engine, KeySelector::pointer("/order_id")).envelope(unwrap);
    let report = by_order
        .process(file(), None, |r: SqsRecord<OrderPlaced>| async move {
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
    let by_envelope = SqsProcessor::new(engine, KeySelector::pointer("/detail/order_id"))
        .envelope(unwrap)
        .process(file(), None, |r: SqsRecord<OrderPlaced>| async move {
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
    let raw = SqsProcessor::new(engine, KeySelector::pointer("/detail/order_id"))
        .process(file(), None, |r: SqsRecord<Value>| {
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
    let no_event_id = SqsProcessor::new(engine, KeySelector::event_id())
        .process(file(), None, |_r: SqsRecord<Value>| async {
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
    let required = SqsProcessor::new(engine, KeySelector::pointer("/event_id"))
        .envelope(EnvelopeMode::Require(Envelopes::EventBridge))
        .process(
            sqs_event("orders-missing-key.json"),
            None,
            |_r: SqsRecord<Value>| async { Ok::<_, HandlerError>(()) },
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

/// One SQS record of `body`.
fn payment_record(id: &str, body: &Value) -> SqsMessage {
    message(Some(id), &body.to_string())
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
    let processor = SqsProcessor::new(engine, KeySelector::pointer("/payment_id"))
        .envelope(EnvelopeMode::Unwrap(Envelopes::Any));
    let credited = Mutex::new(Vec::new());
    let credit = |r: SqsRecord<Payment>| {
        credited.lock().unwrap().push(r.body.clone());
        async move { Ok::<_, HandlerError>(r.body.amount_cents) }
    };
    // One batch, then each copy in a batch of its own.
    let all = crate::testkit::batch(vec![
        payment_record("m-plain", &payment),
        payment_record("m-eventbridge", &event),
        payment_record("m-sns", &notification),
    ]);
    let report = processor.process(all, None, credit).await;
    assert!(report.is_success(), "{:?}", report.records);
    for body in [&payment, &event, &notification] {
        let report = processor
            .process(
                crate::testkit::batch(vec![payment_record("m-again", body)]),
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
            SqsProcessor::new(engine, KeySelector::pointer("/payment_id")).envelope(mode);
        let credited = Mutex::new(Vec::new());
        let batch = crate::testkit::batch(vec![
            payment_record("m-p", &p),
            payment_record("m-lookalike", &lookalike),
        ]);
        let report = processor
            .process(batch, None, |r: SqsRecord<Payment>| {
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
    let report = SqsProcessor::new(engine, KeySelector::pointer("/payment_id"))
        .envelope(EnvelopeMode::Unwrap(Envelopes::Any))
        .process(
            crate::testkit::batch(vec![
                payment_record("m-note", &no_payment),
                payment_record("m-p", &p),
            ]),
            None,
            |r: SqsRecord<Payment>| async move { Ok::<_, HandlerError>(r.body.payment_id) },
        )
        .await;
    assert!(
        matches!(&report.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("does not parse as") && m.contains("not an EventBridge event (it has fields of its own at the top level: note)")),
        "{:?}",
        report.records[0].outcome
    );
    assert_eq!(report.records[1].outcome, Ok(Outcome::Executed("P".into())));
}

/// The `Message` of the notifications in `events/sns-fifo-via-sqs-fifo.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Placed {
    event_id: String,
    order_id: String,
    total_cents: i64,
}

/// `events/sns-fifo-via-sqs-fifo.json`: an SQS FIFO queue subscribed to an
/// SNS FIFO topic; each body is a FIFO notification (a `SequenceNumber`, a
/// `.fifo` topic, no `SignatureVersion`, `Signature` or `SigningCertURL`):
/// `evt-7101` and `evt-7102` in group `acct-1`, `evt-7201` in `acct-2`.
fn sns_fifo() -> crate::sqs::SqsEvent {
    sqs_event("sns-fifo-via-sqs-fifo.json")
}

/// The outcomes of a report, in the batch's order.
fn outcomes<T: Clone>(
    report: &crate::sqs::BatchReport<T>,
) -> Vec<Result<Outcome<T>, FailureReason>> {
    report.records.iter().map(|r| r.outcome.clone()).collect()
}

/// A FIFO topic's notification opens like a standard one: under `Require`
/// every message runs, in its group's order, from the parsed `Message`,
/// keyed by the SNS `MessageId` (a redrive under new SQS message ids
/// replays).
#[tokio::test]
async fn sns_fifo_notifications_open_under_require_in_their_groups_order() {
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::event_id())
        .envelope(EnvelopeMode::Require(Envelopes::Sns));
    let seen = Mutex::new(Vec::new());
    let handler = |r: SqsRecord<Placed>| {
        let seen = &seen;
        async move {
            let notification = r.envelope.as_ref().and_then(Envelope::sns);
            seen.lock().unwrap().push((
                r.group_id().map(str::to_owned),
                r.body.event_id.clone(),
                notification.map(|n| n.message_id.clone()),
                notification.and_then(|n| n.sequence_number.clone()),
                notification.is_some_and(|n| n.is_fifo() && n.signature.is_none()),
            ));
            Ok::<_, HandlerError>(r.body.total_cents)
        }
    };
    let report = processor.process(sns_fifo(), None, handler).await;
    assert_eq!(
        outcomes(&report),
        [
            Ok(Outcome::Executed(1450)),
            Ok(Outcome::Executed(820)),
            Ok(Outcome::Executed(300))
        ]
    );
    let seen = seen.lock().unwrap().clone();
    let group = |g: &str| -> Vec<String> {
        (seen.iter())
            .filter(|s| s.0.as_deref() == Some(g))
            .map(|s| s.1.clone())
            .collect()
    };
    assert_eq!(group("acct-1"), ["evt-7101", "evt-7102"], "in group order");
    assert_eq!(group("acct-2"), ["evt-7201"]);
    assert!(
        seen.iter().any(|s| s.1 == "evt-7101"
            && s.2.as_deref() == Some("076b0ad5-f7f9-51c3-b800-78fe43a4964a")
            && s.3.as_deref() == Some("10000000000000012000")),
        "{seen:?}"
    );
    assert!(seen.iter().all(|s| s.4), "FIFO notifications, unsigned");

    // A redrive: the same bodies under new SQS message ids replay, keyed by
    // the SNS MessageId.
    let mut redriven = sns_fifo();
    for r in &mut redriven.records {
        r.message_id = Some(format!("{}-redriven", r.message_id.clone().unwrap()));
    }
    let report = processor.process(redriven, None, handler).await;
    assert_eq!(
        outcomes(&report),
        [
            Ok(Outcome::Replayed(Some(1450))),
            Ok(Outcome::Replayed(Some(820))),
            Ok(Outcome::Replayed(Some(300)))
        ]
    );
    assert_eq!(seen.len(), 3, "nothing ran again");
}

/// Under `Unwrap(Any)` a handler typed `Value` gets the FIFO notification's
/// parsed `Message`, never the notification itself as if it were the
/// message (keyed here by the queue's `MessageDeduplicationId`, which both
/// readings have).
#[tokio::test]
async fn sns_fifo_notifications_open_under_unwrap_for_a_value_handler() {
    let (engine, _, _) = memory_engine();
    let processor = SqsProcessor::new(engine, KeySelector::DeduplicationId)
        .envelope(EnvelopeMode::Unwrap(Envelopes::Any));
    let report = processor
        .process(sns_fifo(), None, |r: SqsRecord<Value>| async move {
            let opened = r.envelope.is_some();
            Ok::<_, HandlerError>((opened, r.body))
        })
        .await;
    let message =
        |e: &str, o: &str, c: i64| json!({"event_id": e, "order_id": o, "total_cents": c});
    assert_eq!(
        outcomes(&report),
        [
            Ok(Outcome::Executed((
                true,
                message("evt-7101", "ord-7101", 1450)
            ))),
            Ok(Outcome::Executed((
                true,
                message("evt-7201", "ord-7201", 820)
            ))),
            Ok(Outcome::Executed((
                true,
                message("evt-7102", "ord-7102", 300)
            ))),
        ]
    );
}

/// Strict still: a notification from a `.fifo` topic needs its
/// `SequenceNumber`, and one from any other topic its signature. Each fails
/// alone, holding back its group's later messages on a FIFO queue.
#[tokio::test]
async fn a_fifo_notification_without_its_sequence_number_or_a_standard_one_unsigned_fails_alone() {
    let edit = |record: usize, f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut event = sns_fifo();
        let body = event.records[record].body.as_deref().unwrap();
        let mut body: Value = serde_json::from_str(body).unwrap();
        f(body.as_object_mut().unwrap());
        event.records[record].body = Some(body.to_string());
        event
    };
    let no_sequence = edit(0, &|b| {
        b.remove("SequenceNumber");
    });
    let not_fifo = edit(0, &|b| {
        b["TopicArn"] = json!("arn:aws:sns:us-east-1:123456789012:order-events");
    });
    for (event, why) in [
        (no_sequence, "SequenceNumber"),
        (not_fifo, "SignatureVersion"),
    ] {
        let first = event.records[0].message_id.clone().unwrap();
        let (engine, _, _) = memory_engine();
        let report = SqsProcessor::new(engine, KeySelector::event_id())
            .envelope(EnvelopeMode::Require(Envelopes::Sns))
            .process(event, None, |r: SqsRecord<Placed>| async move {
                Ok::<_, HandlerError>(r.body.event_id)
            })
            .await;
        let o = outcomes(&report);
        assert!(
            matches!(&o[0], Err(FailureReason::Parse(m)) if m.contains("must be an SNS notification") && m.contains(why)),
            "{why}: {:?}",
            o[0]
        );
        assert_eq!(o[1], Ok(Outcome::Executed("evt-7201".into())), "{why}");
        assert_eq!(o[2], Err(FailureReason::Skipped { after: first }), "{why}");
    }
}

/// A number beyond `u64` in the `detail` of an EventBridge event in an SQS
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
        let report = SqsProcessor::new(engine, KeySelector::pointer("/amount"))
            .envelope(EnvelopeMode::Unwrap(Envelopes::Any))
            .process(
                crate::testkit::batch(vec![message(Some("m-big"), body)]),
                None,
                |r: SqsRecord<Big>| async move {
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
