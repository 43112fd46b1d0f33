//! Text and binary payloads, one rule on every source: a handler typed
//! `String` takes the payload as text, one typed bytes (`Vec<u8>`,
//! [`crate::Bytes`]) takes its bytes, anything else reads JSON. Keys come
//! from the record or from a key function over the raw payload; a JSON
//! Pointer over a payload that is not JSON fails its record clearly.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::sync::Mutex;

use crate::batch::{BatchReport, FailureReason};
use crate::error::{HandlerError, KeyError};
use crate::testkit::*;
use crate::{KeySelector, MissingKey, Outcome};

/// The outcomes of a report, in batch order: `executed`, `replayed`,
/// `parked` or the failure's text.
fn outcomes<T>(report: &BatchReport<T>) -> Vec<String> {
    (report.records.iter())
        .map(|r| match &r.outcome {
            Ok(Outcome::Executed(_)) => "executed".to_owned(),
            Ok(Outcome::Replayed(_)) => "replayed".to_owned(),
            Ok(Outcome::Parked { .. }) => "parked".to_owned(),
            Ok(other) => other.label().to_owned(),
            Err(reason) => format!("failed: {reason}"),
        })
        .collect()
}

/// What a handler saw, in order.
#[derive(Default)]
struct Seen<T>(Mutex<Vec<T>>);

impl<T: Clone> Seen<T> {
    fn push(&self, t: T) -> Result<Value, HandlerError> {
        self.0.lock().unwrap().push(t);
        Ok(json!({"ok": true}))
    }

    fn all(&self) -> Vec<T> {
        self.0.lock().unwrap().clone()
    }
}

// SQS.

mod sqs {
    use super::*;
    use crate::sqs::{SqsProcessor, SqsRecord};

    fn processor(key: KeySelector) -> SqsProcessor {
        let (engine, _, _) = memory_engine();
        SqsProcessor::new(engine, key)
    }

    /// A plain-text body, a CSV body and a JSON body reach a `String`
    /// handler as delivered; the second delivery replays each.
    #[tokio::test]
    async fn a_string_handler_takes_a_plain_text_body() {
        let processor = processor(KeySelector::Id);
        let bodies = [
            "plain text, not JSON",
            "id,cents\n7,2500\n",
            "{ \"a\" :  1 }",
        ];
        let event = batch(vec![
            message(Some("m1"), bodies[0]),
            message(Some("m2"), bodies[1]),
            message(Some("m3"), bodies[2]),
        ]);
        let seen = &Seen::default();
        let handler = move |r: SqsRecord<String>| async move { seen.push(r.body) };
        let first = processor.process(event.clone(), None, handler).await;
        assert_eq!(outcomes(&first), ["executed"; 3]);
        assert_eq!(seen.all(), bodies, "each body as delivered, JSON too");
        let again = processor.process(event, None, handler).await;
        assert_eq!(outcomes(&again), ["replayed"; 3]);
        assert_eq!(seen.all().len(), 3);
    }

    /// An XML body reaches a `Vec<u8>` handler and a [`crate::Bytes`]
    /// handler as its bytes; a FIFO record keyed by its deduplication id.
    #[tokio::test]
    async fn a_bytes_handler_takes_the_body_as_bytes() {
        let xml = "<order id=\"7\"><cents>2500</cents></order>";
        let processor = processor(KeySelector::DeduplicationId);
        let event = batch(vec![fifo_message("m1", Some("g1"), xml)]);
        let mut event = event;
        let attributes = &mut event.records[0].attributes;
        attributes.insert("MessageDeduplicationId".into(), "order-7".into());
        let seen = &Seen::default();
        let report = (processor.process(
            event.clone(),
            None,
            move |r: SqsRecord<Vec<u8>>| async move { seen.push(r.body) },
        ))
        .await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(seen.all(), [xml.as_bytes().to_vec()]);
        let typed = &Seen::default();
        let report =
            (processor.process(event, None, move |r: SqsRecord<crate::Bytes>| async move {
                typed.push(r.body.into_vec())
            }))
            .await;
        assert_eq!(outcomes(&report), ["replayed"], "one key, one payload hash");
        assert!(typed.all().is_empty());
    }

