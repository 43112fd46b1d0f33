//! The invocation's answer for Kafka: by default a batch with a record not
//! done fails the invocation; under `KafkaItemFailures::Reported` the
//! response names every failed and skipped record.

use super::*;

#[test]
fn item_identifiers_split_at_the_last_at() {
    let mut response = KafkaEventResponse::default();
    for id in ["some.topic-3@42", "no-offset", "t-0@x", "orders-1@17"] {
        response.add_item_failure(id);
    }
    assert_eq!(
        serde_json::to_string(&response).unwrap(),
        r#"{"batchItemFailures":[{"itemIdentifier":{"partition":"some.topic-3","offset":42}},{"itemIdentifier":{"partition":"orders-1","offset":17}}]}"#
    );
}

/// With the mapping processing item failures (provisioned mode,
/// `ReportBatchItemFailures`), the response names every failed and every
/// skipped record of each partition, not only the first: whether Lambda
/// resumes at the lowest named offset or retries only the named records,
/// none of them is committed.
#[tokio::test]
async fn reported_mode_names_every_failed_and_skipped_record_of_each_partition() {
    let sink = Sink::failing(vec!["evt-11", "evt-21"]);
    let processor = processor().item_failures(KafkaItemFailures::Reported);
    let report = processor
        .process(two_partitions(), None, |m| sink.handle(m))
        .await;
    assert_eq!(
        sink.ran(),
        ["orders-0@10", "orders-0@11", "orders-1@20", "orders-1@21"]
    );
    let response = processor.response(&report).unwrap();
    let named: Vec<(String, i64)> = response
        .batch_item_failures
        .iter()
        .map(|f| {
            (
                f.item_identifier.partition.clone(),
                f.item_identifier.offset,
            )
        })
        .collect();
    let at = |p: &str, o: i64| (p.to_owned(), o);
    assert_eq!(
        named,
        [
            at("orders-0", 11),
            at("orders-0", 12),
            at("orders-0", 13),
            at("orders-0", 14),
            at("orders-1", 21),
            at("orders-1", 22),
        ]
    );
    // What was done is not named: 10 and 20 commit.
    assert!(!named.contains(&at("orders-0", 10)) && !named.contains(&at("orders-1", 20)));
}

/// By default (a mapping that does not act on `batchItemFailures`) a batch
/// with one failed record fails the invocation, naming the records not
/// done: Lambda retries the batch instead of committing them.
#[cfg(feature = "lambda")]
#[tokio::test]
async fn by_default_one_failed_record_fails_the_invocation() {
    let ctx = lambda_runtime::Context::default();
    let event = two_partitions_json;
    let sink = Sink::failing(vec!["evt-13"]);
    let err = processor()
        .handle(
            lambda_runtime::LambdaEvent::new(event(), ctx.clone()),
            |m| sink.handle(m),
        )
        .await
        .unwrap_err();
    // The whole-batch answer's errorType is its first failure's.
    assert_eq!(crate::diagnostic::error_type(&*err), "HandlerFailed");
    let text = err.to_string();
    assert!(
        text.starts_with("2 records not done (orders-0@13, orders-0@14)"),
        "{text}"
    );
    assert!(
        text.contains("evt-13 failed"),
        "the first failure's reason: {text}"
    );
    let failed = err.downcast_ref::<KafkaError>().unwrap();
    assert!(matches!(
        failed,
        KafkaError::Failed { records, reason: FailureReason::Handler { .. }, failed: 2, .. }
            if records == &["orders-0@13", "orders-0@14"]
    ));
    // The retry: what was done replays, the rest runs, the invocation succeeds.
    let again = Sink::default();
    let processor = processor();
    let response = processor
        .handle(lambda_runtime::LambdaEvent::new(event(), ctx), |m| {
            again.handle(m)
        })
        .await
        .unwrap();
    assert!(response.batch_item_failures.is_empty());
}

#[cfg(feature = "lambda")]
#[tokio::test]
async fn handle_answers_by_the_mode() {
    let ctx = lambda_runtime::Context::default();
    let sink = Sink::failing(vec!["evt-4101"]);
    let msk = || lambda_runtime::LambdaEvent::new(event_json("kafka-msk-orders.json"), ctx.clone());
    // orders-1@17's poison value is parked in the log; orders-1@18 fails.
    let err = processor()
        .handle(msk(), |m| sink.handle(m))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("(orders-1@18)"), "{err}");
    let response = processor()
        .item_failures(KafkaItemFailures::Reported)
        .handle(msk(), |m| sink.handle(m))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": [
            {"itemIdentifier": {"partition": "orders-1", "offset": 17}},
            {"itemIdentifier": {"partition": "orders-1", "offset": 18}},
        ]})
    );
    let not_kafka = processor()
        .handle(
            lambda_runtime::LambdaEvent::new(event_json("sns-notification.json"), ctx),
            |m| sink.handle(m),
        )
        .await
        .unwrap_err();
    assert_eq!(crate::diagnostic::error_type(&*not_kafka), "InvalidEvent");
}

/// The former module example: a poison value can never decode. By default
/// (`FailBatch`, no parking) it is parked in the log and its partition goes
/// on, since the mapping would retry the batch forever; under `Reported`
/// the response names it and the record behind it.
#[tokio::test]
async fn a_poison_value_is_parked_in_the_log_by_default_or_is_reported() {
    use base64::Engine as _;
    #[derive(Deserialize)]
    struct Order {
        #[allow(dead_code)]
        event_id: String,
        total_cents: i64,
    }
    let (engine, _, _) = memory_engine();
    let processor = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"));
    let record = |offset: i64, value: &str| {
        json!({
            "topic": "orders", "partition": 0, "offset": offset,
            "timestamp": 1796083200104_i64, "timestampType": "CREATE_TIME",
            "value": base64::engine::general_purpose::STANDARD.encode(value), "headers": [],
        })
    };
    let event = parse_kafka_event(json!({
        "eventSource": "aws:kafka", "bootstrapServers": "b-1.example:9098",
        "records": {"orders-0": [
            record(41, r#"{"event_id":"evt-1","total_cents":2500}"#),
            record(42, "not json"),                                  // poison: never decodes
            record(43, r#"{"event_id":"evt-3","total_cents":900}"#), // runs by default
        ]},
    }))
    .expect("a Kafka event");
    let handler = |m: KafkaMessage<Order>| async move {
        Ok::<_, HandlerError>(json!({"charged": m.body.total_cents}))
    };
    let report = processor.process(event.clone(), None, handler).await;
    // By default 42 is parked in the log, 43 runs, the invocation succeeds.
    assert!(matches!(
        report.records[1].outcome,
        Ok(Outcome::Parked { .. })
    ));
    assert!(matches!(
        report.records[2].outcome,
        Ok(Outcome::Executed(_))
    ));
    let response = processor.response(&report).unwrap();
    assert!(response.batch_item_failures.is_empty());
    // A mapping in provisioned mode with ReportBatchItemFailures: 42 and 43.
    let (engine, _, _) = memory_engine();
    let reported = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"))
        .item_failures(KafkaItemFailures::Reported);
    let report = reported.process(event, None, handler).await;
    let response: KafkaEventResponse = reported.response(&report).unwrap();
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({"batchItemFailures": [
            {"itemIdentifier": {"partition": "orders-0", "offset": 42}},
            {"itemIdentifier": {"partition": "orders-0", "offset": 43}},
        ]})
    );
}
