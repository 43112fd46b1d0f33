//! From a stream record to requests: which entries a record asks to
//! publish, which can never be published as written (poison), and each
//! entry rendered as a `SendMessageBatch` or `PutEvents` entry.

use aws_lambda_events::dynamodb::EventRecord;
use serde::Serialize;
use serde_dynamo::AttributeValue;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

use crate::{
    COMPLETED, Destination, MAX_ENTRY_ATTRIBUTES, OUTBOX_ATTRIBUTE, OUTBOX_ID, OutboxEntry,
    STATUS_ATTRIBUTE,
};

/// Whether a queue URL names a FIFO queue.
pub fn is_fifo(queue_url: &str) -> bool {
    queue_url.ends_with(".fifo")
}

/// One `SendMessageBatch` entry, as the relay sends it.
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
    /// String attributes: `outbox_id` and the entry's.
    pub message_attributes: BTreeMap<String, String>,
}

/// The `SendMessageBatch` entry for `entry` at position `index` of a request
/// to `queue_url`.
pub fn sqs_send(queue_url: &str, index: usize, entry: &OutboxEntry) -> SqsSend {
    let fifo = is_fifo(queue_url);
    let mut message_attributes = entry.message.attributes.clone();
    message_attributes.insert(OUTBOX_ID.to_owned(), entry.id.clone());
    SqsSend {
        id: index.to_string(),
        message_body: entry.message.body.clone(),
        message_group_id: if fifo {
            entry.message.group_id.clone()
        } else {
            None
        },
        message_deduplication_id: fifo.then(|| entry.id.clone()),
        message_attributes,
    }
}

/// One `PutEvents` entry, as the relay sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EventPut {
    /// The bus.
    pub event_bus_name: String,
    /// `source`.
    pub source: String,
    /// `detail-type`.
    pub detail_type: String,
    /// The detail: the entry's body with `outbox_id` set.
    pub detail: String,
}

/// The `PutEvents` entry for an EventBridge `entry`; an error when it is not
/// one or its body is not a JSON object.
pub fn event_put(entry: &OutboxEntry) -> Result<EventPut, String> {
    let Destination::EventBridge {
        bus,
        source,
        detail_type,
    } = &entry.message.destination
    else {
        return Err("not an EventBridge destination".to_owned());
    };
    let mut detail = match serde_json::from_str::<Value>(&entry.message.body) {
        Ok(Value::Object(detail)) => detail,
        Ok(_) => return Err("the event detail (body) is not a JSON object".to_owned()),
        Err(e) => return Err(format!("the event detail (body) is not JSON: {e}")),
    };
    detail.insert(OUTBOX_ID.to_owned(), Value::String(entry.id.clone()));
    Ok(EventPut {
        event_bus_name: bus.clone(),
        source: source.clone(),
        detail_type: detail_type.clone(),
        detail: Value::Object(detail).to_string(),
    })
}

/// Why an entry can never be published as written (`None`: it can).
pub fn validate(entry: &OutboxEntry) -> Option<String> {
    let hex = |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex(&entry.id) {
        return Some(format!(
            "id {:?} is not 64 lowercase hex digits (a stable id)",
            entry.id
        ));
    }
    match &entry.message.destination {
        Destination::Sqs { queue_url } => {
            if !(queue_url.starts_with("https://") || queue_url.starts_with("http://")) {
                return Some(format!("queue_url {queue_url:?} is not a queue URL"));
            }
            if entry.message.body.is_empty() {
                return Some("an SQS message body cannot be empty".to_owned());
            }
            if is_fifo(queue_url) && entry.message.group_id.as_deref().is_none_or(str::is_empty) {
                return Some(format!(
                    "a message for the FIFO queue {queue_url} has no group_id"
                ));
            }
            if entry.message.attributes.len() > MAX_ENTRY_ATTRIBUTES {
                return Some(format!(
                    "{} attributes: SQS allows {MAX_ENTRY_ATTRIBUTES} besides {OUTBOX_ID}",
                    entry.message.attributes.len()
                ));
            }
            if entry.message.attributes.contains_key(OUTBOX_ID) {
                return Some(format!("attribute {OUTBOX_ID} is the relay's"));
            }
            if entry
                .message
                .attributes
                .iter()
                .any(|(k, v)| k.is_empty() || v.is_empty())
            {
                return Some("attribute names and values cannot be empty".to_owned());
            }
            None
        }
        Destination::EventBridge {
            bus,
            source,
            detail_type,
        } => {
            if bus.is_empty() || source.is_empty() || detail_type.is_empty() {
                return Some("bus, source and detail_type must not be empty".to_owned());
            }
            event_put(entry).err()
        }
        _ => Some("a destination this relay does not know".to_owned()),
    }
}

