use super::*;
use crate::batch::FailureReason;
use crate::error::ErrorKind;
use crate::error::KeyError;
use crate::record::{Record, Status};
use crate::testkit::{T0, engine_with, event_json, memory_engine};
use crate::{Config, config::TerminalErrors};
use serde::Deserialize;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct OrderPlaced {
    order_id: String,
    sku: String,
    quantity: u32,
}

fn order_placed() -> EventBridgeEvent<Value> {
    parse_event(&event_json("inventory-order-placed.json")).unwrap()
}

async fn reserve(
    runs: &AtomicUsize,
    e: EventBridgeEvent<OrderPlaced>,
) -> Result<Value, HandlerError> {
    runs.fetch_add(1, SeqCst);
    if e.detail.quantity > 100 {
        return Err(HandlerError::terminal(format!(
            "insufficient stock for {} x {}",
            e.detail.quantity, e.detail.sku
        )));
    }
    Ok(json!({"reserved": e.detail.order_id, "event": e.id}))
}

#[tokio::test]
async fn keyed_by_event_id_and_duplicates_replay() {
    let (engine, store, _) = memory_engine();
    let processor = EventBridgeProcessor::new(engine.clone());
    let runs = AtomicUsize::new(0);
    let first = processor
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap();
    let expected = json!({"reserved": "ord-1001", "event": "4197b62e-be24-4f92-8058-adf067913c93"});
    assert_eq!(first, Outcome::Executed(expected.clone()));
    let again = processor
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap();
    assert_eq!(again, Outcome::Replayed(Some(expected.clone())));
    assert_eq!(again.response(), Some(&expected));
    assert_eq!(runs.load(SeqCst), 1);
    // The record is the event id's.
    let key = engine
        .key(&json!("4197b62e-be24-4f92-8058-adf067913c93"))
        .unwrap();
    assert!(
        crate::Store::get(&store, key.as_str())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn business_key_from_detail() {
    let (engine, _, _) = memory_engine();
    let processor = EventBridgeProcessor::new(engine).key(KeySelector::pointer("/detail/order_id"));
    let runs = AtomicUsize::new(0);
    processor
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap();
    // The same order published again: a new event id, same detail.
    let mut republished = order_placed();
    republished.id = Some("0f0f0f0f-0000-4000-8000-000000000000".into());
    let outcome = processor
        .process(republished, None, |e| reserve(&runs, e))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Replayed(Some(_))));
    assert_eq!(runs.load(SeqCst), 1);
    // The same order id with another detail is a mismatch (permanent).
    let mut changed = order_placed();
    changed.detail["quantity"] = json!(3);
    let err = processor
        .process(changed, None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    assert!(
        matches!(err.reason(), FailureReason::PayloadMismatch),
        "{err}"
    );
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn in_progress_is_an_error_to_retry() {
    let (engine, _, clock) = memory_engine();
    let key = engine
        .key(&json!("4197b62e-be24-4f92-8058-adf067913c93"))
        .unwrap();
    let held = Record {
        id: key.as_str().to_owned(),
        status: Status::InProgress,
        expiration: T0 / 1000 + 3600,
        in_progress_expiration: Some(T0 + 10_000),
        data: None,
        error: None,
        validation: None,
        owner: Some("another".into()),
        outbox: None,
    };
    engine.store().claim(&held, T0).await.unwrap();
    let processor = EventBridgeProcessor::new(engine);
    let runs = AtomicUsize::new(0);
    let err = processor
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    match &err {
        Unfinished::Failed {
            message_id: event_id,
            reason: FailureReason::InProgress {
                lease_expires_at_ms,
            },
            ..
        } => {
            assert_eq!(event_id, "4197b62e-be24-4f92-8058-adf067913c93");
            assert_eq!(*lease_expires_at_ms, Some(T0 + 10_000));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.is_retryable());
    assert_eq!(runs.load(SeqCst), 0);
    // Lambda's retry after the holder's lease lapsed runs it.
    clock.advance(Duration::from_secs(11));
    let outcome = processor
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Executed(_)));
}

#[tokio::test]
async fn terminal_errors_are_recorded() {
    let (engine, _, _) =
        engine_with(Config::with_prefix("test.eb").on_terminal_error(TerminalErrors::Record));
    let processor = EventBridgeProcessor::new(engine);
    let runs = AtomicUsize::new(0);
    let event = || parse_event(&event_json("inventory-insufficient-stock.json")).unwrap();
    for replayed in [false, true] {
        let outcome = processor
            .process(event(), None, |e| reserve(&runs, e))
            .await
            .unwrap();
        assert_eq!(
            outcome,
            Outcome::Rejected {
                error: "insufficient stock for 1000 x SKU-RED-MUG".into(),
                replayed
            }
        );
        assert_eq!(outcome.response(), None);
    }
    assert_eq!(runs.load(SeqCst), 1);

    // With the default policy a terminal error is an error, not retryable.
    let (engine, _, _) = memory_engine();
    let err = EventBridgeProcessor::new(engine)
        .process(event(), None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.reason(),
            FailureReason::Handler {
                kind: ErrorKind::Terminal,
                ..
            }
        ) && !err.is_retryable(),
        "{err}"
    );
    assert!(
        err.to_string().contains("(terminal): insufficient stock"),
        "{err}"
    );
}

