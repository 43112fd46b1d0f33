//! Kafka batches (Amazon MSK, self-managed Apache Kafka) on the batch core:
//! [`KafkaProcessor`]. The guide: [`guide::sources::kafka`](crate::guide::sources::kafka), the repository's `docs/sources/kafka.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

pub use aws_lambda_events::kafka::{KafkaEvent, KafkaRecord};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::batch::whole;
use crate::batch::{Answer, Attribute, BatchError, BatchReport, Delivery, FailureReason, Keyed};
use crate::batch::{MalformedRecord, Ordering, Parks, PartialResponse, Preparing, Reading};
use crate::batch::{Prepare, Prepared, Processor, Source, SourceNames, StreamEvent};
use crate::batch::{Within, json_type, malformed::text};
use crate::parking::{LogParking, Parking};
use crate::{batch::parking::Ticket, key::IdempotencyKey};

/// The `eventSource`, `eventSourceArn` and `bootstrapServers` of a Kafka
/// event, shared by its records.
type Origin = Arc<(String, Option<String>, Option<String>)>;

mod schema;
pub use schema::{SchemaId, SchemaRegistry};

/// The `eventSource` of an Amazon MSK event.
pub const MSK_EVENT_SOURCE: &str = "aws:kafka";
/// The `eventSource` of a self-managed Apache Kafka event.
pub const SELF_MANAGED_EVENT_SOURCE: &str = "SelfManagedKafka";

static KAFKA: SourceNames = SourceNames {
    id: "offset",
    id_field: "offset",
    lane_field: "partition",
    deduplication_id: "a deduplication id (Kafka records have none)",
    no_lane: "Kafka record without a topic-partition",
};

/// Processes Kafka batches ([`Processor`] over [`Kafka`]), keyed by a business
/// key in the value or a header, never the offset.
pub type KafkaProcessor = Processor<Kafka>;

/// The Kafka source and its settings.
#[derive(Debug, Clone, Default)]
pub struct Kafka {
    order: KafkaOrder,
    item_failures: KafkaItemFailures,
    schema_registry: Option<SchemaRegistry>,
}

/// Where a Kafka record that can never be prepared goes under
/// [`KafkaItemFailures::FailBatch`] without a parking: the log.
static LOG_PARKING: LogParking = LogParking;

/// What a Kafka record keeps its order with ([`KafkaProcessor::order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KafkaOrder {
    /// Its topic-partition (Kafka's own guarantee). The default.
    #[default]
    Partition,
    /// Its record key within its topic-partition.
    RecordKey,
}

/// Whether the event source mapping acts on `batchItemFailures`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KafkaItemFailures {
    /// It does not: a batch with a record not done fails ([`KafkaError`]).
    /// The default: safe with any mapping.
    #[default]
    FailBatch,
    /// Provisioned mode with `ReportBatchItemFailures`: the response names
    /// every failed and every skipped record.
    Reported,
}

/// A Kafka event as parsed: its records in batch order (topic-partitions by
/// name, each in delivery order), each decoded or, when it does not parse, a
/// [`MalformedRecord`] (which fails alone).
pub type KafkaStreamEvent = StreamEvent<KafkaDelivery>;

impl From<KafkaEvent> for KafkaStreamEvent {
    fn from(event: KafkaEvent) -> Self {
        let source = event.event_source.unwrap_or(MSK_EVENT_SOURCE.to_owned());
        let origin = Arc::new((source, event.event_source_arn, event.bootstrap_servers));
        let mut deliveries = Vec::new();
        for (partition, records) in BTreeMap::from_iter(event.records) {
            for record in records {
                let origin = origin.clone();
                deliveries.push(KafkaDelivery::of_event(partition.clone(), record, origin));
            }
        }
        Self::new(deliveries)
    }
}

impl Source for Kafka {
    type Event = KafkaStreamEvent;
    type Raw = KafkaDelivery;
    type Response = KafkaEventResponse;
    type Error = KafkaError;
    const ORDERING: Ordering = Ordering::StopLane;
    const NAMES: &'static SourceNames = &KAFKA;

