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
//! ([`Unfinished`], the library's whole-batch answer, names the first failed
//! message and every one not done); on the redelivery, the messages already
//! done replay from the idempotency store and only the others run. Each
//! message runs whatever the others do (`Ordering::Unordered`, the
//! default): the batch comes back whole anyway. A message whose data does
//! not read (not base64, not what the handler's type takes) fails alone,
//! with its reason; a payload that is not an Amazon MQ event (or a message
//! Lambda would never write) fails the invocation as
//! `BatchError::WrongEvent`.
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
//! A handler's type says what it takes of the message's data, as for every
//! source: text (`String`), bytes (`lambda_idempotency::Bytes`), or else
//! JSON parsed into it. A key can come from the body
//! (`KeySelector::pointer`), from an ActiveMQ property or a RabbitMQ header
//! (`KeySelector::attribute`: RabbitMQ delivers a text header as bytes,
//! which this source gives as a string), or from the `messageId`
//! (`KeySelector::Id`: ActiveMQ's JMS id stays the same when the broker
//! redelivers; RabbitMQ's is the publisher's, when it sets one).

use std::collections::BTreeMap;

use aws_lambda_events::activemq::{ActiveMqEvent, ActiveMqMessage};
use aws_lambda_events::rabbitmq::{RabbitMqEvent, RabbitMqMessage};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use lambda_idempotency::IdempotencyKey;
use lambda_idempotency::batch::{
    Attribute, BatchError, Delivery, FailureReason, Keyed, Prepare, Prepared, Preparing, Processor,
    Reading, Source, SourceNames, StreamEvent, Unfinished,
};
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
    id_field: "message_id",
    lane_field: "queue",
    deduplication_id: "a deduplication id (Amazon MQ messages have none)",
    no_lane: "Amazon MQ message without a queue",
};

/// An Amazon MQ event, told by its `eventSource`: an ActiveMQ or a RabbitMQ
/// broker's.
#[derive(Deserialize)]
#[serde(tag = "eventSource")]
enum MqEvent {
    #[serde(rename = "aws:mq")]
    ActiveMq(ActiveMqEvent),
    #[serde(rename = "aws:rmq")]
    RabbitMq(RabbitMqEvent),
}

/// One Amazon MQ message as delivered (a RabbitMQ header of UTF-8 bytes
/// given as a string).
#[derive(Debug, Clone)]
pub enum MqMessage {
    /// An ActiveMQ broker's.
    ActiveMq(ActiveMqMessage),
    /// A RabbitMQ broker's, with its queue (`<queue>::<virtual host>`).
    RabbitMq(String, RabbitMqMessage),
}

/// `m` with its headers of UTF-8 bytes (`{"bytes": [..]}`) as strings.
fn readable(mut m: RabbitMqMessage) -> RabbitMqMessage {
    for value in m.basic_properties.headers.values_mut() {
        let bytes = serde_json::from_value(value["bytes"].clone()).map(String::from_utf8);
        if let Ok(Ok(text)) = bytes {
            *value = Value::String(text);
        }
    }
    m
}

impl Source for AmazonMq {
    type Event = StreamEvent<MqMessage>;
    type Raw = MqMessage;
    type Response = ();
    type Error = Unfinished;
    const NAMES: &'static SourceNames = &NAMES;

    fn parse(payload: Value) -> Result<StreamEvent<MqMessage>, BatchError> {
        let event = serde_json::from_value(payload).map_err(|e| BatchError::WrongEvent {
            expected: "an Amazon MQ",
            message: e.to_string(),
        })?;
        let messages = match event {
            MqEvent::ActiveMq(e) => e.messages.into_iter().map(MqMessage::ActiveMq).collect(),
            MqEvent::RabbitMq(e) => {
                let each = |(q, ms): (String, Vec<_>)| {
                    ms.into_iter()
                        .map(move |m| MqMessage::RabbitMq(q.clone(), readable(m)))
                };
                // Queues in name order, each queue's messages in its order.
                let queues = e.messages_by_queue.into_iter().collect::<BTreeMap<_, _>>();
                queues.into_iter().flat_map(each).collect()
            }
        };
        Ok(StreamEvent::new(messages))
    }
}

impl Delivery for MqMessage {
    fn id(&self) -> Option<&str> {
        let id = match self {
            Self::ActiveMq(m) => &m.message_id,
            Self::RabbitMq(_, m) => &m.basic_properties.message_id,
        };
        id.as_deref().filter(|id| !id.is_empty())
    }

    fn lane(&self) -> Option<&str> {
        match self {
            Self::ActiveMq(m) => m.destination.physical_name.as_deref(),
            Self::RabbitMq(queue, _) => Some(queue),
        }
    }

    /// An ActiveMQ property, a RabbitMQ header that is text.
    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        let text = match self {
            Self::ActiveMq(m) => m.properties.get(name).map(String::as_str),
            Self::RabbitMq(_, m) => m.basic_properties.headers.get(name).and_then(Value::as_str),
        };
        text.map(Attribute::Text)
    }

    /// 2 for a message the broker marked `redelivered`, else 1.
    fn receive_count(&self) -> Option<u32> {
        let redelivered = match self {
            Self::ActiveMq(m) => m.redelivered,
            Self::RabbitMq(_, m) => m.redelivered,
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
    /// Its `data`, read by its type: JSON, text (`String`) or bytes
    /// (`lambda_idempotency::Bytes`).
    pub body: M,
    /// The message as delivered.
    pub message: MqMessage,
    /// Its idempotency key (`None`: it runs unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M: DeserializeOwned> Prepare<MqDelivery<M>> for AmazonMq {
    type Body = M;

    /// The `data`, base64-decoded, read by the handler's type (no `data`:
    /// JSON `null`).
    fn prepare<'r>(&self, at: &Reading<'_>, message: &'r MqMessage) -> Preparing<'r, M> {
        let ident = at.ident();
        let (MqMessage::ActiveMq(ActiveMqMessage { data, .. })
        | MqMessage::RabbitMq(_, RabbitMqMessage { data, .. })) = message;
        let bytes = data
            .as_deref()
            .map(|data| STANDARD.decode(data))
            .transpose();
        let bytes = bytes.map_err(|e| {
            FailureReason::Parse(format!("data of message {ident} is not base64: {e}"))
        })?;
        Prepared::from_payload(ident, "data", bytes)
    }

    fn record(&self, message: MqMessage, body: M, keyed: Keyed) -> MqDelivery<M> {
        let key = keyed.key;
        MqDelivery { body, message, key }
    }
}
