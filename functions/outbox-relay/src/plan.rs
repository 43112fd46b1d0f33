//! From a stream record to requests: which entries a record asks to
//! publish, which can never be published as written (poison), and each
//! entry rendered as a `SendMessageBatch` or `PutEvents` entry.

use aws_lambda_events::dynamodb::EventRecord;
use lambda_idempotency::dynamodb_streams::MalformedRecord;
use serde::Serialize;
use serde_dynamo::AttributeValue;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

use crate::{Destination, OUTBOX_ID, OutboxEntry, Policy};
pub use lambda_idempotency::outbox::is_fifo;

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

/// Why an entry can never be published as written (`None`: it can): its id
/// is not a stable id, or its message breaks a rule of
/// [`lambda_idempotency::outbox::Message::check`], the same check the library makes when
/// a handler stages it (so only entries written by an older version or by
/// another writer fail here).
pub fn validate(entry: &OutboxEntry) -> Option<String> {
    let hex = |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex(&entry.id) {
        return Some(format!(
            "id {:?} is not 64 lowercase hex digits (a stable id)",
            entry.id
        ));
    }
    entry
        .message
        .check()
        .err()
        .map(|refusal| refusal.to_string())
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
    /// Entries refused by the allowlist: (entry id, reason).
    pub refused: Vec<(String, String)>,
    /// Why nothing is to be published, when the record is not a completed
    /// record with an outbox.
    pub ignored: Option<&'static str>,
}

/// The plan of a record that is not a DynamoDB stream record (the
/// library's parse keeps what it could read of it): nothing to publish, the
/// record skipped as poison, named by its sequence number when it has one.
pub fn plan_malformed(record: &MalformedRecord) -> RecordPlan {
    RecordPlan {
        sequence_number: record.id.clone(),
        key: None,
        entries: Vec::new(),
        poison: vec![(None, record.error.clone())],
        refused: Vec::new(),
        ignored: None,
    }
}

fn string_attr<'a>(image: &'a serde_dynamo::Item, name: &str) -> Option<&'a str> {
    match image.get(name) {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

/// Reads one stream record: the entries to publish, the poison, the
/// refused, or why it is ignored. Only `INSERT` and `MODIFY` records whose
/// `NewImage` has the status `COMPLETED` and an outbox count (attribute
/// names from `policy`'s [`lambda_idempotency::store::Attributes`]); a `MODIFY` whose
/// `OldImage` (with `NEW_AND_OLD_IMAGES`) was already completed with the
/// same outbox is ignored (its messages went out with the earlier record).
/// An entry whose destination the allowlist does not give the record key's
/// prefix is refused.
pub fn plan_record(record: &EventRecord, policy: &Policy) -> RecordPlan {
    let names = &policy.attributes;
    let completed = lambda_idempotency::store::Status::Completed.as_str();
    let image = &record.change.new_image;
    let mut plan = RecordPlan {
        sequence_number: record.change.sequence_number.clone(),
        key: string_attr(image, &names.id)
            .or_else(|| string_attr(&record.change.keys, &names.id))
            .map(str::to_owned),
        entries: Vec::new(),
        poison: Vec::new(),
        refused: Vec::new(),
        ignored: None,
    };
    if !matches!(record.event_name.as_str(), "INSERT" | "MODIFY") {
        plan.ignored = Some("not an INSERT or MODIFY");
        return plan;
    }
    if string_attr(image, &names.status) != Some(completed) {
        plan.ignored = Some("not COMPLETED");
        return plan;
    }
    let outbox = match image.get(&names.outbox) {
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
    if string_attr(old, &names.status) == Some(completed)
        && string_attr(old, &names.outbox) == Some(outbox.as_str())
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
                } else if let Err(reason) = policy.allowlist.permits(
                    plan.key.as_deref().unwrap_or(""),
                    &entry.message.destination,
                ) {
                    plan.refused.push((entry.id, reason));
                } else {
                    plan.entries.push(entry);
                }
            }
        }
    }
    plan
}
