//! Kafka batches (Amazon MSK and self-managed Apache Kafka) on the batch
//! core.
//!
//! A [`KafkaProcessor`] runs a [`KafkaEvent`]'s records through the core
//! pipeline with [`Ordering::StopLane`]: the records of one topic-partition
//! run one after another in offset order, topic-partitions in parallel;
//! after a record fails, nothing later in its topic-partition runs, so no
//! effect of a record is applied before an earlier record of its partition
//! ("commit the offset last"). With [`KafkaOrder::RecordKey`]
//! ([`KafkaProcessor::order`]) the lanes are the record keys within each
//! topic-partition instead: keys run concurrently and share the batch's
//! transactions, a failure holds back only its key, and the answer stays
//! per topic-partition (the records from the lowest failed offset on that
//! are redelivered and already committed replay).
//!
//! How the batch is answered depends on the mapping ([`KafkaItemFailures`],
//! `response.rs`). The Lambda guide puts partial batch response among the
//! Kafka error handling controls, configured "Under Event poller
//! configuration, select provisioned mode to configure error handling
//! controls" ("Configuring error handling controls for Kafka event
//! sources"); without it the mapping does not act on `batchItemFailures`
//! and commits the failed records' offsets. So by default
//! ([`KafkaItemFailures::FailBatch`]) a batch with a record not done fails
//! the invocation ([`KafkaError`], naming the records), and Lambda retries
//! the batch; what was done replays. With
//! [`KafkaItemFailures::Reported`] (provisioned mode,
//! `ReportBatchItemFailures`) the response ([`KafkaEventResponse`]) names
//! every failed and every skipped record by topic-partition and offset.
//!
//! * `key` and `value` are base64-decoded, the headers' byte arrays decoded
//!   ([`KafkaDelivery`]); the value is parsed as JSON into the handler's
//!   type. A record that does not parse fails (and stops its partition).
//! * The key is a business key by pointer into the value
//!   ([`KeySelector::pointer`]) or a header the producer sets
//!   ([`KeySelector::attribute`]). Never the offset: a producer's retry
//!   writes the same record at a new one (see `key.rs`).
//! * In-batch duplicates (a producer's retry in the same batch) run once;
//!   the copies replay the first one's outcome.
//! * Record positions in the [`BatchReport`] count the records
//!   topic-partition by topic-partition, the topic-partitions in name order
//!   (the event's `records` map has no order of its own).
//! * With [`KafkaProcessor::parking`], a record that can never succeed is
//!   parked ([`crate::parking`]) and its topic-partition goes on.
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use lambda_idempotency::kafka::{
//!     KafkaEventResponse, KafkaItemFailures, KafkaMessage, KafkaProcessor, parse_kafka_event,
//! };
//! use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//! use base64::Engine as _;
//!
//! #[derive(Deserialize)]
//! struct Order { event_id: String, total_cents: i64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("orders.v1"));
//! let processor = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"));
//! let record = |offset: i64, value: &str| json!({
//!     "topic": "orders", "partition": 0, "offset": offset,
//!     "timestamp": 1796083200104_i64, "timestampType": "CREATE_TIME",
//!     "value": base64::engine::general_purpose::STANDARD.encode(value), "headers": [],
//! });
//! let event = parse_kafka_event(json!({
//!     "eventSource": "aws:kafka", "bootstrapServers": "b-1.example:9098",
//!     "records": {"orders-0": [
//!         record(41, r#"{"event_id":"evt-1","total_cents":2500}"#),
//!         record(42, "not json"),                                  // poison: stops the partition
//!         record(43, r#"{"event_id":"evt-3","total_cents":900}"#), // not run
//!     ]},
//! }))
//! .expect("a Kafka event");
//!
//! let report = processor
//!     .process(event, None, |m: KafkaMessage<Order>| async move {
//!         Ok::<_, HandlerError>(json!({"charged": m.body.total_cents}))
//!     })
//!     .await;
//! // By default the invocation fails: Lambda retries the batch, 41 replays.
//! let err = processor.response(&report).unwrap_err();
//! assert!(err.to_string().contains("orders-0@42, orders-0@43"), "{err}");
//! // A mapping in provisioned mode with ReportBatchItemFailures: 42 and 43.
//! let reported = processor.clone().item_failures(KafkaItemFailures::Reported);
//! let response: KafkaEventResponse = reported.response(&report).unwrap();
//! assert_eq!(
//!     serde_json::to_value(&response).unwrap(),
//!     json!({"batchItemFailures": [
//!         {"itemIdentifier": {"partition": "orders-0", "offset": 42}},
//!         {"itemIdentifier": {"partition": "orders-0", "offset": 43}},
//!     ]})
//! );
//! # }
//! ```

mod key;
mod parse;
mod record;
mod response;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use aws_lambda_events::kafka::{KafkaEvent, KafkaRecord};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use parse::{MSK_EVENT_SOURCE, SELF_MANAGED_EVENT_SOURCE, parse_kafka_event};
pub use record::{KafkaDelivery, KafkaHeader, KafkaMessage};
pub use response::{
    KafkaBatchItemFailure, KafkaError, KafkaEventResponse, KafkaItemFailures, KafkaItemIdentifier,
    answer,
};

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::parking::Ticket;
use crate::batch::{
    BatchError, BatchReport, FailureReason, MalformedRecord, Ordering, Parks, PayloadScope,
    Pipeline, Prepare, Prepared, Processor, Source, SourceNames, Within,
};
use record::KAFKA;

/// Processes Kafka batches, Amazon MSK or self-managed ([`Processor`] over
/// [`Kafka`]): the engine plus how keys and failures are handled. Build it
/// once per execution environment; cheap to clone. Its key is a business
/// key in the value ([`KeySelector::pointer`]) or a header
/// ([`KeySelector::attribute`]), not the offset.
pub type KafkaProcessor = Processor<Kafka>;

/// The Kafka source and its settings: what records keep their order with,
/// whether the mapping acts on `batchItemFailures`, and what payload
/// validation hashes.
#[derive(Debug, Clone, Default)]
pub struct Kafka {
    order: KafkaOrder,
    item_failures: KafkaItemFailures,
    payload: PayloadScope,
}

/// What a Kafka record keeps its order with ([`KafkaProcessor::order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KafkaOrder {
    /// The records of one topic-partition run one after another in offset
    /// order, whatever their keys: Kafka's own guarantee. The default.
    #[default]
    Partition,
    /// The records of one record key (within a topic-partition) run one
    /// after another in offset order; different keys run concurrently and
    /// their commits share the batch's transactions, and a failure holds
    /// back only its key. Records produced without a key keep their order
    /// among themselves. For producers that partition by key and consumers
    /// that need order per key only.
    RecordKey,
}

