use crate::Outcome;
use crate::batch::{BatchProcessor, EnvelopeMode, FailureReason, SqsRecord};
use crate::error::{ErrorKind, HandlerError, KeyError};
use crate::record::{Record, Status};
use crate::testkit::*;
use crate::{Config, TerminalErrors};
use crate::{KeyInput, KeySelector, MissingKey, PayloadScope};
use aws_lambda_events::sqs::SqsMessageAttribute;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Order {
    event_id: String,
    order_id: String,
    customer_id: String,
    amount_cents: i64,
    status: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct OrderPlaced {
    order_id: String,
    sku: String,
    quantity: u32,
}

/// orders-standard.json: the first copy of evt-5c1e0a11 (the second is
/// record 2) and the poison record.
const DUP_1: &str = "501cc020-d7c0-4637-92f7-93db59ef56fe";
const POISON: &str = "314f2ff7-4946-4521-bf63-49e2da8159d2";

fn orders(engine: crate::Idempotency) -> BatchProcessor {
    BatchProcessor::new(engine, KeySelector::pointer("/event_id"))
}

#[tokio::test]
async fn in_batch_duplicates_run_once_and_poison_fails_alone() {
    let (engine, store, _) = memory_engine();
    let seen = Mutex::new(Vec::new());
    let report = orders(engine)
        .process(
            sqs_event("orders-standard.json"),
            None,
            |r: SqsRecord<Order>| {
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
    assert_eq!(failed_ids(&report.into_response().unwrap()), [POISON]);
    assert_eq!(store.len(), 3);
}

#[tokio::test]
async fn a_redelivered_batch_replays() {
    let (engine, _, _) = memory_engine();
    let processor = orders(engine);
    let runs = AtomicUsize::new(0);
    let handler = |r: SqsRecord<Order>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, SeqCst);
            Ok::<_, HandlerError>(r.body.amount_cents)
        }
    };
    let first = processor
        .process(sqs_event("orders-standard.json"), None, handler)
        .await;
    assert_eq!(runs.load(SeqCst), 3);
    let second = processor
        .process(sqs_event("orders-standard.json"), None, handler)
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
    assert_eq!(report_failed(&second), [POISON]);
}

