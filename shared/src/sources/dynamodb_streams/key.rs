//! A DynamoDB stream record's key, and the preparation of its images.
//!
//! Keys are selected from the record's JSON view ([`record_json`]):
//! `{"eventName": "MODIFY", "Keys": {..}, "NewImage": {..}, "OldImage": {..}}`
//! (images as plain JSON, numbers as strings of their exact decimal text;
//! an image the stream does not carry is absent).
//!
//! The default key is [`keys_and`]`("<attribute>")`: the item's `Keys`, the
//! `eventName` and one attribute of the image that changes with every write
//! (a version number, an `updated_at`). Every change of an item is then its
//! own key, and the same change has the same key wherever it is read from:
//! a redelivery of the batch, and also a new stream of the table (disabled
//! and enabled again), a global table replica's stream or a backfill, where
//! the same change has another `SequenceNumber`. The `Keys` alone are not a
//! key: every change of the item would be taken for a duplicate of the
//! first. [`KeySelector::Id`] (the `SequenceNumber`) catches redeliveries
//! only. [`KeySelector::pointer`] into the view (`/NewImage/order_id`)
//! suits items written once.

use serde_json::{Map, Value, json};

use super::DynamoDbStreams;
use super::image::item_json;
use super::record::DynamoDbRecord;
use crate::batch::{FailureReason, KeyInput, KeySelector, PayloadScope, Pipeline, Prepared};
use crate::error::KeyError;

/// The JSON view of a record that keys and payload hashes are made of.
pub fn record_json(record: &DynamoDbRecord) -> Value {
    let mut view = Map::new();
    view.insert("eventName".into(), Value::String(record.event_name.clone()));
    view.insert("Keys".into(), item_json(&record.keys));
    if let Some(new) = &record.new_image {
        view.insert("NewImage".into(), item_json(new));
    }
    if let Some(old) = &record.old_image {
        view.insert("OldImage".into(), item_json(old));
    }
    Value::Object(view)
}

/// The default key of a DynamoDB stream record: its `Keys`, its
/// `eventName` and `attribute` of its `NewImage` (of its `OldImage` on a
/// `REMOVE`). `attribute` must change with every write of the item and not
/// start again when the item is deleted and written anew (a version that
/// restarts at 1 would make the new item's first change a duplicate of the
/// old one's). Missing (no such attribute, no image: a `KEYS_ONLY` stream)
/// is [`KeyError::Missing`], handled by [`MissingKey`](crate::MissingKey).
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
        let image = if view.get("NewImage").is_some() {
            "NewImage"
        } else {
            "OldImage"
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

/// How a record's images are keyed and hashed: the part of a
/// [`DynamoDbStreamsProcessor`](super::DynamoDbStreamsProcessor)'s settings
/// its records' preparation reads.
impl DynamoDbStreams {
    /// Converts, keys and hashes one record.
    pub(super) fn prepare_record(
        &self,
        pipeline: &Pipeline<'_>,
        ident: &str,
        raw: aws_lambda_events::dynamodb::EventRecord,
    ) -> Result<Prepared<DynamoDbRecord>, FailureReason> {
        let mut record = DynamoDbRecord::new(raw)
            .map_err(|e| FailureReason::Parse(format!("record {ident}: {e}")))?;
        let view = record_json(&record);
        let key = pipeline.key_of(ident, KeyInput::new(&view, Some(&record.record)))?;
        record.key = key.clone();
        let payload = match self.payload {
            PayloadScope::None => None,
            PayloadScope::Body => Some(view),
        };
        Ok(Prepared::new(record, key, payload))
    }
}