#[tokio::test]
async fn retryable_errors_and_panics_release_the_claim() {
    let (engine, store, _) = memory_engine();
    let processor = EventBridgeProcessor::new(engine);
    let err = processor
        .process(
            order_placed(),
            None,
            |_e: EventBridgeEvent<OrderPlaced>| async {
                Err::<(), _>(HandlerError::retryable("warehouse API timeout"))
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains("warehouse API timeout"), "{err}");
    let err = processor
        .process(
            order_placed(),
            None,
            |_e: EventBridgeEvent<OrderPlaced>| async {
                if true {
                    panic!("handler bug");
                }
                Ok::<(), HandlerError>(())
            },
        )
        .await
        .unwrap_err();
    assert!(
        err.is_retryable() && err.to_string().contains("handler bug"),
        "{err}"
    );
    assert!(store.is_empty());
    let runs = AtomicUsize::new(0);
    assert!(
        processor
            .process(order_placed(), None, |e| reserve(&runs, e))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn bad_detail_is_a_permanent_error() {
    let (engine, store, _) = memory_engine();
    let mut event = order_placed();
    event.detail["quantity"] = json!("two");
    let runs = AtomicUsize::new(0);
    let err = EventBridgeProcessor::new(engine)
        .process(event, None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err.reason(), FailureReason::Parse(m) if m.contains("detail does not parse")),
        "{message}"
    );
    assert!(!err.is_retryable());
    assert!(
        message.contains("4197b62e-be24-4f92-8058-adf067913c93"),
        "{message}"
    );
    assert!(
        message.contains("OrderPlaced") && message.contains("permanent"),
        "{message}"
    );
    assert!(message.contains("invalid type"), "{message}");
    assert_eq!(runs.load(SeqCst), 0);
    assert!(store.is_empty());
}

#[tokio::test]
async fn missing_keys() {
    let runs = AtomicUsize::new(0);
    let (engine, _, _) = memory_engine();
    let processor =
        EventBridgeProcessor::new(engine).key(KeySelector::pointer("/detail/customer_id"));
    let err = processor
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    assert!(
        matches!(err.reason(), FailureReason::Key(KeyError::Missing(p)) if p == "/detail/customer_id"),
        "{err}"
    );
    assert!(!err.is_retryable());
    let outcome = processor
        .missing_key(MissingKey::RunUnprotected)
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Unprotected(_)));
    // No id at all.
    let (engine, _, _) = memory_engine();
    let mut anonymous = order_placed();
    anonymous.id = None;
    let err = EventBridgeProcessor::new(engine)
        .process(anonymous, None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("(no id)"), "{err}");
    // A panicking key function.
    let (engine, _, _) = memory_engine();
    let err = EventBridgeProcessor::new(engine)
        .key(KeySelector::custom(|_| panic!("key bug")))
        .process(order_placed(), None, |e| reserve(&runs, e))
        .await
        .unwrap_err();
    assert!(
        matches!(err.reason(), FailureReason::Panic(m) if m.contains("key selector panicked") && m.contains("key bug")),
        "{err}"
    );
    assert_eq!(runs.load(SeqCst), 1);
}

#[test]
fn wrong_shapes_are_not_eventbridge_events() {
    let cases = [
        (event_json("orders-standard.json"), "Records array"),
        (event_json("payments-fifo.json"), "SQS"),
        (json!([1, 2]), "got an array"),
        (json!(null), "got null"),
        (
            json!({"hello": "world"}),
            "missing detail-type, source, detail",
        ),
        (
            json!({"detail-type": 1, "source": "s", "detail": {}}),
            "must be strings",
        ),
        (
            json!({"detail-type": "X", "source": "s", "detail": {}, "time": "yesterday"}),
            "malformed envelope",
        ),
    ];
    for (value, expected) in cases {
        let err = parse_event(&value).unwrap_err();
        assert!(matches!(err, BatchError::WrongEvent { .. }), "{value}");
        assert_eq!(crate::diagnostic::error_type(&err), "InvalidEvent");
        assert!(err.to_string().contains(expected), "{value}: {err}");
    }
    assert!(parse_event(&event_json("inventory-insufficient-stock.json")).is_ok());
}

