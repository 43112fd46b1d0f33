//! An Amazon MQ source (ActiveMQ and RabbitMQ brokers) for
//! `lambda-idempotency`, written outside the library over its public API
//! alone: an example to copy when a team needs a source the library does not
//! ship. [`AmazonMqProcessor`] runs each message of a batch once; a message
//! delivered again replays its recorded answer.
//!
//! # What Lambda does with an Amazon MQ batch
//!
//! Lambda reads the broker through an event source mapping and invokes the
//! function synchronously with a batch of messages (`BatchSize` up to
//! 10,000; "Using Lambda with Amazon MQ" and "Event source mapping
//! parameters" in the Lambda developer guide). The parameters that apply to
//! Amazon MQ do not include `FunctionResponseTypes`: `ReportBatchItemFailures`
//! exists only for Kinesis, DynamoDB Streams, Amazon MSK, self-managed Kafka
//! and SQS. So there is no partial batch response: the invocation succeeds
//! or fails as a whole, and a failed invocation has the broker deliver the
//! whole batch again (Lambda uses ActiveMQ's default redelivery policy,
//! `maximumRedeliveries` 6, then the broker's dead-letter queue; "Troubleshoot
//! Amazon MQ event source mapping errors"). The guide also warns that a
//! message can be processed more than once.
//!
//! Hence this source: a batch with a message not done fails the invocation
//! ([`Unfinished`], the library's whole-batch answer); on the redelivery, the messages already done replay from
//! the idempotency store and only the others run. Each message runs whatever
//! the others do ([`Ordering::Unordered`]).
//!
//! # Using it
//!
//! ```no_run
//! use amazon_mq_source::{AmazonMqProcessor, MqDelivery};
//! use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//! use serde_json::{Value, json};
//!
//! # async fn run(event: lambda_runtime::LambdaEvent<Value>) -> Result<(), lambda_runtime::Error> {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders"));
//! let processor = AmazonMqProcessor::new(engine, KeySelector::pointer("/order_id"));
//! processor
//!     .handle(event, |message: MqDelivery<Value>| async move {
//!         Ok::<_, HandlerError>(json!({"order": message.body["order_id"]}))
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! A handler typed `String` takes the message's data as text (not JSON);
//! any other type takes it parsed as JSON.

use std::collections::{BTreeMap, HashMap};

use aws_lambda_events::activemq::{ActiveMqEvent, ActiveMqMessage};
use aws_lambda_events::rabbitmq::{RabbitMqEvent, RabbitMqMessage};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lambda_idempotency::batch::{
    Attribute, BatchError, BatchReport, Delivery, FailureReason, IdField, KeyInput, LaneField,
    MalformedRecord, Ordering, Pipeline, Prepare, Prepared, Processor, Source, SourceNames,
    StreamEvent, Unfinished, whole,
};
use lambda_idempotency::{IdempotencyKey, PayloadKind};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Processes the batches of an Amazon MQ event source mapping.
pub type AmazonMqProcessor = Processor<AmazonMq>;

/// The Amazon MQ source (either broker).
#[derive(Debug, Clone, Copy, Default)]
pub struct AmazonMq;

/// What a message's notions are called, in failures and log lines.
static NAMES: SourceNames = SourceNames {
    id: "messageId",
    id_field: IdField::MessageId,
    lane_field: LaneField::Group,
    deduplication_id: "a deduplication id (Amazon MQ messages have none)",
    no_lane: "Amazon MQ message without a queue",
};

/// An Amazon MQ event, told by its `eventSource`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "eventSource")]
pub enum MqEvent {
    /// An ActiveMQ broker's.
    #[serde(rename = "aws:mq")]
    ActiveMq(ActiveMqEvent),
    /// A RabbitMQ broker's.
    #[serde(rename = "aws:rmq")]
    RabbitMq(RabbitMqEvent),
}

/// An Amazon MQ message as delivered.
#[derive(Debug, Clone)]
pub enum MqMessage {
    /// An ActiveMQ broker's.
    ActiveMq(ActiveMqMessage),
    /// A RabbitMQ broker's, with its queue (`<queue>::<virtual host>`).
    RabbitMq(String, RabbitMqMessage),
}

/// One message of a batch, as the source reads it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MqRecord {
    /// The message as delivered.
    pub message: MqMessage,
    /// Its `data` decoded from base64, or why it does not decode.
    pub data: Result<Vec<u8>, String>,
    /// Its text properties (ActiveMQ) or headers (RabbitMQ: a header of
    /// bytes read as UTF-8), what `KeySelector::MessageAttribute` reads.
    pub attributes: HashMap<String, String>,
}