    /// The default selector of a JSON source is a pointer: over a payload
    /// taken as text it fails its record saying which selector to use,
    /// even under `MissingKey::RunUnprotected` (never a silent success); a
    /// key function over the raw payload keys it.
    #[tokio::test]
    async fn a_pointer_over_a_text_payload_fails_clearly_and_a_key_function_reads_the_payload() {
        let processor =
            processor(KeySelector::pointer("/order_id")).missing_key(MissingKey::RunUnprotected);
        let event = batch(vec![message(Some("m1"), "order 7, 2500 cents")]);
        let seen = &Seen::default();
        let handler = move |r: SqsRecord<String>| async move { seen.push(r.body) };
        let report = processor.process(event.clone(), None, handler).await;
        let reason = report.records[0].outcome.as_ref().unwrap_err();
        assert!(
            matches!(reason, FailureReason::Key(KeyError::NotJson { pointer }) if pointer == "/order_id"),
            "{reason:?}"
        );
        let text = reason.to_string();
        assert!(
            text.contains("KeySelector::Id") && text.contains("KeyInput::payload"),
            "{text}"
        );
        assert!(reason.is_terminal() && seen.all().is_empty());

        let by_payload = KeySelector::custom(|input| {
            let text = std::str::from_utf8(input.payload.unwrap_or_default()).unwrap_or("");
            Ok(json!(text.split(',').next().unwrap_or("")))
        });
        let (engine, _, _) = memory_engine();
        let processor = SqsProcessor::new(engine, by_payload);
        let report = processor.process(event, None, handler).await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(seen.all(), ["order 7, 2500 cents"]);
    }

    /// A body that is not UTF-8 cannot reach SQS; an SNS notification's
    /// `Message` opened from a body reaches a text handler as delivered.
    #[tokio::test]
    async fn an_opened_envelope_hands_its_message_as_text() {
        use crate::envelope::{EnvelopeMode, Envelopes};
        let notification = json!({
            "Type": "Notification", "MessageId": "sns-1",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders",
            "Message": "order 7 shipped", "Timestamp": "2026-01-01T00:00:00.000Z",
            "SignatureVersion": "1", "Signature": "c2ln",
            "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
        });
        let processor =
            processor(KeySelector::event_id()).envelope(EnvelopeMode::Require(Envelopes::Sns));
        let event = batch(vec![message(Some("m1"), &notification.to_string())]);
        let seen = &Seen::default();
        let report = (processor.process(event, None, move |r: SqsRecord<String>| async move {
            assert_eq!(r.envelope.as_ref().and_then(|e| e.id()), Some("sns-1"));
            seen.push(r.body)
        }))
        .await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(seen.all(), ["order 7 shipped"]);
    }
}

// Kinesis.

mod kinesis {
    use super::*;
    use crate::kinesis::{KinesisProcessor, KinesisRecord, parse_kinesis_event};
    use crate::parking::MemoryParking;

    /// `gzip.compress(b'{"level":"INFO","msg":"started"}\n', mtime=0)`, as
    /// CloudWatch Logs subscriptions write to Kinesis.
    const GZIP: &[u8] = &[
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0xca, 0x49, 0x2d,
        0x4b, 0xcd, 0x51, 0xb2, 0x52, 0xf2, 0xf4, 0x73, 0xf3, 0x57, 0xd2, 0x51, 0xca, 0x2d, 0x4e,
        0x07, 0x72, 0x8a, 0x4b, 0x12, 0x8b, 0x4a, 0x52, 0x53, 0x94, 0x6a, 0xb9, 0x00, 0xe3, 0x73,
        0xae, 0x03, 0x21, 0x00, 0x00, 0x00,
    ];

    fn record(seq: &str, data: &[u8]) -> Value {
        json!({
            "awsRegion": "us-east-1",
            "eventID": format!("shardId-000000000000:{seq}"),
            "eventName": "aws:kinesis:record",
            "eventSource": "aws:kinesis",
            "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/logs",
            "eventVersion": "1.0",
            "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda-role",
            "kinesis": {
                "approximateArrivalTimestamp": 1795946400.123,
                "data": STANDARD.encode(data),
                "kinesisSchemaVersion": "1.0",
                "partitionKey": "pk-1",
                "sequenceNumber": seq,
            },
        })
    }

    fn processor() -> KinesisProcessor {
        let (engine, _, _) = memory_engine();
        KinesisProcessor::new(engine, KeySelector::Id)
    }

