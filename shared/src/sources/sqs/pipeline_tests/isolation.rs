//! One record failing alone: bodies that do not parse, keys of the wrong
//! type, panics in the handler, the key selector, the body deserializer or
//! the response serializer, bodies over the limit, bad signatures.

use super::*;

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
        assert_eq!(
            failed_ids(
                &report
                    .response_as::<crate::sqs::SqsBatchResponse>()
                    .unwrap()
            ),
            ["poison"]
        );
    }
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
    let report = SqsProcessor::new(engine, KeySelector::pointer("/id"))
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
        let report = SqsProcessor::new(engine, KeySelector::pointer("/id"))
            .missing_key(missing_key)
            .process(event, None, |r: SqsRecord<Value>| async move {
                if r.body.get("boom").is_some() || r.body["id"] == "boom" {
                    panic!("kaboom {}", r.message.message_id.unwrap_or_default());
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
            failed_ids(
                &report
                    .response_as::<crate::sqs::SqsBatchResponse>()
                    .unwrap()
            ),
            ["boom", "nokey"]
        );
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
    let event = batch(vec![
        message(Some("a"), r#"{"account":"x","n":1}"#),
        message(Some("boom"), r#"{"account":"x","n":2}"#),
        message(Some("b"), r#"{"account":"x","n":3}"#),
        message(Some("a-again"), r#"{"n":1,"account":"x"}"#),
    ]);
    let runs = AtomicUsize::new(0);
    let report = SqsProcessor::new(engine, selector)
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
    assert_eq!(
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        ),
        ["boom"]
    );
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
    let report = SqsProcessor::new(engine, KeySelector::pointer("/id"))
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
    let report = SqsProcessor::new(engine.clone(), KeySelector::pointer("/id"))
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
    assert!(
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        )
        .is_empty()
    );
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
    assert_eq!(
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        ),
        all
    );
    assert!(store.is_empty(), "retryable failures release their claims");
}

#[tokio::test]
async fn bodies_over_the_limit_fail_without_parsing() {
    let limit = crate::sqs::DEFAULT_MAX_BODY_BYTES;
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
    let processor = SqsProcessor::new(engine.clone(), KeySelector::pointer("/id"));
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
        failed_ids(
            &report
                .response_as::<crate::sqs::SqsBatchResponse>()
                .unwrap()
        ),
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
        let report = SqsProcessor::new(engine, KeySelector::pointer("/id"))
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
            crate::signature::SignatureError::Missing {
                attribute: attribute()
            }
        );
        assert_eq!(
            bad(2),
            crate::signature::SignatureError::Mismatch {
                attribute: attribute()
            }
        );
        assert!(matches!(
            bad(3),
            crate::signature::SignatureError::Malformed { .. }
        ));
        assert_eq!(
            bad(4),
            crate::signature::SignatureError::Missing {
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
            failed_ids(
                &report
                    .response_as::<crate::sqs::SqsBatchResponse>()
                    .unwrap()
            ),
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
