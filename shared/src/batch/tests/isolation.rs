//! One record failing alone: bodies that do not parse, keys of the wrong
//! type, panics in the handler, the key selector, the body deserializer or
//! the response serializer, every record failing.

use super::pipeline::{DUP_1, Order, orders};
use super::test_source::*;
use crate::batch::FailureReason;
use crate::error::{ErrorKind, HandlerError, KeyError};
use crate::record::Status;
use crate::testkit::memory_engine;
use crate::{KeyInput, KeySelector, MissingKey, Outcome};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

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
        let mut poison = rec(Some("poison"), "");
        poison.body = body.map(str::to_owned);
        let event = batch_of(vec![rec(Some("good"), good), poison]);
        let runs = AtomicUsize::new(0);
        let report = orders(engine)
            .process(event, None, |_r: TestRecord<Order>| {
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
        assert_eq!(failed(&report), ["poison"]);
    }
}

#[tokio::test]
async fn wrong_key_types_always_fail() {
    let (engine, _, _) = memory_engine();
    let event = batch_of(vec![
        rec(Some("obj"), r#"{"id":{"a":1}}"#),
        rec(Some("null"), r#"{"id":null}"#),
        rec(Some("empty"), r#"{"id":""}"#),
        rec(Some("ok"), r#"{"id":"k"}"#),
    ]);
    let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
        .missing_key(MissingKey::RunUnprotected)
        .process(event, None, |_r: TestRecord<Value>| async {
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
        let event = batch_of(vec![
            rec(Some("a"), r#"{"id":"a"}"#),
            rec(Some("boom"), r#"{"id":"boom"}"#),
            rec(Some("nokey"), r#"{"boom":true}"#),
            rec(Some("c"), r#"{"id":"c"}"#),
        ]);
        let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
            .missing_key(missing_key)
            .process(event, None, |r: TestRecord<Value>| async move {
                if r.body.get("boom").is_some() || r.body["id"] == "boom" {
                    panic!("kaboom {}", r.message.id.unwrap_or_default());
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
        assert_eq!(failed(&report), ["boom", "nokey"]);
    }
}

#[tokio::test]
async fn a_panicking_key_selector_fails_only_its_record() {
    let (engine, _, _) = memory_engine();
    let selector = KeySelector::custom(|input: KeyInput<'_>| {
        let body = input.value;
        if input.delivery.and_then(|d| d.id()) == Some("boom") {
            panic!("selector exploded");
        }
        Ok(json!({"account": body["account"], "n": body["n"]}))
    });
    let event = batch_of(vec![
        rec(Some("a"), r#"{"account":"x","n":1}"#),
        rec(Some("boom"), r#"{"account":"x","n":2}"#),
        rec(Some("b"), r#"{"account":"x","n":3}"#),
        rec(Some("a-again"), r#"{"n":1,"account":"x"}"#),
    ]);
    let runs = AtomicUsize::new(0);
    let report = TestProcessor::new(engine, selector)
        .process(event, None, |_r: TestRecord<Value>| {
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
    assert_eq!(failed(&report), ["boom"]);
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
    let event = batch_of(vec![
        rec(Some("a"), r#"{"id":"a"}"#),
        rec(Some("boom"), r#"{"id":"b","explode":true}"#),
    ]);
    let report = TestProcessor::new(engine, KeySelector::pointer("/id"))
        .process(event, None, |_r: TestRecord<Fragile>| async {
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
    let event = batch_of(vec![
        rec(Some("a"), r#"{"id":"a"}"#),
        rec(Some("boom"), r#"{"id":"boom"}"#),
        rec(Some("boom-copy"), r#"{"id":"boom"}"#),
        rec(Some("c"), r#"{"id":"c"}"#),
    ]);
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let report = TestProcessor::new(engine.clone(), KeySelector::pointer("/id"))
        .process(event, None, |r: TestRecord<Value>| {
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
    assert!(failed(&report).is_empty());
}

#[tokio::test]
async fn all_records_failing() {
    let (engine, store, _) = memory_engine();
    let event = sample("orders-standard.json");
    let all = ids(&event);
    let report = orders(engine)
        .process(event, None, |_r: TestRecord<Order>| async {
            Err::<(), _>(HandlerError::retryable("downstream unavailable"))
        })
        .await;
    assert!(report.failures().count() == 5);
    let second_copy = &report.records[2].outcome;
    assert!(
        matches!(second_copy, Err(FailureReason::DuplicateOf { first, .. }) if first == DUP_1),
        "{second_copy:?}"
    );
    assert_eq!(failed(&report), all);
    assert!(store.is_empty(), "retryable failures release their claims");
}
