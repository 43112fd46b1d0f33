//! Parking in an SQS queue (cargo feature `parking-sqs`): one `SendMessage`
//! per parked record, its JSON as the body, its id and source as message
//! attributes.

use aws_sdk_sqs::types::MessageAttributeValue;

use super::{PARKING_QUEUE_ENV, ParkedRecord, Parking, ParkingError};

/// The message attribute holding [`ParkedRecord::id`] (the source position:
/// the same for every copy of a record).
pub const ID_ATTRIBUTE: &str = "parked-id";
/// The message attribute holding [`ParkedRecord::source`].
pub const SOURCE_ATTRIBUTE: &str = "parked-source";

/// Parks records in an SQS queue. On a FIFO queue (`.fifo`) each message's
/// group is the record's lane and its deduplication id the SHA-256 of its
/// [`ParkedRecord::id`], so SQS drops a copy parked again within its
/// deduplication interval; on a standard queue the copies are told apart by
/// the `parked-id` attribute.
#[derive(Debug, Clone)]
pub struct SqsParking {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    fifo: bool,
}

impl SqsParking {
    /// Parking in the queue at `queue_url` through `client`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        let queue_url = queue_url.into();
        Self {
            client,
            fifo: queue_url.ends_with(".fifo"),
            queue_url,
        }
    }

    /// Parking in the queue [`PARKING_QUEUE_ENV`] names, with the crate's
    /// SDK configuration ([`aws_sdk_config`](crate::aws::aws_sdk_config)); `None`
    /// when it is unset or empty.
    pub async fn from_env() -> Option<Self> {
        let url = std::env::var(PARKING_QUEUE_ENV).ok()?;
        let url = url.trim();
        if url.is_empty() {
            return None;
        }
        let client = aws_sdk_sqs::Client::new(&crate::aws::aws_sdk_config().await);
        Some(Self::new(client, url))
    }

    /// The queue's URL.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

fn text(value: &str) -> Result<MessageAttributeValue, ParkingError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| ParkingError::Send {
            place: String::new(),
            source: Box::new(e),
        })
}

#[async_trait::async_trait]
impl Parking for SqsParking {
    async fn park(&self, record: &ParkedRecord) -> Result<(), ParkingError> {
        let body = serde_json::to_string(record)?;
        let mut send = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_attributes(ID_ATTRIBUTE, text(&record.id)?)
            .message_attributes(SOURCE_ATTRIBUTE, text(&record.source)?);
        if self.fifo {
            // The lane, or a group SQS accepts derived from it.
            let lane = record.lane.as_deref().unwrap_or(&record.source);
            let group = crate::outbox::fifo_group(lane);
            send = send
                .message_group_id(group)
                .message_deduplication_id(crate::key::sha256_hex(record.id.as_bytes()));
        }
        send.send().await.map_err(|e| ParkingError::Send {
            place: self.queue_url.clone(),
            source: aws_sdk_sqs::error::DisplayErrorContext(e)
                .to_string()
                .into(),
        })?;
        Ok(())
    }
}
