//! Synthetic events of the stream, Kafka and SNS sources, shaped as Lambda
//! delivers them (the files in `events/` are the reference): for tests that
//! need more records, or other ones, than a sample holds.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// The account of every ARN.
const ACCOUNT: &str = "123456789012";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A Kinesis sequence number: 56 digits, increasing with `n`, distinct per
/// shard.
pub fn kinesis_sequence_number(shard: u32, n: u64) -> String {
    format!(
        "4965800925137074532236445274{:04}{:024}",
        shard % 10_000,
        u128::from(n) * 1_329_227_995_784
    )
}

/// A Kinesis batch of one shard of stream `stream` (a name), as Lambda
/// sends it: record `i` is `(partition key, data)` at sequence number
/// [`kinesis_sequence_number`]`(shard, first + i)`.
pub fn kinesis_event(stream: &str, shard: u32, first: u64, records: &[(&str, &[u8])]) -> Value {
    let arn = format!("arn:aws:kinesis:us-east-1:{ACCOUNT}:stream/{stream}");
    let records: Vec<Value> = records
        .iter()
        .zip(first..)
        .map(|((key, data), n)| {
            let seq = kinesis_sequence_number(shard, n);
            json!({
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": key,
                    "sequenceNumber": seq,
                    "data": b64(data),
                    // Milliseconds, the last digit never 0 (a shorter
                    // fraction is misread by aws_lambda_events 1.2.1).
                    "approximateArrivalTimestamp": (1_796_083_200_123 + n * 1000) as f64 / 1000.0,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": format!("shardId-{shard:012}:{seq}"),
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": crate::kinesis_esm::INVOKE_IDENTITY_ARN,
                "awsRegion": "us-east-1",
                "eventSourceARN": arn,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// One Kafka record: its offset, key and value (raw bytes; `None`: absent)
/// and headers (name, value).
#[derive(Debug, Clone)]
pub struct KafkaRecord<'a> {
    /// Offset in its partition.
    pub offset: i64,
    /// Key bytes (`None`: produced without a key; Lambda leaves `key` out).
    pub key: Option<&'a [u8]>,
    /// Value bytes.
    pub value: &'a [u8],
    /// Headers, in order (written as signed bytes, as Lambda writes them).
    pub headers: Vec<(&'a str, &'a [u8])>,
}

/// Which Kafka event source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kafka {
    /// Amazon MSK (`aws:kafka`, with the cluster's `eventSourceArn`).
    Msk,
    /// Self-managed Apache Kafka (`SelfManagedKafka`, no ARN).
    SelfManaged,
}

/// A Kafka batch of `topic` as Lambda sends it: `partitions` maps a
/// partition number to its records (grouped under `"<topic>-<partition>"`).
pub fn kafka_event(
    source: Kafka,
    topic: &str,
    partitions: &[(i64, Vec<KafkaRecord<'_>>)],
) -> Value {
    let mut records = Map::new();
    for (partition, list) in partitions {
        let list: Vec<Value> = list
            .iter()
            .map(|r| {
                let mut record = json!({
                    "topic": topic,
                    "partition": partition,
                    "offset": r.offset,
                    "timestamp": 1_796_083_200_000i64 + r.offset,
                    "timestampType": "CREATE_TIME",
                });
                if let Some(key) = r.key {
                    record["key"] = json!(b64(key));
                }
                record["value"] = json!(b64(r.value));
                record["headers"] = r
                    .headers
                    .iter()
                    // Bytes as Java writes them: signed.
                    .map(|(name, value)| {
                        let bytes: Vec<i8> =
                            value.iter().map(|b| i8::from_ne_bytes([*b])).collect();
                        json!({ *name: bytes })
                    })
                    .collect();
                record
            })
            .collect();
        records.insert(format!("{topic}-{partition}"), Value::Array(list));
    }
    let mut event = match source {
        Kafka::Msk => json!({
            "eventSource": "aws:kafka",
            "eventSourceArn": format!(
                "arn:aws:kafka:us-east-1:{ACCOUNT}:cluster/test-cluster/751d2973-a626-431c-9d4e-d7975eb44dd7-2"
            ),
            "bootstrapServers": "b-1.testcluster.a1bcde.c2.kafka.us-east-1.amazonaws.com:9098",
        }),
        Kafka::SelfManaged => json!({
            "eventSource": "SelfManagedKafka",
            "bootstrapServers": "kafka-1.internal.example.com:9092",
        }),
    };
    event["records"] = Value::Object(records);
    event
}

/// One SNS notification: its `MessageId`, `Message` and String message
/// attributes.
#[derive(Debug, Clone)]
pub struct Notification<'a> {
    /// SNS `MessageId` (the same on every delivery of one publish).
    pub message_id: &'a str,
    /// `Message`.
    pub message: &'a str,
    /// `MessageAttributes` of type String.
    pub attributes: Vec<(&'a str, &'a str)>,
}

const TOPIC: &str = "order-events";

fn notification_fields(n: &Notification<'_>, url_case: &str) -> Map<String, Value> {
    let topic = format!("arn:aws:sns:us-east-1:{ACCOUNT}:{TOPIC}");
    let subscription = format!("{topic}:61b1ae9a-9bb6-46da-b43e-c74651a2370c");
    let mut m = Map::new();
    m.insert("Type".into(), json!("Notification"));
    m.insert("MessageId".into(), json!(n.message_id));
    m.insert("TopicArn".into(), json!(topic));
    m.insert("Message".into(), json!(n.message));
    m.insert("Timestamp".into(), json!("2026-12-01T00:00:03.104Z"));
    m.insert("SignatureVersion".into(), json!("1"));
    m.insert("Signature".into(), json!(b64(n.message_id.as_bytes())));
    m.insert(
        format!("SigningCert{url_case}"),
        json!("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-d3aa8fc8deced42030bf835deac7b543.pem"),
    );
    m.insert(
        format!("Unsubscribe{url_case}"),
        json!(format!(
            "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={subscription}"
        )),
    );
    if !n.attributes.is_empty() {
        let attrs: Map<String, Value> = n
            .attributes
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!({"Type": "String", "Value": v})))
            .collect();
        m.insert("MessageAttributes".into(), Value::Object(attrs));
    }
    m
}

/// SNS invoking a function directly with `n` (one record; the URLs spelt
/// `SigningCertUrl` / `UnsubscribeUrl`).
pub fn sns_event(n: &Notification<'_>) -> Value {
    let topic = format!("arn:aws:sns:us-east-1:{ACCOUNT}:{TOPIC}");
    json!({
        "Records": [{
            "EventSource": "aws:sns",
            "EventVersion": "1.0",
            "EventSubscriptionArn": format!("{topic}:21be56ed-a058-49f5-8c98-aedd2564c486"),
            "Sns": notification_fields(n, "Url"),
        }]
    })
}

/// The SQS body SNS writes for `n` with raw message delivery off
/// (pretty-printed JSON, `SigningCertURL` / `UnsubscribeURL`).
pub fn sns_body(n: &Notification<'_>) -> String {
    let fields = Value::Object(notification_fields(n, "URL"));
    serde_json::to_string_pretty(&fields).unwrap_or_default()
}

/// A standard-queue SQS event whose bodies are SNS notifications (raw
/// delivery off): record `i` has SQS `messageId` `sqs_ids[i]` and body
/// [`sns_body`]`(notifications[i])`.
///
/// # Panics
/// When the two lists differ in length.
pub fn sns_via_sqs_event(sqs_ids: &[&str], notifications: &[Notification<'_>]) -> Value {
    assert_eq!(sqs_ids.len(), notifications.len());
    let messages: Vec<crate::events::Msg> = sqs_ids
        .iter()
        .zip(notifications)
        .map(|(id, n)| crate::events::Msg::new(*id, sns_body(n)))
        .collect();
    let mut event = crate::events::sqs_event("order-events-consumer", &messages);
    if let Some(records) = event["Records"].as_array_mut() {
        for r in records {
            r["attributes"]["SenderId"] = json!("AIDAIT2UOQQY3AUEKVGXU");
        }
    }
    event
}
