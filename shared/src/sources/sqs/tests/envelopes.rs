//! SNS FIFO notifications in SQS FIFO bodies
//! (`events/sns-fifo-via-sqs-fifo.json`): opened in their groups' order,
//! strict about their sequence number and signature (envelopes on any
//! source: `batch::tests::envelopes`).

use crate::error::HandlerError;
use crate::sqs::{Envelope, EnvelopeMode, Envelopes, FailureReason, SqsProcessor, SqsRecord};
use crate::testkit::*;
use crate::{KeySelector, Outcome};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Mutex;

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
