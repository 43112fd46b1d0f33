//! The kit's own tests: each builder's event parses as its
//! `aws_lambda_events` type and its processor takes every record; each
//! fault of the fault store is observed; the failed ids of every answer.

use serde_json::{Value, json};
use std::time::{Duration, Instant};

use super::*;
use crate::batch::BatchReport;
use crate::store::{Claim, Record, RecordWrite, Status};
use crate::testkit::memory_engine;
use crate::{HandlerError, KeySelector, MemoryStore, Outcome, Store};

/// Every record of `report` ran its handler, ids and lanes in batch order.
fn all_executed<T: std::fmt::Debug>(report: &BatchReport<T>) -> Vec<(String, Option<String>)> {
    assert!(report.is_success(), "{report:?}");
    report
        .records
        .iter()
        .map(|r| {
            assert!(matches!(r.outcome, Ok(Outcome::Executed(_))), "{r:?}");
            (r.message_id.clone().unwrap_or_default(), r.lane.clone())
        })
        .collect()
}

fn body(k: &str) -> String {
    json!({"k": k}).to_string()
}

#[tokio::test]
async fn sqs_standard_and_fifo_events_are_sqs_events_their_processor_takes() {
    let standard = sqs_event(
        "orders",
        &[
            Msg::new("m-1", body("a")),
            Msg::new("m-2", body("b"))
                .received(3)
                .attribute("tenant", "t-1"),
        ],
    );
    let typed_event: crate::sqs::SqsEvent = typed(&standard);
    assert_eq!(
        typed_event.records[1].attributes["ApproximateReceiveCount"],
        "3"
    );
    assert_eq!(
        typed_event.records[1].message_attributes["tenant"]
            .string_value
            .as_deref(),
        Some("t-1")
    );
    let fifo = sqs_event(
        "payments.fifo",
        &[
            Msg::new("f-1", body("a")).in_group("g-1"),
            Msg::new("f-2", body("b")).in_group("g-2"),
        ],
    );
    for (event, lanes) in [(standard, [None, None]), (fifo, [Some("g-1"), Some("g-2")])] {
        let (engine, _, _) = memory_engine();
        let processor = crate::sqs::SqsProcessor::new(engine, KeySelector::pointer("/k"));
        let report = processor
            .process(
                typed::<crate::sqs::SqsEvent>(&event),
                None,
                |r: crate::sqs::SqsRecord<Value>| async move { Ok::<_, HandlerError>(r.body) },
            )
            .await;
        let seen = all_executed(&report);
        let lanes: Vec<Option<String>> = lanes.iter().map(|l| l.map(str::to_owned)).collect();
        assert_eq!(seen.into_iter().map(|(_, l)| l).collect::<Vec<_>>(), lanes);
    }
}

