//! The Amazon MQ source run on a `MemoryStore`, on events as AWS sends them:
//! the `aws_lambda_events` package's own fixtures (`src/fixtures/*.json`
//! beside its `Cargo.toml`, found through `cargo metadata`), and batches
//! made of their messages.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use amazon_mq_source::{AmazonMq, AmazonMqProcessor, MqDelivery, MqMessage};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lambda_idempotency::batch::{BatchError, BatchReport, FailureReason, Source, Unfinished};
use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore, Outcome};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

/// The fixture `name` of the `aws_lambda_events` package this workspace
/// builds with (its directory asked of `cargo metadata` once).
fn fixture(name: &str) -> Value {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let path = DIR.get_or_init(fixtures_dir).join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn fixtures_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let package = (packages.iter())
        .find(|p| p["name"] == "aws_lambda_events")
        .expect("aws_lambda_events in the workspace");
    let manifest = PathBuf::from(package["manifest_path"].as_str().expect("a path"));
    manifest.with_file_name("src").join("fixtures")
}

fn processor(key: KeySelector) -> AmazonMqProcessor {
    let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("mq.orders"));
    AmazonMqProcessor::new(engine, key)
}

/// Each record's outcome, in short.
fn outcomes<T>(report: &BatchReport<T>) -> Vec<&'static str> {
    let label = |r: &Result<Outcome<T>, FailureReason>| match r {
        Ok(Outcome::Executed(_)) => "executed",
        Ok(Outcome::Replayed(_)) => "replayed",
        Ok(_) => "other",
        Err(_) => "failed",
    };
    report.records.iter().map(|r| label(&r.outcome)).collect()
}

/// A batch of the ActiveMQ fixture's message, once per order in `orders`
/// (its `data` the order's JSON, its `messageID` its position).
fn activemq(orders: &[&str], redelivered: bool) -> Value {
    let mut event = fixture("example-activemq-event.json");
    let template = event["messages"][0].clone();
    let message = |(i, order): (usize, &&str)| {
        let mut m = template.clone();
        m["messageID"] = json!(format!("ID:b-0f5b7522-orders-1:{i}"));
        m["data"] = json!(STANDARD.encode(json!({"order_id": order}).to_string()));
        m["redelivered"] = json!(redelivered);
        m
    };
    event["messages"] = orders.iter().enumerate().map(message).collect();
    event
}

/// A batch of the RabbitMQ fixture's message, once per order in `orders`
/// (its `data` the order's JSON, its `messageId` its position).
fn rabbitmq(orders: &[&str], redelivered: bool) -> Value {
    let mut event = fixture("example-rabbitmq-event.json");
    let template = event["rmqMessagesByQueue"]["test::/"][0].clone();
    let message = |(i, order): (usize, &&str)| {
        let mut m = template.clone();
        m["basicProperties"]["messageId"] = json!(format!("msg-{i}"));
        m["data"] = json!(STANDARD.encode(json!({"order_id": order}).to_string()));
        m["redelivered"] = json!(redelivered);
        m
    };
    event["rmqMessagesByQueue"]["test::/"] = orders.iter().enumerate().map(message).collect();
    event
}