impl From<MqMessage> for MqRecord {
    fn from(message: MqMessage) -> Self {
        let (data, attributes) = match &message {
            MqMessage::ActiveMq(m) => (&m.data, m.properties.clone()),
            MqMessage::RabbitMq(_, m) => {
                let headers = m.basic_properties.headers.iter();
                (
                    &m.data,
                    headers
                        .filter_map(|(k, v)| Some((k.clone(), text(v)?)))
                        .collect(),
                )
            }
        };
        let data = STANDARD.decode(data.as_deref().unwrap_or_default());
        let data = data.map_err(|e| e.to_string());
        Self {
            message,
            data,
            attributes,
        }
    }
}

/// A RabbitMQ header's text: a string, a number, or bytes that are UTF-8.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => String::from_utf8(serde_json::from_value(value.get("bytes")?.clone()).ok()?).ok(),
    }
}

impl Source for AmazonMq {
    type Event = StreamEvent<MqRecord>;
    type Raw = MqRecord;
    type Response = ();
    type Error = Unfinished;
    const NAMES: &'static SourceNames = &NAMES;

    fn parse(payload: Value) -> Result<StreamEvent<MqRecord>, BatchError> {
        let event = serde_json::from_value(payload).map_err(|e| BatchError::WrongEvent {
            expected: "an Amazon MQ",
            message: e.to_string(),
        })?;
        let messages: Vec<MqMessage> = match event {
            MqEvent::ActiveMq(e) => e.messages.into_iter().map(MqMessage::ActiveMq).collect(),
            MqEvent::RabbitMq(e) => {
                let each = |(q, ms): (String, Vec<_>)| {
                    ms.into_iter()
                        .map(move |m| MqMessage::RabbitMq(q.clone(), m))
                };
                // Queues in name order, each queue's messages in its order.
                let queues = e.messages_by_queue.into_iter().collect::<BTreeMap<_, _>>();
                queues.into_iter().flat_map(each).collect()
            }
        };
        Ok(StreamEvent::new(
            messages.into_iter().map(MqRecord::from).collect(),
        ))
    }

    fn ordering(&self, _: &StreamEvent<MqRecord>) -> Ordering {
        Ordering::Unordered
    }

    fn records(&self, event: StreamEvent<MqRecord>) -> Vec<Result<MqRecord, MalformedRecord>> {
        event.records
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<(), Unfinished> {
        whole::answer(report)
    }
}

impl Delivery for MqRecord {
    fn id(&self) -> Option<&str> {
        let id = match &self.message {
            MqMessage::ActiveMq(m) => &m.message_id,
            MqMessage::RabbitMq(_, m) => &m.basic_properties.message_id,
        };
        id.as_deref().filter(|id| !id.is_empty())
    }

    fn lane(&self) -> Option<&str> {
        match &self.message {
            MqMessage::ActiveMq(m) => m.destination.physical_name.as_deref(),
            MqMessage::RabbitMq(queue, _) => Some(queue),
        }
    }

    fn body(&self) -> Option<&[u8]> {
        self.data.as_deref().ok()
    }

    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        self.attributes.get(name).map(|v| Attribute::Text(v))
    }

    /// 2 for a message the broker marked `redelivered`, else 1.
    fn receive_count(&self) -> Option<u32> {
        let redelivered = match &self.message {
            MqMessage::ActiveMq(m) => m.redelivered,
            MqMessage::RabbitMq(_, m) => m.redelivered,
        };
        Some(1 + u32::from(redelivered))
    }

    fn source(&self) -> &'static SourceNames {
        &NAMES
    }
}

/// One message as the handler takes it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MqDelivery<M> {
    /// Its `data`: text for a `String`, else parsed as JSON.
    pub body: M,
    /// The message as delivered.
    pub record: MqRecord,
    /// Its idempotency key (`None`: it runs unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M: DeserializeOwned> Prepare<MqDelivery<M>> for AmazonMq {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: MqRecord,
    ) -> Result<Prepared<MqDelivery<M>>, FailureReason> {
        let parse = |what: String| FailureReason::Parse(format!("message {ident}: {what}"));
        let bytes = record
            .data
            .as_deref()
            .map_err(|e| parse(format!("data is not base64: {e}")))?;
        let document = match PayloadKind::of::<M>() {
            PayloadKind::Text => String::from_utf8(bytes.to_vec())
                .map(Value::String)
                .map_err(|e| parse(format!("data is not UTF-8: {e}")))?,
            _ => serde_json::from_slice(bytes)
                .map_err(|e| parse(format!("data is not JSON: {e}")))?,
        };
        let type_name = std::any::type_name::<M>();
        let body =
            M::deserialize(&document).map_err(|e| parse(format!("data is no {type_name}: {e}")))?;
        let key = pipeline.key_of(ident, KeyInput::new(&document, Some(&record)))?;
        let message = MqDelivery {
            body,
            record,
            key: key.clone(),
        };
        Ok(Prepared::new(message, key, Some(document)))
    }
}
