//! The pipeline on the memory store: duplicates, replays, keys, outcomes,
//! concurrency, the deadline margin and leases.

use super::test_source::*;
use crate::Outcome;
use crate::batch::FailureReason;
use crate::error::{ErrorKind, HandlerError, KeyError};
use crate::record::{Record, Status};
use crate::testkit::{T0, engine_with, memory_engine};
use crate::{Config, config::TerminalErrors};
use crate::{KeySelector, MissingKey, PayloadScope};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct Order {
    pub(super) event_id: String,
    pub(super) order_id: String,
    pub(super) customer_id: String,
    pub(super) amount_cents: i64,
    pub(super) status: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct OrderPlaced {
    pub(super) order_id: String,
    pub(super) sku: String,
    pub(super) quantity: u32,
}

/// orders-standard.json: the first copy of evt-5c1e0a11 (the second is
/// record 2) and the poison record.
pub(super) const DUP_1: &str = "501cc020-d7c0-4637-92f7-93db59ef56fe";
pub(super) const POISON: &str = "314f2ff7-4946-4521-bf63-49e2da8159d2";

pub(super) fn orders(engine: crate::Idempotency) -> TestProcessor {
    TestProcessor::new(engine, KeySelector::pointer("/event_id"))
}

#[tokio::test]
async fn in_batch_duplicates_run_once_and_poison_fails_alone() {
    let (engine, store, _) = memory_engine();
    let seen = Mutex::new(Vec::new());
    let report = orders(engine)
        .process(
            sample("orders-standard.json"),
            None,
            |r: TestRecord<Order>| {
                let seen = &seen;
                async move {
                    seen.lock().unwrap().push(r.body.order_id.clone());
                    // Yield, so that a second copy run alongside would find
                    // the first one's claim in progress.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok::<_, HandlerError>(json!({"order": r.body.order_id}))
                }
            },
        )
        .await;
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(
        seen,
        ["ord-1001", "ord-1002", "ord-1003"],
        "ord-1001 ran once"
    );
    let outcomes: Vec<_> = report.records.iter().map(|r| r.outcome.clone()).collect();
    assert_eq!(
        outcomes[0],
        Ok(Outcome::Executed(json!({"order": "ord-1001"})))
    );
    assert_eq!(
        outcomes[2],
        Ok(Outcome::Replayed(Some(json!({"order": "ord-1001"})))),
        "the second copy gets the first copy's response"
    );
    assert_eq!(report.records[0].key_hash, report.records[2].key_hash);
    assert!(
        matches!(&outcomes[3], Err(FailureReason::Parse(m)) if m.contains(POISON) && m.contains("not JSON"))
    );
    assert_eq!(failed(&report), [POISON]);
    assert_eq!(store.len(), 3);
}

#[tokio::test]
async fn a_redelivered_batch_replays() {
    let (engine, _, _) = memory_engine();
    let processor = orders(engine);
    let runs = AtomicUsize::new(0);
    let handler = |r: TestRecord<Order>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, SeqCst);
            Ok::<_, HandlerError>(r.body.amount_cents)
        }
    };
    let first = processor
        .process(sample("orders-standard.json"), None, handler)
        .await;
    assert_eq!(runs.load(SeqCst), 3);
    let second = processor
        .process(sample("orders-standard.json"), None, handler)
        .await;
    assert_eq!(runs.load(SeqCst), 3, "no handler run on redelivery");
    for (a, b) in first.records.iter().zip(&second.records) {
        match (&a.outcome, &b.outcome) {
            (
                Ok(Outcome::Executed(x)) | Ok(Outcome::Replayed(Some(x))),
                Ok(Outcome::Replayed(Some(y))),
            ) => {
                assert_eq!(x, y)
            }
            (Err(_), Err(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(failed(&second), [POISON]);
}

#[tokio::test]
async fn missing_keys_fail_or_run_unprotected() {
    // Record 1 has no event_id; record 2's event_id is a number.
    let event = || sample("orders-missing-key.json");
    let ids = ids(&event());
    let (engine, _, _) = memory_engine();
    let report = orders(engine.clone())
        .process(event(), None, |r: TestRecord<Value>| async move {
            Ok::<_, HandlerError>(r.body["order_id"].clone())
        })
        .await;
    assert_eq!(
        report.records[0].outcome,
        Ok(Outcome::Executed(json!("ord-1101")))
    );
    assert_eq!(
        report.records[1].outcome,
        Err(FailureReason::Key(KeyError::Missing("/event_id".into())))
    );
    // A number is a key; a handler type that wants a string rejects it.
    assert_eq!(
        report.records[2].outcome,
        Ok(Outcome::Executed(json!("ord-1103")))
    );
    assert_eq!(failed(&report), [ids[1].clone()]);

    let typed = orders(engine.clone())
        .process(event(), None, |r: TestRecord<Order>| async move {
            Ok::<_, HandlerError>(r.body.order_id)
        })
        .await;
    assert!(
        matches!(&typed.records[2].outcome, Err(FailureReason::Parse(m)) if m.contains("invalid type: integer `1103`"))
    );

    let (engine, store, _) = memory_engine();
    let runs = AtomicUsize::new(0);
    let unprotected = orders(engine)
        .missing_key(MissingKey::RunUnprotected)
        .process(event(), None, |r: TestRecord<Value>| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, SeqCst);
                assert!(r.key.is_none() == (r.body.get("event_id").is_none()));
                Ok::<_, HandlerError>(())
            }
        })
        .await;
    assert_eq!(runs.load(SeqCst), 3);
    assert_eq!(unprotected.records[1].outcome, Ok(Outcome::Unprotected(())));
    assert!(unprotected.records[1].key_hash.is_none());
    assert!(unprotected.is_success());
    assert_eq!(store.len(), 2, "the unprotected record left no record");
}