    fn parse(payload: Value) -> Result<KafkaStreamEvent, BatchError> {
        parse_kafka_event(payload)
    }

    fn within(&self, delivery: &KafkaDelivery) -> Within {
        self.within(Some(delivery.record.key.as_deref()))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        match raw.get("key") {
            Some(Value::String(key)) => self.within(Some(Some(key))),
            Some(Value::Null) => self.within(Some(None)),
            _ => self.within(None),
        }
    }

    fn ticket(&self, delivery: &KafkaDelivery) -> Option<Ticket> {
        let (source, arn, servers) = &*delivery.origin;
        let ticket = Ticket::new(source, arn.as_deref(), delivery, delivery.record.clone());
        ticket.map(|t| t.in_cluster(servers.as_deref()))
    }

    /// Under [`KafkaItemFailures::FailBatch`] a record that can never be
    /// prepared (not a Kafka record, not base64, not the handler's type,
    /// without a key) would fail every retry of the batch, and Kafka's
    /// default retries are unlimited: its partition would stall. Without a
    /// parking of the processor's own it is parked in the log
    /// ([`LogParking`]) and its partition goes on. `Reported` names it.
    fn unprepared_parking(&self) -> Option<&'static dyn Parking> {
        match self.item_failures {
            KafkaItemFailures::FailBatch => Some(&LOG_PARKING),
            KafkaItemFailures::Reported => None,
        }
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<KafkaEventResponse, KafkaError> {
        if self.item_failures == KafkaItemFailures::Reported {
            let mut response = KafkaEventResponse::default();
            let failures: Vec<_> = report.failures().collect();
            for r in &failures {
                response.add_item_failure(r.message_id.as_deref().unwrap_or_default());
            }
            if response.batch_item_failures.len() == failures.len() {
                return Ok(response);
            }
        }
        <KafkaEventResponse as Answer<KafkaError>>::answer(report)
    }
}

/// The fail-batch mode's answer ([`KafkaItemFailures::FailBatch`]): an
/// empty response when every record is done, else the whole batch fails.
impl Answer<KafkaError> for KafkaEventResponse {
    fn answer<T>(report: &BatchReport<T>) -> Result<KafkaEventResponse, KafkaError> {
        whole::answer(report).map(|()| KafkaEventResponse::default())
    }
}

impl Kafka {
    /// What a record with `key` (`Some(None)`: no key; `None`: unreadable)
    /// keeps its order with: keys as delivered (base64), keyless records
    /// one lane (`-` is not base64).
    fn within(&self, key: Option<Option<&str>>) -> Within {
        match (self.order, key) {
            (KafkaOrder::Partition, _) => Within::Lane,
            (KafkaOrder::RecordKey, Some(Some(key))) => Within::Key(format!("k{key}")),
            (KafkaOrder::RecordKey, Some(None)) => Within::Key("-".to_owned()),
            (KafkaOrder::RecordKey, None) => Within::Unknown,
        }
    }
}

/// Parses an invocation payload as a Kafka event: `eventSource` `aws:kafka`
/// (Amazon MSK) or `SelfManagedKafka`, and a `records` object of
/// topic-partitions, each an array of records, each parsed on its own (one
/// that does not parse is kept as a [`MalformedRecord`]).
pub fn parse_kafka_event(value: Value) -> Result<KafkaStreamEvent, BatchError> {
    let (msk, smk) = (MSK_EVENT_SOURCE, SELF_MANAGED_EVENT_SOURCE);
    let wrong = |message| {
        Err(BatchError::WrongEvent {
            expected: "a Kafka",
            message,
        })
    };
    let source = match value.get("eventSource") {
        Some(Value::String(s)) if s == msk => msk,
        Some(Value::String(s)) if s == smk => smk,
        Some(Value::String(s)) => {
            return wrong(format!("eventSource is {s}, expected {msk} or {smk}"));
        }
        Some(s) => return wrong(format!("eventSource is {}", json_type(s))),
        None => return wrong(format!("no eventSource in {}", json_type(&value))),
    };
    let partitions = match value.get("records") {
        Some(Value::Object(partitions)) => partitions,
        Some(r) => return wrong(format!("records is {}, not an object", json_type(r))),
        None => return wrong("no records object".to_owned()),
    };
    if let Some((name, v)) = partitions.iter().find(|(_, v)| !v.is_array()) {
        return wrong(format!(
            "records of {name} is {}, not an array",
            json_type(v)
        ));
    }
    Ok(parse_records(source, &value, partitions))
}

