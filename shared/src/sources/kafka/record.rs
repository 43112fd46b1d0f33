//! A Kafka record as the pipeline ([`KafkaDelivery`], its [`Delivery`]) and
//! the handler ([`KafkaMessage`]) see it.

use std::any::Any;
use std::sync::Arc;

use aws_lambda_events::kafka::KafkaRecord;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::MSK_EVENT_SOURCE;
use crate::batch::{Attribute, Delivery, IdField, LaneField, SourceNames};
use crate::key::IdempotencyKey;

/// The names of a Kafka record's notions.
pub(crate) static KAFKA: SourceNames = SourceNames {
    id: "offset",
    id_field: IdField::Offset,
    lane_field: LaneField::Partition,
    deduplication_id: "a deduplication id (Kafka records have none)",
    no_lane: "Kafka record without a topic-partition",
};

/// The separator of a record's id: `<topic-partition>@<offset>`.
pub(super) const AT: char = '@';

/// One header of a Kafka record, decoded (Lambda sends header values as
/// arrays of signed bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaHeader {
    /// The header's name.
    pub name: String,
    /// Its value's bytes.
    pub value: Vec<u8>,
}

/// One delivered Kafka record, decoded: what key functions see
/// (`input.raw::<KafkaDelivery>()`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaDelivery {
    /// Its topic-partition as the event's `records` map names it (`orders-0`).
    pub partition: String,
    /// The record as Lambda delivered it (`key` and `value` in base64).
    pub record: KafkaRecord,
    /// The record's key, decoded (`None`: no key, or not base64).
    pub message_key: Option<Vec<u8>>,
    /// The record's value, decoded (`None`: a tombstone, or not base64).
    pub value: Option<Vec<u8>>,
    /// The headers in the order they were produced, decoded.
    pub headers: Vec<KafkaHeader>,
    /// `<partition>@<offset>`, and the offset as text.
    id: String,
    offset: String,
    /// Why the key or the value could not be decoded.
    pub(super) undecodable: Option<String>,
    /// The event's `eventSource` and `eventSourceARN`.
    origin: (Arc<str>, Option<Arc<str>>),
}

impl KafkaDelivery {
    /// The record `record` of topic-partition `partition`, decoded.
    pub fn new(partition: impl Into<String>, record: KafkaRecord) -> Self {
        let partition = partition.into();
        let mut undecodable = None;
        let mut decode = |what: &str, text: &Option<String>| {
            let decoded = STANDARD.decode(text.as_ref()?).map_err(|e| {
                undecodable.get_or_insert_with(|| format!("its {what} is not base64: {e}"));
            });
            decoded.ok()
        };
        let message_key = decode("key", &record.key);
        let value = decode("value", &record.value);
        // Java's signed bytes, as Lambda writes them.
        let headers = (record.headers.iter().flat_map(|h| h.iter()))
            .map(|(name, bytes)| KafkaHeader {
                name: name.clone(),
                value: bytes.iter().map(|&b| b as u8).collect(),
            })
            .collect();
        Self {
            id: format!("{partition}{AT}{}", record.offset),
            offset: record.offset.to_string(),
            partition,
            record,
            message_key,
            value,
            headers,
            undecodable,
            origin: (Arc::from(MSK_EVENT_SOURCE), None),
        }
    }

    /// The record as delivered by `source` from `arn` (the event's
    /// `eventSource` and `eventSourceARN`).
    pub(super) fn with_origin(mut self, source: Arc<str>, arn: Option<Arc<str>>) -> Self {
        self.origin = (source, arn);
        self
    }

    /// The event's `eventSource` and `eventSourceARN`.
    pub(super) fn origin(&self) -> (&str, Option<&str>) {
        (&self.origin.0, self.origin.1.as_deref())
    }

    /// `<topic-partition>@<offset>` (`orders-0@41`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The record's offset in its partition.
    pub fn offset(&self) -> i64 {
        self.record.offset
    }

    /// The value of the first header named `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        let header = self.headers.iter().find(|h| h.name == name);
        header.map(|h| h.value.as_slice())
    }
}

impl Delivery for KafkaDelivery {
    /// `<topic-partition>@<offset>`.
    fn id(&self) -> Option<&str> {
        Some(&self.id)
    }

    /// The topic-partition (`orders-0`).
    fn lane(&self) -> Option<&str> {
        Some(self.partition.as_str()).filter(|p| !p.is_empty())
    }

    /// The offset.
    fn position(&self) -> Option<&str> {
        Some(&self.offset)
    }

    /// The decoded value.
    fn body(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }

    /// A header whose value is UTF-8 is text; any other is binary.
    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        let text = |bytes| std::str::from_utf8(bytes).map_or(Attribute::Binary, Attribute::Text);
        self.header(name).map(text)
    }

    fn source(&self) -> &'static SourceNames {
        &KAFKA
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One Kafka record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KafkaMessage<M> {
    /// The parsed value (base64-decoded, then JSON; `null` for a tombstone).
    pub body: M,
    /// The record, decoded.
    pub delivery: KafkaDelivery,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
}

impl<M> KafkaMessage<M> {
    /// A message (handler unit tests).
    pub fn new(body: M, delivery: KafkaDelivery) -> Self {
        let key = None;
        Self {
            body,
            delivery,
            key,
        }
    }

    /// The topic.
    pub fn topic(&self) -> Option<&str> {
        self.delivery.record.topic.as_deref()
    }

    /// The topic-partition (`orders-0`).
    pub fn partition(&self) -> &str {
        &self.delivery.partition
    }

    /// The offset in the partition.
    pub fn offset(&self) -> i64 {
        self.delivery.offset()
    }

    /// The Kafka record's key, decoded (not the idempotency key).
    pub fn message_key(&self) -> Option<&[u8]> {
        self.delivery.message_key.as_deref()
    }

    /// The value of the first header named `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.delivery.header(name)
    }
}