#[tokio::test]
async fn in_progress_elsewhere_fails_the_record_until_the_lease_lapses() {
    let (engine, store, clock) = memory_engine();
    // Another invocation holds evt-5c1e0a12 (ord-1002).
    let key = engine.key(&json!("evt-5c1e0a12")).unwrap();
    let held = Record {
        id: key.as_str().to_owned(),
        status: Status::InProgress,
        expiration: T0 / 1000 + 3600,
        in_progress_expiration: Some(T0 + 30_000),
        data: None,
        error: None,
        validation: None,
        owner: Some("other-invocation".into()),
        outbox: None,
    };
    assert_eq!(
        engine.store().claim(&held, T0).await.unwrap(),
        crate::store::Claim::Acquired
    );
    let processor = orders(engine);
    let handler = |r: TestRecord<Order>| async move { Ok::<_, HandlerError>(r.body.order_id) };
    let report = processor
        .process(sample("orders-standard.json"), None, handler)
        .await;
    let blocked = "8fddbce1-6d84-41a7-a2df-34e4678e1fbb";
    assert_eq!(
        report.records[1].outcome,
        Err(FailureReason::InProgress {
            lease_expires_at_ms: Some(T0 + 30_000)
        })
    );
    assert_eq!(failed(&report), [blocked, POISON]);
    // The holder died; after its lease the redelivery runs.
    clock.advance(Duration::from_secs(31));
    let report = processor
        .process(sample("orders-standard.json"), None, handler)
        .await;
    assert_eq!(
        report.records[1].outcome,
        Ok(Outcome::Executed("ord-1002".to_owned()))
    );
    assert_eq!(failed(&report), [POISON]);
    assert_eq!(store.len(), 3);
}

#[tokio::test]
async fn retryable_errors_run_again_on_redelivery() {
    let (engine, _, _) = memory_engine();
    let processor = orders(engine);
    let runs = AtomicUsize::new(0);
    let handler = |r: TestRecord<Order>| {
        let runs = &runs;
        async move {
            if runs.fetch_add(1, SeqCst) == 0 {
                return Err(HandlerError::retryable("flaky"));
            }
            Ok(r.body.order_id)
        }
    };
    let one = batch_of(vec![messages(&sample("orders-standard.json"))[1].clone()]);
    let first = processor.process(one.clone(), None, handler).await;
    assert!(
        matches!(&first.records[0].outcome, Err(FailureReason::Handler { message, kind: ErrorKind::Retryable }) if message == "flaky")
    );
    let second = processor.process(one, None, handler).await;
    assert_eq!(
        second.records[0].outcome,
        Ok(Outcome::Executed("ord-1002".into()))
    );
    assert_eq!(runs.load(SeqCst), 2);
}

