//! Parking: on an ordered stream (Kinesis, DynamoDB Streams, Kafka), a
//! record that can never succeed
//! ([`FailureReason::is_terminal`](crate::batch::FailureReason::is_terminal))
//! is sent to a [`Parking`] as a [`ParkedRecord`] and is done
//! ([`Outcome::Parked`](crate::Outcome::Parked)), so its lane goes on; if
//! parking fails, it fails as without parking. `SqsParking` (feature
//! `parking-sqs`) sends to an SQS queue ([`PARKING_QUEUE_ENV`]),
//! [`MemoryParking`] keeps records in memory. The rules:
//! `docs/guarantees.md`, "Parked records".

mod log;
mod memory;
#[cfg(feature = "parking-sqs")]
mod sqs;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use log::{LOG_MAX_MESSAGE_BYTES, LogParking};
pub use memory::MemoryParking;
#[cfg(feature = "parking-sqs")]
pub use sqs::SqsParking;

use crate::error::BoxError;

/// The environment variable naming the SQS queue parked records go to (its
/// URL). Unset or empty: no parking (a record that can never succeed fails
/// and stops its lane).
pub const PARKING_QUEUE_ENV: &str = "PARKING_QUEUE_URL";

/// A [`PARKING_QUEUE_ENV`] that names no place to park in
/// ([`Processor::parking_from_env`](crate::batch::Processor::parking_from_env)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueEnvError {
    /// The value is not a queue URL.
    #[error("{PARKING_QUEUE_ENV}={0:?} is not a queue URL (an http(s) URL without spaces)")]
    Url(String),
    /// A queue is named, and this build cannot send to SQS.
    #[error(
        "{PARKING_QUEUE_ENV} names a queue, and this build cannot park there: it lacks the \
         `parking-sqs` feature"
    )]
    NoSqs,
}

/// The parking queue's URL a [`PARKING_QUEUE_ENV`] value names: `None`
/// when unset or blank (no parking), an error when it is not a queue URL
/// ([`outbox::check_queue_url`](crate::outbox::check_queue_url)).
pub fn queue_url_from(value: Option<&str>) -> Result<Option<String>, QueueEnvError> {
    let Some(url) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    crate::outbox::check_queue_url(url).map_err(|_| QueueEnvError::Url(url.to_owned()))?;
    Ok(Some(url.to_owned()))
}

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
    /// the ARN, as for a DynamoDB stream; a self-managed Kafka cluster, which
    /// has no ARN, is named by its bootstrap servers:
    /// `<bootstrapServers>/<topic-partition>/<offset>`).
    pub id: String,
    /// The `eventSource`: `aws:kinesis`, `aws:dynamodb`, `aws:kafka`,
    /// `SelfManagedKafka`.
    pub source: String,
    /// The stream or cluster (`eventSourceARN`), when known.
    pub event_source_arn: Option<String>,
    /// The lane: the Kinesis shard, the DynamoDB stream, the Kafka
    /// topic-partition.
    pub lane: Option<String>,
    /// The position in the lane: the sequence number, the offset (a
    /// record that is not a Kafka record too).
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

#[cfg(test)]
mod tests;
