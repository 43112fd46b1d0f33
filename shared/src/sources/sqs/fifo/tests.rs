use super::*;
use crate::error::HandlerError;
use crate::sqs::{FailureReason, FifoFailureMode, QueueKind, SqsProcessor, SqsRecord};
use crate::testkit::*;
use crate::{KeySelector, Outcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
async fn concurrency_bounds_groups_too() {
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .concurrency(1)
        .process(sqs_event("payments-fifo.json"), None, |r| ledger.charge(r))
        .await;
    assert!(report.is_success());
    assert_eq!(ledger.max_in_flight.load(SeqCst), 1);
}

// payments-fifo-poison.json, in batch order:
// 0 acct-1 pay-2b61e001 good      3 acct-3 pay-2b61e003 amount -5
// 1 acct-2 pay-2b61e002 good      4 acct-2 pay-2b61e004 good
// 2 acct-1 poison (not JSON)      5 acct-1 pay-2b61e005 good, held back
const POISON: &str = "aae76bb9-4bb4-422e-b6c2-a391969d34ff";

#[tokio::test]
async fn skip_group_holds_back_only_the_failed_group() {
    let event = sqs_event("payments-fifo-poison.json");
    let all = ids(&event);
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .process(event, None, |r| ledger.charge(r))
        .await;
    let mut seen = ledger.seen();
    seen.sort();
    assert_eq!(
        seen,
        [
            "pay-2b61e001",
            "pay-2b61e002",
            "pay-2b61e003",
            "pay-2b61e004"
        ],
        "pay-2b61e005 never ran"
    );
    let o = outcomes(&report);
    assert_eq!(o[0], Ok(Outcome::Executed("charged pay-2b61e001".into())));
    assert!(matches!(&o[2], Err(FailureReason::Parse(m)) if m.contains(POISON)));
    assert!(
        matches!(&o[3], Err(FailureReason::Handler { message, .. }) if message == "negative amount -5")
    );
    assert_eq!(o[4], Ok(Outcome::Executed("charged pay-2b61e004".into())));
    assert_eq!(
        o[5],
        Err(FailureReason::Skipped {
            after: POISON.into()
        })
    );
    let response = report
        .response_as::<crate::sqs::SqsBatchResponse>()
        .unwrap();
    assert_eq!(
        failed_ids(&response),
        [all[2].clone(), all[3].clone(), all[5].clone()]
    );
}

#[tokio::test]
async fn stop_batch_fails_everything_from_the_first_failure() {
    let event = sqs_event("payments-fifo-poison.json");
    let all = ids(&event);
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::StopBatch)
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert_eq!(ledger.seen(), ["pay-2b61e001", "pay-2b61e002"]);
    let o = outcomes(&report);
    assert!(o[0].is_ok() && o[1].is_ok());
    assert!(matches!(&o[2], Err(FailureReason::Parse(_))));
    for later in &o[3..] {
        assert_eq!(
            *later,
            Err(FailureReason::Skipped {
                after: POISON.into()
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
async fn stop_batch_runs_one_record_at_a_time() {
    let ledger = Ledger::new();
    let event = sqs_event("payments-fifo.json");
    let order: Vec<String> = event
        .records
        .iter()
        .map(|r| {
            serde_json::from_str::<Payment>(r.body.as_deref().unwrap())
                .unwrap()
                .payment_id
        })
        .collect();
    let report = payments(FifoFailureMode::StopBatch)
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert!(report.is_success());
    assert_eq!(ledger.seen(), order, "batch order");
    assert_eq!(ledger.max_in_flight.load(SeqCst), 1);
}

#[tokio::test]
async fn fifo_duplicates_run_once() {
    // pay-9d04c0de twice in acct-1 (positions 0 and 2), keyed by its
    // deduplication id or by the payment id.
    for key in [
        KeySelector::DeduplicationId,
        KeySelector::pointer("/payment_id"),
    ] {
        let ledger = Ledger::new();
        let processor = SqsProcessor::new(memory_engine().0, key);
        let report = processor
            .process(sqs_event("payments-fifo-duplicate.json"), None, |r| {
                ledger.charge(r)
            })
            .await;
        let mut seen = ledger.seen();
        seen.sort();
        assert_eq!(seen, ["pay-9d04c0de", "pay-9d04c0df"]);
        assert_eq!(
            outcomes(&report)[2],
            Ok(Outcome::Replayed(Some("charged pay-9d04c0de".into())))
        );
        assert!(report.is_success());
        // Redelivered: everything replays.
        let again = processor
            .process(sqs_event("payments-fifo-duplicate.json"), None, |r| {
                ledger.charge(r)
            })
            .await;
        assert_eq!(ledger.seen().len(), 2);
        assert!(
            outcomes(&again)
                .iter()
                .all(|o| matches!(o, Ok(Outcome::Replayed(Some(_)))))
        );
    }
}

#[tokio::test]
async fn duplicates_across_groups_wait_instead_of_colliding() {
    // The same payment in two groups, first in the group that starts last.
    let body = |p: &str| format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":1}}"#);
    let event = batch(vec![
        fifo_message("b-0", Some("b"), &body("p-0")),
        fifo_message("a-0", Some("a"), &body("p-1")),
        fifo_message("b-1", Some("b"), &body("p-1")),
        fifo_message("b-2", Some("b"), &body("p-2")),
    ]);
    for limit in [1, 4] {
        let ledger = Ledger::new();
        let report = payments(FifoFailureMode::SkipGroup)
            .concurrency(limit)
            .process(event.clone(), None, |r| ledger.charge(r))
            .await;
        assert_eq!(ledger.seen().len(), 3, "p-1 ran once");
        let o = outcomes(&report);
        assert_eq!(o[1], Ok(Outcome::Executed("charged p-1".into())));
        assert_eq!(o[2], Ok(Outcome::Replayed(Some("charged p-1".into()))));
        assert!(report.is_success(), "limit {limit}: {o:?}");
    }
}

#[tokio::test]
async fn a_failed_first_copy_holds_back_its_duplicates_group() {
    let body = |p: &str, amount: i64| {
        format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":{amount}}}"#)
    };
    let event = batch(vec![
        fifo_message("a-0", Some("a"), &body("p-bad", -1)),
        fifo_message("b-0", Some("b"), &body("p-bad", -1)),
        fifo_message("b-1", Some("b"), &body("p-2", 1)),
        fifo_message("c-0", Some("c"), &body("p-3", 1)),
    ]);
    let ledger = Ledger::new();
    let report = payments(FifoFailureMode::SkipGroup)
        .process(event, None, |r| ledger.charge(r))
        .await;
    let mut seen = ledger.seen();
    seen.sort();
    assert_eq!(seen, ["p-3", "p-bad"]);
    let o = outcomes(&report);
    assert!(matches!(&o[1], Err(FailureReason::DuplicateOf { first, .. }) if first == "a-0"));
    assert_eq!(
        o[2],
        Err(FailureReason::Skipped {
            after: "b-0".into()
        })
    );
    assert_eq!(
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        ),
        ["a-0", "b-0", "b-1"]
    );
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

#[tokio::test]
async fn a_recorded_rejection_does_not_hold_back_its_group() {
    let (engine, _, _) = engine_with(
        crate::Config::with_prefix("test.fifo")
            .on_terminal_error(crate::config::TerminalErrors::Record),
    );
    let body = |p: &str, amount: i64| {
        format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":{amount}}}"#)
    };
    let event = batch(vec![
        fifo_message("a-0", Some("a"), &body("p-0", -1)),
        fifo_message("a-1", Some("a"), &body("p-1", 1)),
    ]);
    let ledger = Ledger::new();
    let report = SqsProcessor::new(engine, KeySelector::pointer("/payment_id"))
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert_eq!(ledger.seen(), ["p-0", "p-1"]);
    assert_eq!(
        outcomes(&report)[0],
        Ok(Outcome::Rejected {
            error: "negative amount -1".into(),
            replayed: false
        })
    );
    assert!(report.is_success());
}

#[tokio::test]
async fn all_failing_fifo_batch() {
    for mode in [FifoFailureMode::SkipGroup, FifoFailureMode::StopBatch] {
        let event = sqs_event("payments-fifo.json");
        let all = ids(&event);
        let runs = AtomicUsize::new(0);
        let report = payments(mode)
            .process(event, None, |_r: SqsRecord<Value>| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, SeqCst);
                    Err::<(), _>(HandlerError::retryable("down"))
                }
            })
            .await;
        let expected_runs = if mode == FifoFailureMode::SkipGroup {
            3
        } else {
            1
        };
        assert_eq!(
            runs.load(SeqCst),
            expected_runs,
            "{mode:?}: first of each group / of the batch"
        );
        assert_eq!(
            failed_ids(
                &report
                    .response_as::<crate::sqs::SqsBatchResponse>()
                    .unwrap()
            ),
            all,
            "{mode:?}"
        );
    }
}
