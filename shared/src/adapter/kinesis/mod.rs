//! Kinesis Data Streams batches on the adapter core.
//!
//! A [`KinesisProcessor`] runs a [`KinesisEvent`]'s records through the
//! core pipeline with [`Ordering::StopLane`]: the records of one shard run
//! one after another in sequence order, shards in parallel; after a record
//! fails, nothing later in its shard runs, and the partial batch response
//! ([`KinesisEventResponse`], `ReportBatchItemFailures` on the event
//! source mapping) names that first failed record. Lambda checkpoints just
//! before the lowest sequence number listed and redelivers from there, so no
//! effect of a record is applied before an earlier record of its shard.
//!
//! * Each record is parsed on its own ([`parse_kinesis_event`]); `data` is
//!   base64-decoded and parsed as JSON into the handler's type. A record
//!   that does not parse (its `data` not base64, not JSON, not the
//!   handler's type) fails alone (and stops its shard), never the batch.
//! * The key is a business key by pointer into `data`
//!   ([`KeySelector::pointer`]). Never the `sequenceNumber`: a producer's
//!   retry of `PutRecord` writes the same data under a new one (see
//!   `key.rs`).
//! * In-batch duplicates (a producer's retry in the same batch) run once;
//!   the copies replay the first one's outcome.
//! * With [`KinesisProcessor::parking`], a record that can never succeed
//!   (it does not decode, has no key, is too large, the handler rejects it
//!   with a terminal error) is parked ([`crate::parking`]) and its shard
//!   goes on; without, it stops its shard like any failure.
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
//!     record("102", "not json"),                               // poison: stops the shard
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
#[cfg(feature = "lambda")]
use serde_json::Value;

pub use crate::adapter::MalformedRecord;
pub use parse::{KinesisStreamEvent, parse_kinesis_event};
pub use record::KinesisRecord;
pub use response::{KinesisBatchItemFailure, KinesisEventResponse};

use crate::adapter::delivery::Ids;
use crate::adapter::lanes::fail_after_missing_lane;
use crate::adapter::parking::Ticket;
use crate::adapter::pipeline::{Prepared, Slot, guard};
#[cfg(feature = "lambda")]
use crate::adapter::remaining_now;
use crate::adapter::settings::Settings;
use crate::adapter::{BatchReport, Delivery, FailureReason, KeySelector, Ordering, PayloadScope};
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
        }
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
    /// response naming the first failed record of each shard. An `Err`
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
    /// selected, and `handler` run through the engine, shard by shard.
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
                        let ids = Ids::of(&malformed as &dyn Delivery);
                        let ident = ids.ident(index, KINESIS.id);
                        let ticket = pipeline.parks().then(|| {
                            let arn = malformed.event_source_arn.as_deref();
                            Ticket::new(SOURCE, arn, &malformed, malformed.raw.clone())
                        });
                        let reason = FailureReason::Parse(malformed.error);
                        return Slot::new(index, ident, ids, Err(reason))
                            .with_ticket(ticket.flatten());
                    }
                };
                // Taken before the handler takes the record.
                let ticket = pipeline.parks().then(|| {
                    let raw = serde_json::to_value(&record).ok()?;
                    Ticket::new(SOURCE, record.event_source_arn.as_deref(), &record, raw)
                });
                let ids = Ids::of(&record);
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
}