#[tokio::test]
async fn poison_bodies_fail_only_their_record() {
    let good = r#"{"event_id":"e-1","order_id":"o-1","customer_id":"c","amount_cents":1,"status":"PLACED"}"#;
    let cases: [(Option<&str>, &str); 6] = [
        (Some("not json {"), "is not JSON"),
        (Some(r#"{"event_id": "e-2", "order_id": "#), "is not JSON"),
        (
            Some(r#"{"event_id":"e-3","order_id":7}"#),
            "does not parse as",
        ),
        (Some(r#"["e-4"]"#), "does not parse as"),
        (Some(""), "is not JSON"),
        (None, "has no body"),
    ];
    for (body, expected) in cases {
        let (engine, _, _) = memory_engine();
        let mut poison = message(Some("poison"), "");
        poison.body = body.map(str::to_owned);
        let event = batch(vec![message(Some("good"), good), poison]);
        let runs = AtomicUsize::new(0);
        let report = orders(engine)
            .process(event, None, |_r: SqsRecord<Order>| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, SeqCst);
                    Ok::<_, HandlerError>(())
                }
            })
            .await;
        assert_eq!(runs.load(SeqCst), 1, "{body:?}");
        assert_eq!(
            report.records[0].outcome,
            Ok(Outcome::Executed(())),
            "{body:?}"
        );
        match &report.records[1].outcome {
            Err(FailureReason::Parse(m)) => {
                assert!(
                    m.contains(expected) && m.contains("poison"),
                    "{body:?}: {m}"
                );
                if expected == "does not parse as" {
                    assert!(m.contains("Order"), "{m}");
                }
            }
            other => panic!("{body:?}: {other:?}"),
        }
        assert_eq!(failed_ids(&report.into_response().unwrap()), ["poison"]);
    }
}

#[tokio::test]
async fn missing_keys_fail_or_run_unprotected() {
    // Record 1 has no event_id; record 2's event_id is a number.
    let event = || sqs_event("orders-missing-key.json");
    let ids = ids(&event());
    let (engine, _, _) = memory_engine();
    let report = orders(engine.clone())
        .process(event(), None, |r: SqsRecord<Value>| async move {
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
    assert_eq!(
        failed_ids(&report.into_response().unwrap()),
        [ids[1].clone()]
    );

    let typed = orders(engine.clone())
        .process(event(), None, |r: SqsRecord<Order>| async move {
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
        .process(event(), None, |r: SqsRecord<Value>| {
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
async fn wrong_key_types_always_fail() {
    let (engine, _, _) = memory_engine();
    let event = batch(vec![
        message(Some("obj"), r#"{"id":{"a":1}}"#),
        message(Some("null"), r#"{"id":null}"#),
        message(Some("empty"), r#"{"id":""}"#),
        message(Some("ok"), r#"{"id":"k"}"#),
    ]);
    let report = BatchProcessor::new(engine, KeySelector::pointer("/id"))
        .missing_key(MissingKey::RunUnprotected)
        .process(event, None, |_r: SqsRecord<Value>| async {
            Ok::<_, HandlerError>(())
        })
        .await;
    let outcomes: Vec<_> = report.records.iter().map(|r| r.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Err(FailureReason::Key(KeyError::WrongType {
                at: "/id".into(),
                found: "an object"
            })),
            Ok(Outcome::Unprotected(())),
            Ok(Outcome::Unprotected(())),
            Ok(Outcome::Executed(())),
        ]
    );
}

#[tokio::test]
async fn a_panicking_handler_fails_only_its_record() {
    for missing_key in [MissingKey::Fail, MissingKey::RunUnprotected] {
        let (engine, _, _) = memory_engine();
        let event = batch(vec![
            message(Some("a"), r#"{"id":"a"}"#),
            message(Some("boom"), r#"{"id":"boom"}"#),
            message(Some("nokey"), r#"{"boom":true}"#),
            message(Some("c"), r#"{"id":"c"}"#),
        ]);
        let report = BatchProcessor::new(engine, KeySelector::pointer("/id"))
            .missing_key(missing_key)
            .process(event, None, |r: SqsRecord<Value>| async move {
                if r.body.get("boom").is_some() || r.body["id"] == "boom" {
                    panic!("kaboom {}", r.message_id());
                }
                Ok::<_, HandlerError>(())
            })
            .await;
        assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(())));
        assert_eq!(report.records[3].outcome, Ok(Outcome::Executed(())));
        match &report.records[1].outcome {
            Err(FailureReason::Handler { message, kind }) => {
                assert!(message.contains("panicked: kaboom boom"), "{message}");
                assert_eq!(*kind, ErrorKind::Retryable);
            }
            other => panic!("{other:?}"),
        }
        // Without a key: a key failure, or an unprotected run that panics.
        match (missing_key, &report.records[2].outcome) {
            (MissingKey::Fail, Err(FailureReason::Key(_))) => {}
            (MissingKey::RunUnprotected, Err(FailureReason::Handler { message, .. })) => {
                assert!(message.contains("kaboom nokey"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            failed_ids(&report.into_response().unwrap()),
            ["boom", "nokey"]
        );
    }
}

#[tokio::test]
async fn a_panicking_key_selector_fails_only_its_record() {
    let (engine, _, _) = memory_engine();
    let selector = KeySelector::custom(|input: KeyInput<'_>| {
        let body = input.value;
        if input.message.and_then(|m| m.message_id.as_deref()) == Some("boom") {
            panic!("selector exploded");
        }
        Ok(json!({"account": body["account"], "n": body["n"]}))
    });
    let event = batch(vec![
        message(Some("a"), r#"{"account":"x","n":1}"#),
        message(Some("boom"), r#"{"account":"x","n":2}"#),
        message(Some("b"), r#"{"account":"x","n":3}"#),
        message(Some("a-again"), r#"{"n":1,"account":"x"}"#),
    ]);
    let runs = AtomicUsize::new(0);
    let report = BatchProcessor::new(engine, selector)
        .process(event, None, |_r: SqsRecord<Value>| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, SeqCst);
                Ok::<_, HandlerError>(())
            }
        })
        .await;
    assert_eq!(runs.load(SeqCst), 2, "a composite key dedupes a-again");
    assert!(
        matches!(&report.records[1].outcome, Err(FailureReason::Panic(m)) if m.contains("key selector panicked") && m.contains("selector exploded"))
    );
    assert_eq!(report.records[3].outcome, Ok(Outcome::Replayed(Some(()))));
    assert_eq!(failed_ids(&report.into_response().unwrap()), ["boom"]);
}

#[tokio::test]
async fn a_panicking_body_deserializer_fails_only_its_record() {
    #[derive(Debug)]
    struct Fragile;
    impl<'de> Deserialize<'de> for Fragile {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let v = Value::deserialize(d)?;
            if v["explode"] == true {
                panic!("deserializer exploded");
            }
            Ok(Fragile)
        }
    }
    let (engine, _, _) = memory_engine();
    let event = batch(vec![
        message(Some("a"), r#"{"id":"a"}"#),
        message(Some("boom"), r#"{"id":"b","explode":true}"#),
    ]);
    let report = BatchProcessor::new(engine, KeySelector::pointer("/id"))
        .process(event, None, |_r: SqsRecord<Fragile>| async {
            Ok::<_, HandlerError>(())
        })
        .await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(())));
    assert!(
        matches!(&report.records[1].outcome, Err(FailureReason::Panic(m)) if m.contains("deserializer exploded"))
    );
}

#[tokio::test]
async fn a_panicking_response_serializer_still_completes_its_record() {
    // The response's Serialize runs inside the engine and for in-batch
    // copies: the effect happened, so the record completes (without a
    // stored response) and the copy replays no body.
    #[derive(Debug, Clone, PartialEq, Deserialize)]
    struct Touchy(String);
    impl Serialize for Touchy {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            if self.0 == "boom" {
                panic!("serializer exploded");
            }
            s.serialize_str(&self.0)
        }
    }
    let (engine, store, _) = memory_engine();
    let event = batch(vec![
        message(Some("a"), r#"{"id":"a"}"#),
        message(Some("boom"), r#"{"id":"boom"}"#),
        message(Some("boom-copy"), r#"{"id":"boom"}"#),
        message(Some("c"), r#"{"id":"c"}"#),
    ]);
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let report = BatchProcessor::new(engine.clone(), KeySelector::pointer("/id"))
        .process(event, None, |r: SqsRecord<Value>| {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { Ok::<_, HandlerError>(Touchy(r.body["id"].as_str().unwrap().to_owned())) }
        })
        .await;
    let outcomes: Vec<_> = report.records.iter().map(|r| r.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            Ok(Outcome::Executed(Touchy("a".into()))),
            Ok(Outcome::Executed(Touchy("boom".into()))),
            Ok(Outcome::Replayed(None)),
            Ok(Outcome::Executed(Touchy("c".into()))),
        ]
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 3);
    let key = engine.key(&json!("boom")).unwrap();
    let rec = crate::Store::get(&store, key.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((rec.status, rec.data), (Status::Completed, None));
    assert!(failed_ids(&report.into_response().unwrap()).is_empty());
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
        crate::Claim::Acquired
    );
    let processor = orders(engine);
    let handler = |r: SqsRecord<Order>| async move { Ok::<_, HandlerError>(r.body.order_id) };
    let report = processor
        .process(sqs_event("orders-standard.json"), None, handler)
        .await;
    let blocked = "8fddbce1-6d84-41a7-a2df-34e4678e1fbb";
    assert_eq!(
        report.records[1].outcome,
        Err(FailureReason::InProgress {
            lease_expires_at_ms: Some(T0 + 30_000)
        })
    );
    assert_eq!(
        failed_ids(&report.into_response().unwrap()),
        [blocked, POISON]
    );
    // The holder died; after its lease the redelivery runs.
    clock.advance(Duration::from_secs(31));
    let report = processor
        .process(sqs_event("orders-standard.json"), None, handler)
        .await;
    assert_eq!(
        report.records[1].outcome,
        Ok(Outcome::Executed("ord-1002".to_owned()))
    );
    assert_eq!(failed_ids(&report.into_response().unwrap()), [POISON]);
    assert_eq!(store.len(), 3);
}

#[tokio::test]
async fn all_records_failing() {
    let (engine, store, _) = memory_engine();
    let event = sqs_event("orders-standard.json");
    let all = ids(&event);
    let report = orders(engine)
        .process(event, None, |_r: SqsRecord<Order>| async {
            Err::<(), _>(HandlerError::retryable("downstream unavailable"))
        })
        .await;
    assert!(report.failures().count() == 5);
    let second_copy = &report.records[2].outcome;
    assert!(
        matches!(second_copy, Err(FailureReason::DuplicateOf { first, .. }) if first == DUP_1),
        "{second_copy:?}"
    );
    assert_eq!(failed_ids(&report.into_response().unwrap()), all);
    assert!(store.is_empty(), "retryable failures release their claims");
}

#[tokio::test]
async fn retryable_errors_run_again_on_redelivery() {
    let (engine, _, _) = memory_engine();
    let processor = orders(engine);
    let runs = AtomicUsize::new(0);
    let handler = |r: SqsRecord<Order>| {
        let runs = &runs;
        async move {
            if runs.fetch_add(1, SeqCst) == 0 {
                return Err(HandlerError::retryable("flaky"));
            }
            Ok(r.body.order_id)
        }
    };
    let one = batch(vec![sqs_event("orders-standard.json").records[1].clone()]);
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
    let handler = |r: SqsRecord<Order>| {
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
            .process(sqs_event("orders-standard.json"), None, handler)
            .await;
        assert_eq!(
            report.records[1].outcome,
            Ok(Outcome::Rejected {
                error: "amount over the limit".into(),
                replayed
            })
        );
        assert_eq!(failed_ids(&report.into_response().unwrap()), [POISON]);
    }
    assert_eq!(runs.load(SeqCst), 3);
}

#[tokio::test]
async fn in_batch_copy_with_another_payload_is_a_mismatch() {
    let (engine, _, _) = memory_engine();
    let event = batch(vec![
        message(Some("a"), r#"{"id":"k","amount":1}"#),
        message(Some("b"), r#"{"amount":1,"id":"k"}"#),
        message(Some("c"), r#"{"id":"k","amount":2}"#),
    ]);
    let report = BatchProcessor::new(engine.clone(), KeySelector::pointer("/id"))
        .process(event.clone(), None, |_r: SqsRecord<Value>| async {
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
    let report = BatchProcessor::new(engine, KeySelector::pointer("/id"))
        .payload(PayloadScope::None)
        .process(event, None, |_r: SqsRecord<Value>| async {
            Ok::<_, HandlerError>(1)
        })
        .await;
    assert!(report.is_success());
}

#[tokio::test]
async fn concurrency_is_bounded() {
    for (limit, expect_max) in [(Some(3), 3), (Some(1), 1), (None, 10)] {
        let (engine, _, _) = memory_engine();
        let records = (0..10)
            .map(|i| message(Some(&format!("m-{i}")), &format!(r#"{{"id":"k-{i}"}}"#)))
            .collect();
        let mut processor = BatchProcessor::new(engine, KeySelector::pointer("/id"));
        if let Some(n) = limit {
            processor = processor.concurrency(n);
        }
        let in_flight = AtomicUsize::new(0);
        let max = AtomicUsize::new(0);
        let report = processor
            .process(batch(records), None, |_r: SqsRecord<Value>| {
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
async fn eventbridge_envelopes_in_the_body() {
    let file = || sqs_event("orders-eventbridge-via-sqs.json");
    // The event id as key; the detail as the handler's body.
    let (engine, _, _) = memory_engine();
    let processor = BatchProcessor::new(engine, KeySelector::event_id());
    let seen = Mutex::new(Vec::new());
    let handler = |r: SqsRecord<OrderPlaced>| {
        let seen = &seen;
        async move {
            let envelope = r.envelope.as_ref().expect("an envelope");
            assert_eq!(envelope.detail_type, "OrderPlaced");
            seen.lock()
                .unwrap()
                .push((envelope.id.clone().unwrap(), r.body.clone()));
            Ok::<_, HandlerError>(r.body.quantity)
        }
    };
    let report = processor.process(file(), None, handler).await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(1)));
    assert_eq!(report.records[1].outcome, Ok(Outcome::Executed(3)));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.contains(&(
        "a697c4db-1ab8-4770-838c-238a352f4433".into(),
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

    // A business key inside the envelope.
    let (engine, _, _) = memory_engine();
    let by_order = BatchProcessor::new(engine, KeySelector::pointer("/detail/order_id"));
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

    // Not envelopes: the whole body is M.
    let (engine, _, _) = memory_engine();
    let raw = BatchProcessor::new(engine, KeySelector::pointer("/detail/order_id"))
        .envelope(EnvelopeMode::Never)
        .process(file(), None, |r: SqsRecord<Value>| async move {
            assert!(r.envelope.is_none());
            Ok::<_, HandlerError>(r.body["source"].clone())
        })
        .await;
    assert_eq!(
        raw.records[0].outcome,
        Ok(Outcome::Executed(json!("shop.orders")))
    );

    // Envelopes required: a plain body fails.
    let (engine, _, _) = memory_engine();
    let required = BatchProcessor::new(engine, KeySelector::pointer("/event_id"))
        .envelope(EnvelopeMode::Required)
        .process(
            sqs_event("orders-missing-key.json"),
            None,
            |_r: SqsRecord<Value>| async { Ok::<_, HandlerError>(()) },
        )
        .await;
    assert!(
        matches!(&required.records[0].outcome, Err(FailureReason::Parse(m)) if m.contains("not an EventBridge envelope"))
    );
}

#[tokio::test]
async fn attribute_and_message_id_keys() {
    let (engine, _, _) = memory_engine();
    let mut a = message(Some("m-1"), "{}");
    let mut b = message(Some("m-2"), "{}");
    for m in [&mut a, &mut b] {
        let mut attr = SqsMessageAttribute::default();
        attr.string_value = Some("req-42".into());
        attr.data_type = Some("String".into());
        m.message_attributes.insert("request_id".into(), attr);
    }
    let c = message(Some("m-3"), "{}");
    let runs = AtomicUsize::new(0);
    let handler = |_r: SqsRecord<Value>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, SeqCst);
            Ok::<_, HandlerError>(())
        }
    };
    let report = BatchProcessor::new(engine.clone(), KeySelector::attribute("request_id"))
        .process(batch(vec![a.clone(), b.clone(), c.clone()]), None, handler)
        .await;
    assert_eq!(runs.load(SeqCst), 1);
    assert_eq!(report.records[1].outcome, Ok(Outcome::Replayed(Some(()))));
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::Key(KeyError::Missing(
            "message attribute request_id".into()
        )))
    );
    let report = BatchProcessor::new(engine, KeySelector::Id)
        .process(batch(vec![a, b, c]), None, handler)
        .await;
    assert_eq!(runs.load(SeqCst), 4, "each messageId is its own key");
    assert!(report.is_success());
    let dedup = BatchProcessor::new(memory_engine().0, KeySelector::DeduplicationId)
        .process(sqs_event("orders-missing-key.json"), None, handler)
        .await;
    assert!(
        matches!(&dedup.records[0].outcome, Err(FailureReason::Key(KeyError::Missing(m))) if m.contains("MessageDeduplicationId"))
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
            sqs_event("orders-standard.json"),
            None,
            |_r: SqsRecord<Order>| {
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

#[tokio::test]
async fn bodies_over_the_limit_fail_without_parsing() {
    let limit = super::super::DEFAULT_MAX_BODY_BYTES;
    assert_eq!(limit, 256 * 1024);
    // A JSON body of exactly `len` bytes.
    let sized = |id: &str, len: usize| {
        let head = format!(r#"{{"id":"{id}","pad":""#);
        let pad = "x".repeat(len - head.len() - 2);
        let body = format!("{head}{pad}\"}}");
        assert_eq!(body.len(), len);
        body
    };
    let (engine, store, _) = memory_engine();
    let runs = AtomicUsize::new(0);
    let handler = |_r: SqsRecord<Value>| {
        let runs = &runs;
        async move {
            runs.fetch_add(1, SeqCst);
            Ok::<_, HandlerError>(())
        }
    };
    let event = batch(vec![
        message(Some("at-limit"), &sized("a", limit)),
        message(Some("over"), &sized("b", limit + 1)),
        // Not JSON, and over the limit: never parsed, so not a parse error.
        message(Some("garbage"), &"{".repeat(limit + 10)),
        message(Some("small"), r#"{"id":"c"}"#),
    ]);
    let processor = BatchProcessor::new(engine.clone(), KeySelector::pointer("/id"));
    let report = processor.process(event, None, handler).await;
    assert_eq!(runs.load(SeqCst), 2);
    assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(())));
    assert_eq!(
        report.records[1].outcome,
        Err(FailureReason::BodyTooLarge {
            size: limit + 1,
            limit
        })
    );
    assert_eq!(
        report.records[2].outcome,
        Err(FailureReason::BodyTooLarge {
            size: limit + 10,
            limit
        })
    );
    assert_eq!(report.records[3].outcome, Ok(Outcome::Executed(())));
    let text = FailureReason::BodyTooLarge {
        size: limit + 1,
        limit,
    }
    .to_string();
    assert!(
        text.contains("262145 bytes") && text.contains("262144-byte limit"),
        "{text}"
    );
    assert_eq!(
        failed_ids(&report.into_response().unwrap()),
        ["over", "garbage"]
    );
    assert_eq!(store.len(), 2, "oversized records leave no record");

    // A configured limit, both ways.
    let small = batch(vec![
        message(Some("m-1"), r#"{"id":"d"}"#),
        message(Some("m-2"), r#"{"id":"e","note":"longer"}"#),
    ]);
    let report = processor
        .clone()
        .max_body_bytes(12)
        .process(small, None, handler)
        .await;
    assert_eq!(report.records[0].outcome, Ok(Outcome::Executed(())));
    assert_eq!(
        report.records[1].outcome,
        Err(FailureReason::BodyTooLarge {
            size: r#"{"id":"e","note":"longer"}"#.len(),
            limit: 12
        })
    );
    let big = batch(vec![message(Some("m-3"), &sized("f", limit + 1))]);
    let report = processor
        .max_body_bytes(1 << 20)
        .process(big, None, handler)
        .await;
    assert!(report.is_success());
}

#[tokio::test]
async fn signatures_are_checked_before_parsing() {
    let verifier = crate::Verifier::new(b"test secret").unwrap();
    let signed = |id: &str, body: &str, signature: Option<String>| {
        let mut m = message(Some(id), body);
        if let Some(sig) = signature {
            let mut attr = SqsMessageAttribute::default();
            attr.string_value = Some(sig);
            attr.data_type = Some("String".into());
            m.message_attributes.insert("signature".into(), attr);
        }
        m
    };
    let sign = |body: &str| Some(verifier.sign(body.as_bytes()));
    let good = r#"{"id":"k-1"}"#;
    let event = batch(vec![
        signed("good", good, sign(good)),
        signed("unsigned", r#"{"id":"k-2"}"#, None),
        signed("tampered", r#"{"id":"k-3"}"#, sign(r#"{"id":"k-4"}"#)),
        signed("malformed", r#"{"id":"k-5"}"#, Some("abc".into())),
        // Unsigned garbage is refused before any parsing.
        signed("unsigned-garbage", "not json", None),
        // Correctly signed garbage gets past the check and fails to parse.
        signed("signed-garbage", "not json", sign("not json")),
    ]);
    for disabled in [false, true] {
        let (engine, _, _) = engine_with(Config::with_prefix("test.batch"));
        let engine = if disabled {
            crate::Idempotency::new(
                crate::MemoryStore::new(),
                Config::with_prefix("test.batch").disabled(true),
            )
        } else {
            engine
        };
        let runs = AtomicUsize::new(0);
        let report = BatchProcessor::new(engine, KeySelector::pointer("/id"))
            .verify_signatures(verifier.clone())
            .process(event.clone(), None, |_r: SqsRecord<Value>| {
                let runs = &runs;
                async move {
                    runs.fetch_add(1, SeqCst);
                    Ok::<_, HandlerError>(())
                }
            })
            .await;
        assert_eq!(runs.load(SeqCst), 1, "disabled={disabled}");
        let bad = |i: usize| match &report.records[i].outcome {
            Err(FailureReason::BadSignature(e)) => e.clone(),
            other => panic!("record {i}: {other:?}"),
        };
        let attribute = || "signature".to_owned();
        assert_eq!(
            bad(1),
            crate::SignatureError::Missing {
                attribute: attribute()
            }
        );
        assert_eq!(
            bad(2),
            crate::SignatureError::Mismatch {
                attribute: attribute()
            }
        );
        assert!(matches!(bad(3), crate::SignatureError::Malformed { .. }));
        assert_eq!(
            bad(4),
            crate::SignatureError::Missing {
                attribute: attribute()
            }
        );
        assert!(
            matches!(&report.records[5].outcome, Err(FailureReason::Parse(m)) if m.contains("not JSON")),
            "{:?}",
            report.records[5].outcome
        );
        // The reason names the attribute, never the body.
        let text = FailureReason::BadSignature(bad(2)).to_string();
        assert!(
            text.contains("signature check failed") && !text.contains("k-3"),
            "{text}"
        );
        assert_eq!(
            failed_ids(&report.into_response().unwrap()),
            [
                "unsigned",
                "tampered",
                "malformed",
                "unsigned-garbage",
                "signed-garbage"
            ]
        );
    }
}

#[tokio::test]
async fn leases_are_capped_by_the_remaining_time() {
    let (engine, store, _) = memory_engine();
    let one = batch(vec![message(Some("m-1"), r#"{"id":"k"}"#)]);
    let processor = BatchProcessor::new(engine.clone(), KeySelector::pointer("/id"));
    let key = engine.key(&json!("k")).unwrap();
    let report = processor
        .process(one, Some(Duration::from_secs(5)), |_r: SqsRecord<Value>| {
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
        })
        .await;
    assert!(report.is_success());
}

/// Numeric keys past what `f64` holds keep their exact text: two messages
/// whose ids differ only in the last digit are two keys (both run), and
/// the same body redelivered is still one.
#[tokio::test]
async fn numeric_keys_keep_their_exact_text() {
    let (engine, store, _) = memory_engine();
    let processor = BatchProcessor::new(engine, KeySelector::pointer("/id"));
    let event = batch(vec![
        message(Some("m-1"), r#"{"id":18446744073709551616,"x":1}"#),
        message(Some("m-2"), r#"{"id":18446744073709551617,"x":1}"#),
        message(Some("m-3"), r#"{"id":18446744073709551616,"x":1}"#),
    ]);
    let runs = AtomicUsize::new(0);
    let report = processor
        .process(event, None, |_r: SqsRecord<Value>| {
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