    /// CSV text reaches a `String` handler, gzip bytes a `Vec<u8>` handler,
    /// each keyed by its sequence number; redelivered, each replays.
    #[tokio::test]
    async fn text_and_gzip_bytes_reach_their_handlers() {
        let csv = "sensor-1,21.5\nsensor-2,19.0\n";
        let event = || parse_kinesis_event(json!({"Records": [record("100", csv.as_bytes())]}));
        let processor = processor();
        let seen = &Seen::default();
        let text = move |r: KinesisRecord<String>| async move { seen.push(r.body) };
        let report = processor.process(event().unwrap(), None, text).await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(seen.all(), [csv]);
        let again = processor.process(event().unwrap(), None, text).await;
        assert_eq!(outcomes(&again), ["replayed"]);

        let gzip = || parse_kinesis_event(json!({"Records": [record("200", GZIP)]})).unwrap();
        let bytes = &Seen::default();
        let handler = move |r: KinesisRecord<Vec<u8>>| async move { bytes.push(r.body) };
        let report = processor.process(gzip(), None, handler).await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(bytes.all(), [GZIP.to_vec()]);
        let again = processor.process(gzip(), None, handler).await;
        assert_eq!(outcomes(&again), ["replayed"]);
    }

    /// Bytes that are not UTF-8 for a `String` handler fail their record
    /// terminally, saying so: with parking it is parked and the shard goes
    /// on.
    #[tokio::test]
    async fn bytes_that_are_not_text_for_a_string_handler_are_parked() {
        let parking = MemoryParking::new();
        let processor = processor().parking(parking.clone());
        let event = parse_kinesis_event(json!({"Records": [
            record("100", GZIP),
            record("101", b"after the poison"),
        ]}))
        .unwrap();
        let seen = &Seen::default();
        let report = (processor.process(event, None, move |r: KinesisRecord<String>| async move {
            seen.push(r.body)
        }))
        .await;
        assert_eq!(outcomes(&report), ["parked", "executed"]);
        assert_eq!(seen.all(), ["after the poison"]);
        let parked = parking.parked();
        assert!(
            parked[0].reason.contains("is not UTF-8 text") && parked[0].reason.contains("Bytes"),
            "{}",
            parked[0].reason
        );
    }
}

// Kafka.

mod kafka {
    use super::*;
    use crate::kafka::{
        KafkaItemFailures, KafkaMessage, KafkaProcessor, SchemaId, SchemaRegistry,
        parse_kafka_event,
    };
    use crate::parking::MemoryParking;

    fn record(offset: i64, value: &[u8]) -> Value {
        json!({
            "topic": "orders", "partition": 0, "offset": offset,
            "timestamp": 1796083200104_i64, "timestampType": "CREATE_TIME",
            "key": STANDARD.encode("cust-1"), "value": STANDARD.encode(value),
            "headers": [{"idempotency-key": format!("op-{offset}").into_bytes()}],
        })
    }

    fn event(values: &[&[u8]]) -> Value {
        let records: Vec<Value> = (values.iter().enumerate())
            .map(|(i, v)| record(40 + i as i64, v))
            .collect();
        json!({
            "eventSource": "aws:kafka", "bootstrapServers": "b-1.example:9098",
            "eventSourceArn": "arn:aws:kafka:us-east-1:123456789012:cluster/orders/abc",
            "records": {"orders-0": records},
        })
    }

    fn processor() -> KafkaProcessor {
        let (engine, _, _) = memory_engine();
        KafkaProcessor::new(engine, KeySelector::attribute("idempotency-key"))
    }

    /// Text values reach a `String` handler, binary ones (an Avro body) a
    /// `Vec<u8>` handler, keyed by a header; redelivered, each replays.
    #[tokio::test]
    async fn text_and_bytes_values_reach_their_handlers() {
        let processor = processor();
        let values: [&[u8]; 2] = [b"order 7 placed", b"<order id=\"8\"/>"];
        let seen = &Seen::default();
        let text = move |m: KafkaMessage<String>| async move { seen.push(m.body) };
        let parsed = || parse_kafka_event(event(&values)).unwrap();
        let report = processor.process(parsed(), None, text).await;
        assert_eq!(outcomes(&report), ["executed"; 2]);
        assert_eq!(seen.all(), ["order 7 placed", "<order id=\"8\"/>"]);
        assert_eq!(
            outcomes(&processor.process(parsed(), None, text).await),
            ["replayed"; 2]
        );

        // Avro's binary encoding of {"id": 7, "cents": 2500}: zigzag varints.
        let avro: &[u8] = &[0x0e, 0x88, 0x27];
        let binary = || parse_kafka_event(event(&[avro, &[0xff, 0x00, 0xfe]])).unwrap();
        let processor = self::processor();
        let bytes = &Seen::default();
        let handler = move |m: KafkaMessage<Vec<u8>>| async move { bytes.push(m.body) };
        let report = processor.process(binary(), None, handler).await;
        assert_eq!(outcomes(&report), ["executed"; 2]);
        assert_eq!(bytes.all(), [avro.to_vec(), vec![0xff, 0x00, 0xfe]]);
        assert_eq!(
            outcomes(&processor.process(binary(), None, handler).await),
            ["replayed"; 2]
        );
    }