#[tokio::test]
async fn terminal_errors_recorded_are_done() {
    let (engine, _, _) =
        engine_with(Config::with_prefix("test.batch").on_terminal_error(TerminalErrors::Record));
    let processor = orders(engine);
    let runs = AtomicUsize::new(0);
    let handler = |r: TestRecord<Order>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, SeqCst);
            if r.body.amount_cents > 10_000 {
                return Err(HandlerError::terminal("amount over the limit"));
            }
            Ok(())
        }
    };
    for replayed in [false, true] {
        let report = processor
            .process(sample("orders-standard.json"), None, handler)
            .await;
        assert_eq!(
            report.records[1].outcome,
            Ok(Outcome::Rejected {
                error: "amount over the limit".into(),
                replayed
            })
        );
        assert_eq!(failed(&report), [POISON]);
    }
    assert_eq!(runs.load(SeqCst), 3);
}

#[tokio::test]
async fn in_batch_copy_with_another_payload_is_a_mismatch() {
    let (engine, _, _) = memory_engine();
    let event = batch_of(vec![
        rec(Some("a"), r#"{"id":"k","amount":1}"#),
        rec(Some("b"), r#"{"amount":1,"id":"k"}"#),
        rec(Some("c"), r#"{"id":"k","amount":2}"#),
    ]);
    let report = TestProcessor::new(engine.clone(), KeySelector::pointer("/id"))
        .process(event.clone(), None, |_r: TestRecord<Value>| async {
            Ok::<_, HandlerError>(1)
        })
        .await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(1)));
    assert_eq!(
        report.records[1].outcome,
        Ok(Outcome::Replayed(Some(1))),
        "same payload, reordered"
    );
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::PayloadMismatch)
    );
    // Without payload validation the third copy is a plain duplicate.
    let (engine, _, _) = memory_engine();
    let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
        .payload(PayloadScope::None)
        .process(event, None, |_r: TestRecord<Value>| async {
            Ok::<_, HandlerError>(1)
        })
        .await;
    assert!(report.is_success());
}

#[tokio::test]
async fn concurrency_is_bounded() {
    // Unset, the bound is the README's default, 32 (by its value, not the
    // constant), whatever the batch size.
    let default = 32;
    for (limit, size, expect_max) in [
        (Some(3), 10, 3),
        (Some(1), 10, 1),
        (None, 3 * default, default),
    ] {
        let (engine, _, _) = memory_engine();
        let records = (0..size)
            .map(|i| rec(Some(&format!("m-{i}")), &format!(r#"{{"id":"k-{i}"}}"#)))
            .collect();
        let mut processor = TestProcessor::new(engine, KeySelector::pointer("/id"));
        if let Some(n) = limit {
            processor = processor.concurrency(n);
        }
        let in_flight = AtomicUsize::new(0);
        let max = AtomicUsize::new(0);
        let report = processor
            .process(batch_of(records), None, |_r: TestRecord<Value>| {
                let (in_flight, max) = (&in_flight, &max);
                async move {
                    let now = in_flight.fetch_add(1, SeqCst) + 1;
                    max.fetch_max(now, SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    in_flight.fetch_sub(1, SeqCst);
                    Ok::<_, HandlerError>(())
                }
            })
            .await;
        assert!(report.is_success());
        let max = max.load(SeqCst);
        assert!(max <= expect_max, "{limit:?}: {max}");
        if expect_max > 1 {
            assert!(max > 1, "{limit:?}: records ran one at a time");
        }
        assert_eq!(max, expect_max, "{limit:?}");
    }
}

#[tokio::test]
async fn attribute_and_message_id_keys() {
    let (engine, _, _) = memory_engine();
    let mut a = rec(Some("m-1"), "{}");
    let mut b = rec(Some("m-2"), "{}");
    for m in [&mut a, &mut b] {
        m.attributes.insert("request_id".into(), "req-42".into());
    }
    let c = rec(Some("m-3"), "{}");
    let runs = AtomicUsize::new(0);
    let handler = |_r: TestRecord<Value>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, SeqCst);
            Ok::<_, HandlerError>(())
        }
    };
    let report = TestProcessor::new(engine.clone(), KeySelector::attribute("request_id"))
        .process(
            batch_of(vec![a.clone(), b.clone(), c.clone()]),
            None,
            handler,
        )
        .await;
    assert_eq!(runs.load(SeqCst), 1);
    assert_eq!(report.records[1].outcome, Ok(Outcome::Replayed(Some(()))));
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::Key(KeyError::Missing(
            "message attribute request_id".into()
        )))
    );
    let report = TestProcessor::new(engine, KeySelector::Id)
        .process(batch_of(vec![a, b, c]), None, handler)
        .await;
    assert_eq!(runs.load(SeqCst), 4, "each messageId is its own key");
    assert!(report.is_success());
    let dedup = TestProcessor::new(memory_engine().0, KeySelector::DeduplicationId)
        .process(sample("orders-missing-key.json"), None, handler)
        .await;
    assert!(
        matches!(&dedup.records[0].outcome, Err(FailureReason::Key(KeyError::Missing(m))) if m.contains("deduplication_id"))
    );
}