impl Source for Kafka {
    type Event = KafkaEvent;
    type Raw = KafkaDelivery;
    type Response = KafkaEventResponse;
    type Error = KafkaError;
    const NAMES: &'static SourceNames = &KAFKA;

    fn parse(payload: Value) -> Result<KafkaEvent, BatchError> {
        parse_kafka_event(payload)
    }

    fn ordering(&self, _: &KafkaEvent) -> Ordering {
        Ordering::StopLane
    }

    /// The records, partition by partition (in the order of their names),
    /// each in offset order as delivered.
    fn records(&self, event: KafkaEvent) -> Vec<Result<KafkaDelivery, MalformedRecord>> {
        let source: Arc<str> = event
            .event_source
            .as_deref()
            .unwrap_or(MSK_EVENT_SOURCE)
            .into();
        let arn: Option<Arc<str>> = event.event_source_arn.as_deref().map(Arc::from);
        let mut partitions: Vec<_> = event.records.into_iter().collect();
        partitions.sort_by(|a, b| a.0.cmp(&b.0));
        partitions
            .into_iter()
            .flat_map(|(partition, records)| {
                let (source, arn) = (source.clone(), arn.clone());
                records.into_iter().map(move |record| {
                    KafkaDelivery::new(partition.clone(), record)
                        .with_origin(source.clone(), arn.clone())
                })
            })
            .map(Ok)
            .collect()
    }

    fn within(&self, delivery: &KafkaDelivery) -> Within {
        match self.order {
            KafkaOrder::Partition => Within::Lane,
            // Keys as delivered (base64); keyless records share one lane
            // (`-` is not base64).
            KafkaOrder::RecordKey => Within::Key(match &delivery.record.key {
                Some(key) => format!("k{key}"),
                None => "-".to_owned(),
            }),
        }
    }

    fn ticket(&self, delivery: &KafkaDelivery) -> Option<Ticket> {
        let raw = serde_json::to_value(&delivery.record).ok()?;
        let (source, arn) = delivery.origin();
        Ticket::new(source, arn, delivery, raw)
    }

    /// The answer under [`Processor::item_failures`] ([`answer`]).
    fn respond<T>(&self, report: &BatchReport<T>) -> Result<KafkaEventResponse, KafkaError> {
        answer(report, self.item_failures)
    }
}

impl Parks for Kafka {}

impl<M: DeserializeOwned> Prepare<KafkaMessage<M>> for Kafka {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        delivery: KafkaDelivery,
    ) -> Result<Prepared<KafkaMessage<M>>, FailureReason> {
        let p = self.parse::<M>(pipeline, ident, &delivery)?;
        let key = p.key.clone();
        let record = KafkaMessage {
            body: p.body,
            delivery,
            key: p.key,
        };
        Ok(Prepared::new(record, key, p.payload))
    }
}

impl Processor<Kafka> {
    /// What records keep their order with: their topic-partition (the
    /// default) or their record key ([`KafkaOrder`]). Whatever the order,
    /// the answer is per topic-partition (the module docs).
    pub fn order(mut self, order: KafkaOrder) -> Self {
        self.source.order = order;
        self
    }

    /// Whether the event source mapping acts on `batchItemFailures`.
    /// Default [`KafkaItemFailures::FailBatch`]: a batch with a record not
    /// done fails the invocation, and Lambda retries it. Set
    /// [`KafkaItemFailures::Reported`] only for a mapping in provisioned mode
    /// with `FunctionResponseTypes: [ReportBatchItemFailures]` (without
    /// them Lambda commits the offsets of the records the response names).
    pub fn item_failures(mut self, mode: KafkaItemFailures) -> Self {
        self.source.item_failures = mode;
        self
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`] (the
    /// parsed value).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.payload = scope;
        self
    }
}