    /// Values framed by a schema registry reach a bytes handler with the
    /// schema id beside the payload, the header taken off: the Confluent
    /// wire format and the AWS Glue Schema Registry's header. A value
    /// without the header can never be read: it fails terminally, parked.
    #[tokio::test]
    async fn schema_registry_framed_values_reach_a_bytes_handler_with_their_schema_id() {
        let avro: &[u8] = &[0x0e, 0x88, 0x27];
        let confluent = [&[0u8, 0, 0, 0x01, 0x0b][..], avro].concat(); // schema id 267
        let uuid = [
            0xb0, 0xa1, 0x4c, 0x2e, 0x9d, 0x3f, 0x4e, 0x11, 0x8a, 0x5b, 0x6c, 0x7d, 0x8e, 0x9f,
            0x00, 0x12,
        ];
        let glue = [&[3u8, 0][..], &uuid, avro].concat();
        let unframed: &[u8] = b"{\"id\":7}";
        let parking = MemoryParking::new();
        let processor = processor()
            .schema_registry(SchemaRegistry::Any)
            .parking(parking.clone());
        let seen = &Seen::default();
        let handler =
            |m: KafkaMessage<crate::Bytes>| async move { seen.push((m.schema, m.body.into_vec())) };
        let parsed = parse_kafka_event(event(&[&confluent, &glue, unframed])).unwrap();
        let report = processor.process(parsed, None, handler).await;
        assert_eq!(outcomes(&report), ["executed", "executed", "parked"]);
        let version = uuid;
        assert_eq!(
            seen.all(),
            [
                (Some(SchemaId::Confluent(267)), avro.to_vec()),
                (
                    Some(SchemaId::Glue {
                        version,
                        zlib: false
                    }),
                    avro.to_vec()
                ),
            ]
        );
        let glue_id = SchemaId::Glue {
            version,
            zlib: false,
        };
        assert_eq!(
            glue_id.glue_uuid().as_deref(),
            Some("b0a14c2e-9d3f-4e11-8a5b-6c7d8e9f0012")
        );
        let reason = &parking.parked()[0].reason;
        assert!(
            reason.contains("not framed by the AWS Glue Schema Registry"),
            "{reason}"
        );

        // Confluent framing around JSON: a JSON handler reads the payload.
        let (engine, _, _) = memory_engine();
        let json_processor = KafkaProcessor::new(engine, KeySelector::pointer("/id"))
            .schema_registry(SchemaRegistry::Confluent);
        let framed = [&[0u8, 0, 0, 0, 9][..], b"{\"id\":\"evt-9\"}"].concat();
        let parsed = parse_kafka_event(event(&[&framed])).unwrap();
        let ids = &Seen::default();
        let report = (json_processor.process(parsed, None, |m: KafkaMessage<Value>| async move {
            ids.push((m.schema, m.body))
        }))
        .await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(
            ids.all(),
            [(Some(SchemaId::Confluent(9)), json!({"id": "evt-9"}))]
        );
    }

    /// Under the default `FailBatch` mode, without a parking, a value that
    /// can never decode does not stall its partition: it is parked in the
    /// log, the records after it run, and the invocation succeeds. Under
    /// `Reported` it is named.
    #[tokio::test]
    async fn an_undecodable_value_under_the_default_mode_does_not_stall_its_partition() {
        let processor = processor();
        let values: [&[u8]; 3] = [b"{\"n\":1}", b"not json {", b"{\"n\":3}"];
        let seen = &Seen::default();
        let handler = move |m: KafkaMessage<Value>| async move { seen.push(m.body) };
        let report =
            (processor.process(parse_kafka_event(event(&values)).unwrap(), None, handler)).await;
        assert_eq!(outcomes(&report), ["executed", "parked", "executed"]);
        assert_eq!(seen.all(), [json!({"n": 1}), json!({"n": 3})]);
        let response = processor
            .response(&report)
            .expect("the invocation succeeds");
        assert!(response.batch_item_failures.is_empty());

        let reported = self::processor().item_failures(KafkaItemFailures::Reported);
        let report =
            (reported.process(parse_kafka_event(event(&values)).unwrap(), None, handler)).await;
        let response = reported.response(&report).unwrap();
        let named: Vec<i64> = (response.batch_item_failures.iter())
            .map(|f| f.item_identifier.offset)
            .collect();
        assert_eq!(
            named,
            [41, 42],
            "the undecodable value and the one behind it"
        );
    }
}