/// Each record of `partitions` (topic-partitions by name) parsed on its own.
fn parse_records(
    source: &'static str,
    event: &Value,
    partitions: &Map<String, Value>,
) -> KafkaStreamEvent {
    let arn = text(event, "/eventSourceArn");
    let servers = text(event, "/bootstrapServers");
    let origin = Arc::new((source.to_owned(), arn.clone(), servers.clone()));
    let mut records = Vec::new();
    for (partition, items) in BTreeMap::from_iter(partitions) {
        for raw in items.as_array().into_iter().flatten() {
            let index = records.len();
            records.push(match KafkaRecord::deserialize(raw) {
                Ok(record) => Ok(KafkaDelivery::of_event(
                    partition.clone(),
                    record,
                    origin.clone(),
                )),
                Err(e) => {
                    let mut malformed = MalformedRecord::new(index, raw.clone(), &KAFKA, source);
                    let offset = raw.get("offset").and_then(Value::as_i64);
                    malformed.id = offset.map(|o| format!("{partition}@{o}"));
                    malformed.position = offset.map(|o| o.to_string());
                    malformed.event_source_arn = arn.clone();
                    malformed.cluster = servers.clone();
                    malformed.lane = Some(partition.clone());
                    malformed.error = format!("record {index} is not a Kafka record: {e}");
                    Err(malformed)
                }
            });
        }
    }
    StreamEvent { records }
}

impl Parks for Kafka {}

impl<M: DeserializeOwned> Prepare<KafkaMessage<M>> for Kafka {
    /// The value read, and the schema its registry header names.
    type Body = (M, Option<SchemaId>);

    fn prepare<'r>(
        &self,
        at: &Reading<'_>,
        delivery: &'r KafkaDelivery,
    ) -> Preparing<'r, Self::Body> {
        let ident = at.ident();
        if let Some(problem) = &delivery.undecodable {
            return Err(FailureReason::Parse(format!("record {ident}: {problem}")));
        }
        let (schema, value) = match (self.schema_registry, delivery.value.as_deref()) {
            (Some(registry), Some(value)) => {
                let (schema, payload) = registry.split(value).map_err(|why| {
                    FailureReason::Parse(format!("the value of record {ident}: {why}"))
                })?;
                (Some(schema), Some(payload))
            }
            (_, value) => (None, value),
        };
        let prepared = Prepared::from_payload(ident, "value", value)?;
        Ok(prepared.map(|body| (body, schema)))
    }

    fn record(&self, delivery: KafkaDelivery, body: Self::Body, keyed: Keyed) -> KafkaMessage<M> {
        let (body, schema) = body;
        let mut message = KafkaMessage::new(body, delivery);
        (message.key, message.schema) = (keyed.key, schema);
        message
    }
}

impl Processor<Kafka> {
    /// What records keep their order with (default [`KafkaOrder::Partition`]).
    pub fn order(mut self, order: KafkaOrder) -> Self {
        self.source.order = order;
        self
    }

    /// Whether the mapping acts on `batchItemFailures` ([`KafkaItemFailures`]).
    pub fn item_failures(mut self, mode: KafkaItemFailures) -> Self {
        self.source.item_failures = mode;
        self
    }

    /// Values are framed by `registry`: its header is taken off each value
    /// before the value is read (JSON, text or bytes, by the handler's
    /// type), and the schema it names is [`KafkaMessage::schema`]. A value
    /// without the header can never be read: it fails terminally (parked).
    /// Default: values as produced.
    pub fn schema_registry(mut self, registry: SchemaRegistry) -> Self {
        self.source.schema_registry = Some(registry);
        self
    }
}

