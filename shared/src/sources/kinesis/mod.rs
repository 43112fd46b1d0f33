//! Kinesis Data Streams batches on the batch core.
//!
//! A [`KinesisProcessor`] runs a [`KinesisEvent`]'s records through the
//! core pipeline with [`Ordering::StopLane`], in lanes by partition key
//! ([`KinesisOrder::PartitionKey`], the default): Kinesis keeps order per
//! partition key, and so does Lambda (with a `ParallelizationFactor` above
//! 1 it splits a shard's records by partition key over concurrent
//! batches). The records of one key run one after another in sequence
//! order; different keys run concurrently, under the processor's
//! concurrency bound, and their commits share the batch's transactions
//! (optimistic mode with batch commits: a batch of 100 records over 10 keys
//! commits in at most 10). After a record fails, nothing later of its key
//! runs. [`KinesisOrder::Shard`] keeps the whole shard in one order instead.
//!
//! **The response is a shard checkpoint.** The partial batch response
//! ([`KinesisEventResponse`], `ReportBatchItemFailures` on the event source
//! mapping) names, per shard, the lowest sequence number among the keys'
//! first failures. The Lambda developer guide ("Configuring partial batch
//! response with Kinesis Data Streams and Lambda",
//! `services-kinesis-batchfailurereporting`) states that when
//! `batchItemFailures` lists several records, Lambda takes the one with the
//! lowest sequence number as the checkpoint and retries every record from
//! it (the guide's reporting syntax returns the first failed record). So no effect of a record is applied
//! before an earlier record of its key; and the records of other keys after
//! that checkpoint that already committed are delivered again, and replay:
//! their idempotency records answer, nothing is applied twice. The cost of
//! such a redelivery: with [`PreRead::Always`](crate::batch::PreRead::Always)
//! one pre-read per batch (one `BatchGetItem` per 100 keys; Kinesis records
//! carry no receive count, so a redelivery cannot be told from a first
//! delivery) and the committed records replay without running; without it,
//! each of them runs its handler again and its commit is refused by its
//! condition (in optimistic mode, a transaction cancelled and sent again
//! without it).
//!
//! * Each record is parsed on its own ([`parse_kinesis_event`]); `data` is
//!   base64-decoded and parsed as JSON into the handler's type. A record
//!   that does not parse (its `data` not base64, not JSON, not the
//!   handler's type) fails alone (and stops its key), never the batch. A
//!   record whose partition key cannot be read keeps its whole shard in one
//!   order for that batch (it could belong with any key).
//! * The idempotency key is a business key by pointer into `data`
//!   ([`KeySelector::pointer`]). Never the `sequenceNumber`: a producer's
//!   retry of `PutRecord` writes the same data under a new one (see
//!   `key.rs`).
//! * In-batch duplicates (a producer's retry in the same batch) run once;
//!   the copies replay the first one's outcome.
//! * With [`KinesisProcessor::parking`], a record that can never succeed
//!   (it does not decode, has no key, is too large, the handler rejects it
//!   with a terminal error) is parked ([`crate::parking`]) and its key
//!   goes on; without, it stops its key like any failure.
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use lambda_idempotency::kinesis::{KinesisProcessor, KinesisRecord, parse_kinesis_event};
//! use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
//!
//! #[derive(Deserialize)]
//! struct Reading { reading_id: String, celsius: f64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("readings.v1"));
//! let processor = KinesisProcessor::new(engine, KeySelector::pointer("/reading_id"));
//! use base64::Engine as _;
//! let record = |seq: &str, data: &str| json!({
//!     "eventSource": "aws:kinesis", "eventID": format!("shardId-000000000000:{seq}"),
//!     "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/readings",
//!     "kinesis": {
//!         "partitionKey": "sensor-1", "sequenceNumber": seq,
//!         "data": base64::engine::general_purpose::STANDARD.encode(data),
//!         "approximateArrivalTimestamp": 1795946400.0,
//!     },
//! });
//! let event = parse_kinesis_event(json!({"Records": [
//!     record("101", r#"{"reading_id":"r-1","celsius":21.5}"#),
//!     record("102", "not json"),                               // poison: stops sensor-1
//!     record("103", r#"{"reading_id":"r-3","celsius":22.0}"#), // not run
//! ]}))
//! .expect("a Kinesis event");
//!
//! let report = processor
//!     .process(event, None, |r: KinesisRecord<Reading>| async move {
//!         Ok::<_, HandlerError>(json!({"stored": r.body.celsius}))
//!     })
//!     .await;
//! let response: lambda_idempotency::kinesis::KinesisEventResponse =
//!     report.response_as().expect("every failed record has a sequence number");
//! let failed: Vec<_> = response.batch_item_failures.iter()
//!     .map(|f| f.item_identifier.as_deref().unwrap_or_default()).collect();
//! assert_eq!(failed, ["102"]);
//! # }
//! ```

mod key;
mod parse;
mod record;
mod response;
#[cfg(test)]
mod tests;

