//! Kafka batches (Amazon MSK and self-managed Apache Kafka) on the batch
//! core: [`KafkaProcessor`], lanes by topic-partition ([`KafkaOrder`]), the
//! answer per [`KafkaItemFailures`]. The guide: [docs/sources/kafka.md].
//!
//! [docs/sources/kafka.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/kafka.md

mod key;
mod parse;
mod record;
mod response;

use std::sync::Arc;

pub use aws_lambda_events::kafka::{KafkaEvent, KafkaRecord};
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
    BatchError, BatchReport, MalformedRecord, Ordering, Parks, PayloadScope, Processor, Source,
    SourceNames, Within,
};
use record::KAFKA;

/// Processes Kafka batches, Amazon MSK or self-managed ([`Processor`] over
/// [`Kafka`]). Its key is a business key in the value
/// ([`KeySelector::pointer`]) or a header ([`KeySelector::attribute`]), not
/// the offset.
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
    /// after another in offset order, keys concurrently; a failure holds
    /// back only its key. Keyless records keep their order among themselves.
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

impl Processor<Kafka> {
    /// What records keep their order with: their topic-partition (the
    /// default) or their record key ([`KafkaOrder`]). Whatever the order,
    /// the answer is per topic-partition.
    pub fn order(mut self, order: KafkaOrder) -> Self {
        self.source.order = order;
        self
    }

    /// Whether the event source mapping acts on `batchItemFailures`.
    /// Default [`KafkaItemFailures::FailBatch`]; [`KafkaItemFailures::Reported`]
    /// only for a mapping in provisioned mode with `ReportBatchItemFailures`.
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

#[cfg(test)]
mod tests;