/// What one stream record asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPlan {
    /// The record's `SequenceNumber`.
    pub sequence_number: Option<String>,
    /// The idempotency key (`id`), for logs.
    pub key: Option<String>,
    /// The entries to publish, in outbox order.
    pub entries: Vec<OutboxEntry>,
    /// Entries (or the whole outbox) skipped as poison: (entry id if known,
    /// reason).
    pub poison: Vec<(Option<String>, String)>,
    /// Why nothing is to be published, when the record is not a completed
    /// record with an outbox.
    pub ignored: Option<&'static str>,
}

fn string_attr<'a>(image: &'a serde_dynamo::Item, name: &str) -> Option<&'a str> {
    match image.get(name) {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

/// Reads one stream record: the entries to publish, the poison, or why it is
/// ignored. Only `INSERT` and `MODIFY` records whose `NewImage` has `status`
/// = `COMPLETED` and an `outbox` count; a `MODIFY` whose `OldImage` (with
/// `NEW_AND_OLD_IMAGES`) was already completed with the same outbox is ignored
/// (its messages went out with the earlier record).
pub fn plan_record(record: &EventRecord) -> RecordPlan {
    let image = &record.change.new_image;
    let mut plan = RecordPlan {
        sequence_number: record.change.sequence_number.clone(),
        key: string_attr(image, "id")
            .or_else(|| string_attr(&record.change.keys, "id"))
            .map(str::to_owned),
        entries: Vec::new(),
        poison: Vec::new(),
        ignored: None,
    };
    if !matches!(record.event_name.as_str(), "INSERT" | "MODIFY") {
        plan.ignored = Some("not an INSERT or MODIFY");
        return plan;
    }
    if string_attr(image, STATUS_ATTRIBUTE) != Some(COMPLETED) {
        plan.ignored = Some("not COMPLETED");
        return plan;
    }
    let outbox = match image.get(OUTBOX_ATTRIBUTE) {
        None => {
            plan.ignored = Some("no outbox");
            return plan;
        }
        Some(AttributeValue::S(s)) => s,
        Some(_) => {
            plan.poison
                .push((None, "the outbox attribute is not of type S".to_owned()));
            return plan;
        }
    };
    let old = &record.change.old_image;
    if string_attr(old, STATUS_ATTRIBUTE) == Some(COMPLETED)
        && string_attr(old, OUTBOX_ATTRIBUTE) == Some(outbox.as_str())
    {
        plan.ignored = Some("outbox already published with an earlier record");
        return plan;
    }
    let items = match serde_json::from_str::<Value>(outbox) {
        Ok(Value::Array(items)) => items,
        Ok(_) => {
            plan.poison
                .push((None, "the outbox is not a JSON array".to_owned()));
            return plan;
        }
        Err(e) => {
            plan.poison
                .push((None, format!("the outbox is not valid JSON: {e}")));
            return plan;
        }
    };
    let mut seen = HashSet::new();
    for (index, item) in items.into_iter().enumerate() {
        let id = item.get("id").and_then(Value::as_str).map(str::to_owned);
        match serde_json::from_value::<OutboxEntry>(item) {
            Err(e) => plan
                .poison
                .push((id, format!("entry {index} is not an outbox entry: {e}"))),
            Ok(entry) => {
                if let Some(reason) = validate(&entry) {
                    plan.poison.push((Some(entry.id), reason));
                } else if !seen.insert(entry.id.clone()) {
                    plan.poison
                        .push((Some(entry.id), "a second entry with this id".to_owned()));
                } else {
                    plan.entries.push(entry);
                }
            }
        }
    }
    plan
}