#[tokio::test]
async fn sns_events_directly_and_through_sqs_are_taken_by_their_processors() {
    let n = |id, k| Notification {
        message_id: id,
        message: k,
        attributes: vec![("kind", "order")],
    };
    let (a, b) = (body("a"), body("b"));
    let direct = sns_event(&n("n-1", &a));
    let parsed: crate::sns::SnsEvent = typed(&direct);
    assert_eq!(
        parsed.records[0].sns.message_attributes["kind"].value,
        "order"
    );
    let (engine, _, _) = memory_engine();
    let report = crate::sns::SnsProcessor::new(engine, KeySelector::pointer("/Message/k"))
        .process(
            parsed,
            None,
            |r: crate::sns::Notification<Value>| async move { Ok::<_, HandlerError>(r.body) },
        )
        .await;
    assert_eq!(all_executed(&report)[0].0, "n-1");

    // Through a queue, raw delivery off: the processor opens the envelope,
    // and the key is the notification's `k`.
    let via = events::sns_via_sqs_event(&["m-1", "m-2"], &[n("n-1", &a), n("n-2", &b)]);
    let (engine, _, _) = memory_engine();
    let report = crate::sqs::SqsProcessor::new(engine, KeySelector::pointer("/k"))
        .envelope(crate::envelope::EnvelopeMode::Require(
            crate::envelope::Envelopes::Sns,
        ))
        .process(
            typed::<crate::sqs::SqsEvent>(&via),
            None,
            |r: crate::sqs::SqsRecord<Value>| async move { Ok::<_, HandlerError>(r.body) },
        )
        .await;
    assert_eq!(all_executed(&report).len(), 2);
    let bodies: Vec<Value> = report
        .records
        .iter()
        .map(|r| match &r.outcome {
            Ok(Outcome::Executed(v)) => v.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(bodies, [json!({"k": "a"}), json!({"k": "b"})]);
}

#[tokio::test]
async fn kinesis_events_are_kinesis_events_their_processor_takes() {
    let (a, b) = (body("a"), body("b"));
    let event = kinesis_event(
        "payments",
        1,
        7,
        &[("p-1", a.as_bytes()), ("p-2", b.as_bytes())],
    );
    let parsed: crate::kinesis::KinesisEvent = typed(&event);
    assert_eq!(
        parsed.records[1].kinesis.sequence_number,
        events::kinesis_sequence_number(1, 8)
    );
    let (engine, _, _) = memory_engine();
    let report = crate::kinesis::KinesisProcessor::new(engine, KeySelector::pointer("/k"))
        .process(
            parsed,
            None,
            |r: crate::kinesis::KinesisRecord<Value>| async move { Ok::<_, HandlerError>(r.body) },
        )
        .await;
    let seen = all_executed(&report);
    assert_eq!(seen[0].0, events::kinesis_sequence_number(1, 7));
    assert_eq!(seen.len(), 2);
}

#[tokio::test]
async fn dynamodb_stream_events_are_stream_events_their_processor_takes() {
    let keys = json!({"id": {"S": "sub-1"}});
    let image = |v: &str| json!({"id": {"S": "sub-1"}, "version": {"N": v}});
    let event = dynamodb_stream_event(
        "subscriptions",
        40,
        &[
            Change::insert(keys.clone(), image("1")),
            Change::modify(keys.clone(), image("1"), image("2")),
            Change::remove(keys.clone(), image("2")).by_ttl(),
        ],
    );
    let parsed: aws_lambda_events::dynamodb::Event = typed(&event);
    assert_eq!(parsed.records.len(), 3);
    let (engine, _, _) = memory_engine();
    let processor = crate::dynamodb_streams::DynamoDbStreamsProcessor::new(
        engine,
        crate::dynamodb_streams::keys_and("version"),
    );
    let report = processor
        .process(
            parsed,
            None,
            |r: crate::dynamodb_streams::DynamoDbRecord| async move {
                Ok::<_, HandlerError>((r.event_name.clone(), r.is_ttl_deletion()))
            },
        )
        .await;
    all_executed(&report);
    let seen: Vec<(String, bool)> = report
        .records
        .iter()
        .map(|r| match &r.outcome {
            Ok(Outcome::Executed(v)) => v.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let expected = [("INSERT", false), ("MODIFY", false), ("REMOVE", true)];
    assert_eq!(
        seen,
        expected.map(|(n, t)| (n.to_owned(), t)).to_vec(),
        "in order, the TTL deletion known"
    );
}

#[tokio::test]
async fn kafka_events_of_both_sources_are_kafka_events_their_processor_takes() {
    let (a, b) = (body("a"), body("b"));
    for source in [Kafka::Msk, Kafka::SelfManaged] {
        let record = |offset, value: &'static [u8]| KafkaRecord {
            offset,
            key: Some(b"acct-1"),
            value,
            headers: vec![("trace", b"\xff1")],
        };
        let _ = (&a, &b);
        let event = kafka_event(
            source,
            "orders",
            &[
                (0, vec![record(41, br#"{"k":"a"}"#)]),
                (1, vec![record(9, br#"{"k":"b"}"#)]),
            ],
        );
        let parsed: crate::kafka::KafkaEvent = typed(&event);
        assert_eq!(parsed.records.len(), 2, "two partitions");
        let (engine, _, _) = memory_engine();
        let report = crate::kafka::KafkaProcessor::new(engine, KeySelector::pointer("/k"))
            .process(
                parsed,
                None,
                |m: crate::kafka::KafkaMessage<Value>| async move {
                    Ok::<_, HandlerError>(m.delivery.header("trace").map(<[u8]>::to_vec))
                },
            )
            .await;
        let mut ids: Vec<String> = all_executed(&report)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        assert_eq!(ids, ["orders-0@41", "orders-1@9"], "{source:?}");
    }
}

#[tokio::test]
async fn eventbridge_events_are_taken_by_their_processor() {
    let event = eventbridge_event(
        "e-1",
        "shop.orders",
        "OrderPlaced",
        json!({"order_id": "o-1"}),
    );
    let _: crate::eventbridge::EventBridgeEvent<Value> = typed(&event);
    let (engine, _, _) = memory_engine();
    let processor =
        crate::eventbridge::EventBridgeProcessor::new(engine).accept("shop.orders", "OrderPlaced");
    for expected in ["executed", "replayed"] {
        let outcome = processor
            .process(
                event.clone(),
                None,
                |e: crate::eventbridge::EventBridgeEvent<Value>| async move {
                    Ok::<_, HandlerError>(e.detail["order_id"].clone())
                },
            )
            .await
            .unwrap();
        assert_eq!(outcome.label(), expected);
    }
}

#[tokio::test]
async fn an_http_request_in_each_format_parses_and_runs_then_replays() {
    use crate::http::{HttpProcessor, HttpRequest, HttpResponse};
    let request = HttpEvent::post("/payments", r#"{"amount_cents":5}"#).idempotency_key("k-1");
    let _: aws_lambda_events::apigw::ApiGatewayV2httpRequest = typed(&request.http_api());
    let _: aws_lambda_events::apigw::ApiGatewayV2httpRequest = typed(&request.function_url());
    let _: aws_lambda_events::apigw::ApiGatewayProxyRequest = typed(&request.rest_api());
    let _: aws_lambda_events::alb::AlbTargetGroupRequest = typed(&request.alb());
    let formats = [
        ("http_api", request.http_api()),
        ("function_url", request.function_url()),
        ("rest_api", request.rest_api()),
        ("alb", request.alb().clone()),
    ];
    for (name, event) in formats {
        let (engine, _, _) = memory_engine();
        let processor = HttpProcessor::new(engine).callers([
            crate::http::Caller::Principal,
            crate::http::Caller::Header("host".into()),
        ]);
        let http = HttpRequest::from_event(event).unwrap_or_else(|p| panic!("{name}: {p}"));
        for replayed in [false, true] {
            let response = processor
                .process(
                    &http,
                    None,
                    |r| Ok(r.body.clone()),
                    |b| async move { Ok::<_, HandlerError>(HttpResponse::new(201).binary(&b)) },
                )
                .await;
            assert_eq!(response.status, 201, "{name}: {response:?}");
            assert_eq!(
                response.header_value("idempotent-replayed").is_some(),
                replayed,
                "{name}"
            );
        }
    }
    let anonymous = HttpEvent::post("/p", "{}").caller(None).http_api();
    assert!(anonymous["requestContext"].get("authorizer").is_none());
}

fn record(id: &str) -> Record {
    Record {
        id: id.to_owned(),
        status: Status::Completed,
        expiration: u64::MAX / 2000,
        in_progress_expiration: None,
        data: Some("1".into()),
        error: None,
        validation: None,
        owner: None,
        outbox: None,
    }
}

#[tokio::test]
async fn an_error_fails_the_request_and_writes_nothing() {
    let store = FaultStore::new(MemoryStore::new());
    store.inject(Op::Claim, Fault::Error);
    let err = store.claim(&record("a"), 0).await.unwrap_err();
    assert!(crate::report(&err).contains("injected fault"), "{err}");
    assert_eq!(
        store.inner().get("a").await.unwrap(),
        None,
        "nothing written"
    );
    assert_eq!(store.claim(&record("a"), 0).await.unwrap(), Claim::Acquired);
    assert_eq!((store.seen(Op::Claim), store.injected(Op::Claim)), (2, 1));
}

#[tokio::test]
async fn a_lost_answer_writes_then_fails() {
    let store = FaultStore::new(MemoryStore::new());
    store.inject(Op::Commit, Fault::LostAnswer);
    let r = record("a");
    let err = store
        .commit(
            RecordWrite::Claim {
                record: &r,
                now_ms: 0,
            },
            &[],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, crate::store::TransactError::Store(_)),
        "{err:?}"
    );
    assert_eq!(store.get("a").await.unwrap(), Some(r), "the write happened");
    assert_eq!(store.injected(Op::Commit), 1);
}

#[tokio::test]
async fn a_delay_slows_the_request_and_it_goes_on() {
    let store = FaultStore::new(MemoryStore::new());
    let delay = Duration::from_millis(40);
    store.inject_times(Op::Read, Fault::Delay(delay), 2);
    for _ in 0..2 {
        let start = Instant::now();
        assert_eq!(store.get("a").await.unwrap(), None);
        assert!(start.elapsed() >= delay);
    }
    assert_eq!(store.get_many(&["a".into()]).await.unwrap(), vec![]);
    assert_eq!((store.seen(Op::Read), store.injected(Op::Read)), (3, 2));
}

#[tokio::test]
async fn a_held_request_waits_for_its_gate() {
    let store = FaultStore::new(MemoryStore::new());
    let gate = Gate::new();
    store.inject_always(Op::Release, Fault::Hold(gate.clone()));
    let r = Record {
        status: Status::InProgress,
        in_progress_expiration: Some(u64::MAX / 2),
        owner: Some("me".into()),
        ..record("a")
    };
    assert_eq!(store.claim(&r, 0).await.unwrap(), Claim::Acquired);
    let (released, still_there) = tokio::join!(store.release("a", "me"), async {
        gate.reached().await;
        // Held: the record is still there.
        let there = store.inner().get("a").await.unwrap().is_some();
        gate.open();
        there
    });
    released.unwrap();
    assert!(still_there);
    assert_eq!(
        store.get("a").await.unwrap(),
        None,
        "released after the gate"
    );
    store.clear();
    assert_eq!(store.seen(Op::Release), 1);
}

#[test]
fn failed_ids_of_every_response_and_error() {
    let sqs: crate::sqs::SqsBatchResponse =
        serde_json::from_value(json!({"batchItemFailures": [{"itemIdentifier": "m-2"}]})).unwrap();
    assert_eq!(sqs.failed_ids(), ["m-2"]);
    let kinesis: crate::kinesis::KinesisEventResponse =
        serde_json::from_value(json!({"batchItemFailures": [{"itemIdentifier": "49-1"}]})).unwrap();
    assert_eq!(kinesis.failed_ids(), ["49-1"]);
    let streams: crate::dynamodb_streams::DynamoDbEventResponse =
        serde_json::from_value(json!({"batchItemFailures": [{"itemIdentifier": "700"}]})).unwrap();
    assert_eq!(streams.failed_ids(), ["700"]);
    let kafka: crate::kafka::KafkaEventResponse = serde_json::from_value(
        json!({"batchItemFailures": [{"itemIdentifier": {"partition": "orders-0", "offset": 42}}]}),
    )
    .unwrap();
    assert_eq!(kafka.failed_ids(), ["orders-0@42"]);
    assert!(json!({"statusCode": 500}).failed_ids().is_empty());

    let sns = crate::sns::SnsError::Failed {
        message_id: "n-1".into(),
        reason: crate::batch::FailureReason::Panic("boom".into()),
        failed: 1,
        records: vec!["n-1".into()],
    };
    let answer: Result<(), _> = Err(sns);
    assert_eq!(answer.failed_ids(), ["n-1"]);
    let event = crate::batch::Unfinished::Failed {
        message_id: "e-1".into(),
        reason: crate::batch::FailureReason::PayloadMismatch,
        failed: 1,
        records: vec!["e-1".into()],
    };
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(event);
    assert_eq!(boxed.failed_ids(), ["e-1"]);
    let other: Box<dyn std::error::Error + Send + Sync> = "no".into();
    assert_eq!(other.failed_ids(), [WHOLE_EVENT]);
    let ok: Result<Value, Box<dyn std::error::Error + Send + Sync>> =
        Ok(json!({"batchItemFailures": []}));
    assert!(ok.failed_ids().is_empty());
}

#[cfg(feature = "lambda")]
#[tokio::test]
async fn a_handler_is_invoked_on_an_event_and_on_an_event_file() {
    let (engine, _, _) = memory_engine();
    let processor = crate::sqs::SqsProcessor::new(engine, KeySelector::pointer("/order_id"));
    let handler = |r: crate::sqs::SqsRecord<Value>| async move {
        if r.body["amount_cents"].as_i64() == Some(0) {
            return Err(HandlerError::retryable("zero"));
        }
        Ok(r.body)
    };
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../events/orders-standard.json"
    );
    let answer = invoke_file(|e| processor.handle(e, handler), file).await;
    // The sample's poison record (truncated JSON) alone.
    let sample: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(
        answer.failed_ids(),
        [sample["Records"][3]["messageId"].as_str().unwrap()]
    );
    let event = sqs_event(
        "orders",
        &[
            Msg::new(
                "m-1",
                json!({"order_id": "o-9", "amount_cents": 0}).to_string(),
            ),
            Msg::new(
                "m-2",
                json!({"order_id": "o-8", "amount_cents": 1}).to_string(),
            ),
        ],
    );
    let answer = invoke(|e| processor.handle(e, handler), &event).await;
    assert_eq!(answer.failed_ids(), ["m-1"]);
    let missing = invoke_file(|e| processor.handle(e, handler), "no/such.json").await;
    assert!(missing.unwrap_err().to_string().contains("cannot read"));
}

#[tokio::test]
async fn the_outbox_of_a_record_is_read_back() {
    let store = MemoryStore::new();
    let key = crate::IdempotencyKey::new("t", &json!("e-1")).unwrap();
    assert!(outbox(&store, &key).await.unwrap().is_empty(), "no record");
    let entries = json!([{
        "id": "e-1#0",
        "destination": {"sqs": {"queue_url": "https://sqs.us-east-1.amazonaws.com/1/q"}},
        "body": "hello",
    }]);
    let r = Record {
        outbox: Some(entries.to_string()),
        ..record(key.as_str())
    };
    store
        .commit(
            RecordWrite::Claim {
                record: &r,
                now_ms: 0,
            },
            &[],
        )
        .await
        .unwrap();
    let read = outbox(&store, &key).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].message.body, "hello");
}