pub use aws_lambda_events::kinesis::{KinesisEvent, KinesisEventRecord};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use crate::batch::{MalformedRecord, StreamEvent};
pub use parse::{KinesisStreamEvent, parse_kinesis_event};
pub use record::KinesisRecord;
pub use response::{KinesisBatchItemFailure, KinesisEventResponse};

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::parking::Ticket;
use crate::batch::{
    BatchError, BatchReport, FailureReason, Ordering, Parks, PayloadScope, Pipeline, Prepare,
    Prepared, Processor, Source, SourceNames, Within,
};
use record::KINESIS;

/// The `eventSource` of a Kinesis record.
const SOURCE: &str = "aws:kinesis";

/// The default [`KinesisProcessor::max_data_bytes`]: 10 MiB, the largest
/// record Kinesis Data Streams accepts.
pub const DEFAULT_MAX_DATA_BYTES: usize = 10 * 1024 * 1024;

/// Processes Kinesis Data Streams batches ([`Processor`] over [`Kinesis`]):
/// the engine plus how keys and failures are handled. Build it once per
/// execution environment; cheap to clone.
pub type KinesisProcessor = Processor<Kinesis>;

/// The Kinesis source and its settings: what records keep their order
/// with, and how each record's `data` is checked, parsed and keyed.
#[derive(Debug, Clone)]
pub struct Kinesis {
    order: KinesisOrder,
    max_data_bytes: usize,
    payload: PayloadScope,
}

impl Default for Kinesis {
    fn default() -> Self {
        Self {
            order: KinesisOrder::default(),
            max_data_bytes: DEFAULT_MAX_DATA_BYTES,
            payload: PayloadScope::default(),
        }
    }
}

/// What a Kinesis record keeps its order with ([`KinesisProcessor::order`]).
///
/// Kinesis keeps order per partition key, and so does Lambda: with a
/// `ParallelizationFactor` above 1 it splits a shard's records by partition
/// key over concurrent batches. Whatever the lanes, the response is a shard
/// checkpoint (the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KinesisOrder {
    /// The records of one partition key run one after another in sequence
    /// order; different keys run concurrently (under the processor's
    /// concurrency bound), and their commits share the batch's transactions.
    /// A failure holds back only its key. The default.
    #[default]
    PartitionKey,
    /// The records of one shard run one after another, whatever their
    /// partition keys: for a consumer whose effects depend on the order of
    /// records of different keys. Each record then commits alone.
    Shard,
}

impl Source for Kinesis {
    type Event = KinesisStreamEvent;
    type Raw = KinesisEventRecord;
    type Response = KinesisEventResponse;
    type Error = BatchError;
    const NAMES: &'static SourceNames = &KINESIS;

    fn parse(payload: Value) -> Result<KinesisStreamEvent, BatchError> {
        parse_kinesis_event(payload)
    }

    fn ordering(&self, _: &KinesisStreamEvent) -> Ordering {
        Ordering::StopLane
    }

    fn records(
        &self,
        event: KinesisStreamEvent,
    ) -> Vec<Result<KinesisEventRecord, MalformedRecord>> {
        event.records
    }

    fn within(&self, record: &KinesisEventRecord) -> Within {
        self.within(Some(&record.kinesis.partition_key))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        self.within(raw.pointer("/kinesis/partitionKey").and_then(Value::as_str))
    }

    fn ticket(&self, record: &KinesisEventRecord) -> Option<Ticket> {
        let raw = serde_json::to_value(record).ok()?;
        Ticket::new(SOURCE, record.event_source_arn.as_deref(), record, raw)
    }

    fn respond<T>(&self, report: &BatchReport<T>) -> Result<KinesisEventResponse, BatchError> {
        report.response_as()
    }
}

impl Parks for Kinesis {}

impl<M: DeserializeOwned> Prepare<KinesisRecord<M>> for Kinesis {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        record: KinesisEventRecord,
    ) -> Result<Prepared<KinesisRecord<M>>, FailureReason> {
        let p = self.parse::<M>(pipeline, ident, &record)?;
        let key = p.key.clone();
        let record = KinesisRecord {
            body: p.body,
            record,
            key: p.key,
        };
        Ok(Prepared::new(record, key, p.payload))
    }
}

impl Kinesis {
    /// What a record with partition key `key` (`None`: unreadable) keeps
    /// its order with.
    fn within(&self, key: Option<&str>) -> Within {
        match (self.order, key) {
            (KinesisOrder::Shard, _) => Within::Lane,
            (KinesisOrder::PartitionKey, Some(key)) if !key.is_empty() => {
                Within::Key(key.to_owned())
            }
            (KinesisOrder::PartitionKey, _) => Within::Unknown,
        }
    }
}

impl Processor<Kinesis> {
    /// What records keep their order with: their partition key (the
    /// default) or their whole shard ([`KinesisOrder`]).
    pub fn order(mut self, order: KinesisOrder) -> Self {
        self.source.order = order;
        self
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`] (the
    /// parsed `data`).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.payload = scope;
        self
    }

    /// Records whose decoded `data` is over `bytes` fail without being
    /// parsed. Default [`DEFAULT_MAX_DATA_BYTES`].
    pub fn max_data_bytes(mut self, bytes: usize) -> Self {
        self.source.max_data_bytes = bytes;
        self
    }
}
