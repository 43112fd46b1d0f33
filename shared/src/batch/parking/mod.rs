//! Parking: on an ordered stream (Kinesis, DynamoDB Streams, Kafka), a
//! record that can never succeed ([`FailureReason::is_terminal`]) is sent to
//! a [`Parking`] as a [`ParkedRecord`] and is done
//! ([`Outcome::Parked`](crate::Outcome::Parked)), so its lane goes on; if
//! parking fails, it fails as without parking. `SqsParking` (feature
//! `parking-sqs`) sends to an SQS queue ([`PARKING_QUEUE_ENV`]),
//! [`MemoryParking`] keeps records in memory. The rules:
//! `docs/guarantees.md`, "Parked records".

#[cfg(feature = "parking-sqs")]
mod sqs;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "parking-sqs")]
pub use sqs::SqsParking;

use super::delivery::Delivery;
use super::report::FailureReason;
use crate::clock::{Clock, SystemClock};
use crate::error::BoxError;

/// The environment variable naming the SQS queue parked records go to (its
/// URL). Unset or empty: no parking (a record that can never succeed fails
/// and stops its lane).
pub const PARKING_QUEUE_ENV: &str = "PARKING_QUEUE_URL";

/// The largest SQS message: 1 MiB (1,048,576 bytes), body and message
/// attributes together (SendMessage `MessageBody`: "The maximum size is 1
/// MiB or 1,048,576 bytes", since 2026-01-29; it was 256 KiB). A parked
/// record whose message would be larger is parked as a reference.
pub const SQS_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The message a parked record becomes: the record as delivered (or a
/// reference to it), where it comes from, and why it was parked. Serialized
/// as the JSON body of the parking queue's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ParkedRecord {
    /// Its source position, the same for every copy of the record (a
    /// redelivery parks it again under the same id):
    /// `<eventSourceARN>/<lane>/<position>` (the lane left out when it is
    /// the ARN, as for a DynamoDB stream).
    pub id: String,
    /// The `eventSource`: `aws:kinesis`, `aws:dynamodb`, `aws:kafka`,
    /// `SelfManagedKafka`.
    pub source: String,
    /// The stream or cluster (`eventSourceARN`), when known.
    pub event_source_arn: Option<String>,
    /// The lane: the Kinesis shard, the DynamoDB stream, the Kafka
    /// topic-partition.
    pub lane: Option<String>,
    /// The position in the lane: the sequence number, the offset.
    pub position: String,
    /// Why it can never succeed.
    pub reason: String,
    /// The record as Lambda delivered it (Kinesis `data` and Kafka `value`
    /// base64, as in the event), or `None` when the message would be over
    /// the parking's size limit: the source position then is the reference
    /// (read it from the stream while the stream retains it).
    pub record: Option<Value>,
    /// The size of the record's JSON, in bytes (whether or not it is kept).
    pub record_bytes: usize,
    /// When it was parked, epoch ms.
    pub parked_at_ms: u64,
}

/// Why a record could not be parked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParkingError {
    /// The parking place did not take the record.
    #[error("parking {place} did not take the record")]
    Send {
        /// Where it was sent (a queue URL).
        place: String,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// The record could not be written as a message.
    #[error("the parked record could not be serialized: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// Where records that can never succeed are set aside (see the module
/// docs). An implementation answers `Ok` once the record is stored
/// durably: the record is then reported as done.
#[async_trait::async_trait]
pub trait Parking: Send + Sync + fmt::Debug {
    /// Stores `record`.
    async fn park(&self, record: &ParkedRecord) -> Result<(), ParkingError>;

    /// The largest message it takes, in bytes: a record whose message would
    /// be larger is parked as a reference. Default
    /// [`SQS_MAX_MESSAGE_BYTES`].
    fn max_message_bytes(&self) -> usize {
        SQS_MAX_MESSAGE_BYTES
    }
}

/// Parking in memory: local runs and tests. Cheap to clone (clones share
/// the records); [`MemoryParking::fail`] makes it refuse records.
#[derive(Debug, Clone)]
pub struct MemoryParking {
    parked: Arc<Mutex<Vec<ParkedRecord>>>,
    failing: Arc<AtomicBool>,
    max_message_bytes: usize,
}

impl Default for MemoryParking {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryParking {
    /// An empty parking taking messages up to [`SQS_MAX_MESSAGE_BYTES`].
    pub fn new() -> Self {
        Self {
            parked: Arc::default(),
            failing: Arc::default(),
            max_message_bytes: SQS_MAX_MESSAGE_BYTES,
        }
    }

    /// This parking taking messages up to `bytes` only.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// From now on refuses (`true`) or takes (`false`) records.
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The records parked so far, in the order they were parked.
    pub fn parked(&self) -> Vec<ParkedRecord> {
        self.parked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait::async_trait]
impl Parking for MemoryParking {
    async fn park(&self, record: &ParkedRecord) -> Result<(), ParkingError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(ParkingError::Send {
                place: "memory".to_owned(),
                source: "the memory parking is set to fail".into(),
            });
        }
        self.parked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record.clone());
        Ok(())
    }

    fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }
}