// SNS.

mod sns {
    use super::*;
    use crate::sns::{Notification, SnsProcessor, parse_sns_event};

    /// A notification's `Message` reaches a bytes handler as delivered, a
    /// JSON one included; keyed by the SNS `MessageId`.
    #[tokio::test]
    async fn a_bytes_handler_takes_the_message_as_delivered() {
        let sample = event_json("sns-notification.json");
        let message = sample["Records"][0]["Sns"]["Message"]
            .as_str()
            .unwrap()
            .to_owned();
        let (engine, _, _) = memory_engine();
        let processor = SnsProcessor::new(engine, KeySelector::event_id());
        let seen = &Seen::default();
        let handler = move |n: Notification<Vec<u8>>| async move { seen.push(n.body) };
        let event = || parse_sns_event(sample.clone()).unwrap();
        let report = processor.process(event(), None, handler).await;
        assert_eq!(outcomes(&report), ["executed"]);
        assert_eq!(seen.all(), [message.into_bytes()]);
        assert_eq!(
            outcomes(&processor.process(event(), None, handler).await),
            ["replayed"]
        );

        // A pointer into the Message a bytes handler takes finds no JSON:
        // the notification fails, even where a missing key would run
        // unprotected; one into the notification itself still keys it.
        let (engine, _, _) = memory_engine();
        let into_message = SnsProcessor::new(engine, KeySelector::pointer("/Message/event_id"))
            .missing_key(MissingKey::RunUnprotected);
        let report = into_message.process(event(), None, handler).await;
        let reason = report.records[0].outcome.as_ref().unwrap_err();
        assert!(
            matches!(reason, FailureReason::Key(KeyError::NotJson { .. })),
            "{reason:?}"
        );
        let (engine, _, _) = memory_engine();
        let by_id = SnsProcessor::new(engine, KeySelector::pointer("/MessageId"));
        assert_eq!(
            outcomes(&by_id.process(event(), None, handler).await),
            ["executed"]
        );
    }
}

// EventBridge.

mod eventbridge {
    use super::*;
    use crate::eventbridge::{EventBridgeEvent, EventBridgeProcessor, EventPayload};

    /// An EventBridge event reaches a `String` handler with its `detail`'s
    /// JSON text as delivered; the retry replays.
    #[tokio::test]
    async fn a_string_handler_takes_the_details_text() {
        let text = r#"{"version":"0","id":"evt-1","detail-type":"OrderPlaced","source":"shop","account":"123456789012","time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{"order_id": "ord-1",  "cents": 12345678901234567890}}"#;
        let (engine, _, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine);
        let seen = &Seen::default();
        let handler = move |e: EventBridgeEvent<String>| async move { seen.push(e.detail) };
        let payload = || EventPayload::from_text(text).unwrap();
        let first = processor.process(payload(), None, handler).await.unwrap();
        assert!(matches!(first, Outcome::Executed(_)), "{first:?}");
        assert_eq!(
            seen.all(),
            [r#"{"order_id": "ord-1",  "cents": 12345678901234567890}"#]
        );
        let again = processor.process(payload(), None, handler).await.unwrap();
        assert!(matches!(again, Outcome::Replayed(_)), "{again:?}");

        let bytes = &Seen::default();
        let (engine, _, _) = memory_engine();
        let processor = EventBridgeProcessor::new(engine);
        let value: Value = serde_json::from_str(text).unwrap();
        (processor.process(
            value,
            None,
            move |e: EventBridgeEvent<crate::Bytes>| async move { bytes.push(e.detail.into_vec()) },
        ))
        .await
        .unwrap();
        let detail: Value = serde_json::from_slice(&bytes.all()[0]).unwrap();
        assert_eq!(detail["order_id"], "ord-1");
    }
}