/// `o-1`, `o-2`, `o-1` again (the producer's resend) and `o-3`, whose
/// handler fails the first time: the batch fails naming `o-3`, having run
/// `o-1` and `o-2` once; delivered again, `o-1` and `o-2` replay and only
/// `o-3` runs.
async fn a_failed_message_fails_the_batch_and_only_it_runs_again(
    event: fn(&[&str], bool) -> Value,
    failed_id: &str,
) {
    let orders = ["o-1", "o-2", "o-1", "o-3"];
    let processor = processor(KeySelector::pointer("/order_id"));
    let (runs, broken) = (Mutex::new(Vec::new()), AtomicBool::new(true));
    let handler = |message: MqDelivery<Value>| {
        let (runs, broken) = (&runs, &broken);
        async move {
            let order = message.body["order_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if order == "o-3" && broken.load(Ordering::SeqCst) {
                return Err(HandlerError::retryable("the warehouse is down"));
            }
            runs.lock().expect("runs").push(order.clone());
            Ok(json!({"order": order}))
        }
    };

    let first = AmazonMq::parse(event(&orders, false)).expect("an Amazon MQ event");
    let report = processor.process(first, None, &handler).await;
    assert_eq!(
        outcomes(&report),
        ["executed", "executed", "replayed", "failed"]
    );
    let Err(Unfinished::Failed {
        message_id,
        reason,
        records,
        ..
    }) = processor.response(&report)
    else {
        panic!("a batch with a failed message must fail the invocation");
    };
    assert_eq!(
        (message_id.as_str(), &records[..]),
        (failed_id, &[failed_id.to_owned()][..])
    );
    assert!(
        reason.to_string().contains("the warehouse is down"),
        "{reason}"
    );
    assert_eq!(*runs.lock().expect("runs"), ["o-1", "o-2"]);

    broken.store(false, Ordering::SeqCst);
    let again = AmazonMq::parse(event(&orders, true)).expect("an Amazon MQ event");
    let report = processor.process(again, None, &handler).await;
    assert_eq!(
        outcomes(&report),
        ["replayed", "replayed", "replayed", "executed"]
    );
    assert_eq!(processor.response(&report), Ok(()));
    assert_eq!(*runs.lock().expect("runs"), ["o-1", "o-2", "o-3"]);
    let replayed = report.records[0]
        .outcome
        .as_ref()
        .ok()
        .and_then(Outcome::response);
    assert_eq!(replayed, Some(&json!({"order": "o-1"})));
}

#[tokio::test]
async fn activemq_a_failed_message_fails_the_batch_and_only_it_runs_again() {
    let id = "ID:b-0f5b7522-orders-1:3";
    a_failed_message_fails_the_batch_and_only_it_runs_again(activemq, id).await;
}

#[tokio::test]
async fn rabbitmq_a_failed_message_fails_the_batch_and_only_it_runs_again() {
    a_failed_message_fails_the_batch_and_only_it_runs_again(rabbitmq, "msg-3").await;
}

/// Invokes `processor` through the Lambda entry point (`handle`) on the
/// fixture `name`, its handler taking the data as text.
async fn invoke(
    processor: &AmazonMqProcessor,
    name: &str,
    runs: &Mutex<Vec<String>>,
) -> Result<(), lambda_runtime::Error> {
    let event = LambdaEvent::new(fixture(name), Context::default());
    let handler = |message: MqDelivery<String>| async move {
        runs.lock().expect("runs").push(message.body.clone());
        Ok::<_, HandlerError>(message.body.len())
    };
    processor.handle(event, handler).await
}

/// The fixtures as they are, through the Lambda entry point, twice: the
/// message runs once, then replays (the ActiveMQ one also as its variant
/// with null properties).
#[tokio::test]
async fn the_fixtures_run_once_then_replay_through_handle() {
    let runs = Mutex::new(Vec::new());
    // ActiveMQ: the data is text; the key, the JMS messageID the broker keeps
    // on redelivery.
    let active = processor(KeySelector::Id);
    invoke(&active, "example-activemq-event.json", &runs)
        .await
        .expect("done");
    invoke(&active, "example-activemq-event.json", &runs)
        .await
        .expect("replayed");
    // The same message with `"properties": null`: read, and replayed.
    invoke(
        &active,
        "example-activemq-event-null-properties.json",
        &runs,
    )
    .await
    .expect("replayed");
    // RabbitMQ: the fixture's message has no messageId; keyed by its data,
    // taken as text.
    let rabbit = processor(KeySelector::custom(|input| Ok(input.value.clone())));
    invoke(&rabbit, "example-rabbitmq-event.json", &runs)
        .await
        .expect("done");
    invoke(&rabbit, "example-rabbitmq-event.json", &runs)
        .await
        .expect("replayed");
    let runs = runs.into_inner().expect("runs");
    assert_eq!(
        runs,
        [
            "Enter some text here for the message body...",
            r#"{"timeout":0,"data":"CZrmf0Gw8Ov4bqLQxD4E"}"#
        ]
    );
}