/// One Kafka record, decoded: what key functions see (`input.raw::<KafkaDelivery>()`);
/// its [`Delivery::id`] is `<topic-partition>@<offset>` (`orders-0@41`).
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
    /// The headers (name, value) in the order they were produced, decoded.
    pub headers: Vec<(String, Vec<u8>)>,
    id: String,
    undecodable: Option<String>,
    origin: Origin,
}

impl KafkaDelivery {
    /// The record `record` of topic-partition `partition`, decoded.
    pub fn new(partition: impl Into<String>, record: KafkaRecord) -> Self {
        let origin = Arc::new((MSK_EVENT_SOURCE.to_owned(), None, None));
        Self::of_event(partition.into(), record, origin)
    }

    /// The record of an event whose `eventSource` and `eventSourceArn` are
    /// `origin`.
    fn of_event(partition: String, record: KafkaRecord, origin: Origin) -> Self {
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
            .map(|(name, bytes)| (name.clone(), bytes.iter().map(|&b| b as u8).collect()))
            .collect();
        Self {
            id: format!("{partition}@{}", record.offset),
            partition,
            record,
            message_key,
            value,
            headers,
            undecodable,
            origin,
        }
    }

    /// The value of the first header named `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        let header = self.headers.iter().find(|(n, _)| n == name);
        header.map(|(_, value)| value.as_slice())
    }
}

impl Delivery for KafkaDelivery {
    fn id(&self) -> Option<&str> {
        Some(&self.id)
    }

    fn lane(&self) -> Option<&str> {
        Some(self.partition.as_str()).filter(|p| !p.is_empty())
    }

    fn position(&self) -> Option<&str> {
        self.id.rsplit_once('@').map(|(_, offset)| offset)
    }

    fn body(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }

    fn attribute(&self, name: &str) -> Option<Attribute<'_>> {
        let text = |bytes| std::str::from_utf8(bytes).map_or(Attribute::Binary, Attribute::Text);
        self.header(name).map(text)
    }

    fn source(&self) -> &'static SourceNames {
        &KAFKA
    }
}

/// One Kafka record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KafkaMessage<M> {
    /// The value, base64-decoded (and its schema registry header taken
    /// off), then read by the handler's type ([`crate::PayloadKind`]):
    /// parsed as JSON (`null` for a tombstone), or taken as text or bytes
    /// ([`crate::Bytes`]).
    pub body: M,
    /// The record, decoded: its topic, partition, offset, key and headers.
    pub delivery: KafkaDelivery,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
    /// The schema the value's registry header names
    /// ([`KafkaProcessor::schema_registry`]).
    pub schema: Option<SchemaId>,
}

impl<M> KafkaMessage<M> {
    /// A message (handler unit tests).
    pub fn new(body: M, delivery: KafkaDelivery) -> Self {
        let (key, schema) = (None, None);
        Self {
            body,
            delivery,
            key,
            schema,
        }
    }
}

/// A Kafka batch had records not done under [`KafkaItemFailures::FailBatch`]
/// (or a failed record `Reported` cannot name): the whole-batch answer,
/// [`Unfinished`](crate::batch::Unfinished), its records named
/// `<topic-partition>@<offset>`.
pub type KafkaError = crate::batch::Unfinished;

/// The partial batch response under [`KafkaItemFailures::Reported`].
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct KafkaEventResponse {
    /// One entry per record to deliver again (empty: the batch is done).
    pub batch_item_failures: Vec<KafkaBatchItemFailure>,
}

/// One record to deliver again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct KafkaBatchItemFailure {
    /// Its topic-partition and offset.
    pub item_identifier: KafkaItemIdentifier,
}

/// A Kafka record's identifier in the partial batch response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KafkaItemIdentifier {
    /// The topic-partition, as the event's `records` map names it (`orders-0`).
    pub partition: String,
    /// The record's offset.
    pub offset: i64,
}

impl PartialResponse for KafkaEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        let parsed = id.rsplit_once('@').map(|(p, o)| (p.to_owned(), o.parse()));
        if let Some((partition, Ok(offset))) = parsed {
            let item_identifier = KafkaItemIdentifier { partition, offset };
            let failure = KafkaBatchItemFailure { item_identifier };
            self.batch_item_failures.push(failure);
        }
    }
}

#[cfg(test)]
mod tests;
