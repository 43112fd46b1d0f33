use super::*;
use crate::error::HandlerError;
use crate::sqs::{FailureReason, FifoFailureMode, QueueKind, SqsProcessor, SqsRecord};
use crate::testkit::*;
use crate::{KeySelector, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Payment {
    payment_id: String,
    account_id: String,
    amount_cents: i64,
}

/// A payments handler: records the order it saw payments in (per group),
/// sleeps a little so groups overlap, refuses negative amounts.
struct Ledger {
    seen: Mutex<Vec<(String, String)>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Ledger {
    fn new() -> Self {
        Self {
            seen: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        }
    }

    async fn charge(&self, r: SqsRecord<Payment>) -> Result<String, HandlerError> {
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(now, SeqCst);
        self.seen.lock().unwrap().push((
            r.group_id().unwrap_or_default().to_owned(),
            r.body.payment_id.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.in_flight.fetch_sub(1, SeqCst);
        if r.body.amount_cents < 0 {
            return Err(HandlerError::terminal(format!(
                "negative amount {}",
                r.body.amount_cents
            )));
        }
        Ok(format!("charged {}", r.body.payment_id))
    }

    fn seen(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }

    fn by_group(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (g, p) in self.seen.lock().unwrap().iter() {
            groups.entry(g.clone()).or_default().push(p.clone());
        }
        groups
    }
}

fn payments(mode: FifoFailureMode) -> SqsProcessor {
    SqsProcessor::new(memory_engine().0, KeySelector::pointer("/payment_id"))
        .fifo_failure_mode(mode)
}

fn outcomes<T: Clone>(
    report: &super::super::BatchReport<T>,
) -> Vec<Result<Outcome<T>, FailureReason>> {
    report.records.iter().map(|r| r.outcome.clone()).collect()
}

#[test]
fn fifo_is_recognised_from_the_arn_or_forced() {
    let fifo = sqs_event("payments-fifo.json").into();
    let standard = sqs_event("orders-standard.json").into();
    let is_fifo = |queue_kind, event: &SqsStreamEvent| {
        let sqs = Sqs {
            queue_kind,
            ..Sqs::default()
        };
        sqs.ordering(event).is_ordered()
    };
    assert!(is_fifo(QueueKind::Auto, &fifo));
    assert!(!is_fifo(QueueKind::Auto, &standard));
    assert!(!is_fifo(QueueKind::Standard, &fifo));
    assert!(is_fifo(QueueKind::Fifo, &standard));
    assert!(!is_fifo(QueueKind::Auto, &batch(vec![]).into()));
}

#[tokio::test]
async fn groups_keep_their_order_and_run_concurrently() {
    let event = sqs_event("payments-fifo.json");
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &event.records {
        let p: Payment = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
        expected.entry(p.account_id).or_default().push(p.payment_id);
    }
    assert_eq!(expected.len(), 3);
    for _ in 0..5 {
        let ledger = Ledger::new();
        let report = payments(FifoFailureMode::SkipGroup)
            .process(sqs_event("payments-fifo.json"), None, |r| ledger.charge(r))
            .await;
        assert!(report.fifo);
        assert!(report.is_success());
        assert_eq!(ledger.by_group(), expected, "order within each group");
        let max = ledger.max_in_flight.load(SeqCst);
        assert!(max > 1 && max <= 3, "one record per group at a time: {max}");
        // Results are reported in batch order.
        let positions: Vec<_> = report.records.iter().map(|r| r.position).collect();
        assert_eq!(positions, (0..6).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn a_record_without_group_holds_back_the_rest_of_the_batch() {
    let mut event = sqs_event("payments-fifo.json");
    let all = ids(&event);
    event.records[2].attributes.remove("MessageGroupId");
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert_eq!(ledger.seen().len(), 2, "only the records before it ran");
    let o = outcomes(&report);
    assert!(o[0].is_ok() && o[1].is_ok());
    assert!(matches!(&o[2], Err(FailureReason::NoLane(m)) if m.contains("MessageGroupId")));
    let reason = o[2].as_ref().unwrap_err().to_string();
    assert!(
        reason.contains("MessageGroupId") && reason.contains("really FIFO"),
        "{reason}"
    );
    for later in &o[3..] {
        assert_eq!(
            *later,
            Err(FailureReason::Skipped {
                after: all[2].clone()
            })
        );
    }
    assert_eq!(
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        ),
        all[2..].to_vec()
    );
}

#[tokio::test]
async fn forced_fifo_and_forced_standard() {
    // Groups on a queue whose ARN does not say FIFO: forced FIFO skips.
    let body = |p: &str, amount: i64| {
        format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":{amount}}}"#)
    };
    let mut records = vec![
        fifo_message("a-0", Some("a"), &body("p-0", -1)),
        fifo_message("a-1", Some("a"), &body("p-1", 1)),
    ];
    for r in &mut records {
        r.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:orders".into());
    }
    let event = batch(records);
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .queue_kind(QueueKind::Fifo)
        .process(event.clone(), None, |r| ledger.charge(r))
        .await;
    assert!(report.fifo);
    assert_eq!(ledger.seen(), ["p-0"]);
    // Auto on that ARN: standard, both run.
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert!(!report.fifo);
    assert_eq!(ledger.seen().len(), 2);
    assert_eq!(
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        ),
        ["a-0"]
    );
    // Forced standard on a FIFO batch: a poison record holds nothing back.
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .queue_kind(QueueKind::Standard)
        .process(sqs_event("payments-fifo-poison.json"), None, |r| {
            ledger.charge(r)
        })
        .await;
    assert_eq!(ledger.seen().len(), 5);
    assert_eq!(report.failures().count(), 2);
}
