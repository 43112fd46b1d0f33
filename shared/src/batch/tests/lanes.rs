//! Lanes: records keep their order within their lane, lanes run
//! concurrently, and a failure takes down what the ordering says (its lane,
//! the batch, or its key within the lane); in-batch duplicates across
//! lanes; a record without a lane.

use super::test_source::*;
use crate::batch::{FailureReason, Ordering};
use crate::error::HandlerError;
use crate::testkit::{engine_with, memory_engine};
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

/// A payments handler: records the order it saw payments in (per lane),
/// sleeps a little so lanes overlap, refuses negative amounts.
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

    async fn charge(&self, r: TestRecord<Payment>) -> Result<String, HandlerError> {
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(now, SeqCst);
        self.seen.lock().unwrap().push((
            r.lane().unwrap_or_default().to_owned(),
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

    fn by_lane(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (g, p) in self.seen.lock().unwrap().iter() {
            groups.entry(g.clone()).or_default().push(p.clone());
        }
        groups
    }
}

fn payments(ordering: Ordering) -> TestProcessor {
    TestProcessor::new(memory_engine().0, KeySelector::pointer("/payment_id")).ordering(ordering)
}

fn outcomes<T: Clone>(
    report: &crate::batch::BatchReport<T>,
) -> Vec<Result<Outcome<T>, FailureReason>> {
    report.records.iter().map(|r| r.outcome.clone()).collect()
}

#[tokio::test]
async fn lanes_keep_their_order_and_run_concurrently() {
    let event = sample("payments-fifo.json");
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in messages(&event) {
        let p: Payment = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
        expected.entry(p.account_id).or_default().push(p.payment_id);
    }
    assert_eq!(expected.len(), 3);
    for _ in 0..5 {
        let ledger = Ledger::new();
        let report = payments(Ordering::SkipLane)
            .process(sample("payments-fifo.json"), None, |r| ledger.charge(r))
            .await;
        assert!(report.fifo);
        assert!(report.is_success());
        assert_eq!(ledger.by_lane(), expected, "order within each lane");
        let max = ledger.max_in_flight.load(SeqCst);
        assert!(max > 1 && max <= 3, "one record per lane at a time: {max}");
        // Results are reported in batch order.
        let positions: Vec<_> = report.records.iter().map(|r| r.position).collect();
        assert_eq!(positions, (0..6).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn concurrency_bounds_lanes_too() {
    let ledger = Ledger::new();
    let report = payments(Ordering::SkipLane)
        .concurrency(1)
        .process(sample("payments-fifo.json"), None, |r| ledger.charge(r))
        .await;
    assert!(report.is_success());
    assert_eq!(ledger.max_in_flight.load(SeqCst), 1);
}

// payments-fifo-poison.json, in batch order (lane = its MessageGroupId):
// 0 acct-1 pay-2b61e001 good      3 acct-3 pay-2b61e003 amount -5
// 1 acct-2 pay-2b61e002 good      4 acct-2 pay-2b61e004 good
// 2 acct-1 poison (not JSON)      5 acct-1 pay-2b61e005 good, held back
const POISON: &str = "aae76bb9-4bb4-422e-b6c2-a391969d34ff";

#[tokio::test]
async fn skip_lane_holds_back_only_the_failed_lane() {
    let event = sample("payments-fifo-poison.json");
    let all = ids(&event);
    let ledger = Ledger::new();
    let report = payments(Ordering::SkipLane)
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
    assert_eq!(
        failed(&report),
        [all[2].clone(), all[3].clone(), all[5].clone()]
    );
}

#[tokio::test]
async fn stop_batch_fails_everything_from_the_first_failure() {
    let event = sample("payments-fifo-poison.json");
    let all = ids(&event);
    let ledger = Ledger::new();
    let report = payments(Ordering::StopBatch)
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
    assert_eq!(failed(&report), all[2..].to_vec());
}

#[tokio::test]
async fn stop_batch_runs_one_record_at_a_time() {
    let ledger = Ledger::new();
    let event = sample("payments-fifo.json");
    let order: Vec<String> = messages(&event)
        .iter()
        .map(|r| {
            serde_json::from_str::<Payment>(r.body.as_deref().unwrap())
                .unwrap()
                .payment_id
        })
        .collect();
    let report = payments(Ordering::StopBatch)
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert!(report.is_success());
    assert_eq!(ledger.seen(), order, "batch order");
    assert_eq!(ledger.max_in_flight.load(SeqCst), 1);
}

#[tokio::test]
async fn in_batch_duplicates_in_a_lane_run_once() {
    // pay-9d04c0de twice in acct-1 (positions 0 and 2), keyed by its
    // deduplication id or by the payment id.
    for key in [
        KeySelector::DeduplicationId,
        KeySelector::pointer("/payment_id"),
    ] {
        let ledger = Ledger::new();
        let processor = TestProcessor::new(memory_engine().0, key).ordering(Ordering::SkipLane);
        let report = processor
            .process(sample("payments-fifo-duplicate.json"), None, |r| {
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
            .process(sample("payments-fifo-duplicate.json"), None, |r| {
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
async fn duplicates_across_lanes_wait_instead_of_colliding() {
    // The same payment in two lanes, first in the lane that starts last.
    let body = |p: &str| format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":1}}"#);
    let event = batch_of(vec![
        laned("b-0", Some("b"), &body("p-0")),
        laned("a-0", Some("a"), &body("p-1")),
        laned("b-1", Some("b"), &body("p-1")),
        laned("b-2", Some("b"), &body("p-2")),
    ]);
    for limit in [1, 4] {
        let ledger = Ledger::new();
        let report = payments(Ordering::SkipLane)
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
async fn a_failed_first_copy_holds_back_its_duplicates_lane() {
    let body = |p: &str, amount: i64| {
        format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":{amount}}}"#)
    };
    let event = batch_of(vec![
        laned("a-0", Some("a"), &body("p-bad", -1)),
        laned("b-0", Some("b"), &body("p-bad", -1)),
        laned("b-1", Some("b"), &body("p-2", 1)),
        laned("c-0", Some("c"), &body("p-3", 1)),
    ]);
    let ledger = Ledger::new();
    let report = payments(Ordering::SkipLane)
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
    assert_eq!(failed(&report), ["a-0", "b-0", "b-1"]);
}

#[tokio::test]
async fn a_record_without_a_lane_holds_back_the_rest_of_the_batch() {
    let mut event = sample("payments-fifo.json");
    let all = ids(&event);
    event.records[2].as_mut().unwrap().lane = None;
    let ledger = Ledger::new();
    let report = payments(Ordering::SkipLane)
        .process(event, None, |r| ledger.charge(r))
        .await;
    assert_eq!(ledger.seen().len(), 2, "only the records before it ran");
    let o = outcomes(&report);
    assert!(o[0].is_ok() && o[1].is_ok());
    assert!(matches!(&o[2], Err(FailureReason::NoLane(m)) if m.contains("without a lane")));
    let reason = o[2].as_ref().unwrap_err().to_string();
    assert!(reason.contains("without a lane"), "{reason}");
    for later in &o[3..] {
        assert_eq!(
            *later,
            Err(FailureReason::Skipped {
                after: all[2].clone()
            })
        );
    }
    assert_eq!(failed(&report), all[2..].to_vec());
}

#[tokio::test]
async fn a_recorded_rejection_does_not_hold_back_its_lane() {
    let (engine, _, _) = engine_with(
        crate::Config::with_prefix("test.fifo")
            .on_terminal_error(crate::config::TerminalErrors::Record),
    );
    let body = |p: &str, amount: i64| {
        format!(r#"{{"payment_id":"{p}","account_id":"x","amount_cents":{amount}}}"#)
    };
    let event = batch_of(vec![
        laned("a-0", Some("a"), &body("p-0", -1)),
        laned("a-1", Some("a"), &body("p-1", 1)),
    ]);
    let ledger = Ledger::new();
    let report = TestProcessor::new(engine, KeySelector::pointer("/payment_id"))
        .ordering(Ordering::SkipLane)
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
async fn all_failing_ordered_batch() {
    for mode in [Ordering::SkipLane, Ordering::StopBatch] {
        let event = sample("payments-fifo.json");
        let all = ids(&event);
        let runs = AtomicUsize::new(0);
        let report = payments(mode)
            .process(event, None, |_r: TestRecord<Value>| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, SeqCst);
                    Err::<(), _>(HandlerError::retryable("down"))
                }
            })
            .await;
        let expected_runs = if mode == Ordering::SkipLane { 3 } else { 1 };
        assert_eq!(
            runs.load(SeqCst),
            expected_runs,
            "{mode:?}: first of each lane / of the batch"
        );
        assert_eq!(failed(&report), all, "{mode:?}");
    }
}

/// Records of keys `a`, `b` and none, interleaved in lane `L`, each
/// `r<n>` with the body `{"id": "e<n>"}`.
fn keyed_batch() -> Vec<TestMessage> {
    [
        (10, Some("a")),
        (11, Some("b")),
        (12, None),
        (13, Some("a")),
        (14, Some("b")),
        (15, None),
    ]
    .into_iter()
    .map(|(n, key)| keyed(&format!("r{n}"), "L", key, &format!(r#"{{"id":"e{n}"}}"#)))
    .collect()
}

/// A handler that logs the records it runs and fails those of `fail`
/// (retryable).
struct Sink {
    ran: Mutex<Vec<String>>,
    fail: Vec<&'static str>,
}

impl Sink {
    fn failing(fail: Vec<&'static str>) -> Self {
        Self {
            ran: Mutex::default(),
            fail,
        }
    }

    async fn handle(&self, r: TestRecord<Value>) -> Result<(), HandlerError> {
        let id = r.message.id.clone().unwrap_or_default();
        self.ran.lock().unwrap().push(id.clone());
        if self.fail.contains(&id.as_str()) {
            return Err(HandlerError::retryable("down"));
        }
        Ok(())
    }

    fn ran(&self) -> Vec<String> {
        self.ran.lock().unwrap().clone()
    }
}

/// The outcome of the record `id`.
fn outcome_of<'r, T>(
    report: &'r crate::batch::BatchReport<T>,
    id: &str,
) -> &'r Result<Outcome<T>, FailureReason> {
    &report
        .records
        .iter()
        .find(|r| r.message_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no record {id}"))
        .outcome
}

/// A lane cut by key ([`Ordering::StopLane`], each record's key): a failure
/// holds back only its key (the records without a key keep their own
/// order); the answer names the lane's first failed record, from which the
/// stream redelivers. Not cut, the whole lane stops.
#[tokio::test]
async fn with_lanes_cut_by_key_a_failure_holds_back_only_its_key() {
    let processor = || {
        TestProcessor::new(memory_engine().0, KeySelector::pointer("/id"))
            .ordering(Ordering::StopLane)
    };
    let sink = Sink::failing(vec!["r10"]);
    let report = processor()
        .by_key()
        .process(batch_of(keyed_batch()), None, |r| sink.handle(r))
        .await;
    for done in ["r11", "r12", "r14", "r15"] {
        assert!(
            matches!(outcome_of(&report, done), Ok(Outcome::Executed(_))),
            "{done}"
        );
    }
    assert_eq!(
        outcome_of(&report, "r13"),
        &Err(FailureReason::Skipped {
            after: "r10".to_owned()
        })
    );
    assert_eq!(failed(&report), ["r10"]);

    let sink = Sink::failing(vec!["r10"]);
    let report = processor()
        .process(batch_of(keyed_batch()), None, |r| sink.handle(r))
        .await;
    assert_eq!(sink.ran(), ["r10"], "the lane stopped");
    assert_eq!(report.failures().count(), 6);
    assert_eq!(failed(&report), ["r10"]);
}

/// In a lane cut by key, a record without an idempotency key (run
/// unprotected, so nothing answers its redelivery) waits behind every
/// earlier record of its lane and does not run behind a failure of any of
/// them, nor do the later records of its key; protected records of other
/// keys go on. With the kill switch (every record unprotected) nothing
/// after the failure runs.
#[tokio::test]
async fn a_record_without_an_idempotency_key_waits_behind_any_earlier_failure_of_its_lane() {
    let selector = KeySelector::custom(|input| match input.value["id"].as_str() {
        Some("e11") | None => Err(crate::KeyError::Missing("/id".to_owned())),
        Some(id) => Ok(serde_json::json!(id)),
    });
    let (engine, _, _) = memory_engine();
    let processor = TestProcessor::new(engine, selector)
        .ordering(Ordering::StopLane)
        .by_key()
        .missing_key(crate::MissingKey::RunUnprotected);
    let sink = Sink::failing(vec!["r10"]);
    let report = processor
        .process(batch_of(keyed_batch()), None, |r| sink.handle(r))
        .await;
    // r14, of key b, is behind r11 in its key.
    for (skipped, after) in [(11, 10), (13, 10), (14, 11)] {
        assert_eq!(
            outcome_of(&report, &format!("r{skipped}")),
            &Err(FailureReason::Skipped {
                after: format!("r{after}")
            }),
            "{skipped}"
        );
    }
    for done in ["r12", "r15"] {
        assert!(
            matches!(outcome_of(&report, done), Ok(Outcome::Executed(_))),
            "{done}"
        );
    }
    assert_eq!(sink.ran(), ["r10", "r12", "r15"]);

    let config = crate::Config::with_prefix("test.lanes").disabled(true);
    let engine = crate::Idempotency::new(crate::MemoryStore::new(), config);
    let sink = Sink::failing(vec!["r10"]);
    let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
        .ordering(Ordering::StopLane)
        .by_key()
        .process(batch_of(keyed_batch()), None, |r| sink.handle(r))
        .await;
    assert_eq!(sink.ran(), ["r10"]);
    assert_eq!(report.failures().count(), 6);
}

/// A record that does not parse and whose key cannot be read fails alone,
/// and its lane keeps one order after it: every later record of the lane,
/// whatever its key, is held back.
#[tokio::test]
async fn a_record_whose_key_is_unreadable_keeps_its_lane_in_one_order() {
    let mut records: Vec<Value> = keyed_batch().iter().map(raw).collect();
    // Not a test record (an unknown field), and no key.
    let poison = records[2].as_object_mut().unwrap();
    poison.remove("key");
    poison.insert("unexpected".into(), serde_json::json!(true));
    let event =
        <TestSource as crate::batch::Source>::parse(serde_json::json!({ "Records": records }))
            .unwrap();
    let sink = Sink::failing(vec![]);
    let report = TestProcessor::new(memory_engine().0, KeySelector::pointer("/id"))
        .ordering(Ordering::StopLane)
        .by_key()
        .process(event, None, |r| sink.handle(r))
        .await;
    assert!(
        matches!(outcome_of(&report, "r12"), Err(FailureReason::Parse(m)) if m.contains("not a test record")),
        "{:?}",
        outcome_of(&report, "r12")
    );
    assert_eq!(sink.ran(), ["r10", "r11"]);
    for later in ["r13", "r14", "r15"] {
        assert_eq!(
            outcome_of(&report, later),
            &Err(FailureReason::Skipped {
                after: "r12".to_owned()
            }),
            "{later}"
        );
    }
    assert_eq!(failed(&report), ["r12"]);
}