/// What a record would be parked as, taken when it is prepared (before the
/// handler takes the record): only when its processor parks.
#[derive(Debug)]
pub struct Ticket {
    source: String,
    event_source_arn: Option<String>,
    lane: Option<String>,
    position: String,
    record: Value,
}

impl Ticket {
    /// The ticket of `delivery` (its lane and position) from `source`
    /// (`eventSource`) and `event_source_arn`, carrying `record` (the record
    /// as delivered); `None` without a position: the copies of such a
    /// record could not be told apart, so it is not parked.
    pub fn new(
        source: &str,
        event_source_arn: Option<&str>,
        delivery: &dyn Delivery,
        record: Value,
    ) -> Option<Self> {
        let position = delivery.position().filter(|p| !p.is_empty())?;
        Some(Self {
            source: source.to_owned(),
            event_source_arn: event_source_arn
                .filter(|a| !a.is_empty())
                .map(str::to_owned),
            lane: delivery.lane().filter(|l| !l.is_empty()).map(str::to_owned),
            position: position.to_owned(),
            record,
        })
    }

    /// The source position: `<eventSourceARN>/<lane>/<position>`, without
    /// what is unknown, and without the lane when it is the ARN.
    fn id(&self) -> String {
        let arn = self.event_source_arn.as_deref();
        let lane = self.lane.as_deref().filter(|l| Some(*l) != arn);
        [arn, lane, Some(self.position.as_str())]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The message parking this record for `reason` gives, within
    /// `max_message_bytes` (the record left out when it would not fit).
    pub(crate) fn parked(self, reason: &FailureReason, max_message_bytes: usize) -> ParkedRecord {
        let record_bytes = serde_json::to_string(&self.record).map_or(0, |s| s.len());
        let mut parked = ParkedRecord {
            id: self.id(),
            source: self.source,
            event_source_arn: self.event_source_arn,
            lane: self.lane,
            position: self.position,
            reason: reason.to_string(),
            record: Some(self.record),
            record_bytes,
            parked_at_ms: SystemClock.now_ms(),
        };
        // The message attributes (the id and the source, their names and
        // types) count towards SQS's limit too.
        let attributes = parked.id.len() + parked.source.len() + 64;
        let body = serde_json::to_string(&parked).map_or(usize::MAX, |s| s.len());
        if body.saturating_add(attributes) > max_message_bytes {
            parked.record = None;
        }
        parked
    }
}

impl Ticket {
    /// Parks the record that failed terminally for `reason` (`ident`, for
    /// the log): done ([`Outcome::Parked`](crate::Outcome::Parked)) once
    /// `parking` has it; if parking fails, the record fails for `reason` as
    /// it would without parking (its lane stops).
    pub(crate) async fn park<T>(
        self,
        parking: &dyn Parking,
        reason: FailureReason,
        ident: &str,
    ) -> Result<crate::Outcome<T>, FailureReason> {
        let parked = self.parked(&reason, parking.max_message_bytes());
        match parking.park(&parked).await {
            Ok(()) => Ok(crate::Outcome::Parked {
                id: parked.id,
                reason: parked.reason,
            }),
            Err(e) => {
                tracing::error!(
                    record = ident,
                    parked_id = parked.id.as_str(),
                    error = %crate::error::report(&e),
                    "parking failed: the record fails and its lane stops, as without parking"
                );
                Err(reason)
            }
        }
    }
}

#[cfg(test)]
mod tests;
