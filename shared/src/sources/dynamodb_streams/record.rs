//! A DynamoDB stream record as the pipeline ([`Delivery`]) and the handler
//! see it: its images converted exactly, its key selected from its JSON
//! view ([`record_json`]; by default [`keys_and`]).

use std::any::Any;

use serde_json::{Value, json};

use super::image::{item_json, to_item};
use super::{DynamoDbStreams, EventRecord, SALVAGE};
use crate::batch::{Delivery, FailureReason, KeyInput, KeySelector, Pipeline, Prepare, Prepared};
use crate::batch::{SourceNames, Within};
use crate::error::KeyError;
use crate::key::IdempotencyKey;
use crate::sources::hashed;
use crate::write::Item;

/// The `principalId` of the deletions DynamoDB's Time to Live makes.
pub const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// The item a record's `Keys` name, as one canonical text
/// ([`key_text`](crate::write::key_text)); [`Within::Unknown`] for keys
/// missing, empty or invalid (the batch keeps stream order).
pub(super) fn item_of(keys: Option<&serde_dynamo::Item>) -> Within {
    match keys.filter(|k| !k.is_empty()).map(to_item) {
        Some(Ok(item)) => Within::Key(crate::write::key_text(&item)),
        _ => Within::Unknown,
    }
}

impl Delivery for EventRecord {
    fn id(&self) -> Option<&str> {
        (self.change.sequence_number.as_deref()).filter(|s| !s.is_empty())
    }

    /// The stream (`eventSourceARN`): a batch is one shard of it.
    fn lane(&self) -> Option<&str> {
        self.event_source_arn.as_deref().filter(|s| !s.is_empty())
    }

    fn position(&self) -> Option<&str> {
        self.id()
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
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

    /// Whether this is a deletion by DynamoDB's Time to Live (not by a
    /// writer): a `REMOVE` whose `userIdentity` is `{"type": "Service",
    /// "principalId": "dynamodb.amazonaws.com"}`.
    pub fn is_ttl_deletion(&self) -> bool {
        let by_ttl =
            |u: &super::UserIdentity| u.type_ == "Service" && u.principal_id == TTL_PRINCIPAL;
        self.event_name == "REMOVE" && self.record.user_identity.as_ref().is_some_and(by_ttl)
    }
}

/// The JSON view of a record that keys and payload hashes are made of:
/// `{"eventName": .., "Keys": {..}, "NewImage": {..}, "OldImage": {..}}`,
/// images as plain JSON ([`item_json`]), an image the stream lacks absent.
pub fn record_json(record: &DynamoDbRecord) -> Value {
    let mut view = json!({"eventName": record.event_name, "Keys": item_json(&record.keys)});
    let images = [
        ("NewImage", &record.new_image),
        ("OldImage", &record.old_image),
    ];
    for (name, image) in images {
        if let Some(image) = image {
            view[name] = item_json(image);
        }
    }
    view
}

/// The default key of a stream record: its `Keys`, its `eventName` and
/// `attribute` (one that changes with every write and never starts again)
/// of its `NewImage` (its `OldImage` on a `REMOVE`). Missing (no such
/// attribute, no image) is [`KeyError::Missing`].
pub fn keys_and(attribute: impl Into<String>) -> KeySelector {
    let attribute = attribute.into();
    KeySelector::custom(move |input: KeyInput<'_>| {
        let view = input.value;
        let keys = view
            .get("Keys")
            .filter(|k| k.as_object().is_some_and(|k| !k.is_empty()))
            .ok_or_else(|| KeyError::Missing("Keys".to_owned()))?;
        // The NewImage when the record has one; the OldImage of a REMOVE
        // (never the OldImage of a change whose NewImage lacks it: that is
        // the previous change's value).
        let image = match view.get("NewImage") {
            Some(_) => "NewImage",
            None => "OldImage",
        };
        let value = view
            .get(image)
            .and_then(|i| i.get(&attribute))
            .ok_or_else(|| KeyError::Missing(format!("{image}.{attribute}")))?;
        match value {
            Value::Null => Err(KeyError::Missing(format!("{image}.{attribute} (null)"))),
            Value::String(s) if s.is_empty() => Err(KeyError::Empty),
            value => Ok(json!({
                "keys": keys,
                "event": view.get("eventName").cloned().unwrap_or(Value::Null),
                "attribute": [attribute.as_str(), value],
            })),
        }
    })
}

impl Prepare<DynamoDbRecord> for DynamoDbStreams {
    fn prepare(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        raw: EventRecord,
    ) -> Result<Prepared<DynamoDbRecord>, FailureReason> {
        let mut record = DynamoDbRecord::new(raw)
            .map_err(|e| FailureReason::Parse(format!("record {ident}: {e}")))?;
        let view = record_json(&record);
        let key = pipeline.key_of(ident, KeyInput::new(&view, Some(&record.record)))?;
        record.key = key.clone();
        Ok(Prepared::new(record, key, hashed(self.payload, view)))
    }
}
