//! A DynamoDB stream record as the pipeline ([`Delivery`]) and the handler
//! see it: its id and position its `SequenceNumber`, its lane its stream
//! (`eventSourceARN`: a batch is one shard of it), and within the lane its
//! item ([`item_of`]).

use std::any::Any;

use aws_lambda_events::dynamodb::EventRecord;

use super::image::to_item;
use crate::batch::delivery::Within;
use crate::batch::{Delivery, IdField, LaneField, SourceNames};
use crate::key::IdempotencyKey;
use crate::write::Item;

/// The names of a DynamoDB stream record's notions.
pub(crate) static DYNAMODB_STREAMS: SourceNames = SourceNames {
    id: "SequenceNumber",
    id_field: IdField::SequenceNumber,
    lane_field: LaneField::Shard,
    deduplication_id: "a deduplication id (DynamoDB stream records have none)",
    no_lane: "DynamoDB stream record without an eventSourceARN (its stream)",
};

/// The `principalId` of the deletions DynamoDB's Time to Live makes.
pub const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// Whether `record` is a deletion by DynamoDB's Time to Live (not by a
/// writer): a `REMOVE` whose `userIdentity` is `{"type": "Service",
/// "principalId": "dynamodb.amazonaws.com"}`.
pub fn is_ttl_deletion(record: &EventRecord) -> bool {
    record.event_name == "REMOVE"
        && record
            .user_identity
            .as_ref()
            .is_some_and(|u| u.type_ == "Service" && u.principal_id == TTL_PRINCIPAL)
}

/// The item a record's `Keys` name, as one canonical text
/// ([`key_text`](crate::write::key_text)); [`Within::Unknown`] for keys
/// missing, empty or invalid (the batch keeps stream order).
pub(crate) fn item_of(keys: Option<&serde_dynamo::Item>) -> Within {
    match keys.filter(|k| !k.is_empty()).map(to_item) {
        Some(Ok(item)) => Within::Key(crate::write::key_text(&item)),
        _ => Within::Unknown,
    }
}

impl Delivery for EventRecord {
    /// The `SequenceNumber`: what `batchItemFailures` names.
    fn id(&self) -> Option<&str> {
        self.change
            .sequence_number
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// The stream (`eventSourceARN`): a batch is one shard of it.
    fn lane(&self) -> Option<&str> {
        self.event_source_arn.as_deref().filter(|s| !s.is_empty())
    }

    /// The `SequenceNumber`.
    fn position(&self) -> Option<&str> {
        self.id()
    }

    fn source(&self) -> &'static SourceNames {
        &DYNAMODB_STREAMS
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One DynamoDB stream record as the handler sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DynamoDbRecord {
    /// `INSERT`, `MODIFY` or `REMOVE`.
    pub event_name: String,
    /// The item's primary key (`Keys`).
    pub keys: Item,
    /// The item after the change (`NewImage`; not on a `REMOVE`).
    pub new_image: Option<Item>,
    /// The item before the change (`OldImage`; not on an `INSERT`).
    pub old_image: Option<Item>,
    /// The record as Lambda delivered it.
    pub record: EventRecord,
    /// The record's idempotency key (`None` when running unprotected).
    pub key: Option<IdempotencyKey>,
}

impl DynamoDbRecord {
    /// The handler's view of `record`, its images converted exactly; an
    /// error names an attribute that is not a valid DynamoDB value.
    pub fn new(record: EventRecord) -> Result<Self, String> {
        let image = |name: &str, item: &serde_dynamo::Item| -> Result<Option<Item>, String> {
            if item.is_empty() {
                return Ok(None);
            }
            to_item(item).map(Some).map_err(|e| format!("{name}.{e}"))
        };
        Ok(Self {
            event_name: record.event_name.clone(),
            keys: image("Keys", &record.change.keys)?.unwrap_or_default(),
            new_image: image("NewImage", &record.change.new_image)?,
            old_image: image("OldImage", &record.change.old_image)?,
            record,
            key: None,
        })
    }

    /// The `SequenceNumber` (its position in the shard).
    pub fn sequence_number(&self) -> Option<&str> {
        self.record.change.sequence_number.as_deref()
    }

    /// The `NewImage`, else the `OldImage`.
    pub fn image(&self) -> Option<&Item> {
        self.new_image.as_ref().or(self.old_image.as_ref())
    }

    /// Whether this is a Time to Live deletion ([`is_ttl_deletion`]).
    pub fn is_ttl_deletion(&self) -> bool {
        is_ttl_deletion(&self.record)
    }
}