/// What the source reads of a RabbitMQ message: its queue, and its headers
/// of bytes as text, which a key can come from: a message with the same
/// `header1` replays, one with another `header1` runs.
#[tokio::test]
async fn a_key_comes_from_a_rabbitmq_header_of_bytes() {
    let processor = processor(KeySelector::attribute("header1"));
    let seen = Mutex::new(Vec::new());
    let handler = |m: MqDelivery<Value>| {
        let seen = &seen;
        async move {
            let MqMessage::RabbitMq(queue, message) = &m.message else {
                panic!("a RabbitMQ message");
            };
            seen.lock().expect("seen").push(queue.clone());
            Ok::<_, HandlerError>(json!(message.basic_properties.headers))
        }
    };
    let mut event = fixture("example-rabbitmq-event.json");
    let mut outcomes_of = Vec::new();
    // The same data each time (payload validation would refuse another with
    // the same key), `header2` changing, then `header1`.
    for (header1, header2) in [
        (b"value1", b"value2"),
        (b"value1", b"other2"),
        (b"value9", b"value2"),
    ] {
        let message = &mut event["rmqMessagesByQueue"]["test::/"][0];
        message["basicProperties"]["headers"]["header1"] = json!({"bytes": header1});
        message["basicProperties"]["headers"]["header2"] = json!({"bytes": header2});
        let parsed = AmazonMq::parse(event.clone()).expect("a RabbitMQ event");
        let report = processor.process(parsed, None, handler).await;
        assert_eq!(report.records[0].lane.as_deref(), Some("test::/"));
        outcomes_of.extend(outcomes(&report));
        if outcomes_of.len() == 1 {
            let recorded = report.records[0].outcome.as_ref().ok();
            let headers = recorded.and_then(Outcome::response).expect("a response");
            let expected = json!({"header1": "value1", "header2": "value2", "numberInHeader": 10});
            assert_eq!(headers, &expected);
        }
    }
    assert_eq!(outcomes_of, ["executed", "replayed", "executed"]);
    assert_eq!(*seen.lock().expect("seen"), ["test::/", "test::/"]);
}

/// Another source's event is refused as a whole; a message whose data is
/// not what the handler takes fails alone, and fails the invocation.
#[tokio::test]
async fn wrong_events_are_refused_and_bad_messages_fail_alone() {
    let sqs = json!({"Records": [{"eventSource": "aws:sqs", "body": "{}"}]});
    let msk = json!({"eventSource": "aws:kafka", "records": {}});
    for (event, why) in [
        (sqs, "missing field `eventSource`"),
        (msk, "`aws:mq` or `aws:rmq`"),
    ] {
        let Err(BatchError::WrongEvent { message, .. }) = AmazonMq::parse(event) else {
            panic!("another source's event is no Amazon MQ event");
        };
        assert!(message.contains(why), "{message}");
    }

    let mut event = activemq(&["o-1", "o-2", "o-3"], false);
    event["messages"][1]["data"] = json!("not base64 !");
    event["messages"][2]["data"] = json!(STANDARD.encode("not json {"));
    let event = AmazonMq::parse(event).expect("an ActiveMQ event");
    let processor = processor(KeySelector::pointer("/order_id"));
    let report = processor
        .process(event, None, |_: MqDelivery<Value>| async {
            Ok::<_, HandlerError>(json!("ok"))
        })
        .await;
    assert_eq!(outcomes(&report), ["executed", "failed", "failed"]);
    let reasons: Vec<String> = (report.failures())
        .filter_map(|r| r.outcome.as_ref().err().map(ToString::to_string))
        .collect();
    assert!(reasons[0].contains("is not base64"), "{reasons:?}");
    assert!(reasons[1].contains("is not JSON"), "{reasons:?}");
    let Err(Unfinished::Failed { failed, .. }) = processor.response(&report) else {
        panic!("bad messages fail the invocation");
    };
    assert_eq!(failed, 2);
}
