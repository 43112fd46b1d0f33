//! Events as Lambda delivers them, for every source the crate handles: the
//! JSON a function receives (`serde_json::Value`), which parses as its
//! `aws_lambda_events` type ([`typed`]) and is accepted by its processor.
//!
//! Every ARN is in account `123456789012`, region `us-east-1`. Ids,
//! sequence numbers and timestamps are derived from the arguments, so the
//! same call builds the same event: a redelivery is the same call again.

use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// The account of every ARN.
pub const ACCOUNT: &str = "123456789012";

/// The identity Lambda invokes a Kinesis function as (`invokeIdentityArn`).
pub const INVOKE_IDENTITY_ARN: &str = "arn:aws:iam::123456789012:role/kinesis-esm";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `event` as its `aws_lambda_events` type (`SqsEvent`, `KinesisEvent`,
/// ...).
///
/// # Panics
/// When `event` is not of that type's shape.
pub fn typed<T: DeserializeOwned>(event: &Value) -> T {
    serde_json::from_value(event.clone()).unwrap_or_else(|e| {
        panic!(
            "not a {}: {e}",
            std::any::type_name::<T>().rsplit("::").next().unwrap_or("")
        )
    })
}

/// One message of an SQS event ([`sqs_event`]).
#[derive(Debug, Clone)]
pub struct Msg {
    /// `messageId`.
    pub id: String,
    /// `body`.
    pub body: String,
    /// `MessageGroupId` (FIFO).
    pub group: Option<String>,
    /// `ApproximateReceiveCount` (1 unless set).
    pub receive_count: u32,
    /// `messageAttributes` of type String.
    pub attributes: Vec<(String, String)>,
}

impl Msg {
    /// A standard-queue message.
    pub fn new(id: impl Into<String>, body: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            body: body.into(),
            group: None,
            receive_count: 1,
            attributes: Vec::new(),
        }
    }

    /// A FIFO message in `group`.
    #[must_use]
    pub fn in_group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Delivered `count` times (`ApproximateReceiveCount`).
    #[must_use]
    pub fn received(mut self, count: u32) -> Self {
        self.receive_count = count;
        self
    }

    /// With the String message attribute `name`.
    #[must_use]
    pub fn attribute(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.push((name.into(), value.into()));
        self
    }
}

/// An SQS event as Lambda delivers it, from `queue` (a queue name; a
/// `.fifo` name makes it FIFO, each message then needs a group).
pub fn sqs_event(queue: &str, messages: &[Msg]) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut attributes = json!({
                "ApproximateReceiveCount": m.receive_count.to_string(),
                "SentTimestamp": (1_795_950_000_000u64 + i as u64).to_string(),
                "SenderId": "AROAEXAMPLE:test",
                "ApproximateFirstReceiveTimestamp": (1_795_950_000_100u64 + i as u64).to_string(),
            });
            if let Some(group) = &m.group {
                attributes["MessageGroupId"] = json!(group);
                attributes["MessageDeduplicationId"] = json!(format!("dedup-{}", m.id));
                attributes["SequenceNumber"] = json!(format!(
                    "{:020}",
                    18_000_000_000_000_000_000u128 + i as u128
                ));
            }
            let message_attributes: Map<String, Value> = m
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), json!({"stringValue": v, "dataType": "String"})))
                .collect();
            json!({
                "messageId": m.id,
                "receiptHandle": format!("handle-{}", m.id),
                "body": m.body,
                "attributes": attributes,
                "messageAttributes": message_attributes,
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{queue}"),
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    json!({ "Records": records })
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
                "invokeIdentityArn": INVOKE_IDENTITY_ARN,
                "awsRegion": "us-east-1",
                "eventSourceARN": arn,
            })
        })
        .collect();
    json!({ "Records": records })
}

