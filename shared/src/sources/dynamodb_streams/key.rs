//! A stream record's key, selected from its JSON view ([`record_json`]),
//! and the preparation of its images.

use serde_json::{Value, json};

use super::image::item_json;
use super::{DynamoDbRecord, DynamoDbStreams, EventRecord};
use crate::batch::{FailureReason, KeyInput, KeySelector, Pipeline, Prepare, Prepared};
use crate::error::KeyError;
use crate::sources::hashed;

/// The JSON view of a record that keys and payload hashes are made of:
/// `{"eventName": .., "Keys": {..}, "NewImage": {..}, "OldImage": {..}}`,
/// images as plain JSON ([`item_json`]), an image the stream lacks absent.
pub fn record_json(record: &DynamoDbRecord) -> Value {
    let mut view = json!({"eventName": record.event_name, "Keys": item_json(&record.keys)});
    for (name, image) in [
        ("NewImage", &record.new_image),
        ("OldImage", &record.old_image),
    ] {
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

impl Prepare<DynamoDbRecord> for DynamoDbStreams {
    /// Converts, keys and hashes one record.
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
