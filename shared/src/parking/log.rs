//! [`LogParking`]: parked records written to the function's log.

use super::{ParkedRecord, Parking, ParkingError};

/// The largest log line a parked record is written in: 256 KiB less room
/// for the line's own fields (CloudWatch Logs `PutLogEvents`,
/// `InputLogEvent.message`: "Each log event can be no larger than 256 KB").
/// A larger record is logged as a reference (its source position).
pub const LOG_MAX_MESSAGE_BYTES: usize = 256 * 1024 - 2048;

/// Parking in the function's log: each parked record is one `ERROR` line
/// (`parked_record`: the [`ParkedRecord`] as JSON, the record as delivered
/// when it fits [`LOG_MAX_MESSAGE_BYTES`]) and is counted as parked. It
/// never refuses a record. What a Kafka processor in
/// `KafkaItemFailures::FailBatch` mode without a parking of its own does with
/// a record that can never be prepared (`docs/sources/kafka.md`); a queue
/// (`SqsParking`, feature `parking-sqs`) keeps records more durably.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogParking;

#[async_trait::async_trait]
impl Parking for LogParking {
    async fn park(&self, record: &ParkedRecord) -> Result<(), ParkingError> {
        let json = serde_json::to_string(record)?;
        tracing::error!(
            parked_id = %record.id,
            reason = %record.reason,
            parked_record = %json,
            "record parked in the log: it can never succeed; replay it from this line or from \
             its source position"
        );
        Ok(())
    }

    fn max_message_bytes(&self) -> usize {
        LOG_MAX_MESSAGE_BYTES
    }
}