#[tokio::test]
async fn kill_switch_runs_every_record() {
    let store = crate::MemoryStore::new();
    let disabled = crate::Idempotency::new(
        store.clone(),
        Config::with_prefix("test.batch").disabled(true),
    );
    let runs = AtomicUsize::new(0);
    let report = orders(disabled)
        .process(
            sample("orders-standard.json"),
            None,
            |_r: TestRecord<Order>| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, SeqCst);
                    Ok::<_, HandlerError>(())
                }
            },
        )
        .await;
    assert_eq!(runs.load(SeqCst), 4, "the in-batch duplicate runs too");
    assert_eq!(report.records[2].outcome, Ok(Outcome::Unprotected(())));
    assert!(store.is_empty());
}

/// Records are admitted a window at a time (the concurrency): copies of
/// records admitted long before, and copies past a full window of first
/// copies, still take their first copy's outcome (no copy waits for a first
/// copy that is never admitted).
#[tokio::test]
async fn in_batch_copies_past_the_admission_window_take_the_first_outcome() {
    let (engine, _, _) = memory_engine();
    // k-0..k-4, then three rounds of copies of them, interleaved with new keys.
    let mut records = Vec::new();
    for round in 0..4 {
        for i in 0..5 {
            records.push(rec(
                Some(&format!("m-{round}-{i}")),
                &format!(r#"{{"id":"k-{i}"}}"#),
            ));
            records.push(rec(
                Some(&format!("n-{round}-{i}")),
                &format!(r#"{{"id":"new-{round}-{i}"}}"#),
            ));
        }
    }
    let runs = AtomicUsize::new(0);
    let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
        .concurrency(2)
        .process(batch_of(records), None, |_r: TestRecord<Value>| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, HandlerError>(())
            }
        })
        .await;
    assert!(report.is_success(), "{:?}", report.records);
    assert_eq!(runs.load(SeqCst), 5 + 20, "each key once");
    let replayed = report
        .records
        .iter()
        .filter(|r| matches!(r.outcome, Ok(Outcome::Replayed(_))))
        .count();
    assert_eq!(replayed, 15);
}

