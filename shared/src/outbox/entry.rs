//! An entry of a record's outbox (a message with its stable id), its
//! stored form, and how a publisher sends it (the publication format).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Destination, Message, OUTBOX_ID, is_fifo, sqs_message_size};

/// A message as stored in the record, with its stable id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// `sha256(<record id>/<position>)` in hex: the same for every commit
    /// and every re-publish of this message.
    pub id: String,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
}

pub use crate::key::stable_id;

/// The stored form of `messages` for the record `record_id` (`None`
/// without messages).
pub(crate) fn encode(record_id: &str, messages: &[Message]) -> Option<String> {
    if messages.is_empty() {
        return None;
    }
    let entries: Vec<Entry> = messages
        .iter()
        .enumerate()
        .map(|(i, message)| Entry {
            id: stable_id(record_id, i),
            message: message.clone(),
        })
        .collect();
    serde_json::to_string(&entries).ok()
}

/// Reads the entries of a record's `outbox` attribute.
pub fn decode(outbox: &str) -> Result<Vec<Entry>, serde_json::Error> {
    serde_json::from_str(outbox)
}

/// Entries per `SendMessageBatch` / `PutEvents` request (the services'
/// maximum); the sum of a request's sizes is at most what one message
/// ([`MAX_SQS_MESSAGE_BYTES`](super::MAX_SQS_MESSAGE_BYTES)) or event entry ([`MAX_EVENT_ENTRY_BYTES`](super::MAX_EVENT_ENTRY_BYTES))
/// may be.
pub const MAX_BATCH_ENTRIES: usize = 10;

/// Cuts `sizes` (in order) into requests of ≤ [`MAX_BATCH_ENTRIES`] entries
/// and ≤ `max_bytes` (an entry larger than that goes alone).
pub fn chunks(sizes: &[usize], max_bytes: usize) -> Vec<std::ops::Range<usize>> {
    let (mut out, mut start, mut bytes) = (Vec::new(), 0, 0);
    for (i, size) in sizes.iter().enumerate() {
        if i > start && (i - start == MAX_BATCH_ENTRIES || bytes + size > max_bytes) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

/// One `SendMessageBatch` entry: an outbox [`Entry`] as it is published
/// to SQS ([`Entry::sqs_send`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SqsSend {
    /// The entry id inside the request (its position).
    pub id: String,
    /// The body.
    pub message_body: String,
    /// FIFO only: the group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_group_id: Option<String>,
    /// FIFO only: the stable id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_deduplication_id: Option<String>,
    /// String attributes: [`OUTBOX_ID`] and the entry's.
    pub message_attributes: BTreeMap<String, String>,
}

/// One `PutEvents` entry: an outbox [`Entry`] as it is published to
/// EventBridge ([`Entry::event_put`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EventPut {
    /// The bus.
    pub event_bus_name: String,
    /// `source`.
    pub source: String,
    /// `detail-type`.
    pub detail_type: String,
    /// The detail: the entry's body with [`OUTBOX_ID`] set.
    pub detail: String,
}

impl EventPut {
    /// The size EventBridge counts for it: `source`, `detail-type` and
    /// the detail (its [`OUTBOX_ID`] included).
    pub fn size(&self) -> usize {
        self.source.len() + self.detail_type.len() + self.detail.len()
    }
}

impl Entry {
    /// The `SendMessageBatch` entry at position `index` of a request to
    /// `queue_url`: [`OUTBOX_ID`] among its attributes and, on a FIFO
    /// queue, the stable id as `MessageDeduplicationId` and the group.
    pub fn sqs_send(&self, queue_url: &str, index: usize) -> SqsSend {
        let fifo = is_fifo(queue_url);
        let mut message_attributes = self.message.attributes.clone();
        message_attributes.insert(OUTBOX_ID.to_owned(), self.id.clone());
        SqsSend {
            id: index.to_string(),
            message_body: self.message.body.clone(),
            message_group_id: self.message.group_id.clone().filter(|_| fifo),
            message_deduplication_id: fifo.then(|| self.id.clone()),
            message_attributes,
        }
    }

    /// The size SQS counts for its message ([`sqs_message_size`]).
    pub fn sqs_size(&self) -> usize {
        sqs_message_size(&self.message.body, &self.message.attributes)
    }

    /// The `PutEvents` entry of an EventBridge entry, [`OUTBOX_ID`] set in
    /// its detail; an error when it is not one or its body is not a JSON
    /// object.
    pub fn event_put(&self) -> Result<EventPut, String> {
        let Destination::EventBridge {
            bus,
            source,
            detail_type,
        } = &self.message.destination
        else {
            return Err("not an EventBridge destination".to_owned());
        };
        let mut detail = match serde_json::from_str(&self.message.body) {
            Ok(serde_json::Value::Object(detail)) => detail,
            Ok(_) => return Err("the event detail (body) is not a JSON object".to_owned()),
            Err(e) => return Err(format!("the event detail (body) is not JSON: {e}")),
        };
        detail.insert(OUTBOX_ID.to_owned(), self.id.clone().into());
        Ok(EventPut {
            event_bus_name: bus.clone(),
            source: source.clone(),
            detail_type: detail_type.clone(),
            detail: serde_json::Value::Object(detail).to_string(),
        })
    }
}

/// An outbox entry that can never be published as written: its id, when
/// it has one, and why.
pub type Unpublishable = (Option<String>, String);

/// Reads a record's `outbox` attribute entry by entry, for a publisher: an
/// `Err` when it is not a JSON array; otherwise each entry in order, or why
/// it can never be published as written: it is not an entry, its id is not
/// a stable id (64 lowercase hex digits), its message breaks
/// [`Message::check`] (the check made when a handler stages it, so only
/// entries written by an older version or another writer fail here), or an
/// earlier entry has its id.
pub fn decode_each(outbox: &str) -> Result<Vec<Result<Entry, Unpublishable>>, String> {
    let items = match serde_json::from_str(outbox) {
        Ok(serde_json::Value::Array(items)) => items,
        Ok(_) => return Err("the outbox is not a JSON array".to_owned()),
        Err(e) => return Err(format!("the outbox is not valid JSON: {e}")),
    };
    let mut seen = std::collections::HashSet::new();
    let stable =
        |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut check = |index: usize, item: serde_json::Value| {
        let id = item.get("id").and_then(|v| v.as_str()).map(str::to_owned);
        let entry = serde_json::from_value::<Entry>(item)
            .map_err(|e| (id, format!("entry {index} is not an outbox entry: {e}")))?;
        let refused = if !stable(&entry.id) {
            format!(
                "id {:?} is not 64 lowercase hex digits (a stable id)",
                entry.id
            )
        } else if let Err(refusal) = entry.message.check() {
            refusal.to_string()
        } else if !seen.insert(entry.id.clone()) {
            "a second entry with this id".to_owned()
        } else {
            return Ok(entry);
        };
        Err((Some(entry.id), refused))
    };
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, item)| check(i, item))
        .collect())
}
