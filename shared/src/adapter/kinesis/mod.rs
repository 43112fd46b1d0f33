//! Kinesis Data Streams batches on the adapter core.
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
//! use shared::kinesis::{KinesisProcessor, KinesisRecord, parse_kinesis_event};
//! use shared::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
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
//! let response: shared::kinesis::KinesisEventResponse =
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

use std::future::Future;
use std::time::{Duration, Instant};

pub use aws_lambda_events::kinesis::{KinesisEvent, KinesisEventRecord};
#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use crate::adapter::{MalformedRecord, StreamEvent};
pub use parse::{KinesisStreamEvent, parse_kinesis_event};
pub use record::KinesisRecord;
pub use response::{KinesisBatchItemFailure, KinesisEventResponse};

use crate::adapter::delivery::{Ids, Within};
use crate::adapter::lanes::fail_after_missing_lane;
use crate::adapter::parking::Ticket;
use crate::adapter::pipeline::{Prepared, Slot, guard};
#[cfg(feature = "lambda")]
use crate::adapter::remaining_now;
use crate::adapter::settings::Settings;
use crate::adapter::{BatchReport, FailureReason, KeySelector, Ordering, PayloadScope};
use crate::engine::Idempotency;
use crate::error::HandlerError;
use crate::write::IntoStaged;
use key::DataRules;
use record::KINESIS;

/// The `eventSource` of a Kinesis record.
const SOURCE: &str = "aws:kinesis";

/// The default [`KinesisProcessor::max_data_bytes`]: 10 MiB, the largest
/// record Kinesis Data Streams accepts.
pub const DEFAULT_MAX_DATA_BYTES: usize = 10 * 1024 * 1024;

/// Processes Kinesis Data Streams batches: the engine plus how keys and
/// failures are handled. Build it once per execution environment; cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct KinesisProcessor {
    settings: Settings,
    /// How each record's `data` is checked, parsed and keyed.
    rules: DataRules,
    /// What records keep their order with.
    order: KinesisOrder,
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

crate::adapter::settings::batch_settings!(KinesisProcessor);
crate::adapter::settings::parking_setting!(KinesisProcessor);

impl KinesisProcessor {
    /// A processor over `engine` taking each record's key from `key`: a
    /// business key in `data` ([`KeySelector::pointer`]), not the sequence
    /// number.
    pub fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self {
            settings: Settings::new(engine, key),
            rules: DataRules {
                max_data_bytes: DEFAULT_MAX_DATA_BYTES,
                payload: PayloadScope::default(),
            },
            order: KinesisOrder::default(),
        }
    }

    /// What records keep their order with: their partition key (the
    /// default) or their whole shard ([`KinesisOrder`]).
    pub fn order(mut self, order: KinesisOrder) -> Self {
        self.order = order;
        self
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`] (the
    /// parsed `data`).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.rules.payload = scope;
        self
    }

    /// Records whose decoded `data` is over `bytes` fail without being
    /// parsed. Default [`DEFAULT_MAX_DATA_BYTES`].
    pub fn max_data_bytes(mut self, bytes: usize) -> Self {
        self.rules.max_data_bytes = bytes;
        self
    }

    /// Handles one invocation: parses the Kinesis event, runs [`process`]
    /// with the invocation's remaining time, and returns the partial batch
    /// response naming the lowest failed sequence number of each shard. An `Err`
    /// fails the whole invocation (Lambda retries the batch): the payload
    /// is not a Kinesis event, or a failed record has no sequence number.
    ///
    /// [`process`]: KinesisProcessor::process
    #[cfg(feature = "lambda")]
    pub async fn handle<M, T, R, H, Fut>(
        &self,
        event: LambdaEvent<Value>,
        handler: H,
    ) -> Result<KinesisEventResponse, lambda_runtime::Error>
    where
        M: DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(KinesisRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let (payload, ctx) = event.into_parts();
        let event = parse_kinesis_event(payload)?;
        let report = self.process(event, remaining_now(&ctx), handler).await;
        Ok(report.response_as::<KinesisEventResponse>()?)
    }

    /// Processes `event`: each record's `data` is parsed into `M`, its key
    /// selected, and `handler` run through the engine, key by key (or shard
    /// by shard: [`KinesisProcessor::order`]).
    /// Never fails as a whole: per-record failures are in the report (a
    /// record that did not parse, a [`MalformedRecord`], fails alone).
    ///
    /// `remaining` is the invocation's remaining time at the call (`None`:
    /// unknown); each record's lease is capped by what is left when it
    /// starts. `T` is the response recorded and replayed to duplicates.
    pub async fn process<M, T, R, H, Fut>(
        &self,
        event: impl Into<KinesisStreamEvent>,
        remaining: Option<Duration>,
        handler: H,
    ) -> BatchReport<T>
    where
        M: DeserializeOwned,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(KinesisRecord<M>) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let started = Instant::now();
        let pipeline = self.settings.pipeline(Ordering::StopLane, &KINESIS);
        let mut slots: Vec<_> = event
            .into()
            .records
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                let record = match entry {
                    Ok(record) => record,
                    Err(malformed) => {
                        let key = malformed
                            .raw
                            .pointer("/kinesis/partitionKey")
                            .and_then(Value::as_str);
                        let within = self.within(key);
                        return malformed.into_slot(index, within, &pipeline, SOURCE);
                    }
                };
                // Taken before the handler takes the record.
                let ticket = pipeline.parks().then(|| {
                    let raw = serde_json::to_value(&record).ok()?;
                    Ticket::new(SOURCE, record.event_source_arn.as_deref(), &record, raw)
                });
                let within = self.within(Some(&record.kinesis.partition_key));
                let ids = Ids::of(&record).within(within);
                let ident = ids.ident(index, KINESIS.id);
                let prepared = match guard(|| self.rules.parse::<M>(&pipeline, &ident, &record)) {
                    Ok(Ok(p)) => Ok(Prepared {
                        record: KinesisRecord {
                            body: p.body,
                            record,
                            key: p.key.clone(),
                        },
                        key: p.key,
                        payload: p.payload,
                    }),
                    Ok(Err(reason)) => Err(reason),
                    Err(panic) => Err(FailureReason::Panic(format!(
                        "preparing record {ident} (data deserializer) panicked: {panic}"
                    ))),
                };
                Slot::new(index, ident, ids, prepared).with_ticket(ticket.flatten())
            })
            .collect();
        fail_after_missing_lane(&mut slots, Ordering::StopLane, FailureReason::NoLane);
        pipeline.run(slots, started, remaining, handler).await
    }

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