/// One change of a DynamoDB stream ([`dynamodb_stream_event`]): the item's
/// keys and images in DynamoDB JSON (`{"id": {"S": "a"}}`).
#[derive(Debug, Clone)]
pub struct Change {
    /// `INSERT`, `MODIFY` or `REMOVE`.
    pub event_name: &'static str,
    /// `Keys`.
    pub keys: Value,
    /// `NewImage` (none on a `REMOVE`).
    pub new_image: Option<Value>,
    /// `OldImage` (none on an `INSERT`).
    pub old_image: Option<Value>,
    /// Deleted by Time to Live (the `userIdentity` DynamoDB's TTL sets).
    pub ttl: bool,
}

impl Change {
    /// An item written for the first time.
    pub fn insert(keys: Value, new_image: Value) -> Self {
        Self {
            event_name: "INSERT",
            keys,
            new_image: Some(new_image),
            old_image: None,
            ttl: false,
        }
    }

    /// An item changed from `old_image` to `new_image`.
    pub fn modify(keys: Value, old_image: Value, new_image: Value) -> Self {
        Self {
            event_name: "MODIFY",
            keys,
            new_image: Some(new_image),
            old_image: Some(old_image),
            ttl: false,
        }
    }

    /// An item deleted.
    pub fn remove(keys: Value, old_image: Value) -> Self {
        Self {
            event_name: "REMOVE",
            keys,
            new_image: None,
            old_image: Some(old_image),
            ttl: false,
        }
    }

    /// Deleted by Time to Live, not by a caller.
    #[must_use]
    pub fn by_ttl(mut self) -> Self {
        self.ttl = true;
        self
    }
}

/// A DynamoDB Streams batch of table `table` as Lambda sends it: change `i`
/// at sequence number `first + i` (21 digits), `NEW_AND_OLD_IMAGES`.
pub fn dynamodb_stream_event(table: &str, first: u64, changes: &[Change]) -> Value {
    let arn = format!(
        "arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{table}/stream/2026-11-30T08:15:42.517"
    );
    let records: Vec<Value> = changes
        .iter()
        .zip(first..)
        .map(|(c, n)| {
            let mut dynamodb = json!({
                "ApproximateCreationDateTime": 1_796_083_200 + n,
                "Keys": c.keys,
                "SequenceNumber": format!("{:021}", 700_000_000_000_000_000_000u128 + u128::from(n)),
                "SizeBytes": 100,
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            });
            if let Some(image) = &c.new_image {
                dynamodb["NewImage"] = image.clone();
            }
            if let Some(image) = &c.old_image {
                dynamodb["OldImage"] = image.clone();
            }
            let mut record = json!({
                "eventID": format!("{n:032x}"),
                "eventName": c.event_name,
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": dynamodb,
                "eventSourceARN": arn,
            });
            if c.ttl {
                record["userIdentity"] =
                    json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
            }
            record
        })
        .collect();
    json!({ "Records": records })
}

/// One Kafka record ([`kafka_event`]): its offset, key and value (raw
/// bytes; `None`: absent) and headers (name, value).
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

/// One SNS notification ([`sns_event`], [`sns_body`]): its `MessageId`,
/// `Message` and String message attributes.
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
    let messages: Vec<Msg> = sqs_ids
        .iter()
        .zip(notifications)
        .map(|(id, n)| Msg::new(*id, sns_body(n)))
        .collect();
    let mut event = sqs_event("order-events-consumer", &messages);
    if let Some(records) = event["Records"].as_array_mut() {
        for r in records {
            r["attributes"]["SenderId"] = json!("AIDAIT2UOQQY3AUEKVGXU");
        }
    }
    event
}

/// An EventBridge event as a rule's target receives it: `id`, `source`,
/// `detail-type` and `detail`.
pub fn eventbridge_event(id: &str, source: &str, detail_type: &str, detail: Value) -> Value {
    json!({
        "version": "0",
        "id": id,
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": "2026-11-29T10:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    })
}
