//! An SQS body failing alone, by SQS's own rules: a body missing or not
//! JSON, bodies over `max_body_bytes`, bad signatures.

use crate::error::HandlerError;
use crate::sqs::{FailureReason, SqsProcessor, SqsRecord};
use crate::testkit::*;
use crate::{Config, KeySelector, Outcome};
use aws_lambda_events::sqs::SqsMessageAttribute;
use serde::Deserialize;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// SQS's own messages for a body that is missing, not JSON, or not the
/// handler's type: each fails its record alone (the same isolation on any
/// source: `batch::tests::isolation::poison_bodies_fail_only_their_record`).
#[tokio::test]
async fn a_body_missing_or_not_json_or_of_another_type_fails_alone_saying_why() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Order {
        event_id: String,
        order_id: String,
    }
    let cases: [(Option<&str>, &[&str]); 3] = [
        (None, &["message poison has no body"]),
        (
            Some("not json {"),
            &["is not JSON", "type it String or lambda_idempotency::Bytes"],
        ),
        (
            Some(r#"{"event_id":"e-3","order_id":7}"#),
            &["does not parse as", "Order"],
        ),
    ];
    for (body, expected) in cases {
        let (engine, _, _) = memory_engine();
        let mut poison = message(Some("poison"), "");
        poison.body = body.map(str::to_owned);
        let good = message(Some("good"), r#"{"event_id":"e-1","order_id":"o-1"}"#);
        let report = SqsProcessor::new(engine, KeySelector::pointer("/event_id"))
            .process(
                batch(vec![good, poison]),
                None,
                |_r: SqsRecord<Order>| async { Ok::<_, HandlerError>(()) },
            )
            .await;
        assert_eq!(
            report.records[0].outcome,
            Ok(Outcome::Executed(())),
            "{body:?}"
        );
        match &report.records[1].outcome {
            Err(FailureReason::Parse(m)) => {
                for e in expected {
                    assert!(m.contains(e) && m.contains("poison"), "{body:?}: {m}");
                }
            }
            other => panic!("{body:?}: {other:?}"),
        }
        let response = report
            .response_as::<crate::sqs::SqsBatchResponse>()
            .unwrap();
        assert_eq!(failed_ids(&response), ["poison"]);
    }
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