#[test]
fn process_future_is_send() {
    fn assert_send<F: Future + Send>(_: F) {}
    let (engine, _, _) = memory_engine();
    let processor = EventBridgeProcessor::new(engine);
    assert_send(processor.process(
        order_placed(),
        None,
        |e: EventBridgeEvent<Value>| async move { Ok::<_, HandlerError>(e.detail) },
    ));
}

/// Invocations through `handle`, the entry a function calls.
#[cfg(feature = "lambda")]
mod invocations {
    use super::*;

    /// An invocation as the Lambda runtime hands it to `handle`: the payload
    /// text deserialized into the type `handle` takes.
    fn invocation<P: DeserializeOwned>(text: &str) -> LambdaEvent<P> {
        let payload = serde_json::from_str(text).expect("invocation payload");
        LambdaEvent::new(
            payload,
            crate::runtime::local_context(1, Duration::from_secs(30)),
        )
    }

    /// Another source's event fails the invocation before any record, as
    /// every source's `handle` does (`BatchError::WrongEvent`, no claim, no
    /// handler); given to `process`, it fails as the event's one record.
    #[tokio::test]
    async fn another_sources_event_fails_before_any_record() {
        let (engine, store, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine);
        let runs = AtomicUsize::new(0);
        let sqs = event_json("orders-standard.json").to_string();
        let err = processor
            .handle(invocation::<EventPayload>(&sqs), |e| reserve(&runs, e))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.downcast_ref::<BatchError>(),
                Some(BatchError::WrongEvent { .. })
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("not an EventBridge event: it has a Records array")
        );
        assert_eq!(crate::diagnostic::error_type(&*err), "InvalidEvent");
        let err = processor
            .process(event_json("orders-standard.json"), None, |e| {
                reserve(&runs, e)
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err.reason(), FailureReason::Parse(m) if m.contains("Records array")),
            "{err}"
        );
        assert_eq!(runs.load(SeqCst), 0);
        assert!(store.is_empty());
    }

    /// An `OrderPlaced` envelope whose `detail.order_id` is the JSON number
    /// `order_id` (its text as written).
    fn numeric_order(event_id: &str, order_id: &str) -> String {
        format!(
            r#"{{"version":"0","id":"{event_id}","detail-type":"OrderPlaced","source":"shop.orders",
            "account":"123456789012","time":"2026-11-29T10:00:00Z","region":"us-east-1","resources":[],
            "detail":{{"order_id":{order_id},"sku":"SKU-RED-MUG","quantity":2}}}}"#
        )
    }

    /// Two orders whose numeric ids differ past what `f64` holds are two keys
    /// through the function's entry (`handle`): both run. The first order
    /// published again (a new event id) is still one key: it replays.
    #[tokio::test]
    async fn numeric_keys_keep_their_exact_text() {
        let (engine, store, _) = memory_engine();
        let processor =
            EventBridgeProcessor::new(engine).key(KeySelector::pointer("/detail/order_id"));
        let runs = AtomicUsize::new(0);
        let run = |e: EventBridgeEvent<Value>| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, SeqCst);
                Ok::<_, HandlerError>(json!({"event": e.id}))
            }
        };
        let first = processor
            .handle(
                invocation(&numeric_order("e-1", "12345678901234567890123")),
                run,
            )
            .await
            .unwrap();
        assert_eq!(first, EventResponse::Done(json!({"event": "e-1"})));
        let second = processor
            .handle(
                invocation(&numeric_order("e-2", "12345678901234567890124")),
                run,
            )
            .await
            .unwrap();
        assert_eq!(
            second,
            EventResponse::Done(json!({"event": "e-2"})),
            "another order: it runs"
        );
        let again = processor
            .handle(
                invocation(&numeric_order("e-3", "12345678901234567890123")),
                run,
            )
            .await
            .unwrap();
        assert_eq!(
            again,
            EventResponse::Done(json!({"event": "e-1"})),
            "the first order again: replayed"
        );
        assert_eq!(runs.load(SeqCst), 2);
        assert_eq!(store.len(), 2);
    }

    /// The `detail` hashed for payload validation keeps exact numbers too: the
    /// same event id with a detail that differs only past `f64`'s precision is
    /// a mismatch, not a replay.
    #[tokio::test]
    async fn payload_hash_keeps_exact_numbers() {
        let (engine, _, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine);
        let runs = AtomicUsize::new(0);
        let run = |_e: EventBridgeEvent<Value>| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, SeqCst);
                Ok::<_, HandlerError>(json!("done"))
            }
        };
        processor
            .handle(
                invocation(&numeric_order("e-1", "12345678901234567890123")),
                run,
            )
            .await
            .unwrap();
        let err = processor
            .handle(
                invocation(&numeric_order("e-1", "12345678901234567890124")),
                run,
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("different payload"), "{err}");
        assert_eq!(runs.load(SeqCst), 1);
    }

    /// A number keys (and hashes into the payload) the same invoking the
    /// function directly as in an SQS body, for every form it can be written in:
    /// exponents, trailing zeros, past `u64`, past `f64`'s 15 digits. One rule,
    /// whatever it decides for each form.
    #[tokio::test]
    async fn numbers_key_as_in_an_sqs_body() {
        use crate::sqs::{EnvelopeMode, Envelopes, SqsProcessor, SqsRecord};
        use crate::testkit::{batch, message};
        use std::sync::{Arc, Mutex};

        /// A selector keyed by `pointer`, keeping the material it saw.
        fn seen(pointer: &'static str) -> (KeySelector, Arc<Mutex<Option<Value>>>) {
            let seen = Arc::new(Mutex::new(None));
            let keep = seen.clone();
            let selector = KeySelector::custom(move |input| {
                let n = crate::batch::key::pointer_key(input.value, pointer)?;
                *keep.lock().unwrap() = Some(n.clone());
                Ok(n)
            });
            (selector, seen)
        }

        let numbers = [
            "1000",
            "1e3",
            "1E+3",
            "1000.0",
            "1",
            "1.0",
            "-0",
            "0.1",
            "1.5",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "12345678901234567890123",
            "12345678901234567890124",
            "0.12345678901234567891",
            "1.0000000000000000001",
            "1234567890123456.7",
            r#""12345678901234567890123""#,
        ];
        let mut keys = std::collections::HashMap::new();
        for n in numbers {
            let text = format!(
                r#"{{"id":"e-1","detail-type":"OrderPlaced","source":"shop.orders",
                "detail":{{"n":{n},"also":[{n}]}}}}"#
            );
            let (engine, direct_store, _) = memory_engine();
            // Invoking the function, the key reads the envelope; opened from
            // a queue's body, the detail.
            let (selector, direct) = seen("/detail/n");
            let _: EventResponse<()> = EventBridgeProcessor::new(engine.clone())
                .key(selector)
                .handle(invocation(&text), |_e: EventBridgeEvent<Value>| async {
                    Ok::<_, HandlerError>(())
                })
                .await
                .unwrap();
            let (queue_engine, queue_store, _) = memory_engine();
            let (selector, queued) = seen("/n");
            let report = SqsProcessor::new(queue_engine, selector)
                .envelope(EnvelopeMode::Unwrap(Envelopes::EventBridge))
                .process(
                    batch(vec![message(Some("m-1"), &text)]),
                    None,
                    |_r: SqsRecord<Value>| async { Ok::<_, HandlerError>(()) },
                )
                .await;
            assert!(report.is_success(), "{n}");
            let direct = direct.lock().unwrap().clone().unwrap();
            assert_eq!(direct, queued.lock().unwrap().clone().unwrap(), "{n}");
            let key = engine.key(&direct).unwrap();
            let record = |store: &crate::MemoryStore| {
                let store = store.clone();
                let id = key.as_str().to_owned();
                async move { crate::Store::get(&store, &id).await.unwrap() }
            };
            let (direct_record, queued_record) = (
                record(&direct_store).await.expect("direct record"),
                record(&queue_store).await.expect("queued record"),
            );
            assert!(direct_record.validation.is_some(), "{n}");
            assert_eq!(
                direct_record.validation, queued_record.validation,
                "{n}: the detail hashes the same"
            );
            keys.insert(n, key);
        }
        // What the rule decides, the same on both paths: a number `f64` holds
        // keys as its JSON value (`1e3` is `1000.0`, not `1000`; `1.0` is not
        // `1`); past that, as its text (the bare and the quoted
        // 12345678901234567890123 are one key, its neighbour another).
        let key = |n: &str| keys[n].clone();
        assert_eq!(key("1e3"), key("1E+3"));
        assert_eq!(key("1e3"), key("1000.0"));
        assert_ne!(key("1e3"), key("1000"));
        assert_ne!(key("1.0"), key("1"));
        assert_eq!(
            key("12345678901234567890123"),
            key(r#""12345678901234567890123""#)
        );
        assert_ne!(
            key("12345678901234567890123"),
            key("12345678901234567890124")
        );
        assert_ne!(key("18446744073709551615"), key("18446744073709551616"));
    }
}