/// Near the deadline, the records whose turn has not come fail without
/// starting (OutOfTime, retryable): the records in flight finish, none is
/// started with less than the margin left, and the batch answers before the
/// invocation's time is up.
#[tokio::test]
async fn records_past_the_deadline_margin_fail_without_starting() {
    let (engine, store, _) = memory_engine();
    let records = (0..20)
        .map(|i| rec(Some(&format!("m-{i}")), &format!(r#"{{"id":"k-{i}"}}"#)))
        .collect();
    let remaining = Duration::from_millis(600);
    let margin = Duration::from_millis(300);
    let processor = TestProcessor::new(engine.clone(), KeySelector::pointer("/id"))
        .concurrency(2)
        .deadline_margin(margin);
    let started = std::time::Instant::now();
    let ran = Mutex::new(Vec::new());
    let report = processor
        .process(
            batch_of(records),
            Some(remaining),
            |r: TestRecord<Value>| {
                let ran = &ran;
                async move {
                    // `started` is a little before the pipeline's start.
                    let left = remaining.saturating_sub(started.elapsed());
                    assert!(
                        left + Duration::from_millis(20) >= margin,
                        "started with {left:?} left"
                    );
                    ran.lock()
                        .unwrap()
                        .push(r.body["id"].as_str().unwrap().to_owned());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, HandlerError>(())
                }
            },
        )
        .await;
    assert!(
        started.elapsed() < remaining,
        "answered after {:?}",
        started.elapsed()
    );
    let ran = ran.into_inner().unwrap();
    let done = report.records.iter().filter(|r| !r.is_failure()).count();
    assert_eq!(done, ran.len(), "exactly the records that ran are done");
    assert!((2..20).contains(&done), "{done} of 20 ran");
    for r in report.records.iter().filter(|r| r.is_failure()) {
        let Err(FailureReason::OutOfTime {
            remaining_ms,
            margin_ms,
        }) = &r.outcome
        else {
            panic!("{:?}", r.outcome);
        };
        assert!(*remaining_ms < 300 && *margin_ms == 300, "{:?}", r.outcome);
        assert!(
            r.outcome
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("not started")
        );
        // Never started: no claim was written for its key.
        let key = engine.key(&json!(format!("k-{}", r.position))).unwrap();
        assert!(
            crate::Store::get(&store, key.as_str())
                .await
                .unwrap()
                .is_none()
        );
    }
    assert_eq!(failed(&report).len(), 20 - done);
}

/// A function whose whole invocation is shorter than the default margin
/// (a 1 s timeout) still runs its records: unset, the margin is at most a
/// tenth of the batch's time.
#[tokio::test]
async fn a_short_invocation_still_runs_its_records() {
    let (engine, _, _) = memory_engine();
    let one = batch_of(vec![rec(Some("m-1"), r#"{"id":"k"}"#)]);
    let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
        .process(
            one,
            Some(Duration::from_millis(400)),
            |_r: TestRecord<Value>| async { Ok::<_, HandlerError>(()) },
        )
        .await;
    assert!(report.is_success(), "{:?}", report.records[0].outcome);
}

#[tokio::test]
async fn leases_are_capped_by_the_remaining_time() {
    let (engine, store, _) = memory_engine();
    let one = batch_of(vec![rec(Some("m-1"), r#"{"id":"k"}"#)]);
    let processor = TestProcessor::new(engine.clone(), KeySelector::pointer("/id"));
    let key = engine.key(&json!("k")).unwrap();
    let report = processor
        .process(
            one,
            Some(Duration::from_secs(5)),
            |_r: TestRecord<Value>| {
                let store = store.clone();
                let key = key.clone();
                async move {
                    let held = crate::Store::get(&store, key.as_str())
                        .await
                        .unwrap()
                        .unwrap();
                    let lease = held.in_progress_expiration.unwrap() - T0;
                    assert!(lease <= 5_000 && lease > 4_000, "{lease}");
                    Ok::<_, HandlerError>(())
                }
            },
        )
        .await;
    assert!(report.is_success());
}

/// Numeric keys past what `f64` holds keep their exact text: two messages
/// whose ids differ only in the last digit are two keys (both run), and
/// the same body redelivered is still one.
#[tokio::test]
async fn numeric_keys_keep_their_exact_text() {
    let (engine, store, _) = memory_engine();
    let processor = TestProcessor::new(engine, KeySelector::pointer("/id"));
    let event = batch_of(vec![
        rec(Some("m-1"), r#"{"id":18446744073709551616,"x":1}"#),
        rec(Some("m-2"), r#"{"id":18446744073709551617,"x":1}"#),
        rec(Some("m-3"), r#"{"id":18446744073709551616,"x":1}"#),
    ]);
    let runs = AtomicUsize::new(0);
    let report = processor
        .process(event, None, |_r: TestRecord<Value>| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, SeqCst);
                Ok::<_, HandlerError>(json!("done"))
            }
        })
        .await;
    assert_eq!(runs.load(SeqCst), 2, "two distinct ids");
    assert_eq!(store.len(), 2);
    assert!(matches!(
        report.records[1].outcome,
        Ok(Outcome::Executed(_))
    ));
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Replayed(_))
    ));
}
