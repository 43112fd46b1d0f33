//! The transactional outbox: messages a handler publishes, exactly once.
//!
//! A handler stages messages next to its writes ([`Staged::publish`]). They
//! are stored **inside its idempotency record** (attribute `outbox`, a JSON
//! array of [`Entry`]), so they commit in the same write as the record and
//! the business writes, in every commit mode, or not at all. The
//! `outbox-relay` function reads the table's stream and publishes every
//! entry of a completed record under its stable [`Entry::id`]: a FIFO queue
//! deduplicates on it (`MessageDeduplicationId`), every SQS message carries
//! it as the `outbox_id` attribute, an EventBridge event as
//! `detail.outbox_id`, so a consumer recognises every re-publish. That
//! publication format is written here, for any publisher: [`decode_each`]
//! reads a record's entries one by one, [`Entry::sqs_send`] and
//! [`Entry::event_put`] render an entry as its request entry, [`chunks`]
//! cuts a target's entries into requests within the services' limits.
//!
//! Every message is checked against the services' documented rules when a
//! handler stages it ([`Message::check`], [`Refusal`]) and again by the
//! relay: a message that SQS, EventBridge or the relay would refuse is a
//! terminal error of the handler before anything commits, never a committed
//! effect whose message is lost.
//!
//! Why in the record and not in an outbox table: the record is written
//! anyway, so the entries add no item and no request to the commit (an
//! outbox table adds one item per message to the transaction, 2 write units
//! each, and a cleanup delete), and the stream carries the messages with
//! the completion that makes them due. The cost: they count towards the
//! record's 400 KB.
//!
//! [`Staged::publish`]: crate::write::Staged::publish

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::key::sha256_hex;

/// The SQS message attribute (and EventBridge `detail` field) carrying a
/// message's stable id.
pub const OUTBOX_ID: &str = "outbox_id";

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Destination {
    /// An SQS queue (a URL ending in `.fifo` is a FIFO queue).
    #[serde(rename = "sqs")]
    Sqs {
        /// The queue URL.
        queue_url: String,
    },
    /// An EventBridge event bus.
    #[serde(rename = "eventbridge")]
    EventBridge {
        /// The bus name or ARN.
        bus: String,
        /// The event's `source`.
        source: String,
        /// The event's `detail-type`.
        detail_type: String,
    },
}

/// A message to publish once the handler's commit lands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Where it goes.
    pub destination: Destination,
    /// The SQS body, or the EventBridge `detail` (a JSON object as text).
    pub body: String,
    /// The FIFO message group (required for FIFO queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// String message attributes (SQS).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

impl Message {
    /// A message to the SQS queue at `queue_url`.
    pub fn sqs(queue_url: impl Into<String>, body: impl Into<String>) -> Self {
        Self {
            destination: Destination::Sqs {
                queue_url: queue_url.into(),
            },
            body: body.into(),
            group_id: None,
            attributes: BTreeMap::new(),
        }
    }

    /// A message to the SQS queue at `queue_url` whose body is `body` as
    /// JSON. The two characters a JSON string may hold but SQS refuses in a
    /// body (U+FFFE, U+FFFF) are written as `\u` escapes, so any string
    /// field publishes and the consumer parses back the same value.
    pub fn sqs_json(
        queue_url: impl Into<String>,
        body: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self::sqs(
            queue_url,
            json_for_sqs(serde_json::to_string(body)?),
        ))
    }

    /// An event on `bus` whose `detail` is `detail` (serialized: it must be
    /// a JSON object, checked when the handler's result is committed).
    pub fn event(
        bus: impl Into<String>,
        source: impl Into<String>,
        detail_type: impl Into<String>,
        detail: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            destination: Destination::EventBridge {
                bus: bus.into(),
                source: source.into(),
                detail_type: detail_type.into(),
            },
            body: serde_json::to_string(detail)?,
            group_id: None,
            attributes: BTreeMap::new(),
        })
    }

    /// Sets the FIFO message group.
    pub fn group(mut self, group_id: impl Into<String>) -> Self {
        self.group_id = Some(group_id.into());
        self
    }

    /// Adds a string message attribute (SQS).
    pub fn attribute(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(name.into(), value.into());
        self
    }

    /// Why this message cannot be published, if it cannot: the services'
    /// documented rules (see [`Refusal`]), checked when a handler stages it
    /// (before anything commits, so a message that could never be
    /// delivered never commits) and again by the relay before it sends.
    pub fn check(&self) -> Result<(), Refusal> {
        match &self.destination {
            Destination::Sqs { queue_url } => self.check_sqs(queue_url),
            Destination::EventBridge {
                bus,
                source,
                detail_type,
            } => check_event(bus, source, detail_type, &self.body),
        }
    }

    fn check_sqs(&self, queue_url: &str) -> Result<(), Refusal> {
        let url_ok = ["https://", "http://"].iter().any(|scheme| {
            queue_url
                .strip_prefix(scheme)
                .is_some_and(|rest| !rest.is_empty())
        });
        if !url_ok || queue_url.chars().any(char::is_whitespace) {
            return Err(Refusal::QueueUrl(queue_url.to_owned()));
        }
        if self.body.is_empty() {
            return Err(Refusal::EmptyBody);
        }
        if let Some((at, c)) = self.body.char_indices().find(|(_, c)| !sqs_char(*c)) {
            return Err(Refusal::BodyCharacter { at, c });
        }
        match &self.group_id {
            Some(group) => check_group_id(group)?,
            None if is_fifo(queue_url) => return Err(Refusal::NoGroup(queue_url.to_owned())),
            None => {}
        }
        if self.attributes.len() + 1 > MAX_ATTRIBUTES {
            return Err(Refusal::TooManyAttributes(self.attributes.len()));
        }
        for (name, value) in &self.attributes {
            check_attribute_name(name)?;
            if value.is_empty() {
                return Err(Refusal::AttributeValue {
                    name: name.clone(),
                    problem: "is empty",
                });
            }
            if !value.chars().all(sqs_char) {
                return Err(Refusal::AttributeValue {
                    name: name.clone(),
                    problem: "has a character SQS refuses",
                });
            }
        }
        let size = sqs_message_size(&self.body, &self.attributes);
        if size > MAX_SQS_MESSAGE_BYTES {
            return Err(Refusal::TooLarge {
                size,
                limit: MAX_SQS_MESSAGE_BYTES,
                service: "SQS",
            });
        }
        Ok(())
    }
}

/// SQS: a message holds at most 10 message attributes, and the relay adds
/// [`OUTBOX_ID`] to every one (so a message may stage 9).
pub const MAX_ATTRIBUTES: usize = 10;
/// SQS: a message (body plus every attribute's name, type and value) is at
/// most 1 MiB (raised from 256 KiB in January 2026).
pub const MAX_SQS_MESSAGE_BYTES: usize = 1_048_576;
/// EventBridge: a `PutEvents` entry (`Source`, `DetailType`, `Detail`) is at
/// most 1 MB (raised from 256 KB in January 2026; read as 1,000,000 bytes,
/// the stricter of its two readings).
pub const MAX_EVENT_ENTRY_BYTES: usize = 1_000_000;
/// SQS: `MessageGroupId` (and `MessageDeduplicationId`) is 1 to 128
/// characters.
pub const MAX_GROUP_ID_CHARS: usize = 128;
/// SQS: a message attribute name is at most 256 characters.
pub const MAX_ATTRIBUTE_NAME_CHARS: usize = 256;
/// EventBridge: `Source` is 1 to 256 characters.
pub const MAX_SOURCE_CHARS: usize = 256;
/// EventBridge: `DetailType` is 1 to 128 characters.
pub const MAX_DETAIL_TYPE_CHARS: usize = 128;
/// EventBridge: `EventBusName` (a name or an ARN) is 1 to 1,600 characters.
pub const MAX_BUS_CHARS: usize = 1600;

/// Why a message can never be published as written: each variant is one of
/// SQS's or EventBridge's documented rules (or the relay's own
/// [`OUTBOX_ID`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The queue URL is not an `http(s)://` URL.
    #[error("the queue URL {0:?} is not an http(s) URL")]
    QueueUrl(String),
    /// SQS needs a body of at least one character.
    #[error("an SQS message body cannot be empty")]
    EmptyBody,
    /// SQS accepts only `#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
    /// #x10000-#x10FFFF` in a body and in String attribute values.
    #[error("the body has a character SQS refuses ({c:?} at byte {at})")]
    BodyCharacter {
        /// Its byte offset.
        at: usize,
        /// The character.
        c: char,
    },
    /// A FIFO queue needs a message group.
    #[error("a message to the FIFO queue {0} has no group id")]
    NoGroup(String),
    /// A `MessageGroupId` is 1 to 128 ASCII letters, digits or punctuation.
    #[error("the group id {0:?} is not 1 to 128 ASCII letters, digits or punctuation (no spaces)")]
    GroupId(String),
    /// More attributes than SQS takes beside [`OUTBOX_ID`].
    #[error("{0} message attributes: SQS allows 10 per message, one of them the relay's outbox_id")]
    TooManyAttributes(usize),
    /// An attribute name SQS refuses, or [`OUTBOX_ID`].
    #[error("the attribute name {name:?} {problem}")]
    AttributeName {
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// An attribute value SQS refuses.
    #[error("the value of attribute {name:?} {problem}")]
    AttributeValue {
        /// The attribute's name.
        name: String,
        /// What is wrong with the value.
        problem: &'static str,
    },
    /// Larger than the service accepts, as the relay sends it.
    #[error("the message is {size} bytes as sent; {service} accepts {limit}")]
    TooLarge {
        /// Its size as sent (with [`OUTBOX_ID`]).
        size: usize,
        /// The service's limit.
        limit: usize,
        /// `SQS` or `EventBridge`.
        service: &'static str,
    },
    /// An event bus name or ARN EventBridge refuses.
    #[error("the event bus {0:?} is not a bus name or ARN (1 to 1600 of A-Z a-z 0-9 . - _ /)")]
    Bus(String),
    /// An event `source` EventBridge refuses.
    #[error("the event source {0:?} is not 1 to 256 characters outside the reserved aws. prefix")]
    Source(String),
    /// An event `detail-type` EventBridge refuses.
    #[error("the event detail-type {0:?} is not 1 to 128 characters")]
    DetailType(String),
    /// The detail is not a JSON object, or holds [`OUTBOX_ID`].
    #[error("the event detail {0}")]
    Detail(&'static str),
}

/// `json` (serde_json's output) with U+FFFE and U+FFFF escaped: outside
/// strings JSON has no such characters, inside them `\uFFFE` means the same.
fn json_for_sqs(json: String) -> String {
    if !json.contains(['\u{FFFE}', '\u{FFFF}']) {
        return json;
    }
    json.replace('\u{FFFE}', "\\ufffe")
        .replace('\u{FFFF}', "\\uffff")
}

/// Whether a queue URL names a FIFO queue.
pub fn is_fifo(queue_url: &str) -> bool {
    queue_url.ends_with(".fifo")
}

/// Whether SQS accepts `c` in a message body or a String attribute value.
pub fn sqs_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Whether `group` is a valid `MessageGroupId`: 1 to 128 characters, each an
/// ASCII letter, digit or punctuation mark.
pub fn check_group_id(group: &str) -> Result<(), Refusal> {
    let ok = !group.is_empty()
        && group.len() <= MAX_GROUP_ID_CHARS
        && group.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(Refusal::GroupId(group.to_owned()))
    }
}

fn check_attribute_name(name: &str) -> Result<(), Refusal> {
    let problem = if name == OUTBOX_ID {
        Some("is reserved for the relay's stable id")
    } else if name.is_empty() || name.chars().count() > MAX_ATTRIBUTE_NAME_CHARS {
        Some("is not 1 to 256 characters")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        Some("has a character other than A-Z a-z 0-9 _ - .")
    } else if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
        Some("starts or ends with a period, or has two in a row")
    } else if ["aws.", "amazon."]
        .iter()
        .any(|p| name.len() >= p.len() && name[..p.len()].eq_ignore_ascii_case(p))
    {
        Some("starts with a prefix reserved for AWS (AWS. or Amazon.)")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(Refusal::AttributeName {
            name: name.to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

/// The size SQS counts for a message the relay sends: the body and, for
/// each attribute (the message's and [`OUTBOX_ID`] with its 64-digit id),
/// its name, its type (`String`) and its value, in UTF-8 bytes.
pub fn sqs_message_size(body: &str, attributes: &BTreeMap<String, String>) -> usize {
    const TYPE: usize = "String".len();
    let outbox_id = OUTBOX_ID.len() + TYPE + 64;
    body.len()
        + outbox_id
        + attributes
            .iter()
            .map(|(k, v)| k.len() + TYPE + v.len())
            .sum::<usize>()
}

/// The size EventBridge counts for an entry the relay sends: `Source`,
/// `DetailType` and `Detail` in UTF-8 bytes, the detail with the
/// `"outbox_id":"<64 digits>"` member the relay adds.
pub fn event_entry_size(source: &str, detail_type: &str, detail: &str) -> usize {
    let member = r#","outbox_id":""#.len() + 64 + 1;
    source.len() + detail_type.len() + detail.len() + member
}

fn check_event(bus: &str, source: &str, detail_type: &str, detail: &str) -> Result<(), Refusal> {
    let name = bus.rsplit_once(":event-bus/").map_or(bus, |(_, name)| name);
    let bus_ok = !name.is_empty()
        && bus.chars().count() <= MAX_BUS_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'/'))
        && (name.len() == bus.len() || bus.starts_with("arn:"));
    if !bus_ok {
        return Err(Refusal::Bus(bus.to_owned()));
    }
    let reserved = source.len() >= 4 && source[..4].eq_ignore_ascii_case("aws.");
    if source.trim().is_empty() || source.chars().count() > MAX_SOURCE_CHARS || reserved {
        return Err(Refusal::Source(source.to_owned()));
    }
    if detail_type.trim().is_empty() || detail_type.chars().count() > MAX_DETAIL_TYPE_CHARS {
        return Err(Refusal::DetailType(detail_type.to_owned()));
    }
    match serde_json::from_str::<serde_json::Value>(detail) {
        Ok(serde_json::Value::Object(members)) if members.contains_key(OUTBOX_ID) => {
            return Err(Refusal::Detail("holds outbox_id, which the relay sets"));
        }
        Ok(serde_json::Value::Object(_)) => {}
        _ => return Err(Refusal::Detail("is not a JSON object")),
    }
    let size = event_entry_size(source, detail_type, detail);
    if size > MAX_EVENT_ENTRY_BYTES {
        return Err(Refusal::TooLarge {
            size,
            limit: MAX_EVENT_ENTRY_BYTES,
            service: "EventBridge",
        });
    }
    Ok(())
}

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

/// The stable id of the message at `position` of the record `record_id`.
pub fn stable_id(record_id: &str, position: usize) -> String {
    sha256_hex(format!("{record_id}/{position}").as_bytes())
}

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
/// ([`MAX_SQS_MESSAGE_BYTES`]) or event entry ([`MAX_EVENT_ENTRY_BYTES`])
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

#[cfg(test)]
mod tests {
    use super::*;

    const FIFO: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/notifications.fifo";

    #[test]
    fn chunks_hold_ten_entries_and_fit_the_size_limit() {
        const MAX: usize = MAX_SQS_MESSAGE_BYTES;
        let ranges = chunks(&[1; 25], MAX);
        assert_eq!(ranges, vec![0..10, 10..20, 20..25]);
        assert_eq!(chunks(&[], MAX), Vec::<std::ops::Range<usize>>::new());
        let big = MAX / 2;
        assert_eq!(
            chunks(&[big, big, 1, MAX * 2, 1], MAX),
            vec![0..2, 2..3, 3..4, 4..5]
        );
    }

    /// What the relay sends carries the stable id: the `outbox_id`
    /// attribute, on a FIFO queue the deduplication id (and the group), an
    /// event's `detail.outbox_id`.
    #[test]
    fn requests_carry_the_stable_id() {
        let entry: Entry = serde_json::from_value(serde_json::json!({
            "id": stable_id("k", 0),
            "destination": {"sqs": {"queue_url": FIFO}},
            "body": "hello",
            "group_id": "acct-1",
            "attributes": {"type": "OrderConfirmed"},
        }))
        .unwrap();
        let send = entry.sqs_send(FIFO, 3);
        assert_eq!(send.id, "3");
        assert_eq!(
            send.message_deduplication_id.as_deref(),
            Some(entry.id.as_str())
        );
        assert_eq!(send.message_group_id.as_deref(), Some("acct-1"));
        assert_eq!(send.message_attributes[OUTBOX_ID], entry.id);
        assert_eq!(send.message_attributes["type"], "OrderConfirmed");
        let printed = serde_json::to_value(&send).unwrap();
        assert_eq!(printed["MessageDeduplicationId"], entry.id.as_str());
        let standard = entry.sqs_send(&FIFO.replace(".fifo", ""), 0);
        assert_eq!(standard.message_deduplication_id, None);
        assert_eq!(standard.message_group_id, None);
        assert_eq!(standard.message_attributes[OUTBOX_ID], entry.id);
        assert!(entry.event_put().is_err(), "not an event");

        let event: Entry = serde_json::from_value(serde_json::json!({
            "id": stable_id("k", 1),
            "destination": {"eventbridge": {"bus": "default", "source": "orders", "detail_type": "OrderConfirmed"}},
            "body": "{\"order_id\":\"o-1\"}",
        }))
        .unwrap();
        let put = event.event_put().unwrap();
        assert_eq!(put.event_bus_name, "default");
        let detail: serde_json::Value = serde_json::from_str(&put.detail).unwrap();
        assert_eq!(
            detail,
            serde_json::json!({"order_id": "o-1", OUTBOX_ID: stable_id("k", 1)})
        );
        assert_eq!(
            put.size(),
            "orders".len() + "OrderConfirmed".len() + put.detail.len()
        );
        let mut not_object = event.clone();
        not_object.message.body = "[1]".to_owned();
        assert!(
            not_object
                .event_put()
                .unwrap_err()
                .contains("not a JSON object")
        );
    }

    /// Each entry read on its own: the good ones kept, each bad one named
    /// with its reason; an outbox that is not an array is refused whole.
    #[test]
    fn decode_each_keeps_the_good_entries_and_names_the_bad() {
        let good = |i: usize| {
            serde_json::json!({
                "id": stable_id("k", i),
                "destination": {"sqs": {"queue_url": FIFO}},
                "body": "b",
                "group_id": "g",
            })
        };
        let mut no_group = good(1);
        no_group["group_id"] = serde_json::Value::Null;
        let mut not_hex = good(3);
        not_hex["id"] = "not-hex".into();
        let outbox = serde_json::json!([
            good(0),
            no_group,
            {"id": stable_id("k", 2), "destination": {"sns": {"topic": "x"}}, "body": "b"},
            not_hex,
            good(0),
            good(5),
        ]);
        let entries = decode_each(&outbox.to_string()).unwrap();
        let kept: Vec<&str> = entries.iter().flatten().map(|e| e.id.as_str()).collect();
        assert_eq!(kept, [stable_id("k", 0), stable_id("k", 5)]);
        let bad: Vec<&Unpublishable> = entries.iter().filter_map(|e| e.as_ref().err()).collect();
        assert_eq!(bad.len(), 4, "{bad:?}");
        assert!(bad[0].1.contains("no group id"), "{bad:?}");
        assert_eq!(bad[1].0.as_deref(), Some(stable_id("k", 2).as_str()));
        assert!(bad[1].1.contains("not an outbox entry"), "{bad:?}");
        assert!(bad[2].1.contains("64 lowercase hex"), "{bad:?}");
        assert!(bad[3].1.contains("second entry"), "{bad:?}");
        assert!(
            decode_each("{not json")
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert!(
            decode_each("{\"a\":1}")
                .unwrap_err()
                .contains("not a JSON array")
        );
    }

    #[test]
    fn entries_round_trip_in_the_relay_format() {
        let messages = [
            Message::sqs("https://sqs.local/1/n.fifo", "hello")
                .group("acct-1")
                .attribute("k", "v"),
            Message::event(
                "default",
                "orders",
                "OrderConfirmed",
                &serde_json::json!({"order_id": "o-1"}),
            )
            .unwrap(),
        ];
        let text = encode("orders.notify#abc", &messages).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({
                "id": stable_id("orders.notify#abc", 0),
                "destination": {"sqs": {"queue_url": "https://sqs.local/1/n.fifo"}},
                "body": "hello",
                "group_id": "acct-1",
                "attributes": {"k": "v"},
            })
        );
        assert_eq!(
            json[1]["destination"],
            serde_json::json!({"eventbridge": {"bus": "default", "source": "orders", "detail_type": "OrderConfirmed"}})
        );
        let back = decode(&text).unwrap();
        assert_eq!(back[1].message, messages[1]);
        assert_eq!(back[0].id.len(), 64);
        assert_ne!(back[0].id, back[1].id, "positions differ");
        assert_ne!(stable_id("a#h", 0), stable_id("b#h", 0), "prefixes differ");
        assert_eq!(encode("x", &[]), None);
    }

    #[test]
    fn undeliverable_messages_are_refused() {
        assert!(Message::sqs("https://q/n.fifo", "b").check().is_err());
        assert!(
            Message::sqs("https://q/n.fifo", "b")
                .group("g")
                .check()
                .is_ok()
        );
        assert!(Message::sqs("https://q/n", "b").check().is_ok());
        assert!(Message::sqs("", "b").check().is_err());
        assert!(
            Message::sqs("https://q/n", "b")
                .attribute(OUTBOX_ID, "x")
                .check()
                .is_err()
        );
        let event = Message::event("bus", "s", "d", &serde_json::json!([1])).unwrap();
        assert!(event.check().is_err(), "detail must be an object");
    }
    #[test]
    fn the_services_boundaries_are_accepted() {
        let q = "https://sqs.us-east-1.amazonaws.com/1/n";
        let fifo = "https://sqs.us-east-1.amazonaws.com/1/n.fifo";
        let nine = (0..9).fold(Message::sqs(q, "b"), |m, i| {
            m.attribute(format!("a{i}"), "v")
        });
        assert_eq!(nine.check(), Ok(()), "9 of ours + outbox_id = 10");
        assert_eq!(
            nine.attribute("a9", "v").check(),
            Err(Refusal::TooManyAttributes(10))
        );
        let punctuation: String = (0x21u8..=0x7e).map(char::from).collect();
        for group in ["g".repeat(128), punctuation[..94].to_owned(), "a".into()] {
            assert_eq!(
                Message::sqs(fifo, "b").group(&group).check(),
                Ok(()),
                "{group}"
            );
        }
        assert!(Message::sqs(fifo, "b").group("tab\there").check().is_err());
        // Every character SQS lists, at its edges, in a body and a value.
        let allowed = "\t\n\r \u{D7FF}\u{E000}\u{FFFD}\u{10000}\u{10FFFF}";
        assert_eq!(
            Message::sqs(q, allowed).attribute("x", allowed).check(),
            Ok(())
        );
        for bad in [
            '\u{0}', '\u{8}', '\u{B}', '\u{C}', '\u{1F}', '\u{FFFE}', '\u{FFFF}',
        ] {
            assert!(!sqs_char(bad), "{bad:?}");
            assert!(
                Message::sqs(q, "b")
                    .attribute("x", bad.to_string())
                    .check()
                    .is_err()
            );
        }
        for name in ["a.b", "A-Z_0.9", "awsx", "Amazonia", &"n".repeat(256)] {
            assert_eq!(
                Message::sqs(q, "b").attribute(name, "v").check(),
                Ok(()),
                "{name}"
            );
        }
        for name in [
            ".a",
            "a.",
            "AWS.x",
            "aws.x",
            "AMAZON.x",
            &"n".repeat(257),
            "é",
        ] {
            assert!(
                Message::sqs(q, "b").attribute(name, "v").check().is_err(),
                "{name}"
            );
        }
        // Size as sent: body + attributes + outbox_id's name, type, 64 digits.
        let fixed = sqs_message_size("", &BTreeMap::new());
        assert_eq!(fixed, "outbox_id".len() + "String".len() + 64);
        let fits = "x".repeat(MAX_SQS_MESSAGE_BYTES - fixed);
        assert_eq!(Message::sqs(q, fits.clone()).check(), Ok(()));
        assert!(matches!(
            Message::sqs(q, fits + "x").check(),
            Err(Refusal::TooLarge { size, limit: MAX_SQS_MESSAGE_BYTES, .. }) if size == MAX_SQS_MESSAGE_BYTES + 1
        ));
        // EventBridge.
        let detail = serde_json::json!({"k": 1});
        let arn = "arn:aws:events:us-east-1:123456789012:event-bus/orders";
        for bus in ["default", arn, "aws.partner/x.com/1"] {
            let m = Message::event(bus, "shop.orders", "d".repeat(128), &detail).unwrap();
            assert_eq!(m.check(), Ok(()), "{bus}");
        }
        for bus in [
            "",
            "has space",
            "arn:aws:events:us-east-1:1:event-bus/",
            "a:b",
        ] {
            let m = Message::event(bus, "s", "d", &detail).unwrap();
            assert!(matches!(m.check(), Err(Refusal::Bus(_))), "{bus:?}");
        }
        let m = Message::event("b", "s".repeat(257), "d", &detail).unwrap();
        assert!(matches!(m.check(), Err(Refusal::Source(_))));
        let m = Message::event("b", "AWS.orders", "d", &detail).unwrap();
        assert!(matches!(m.check(), Err(Refusal::Source(_))));
        let m = Message::event("b", "s", "d", &serde_json::json!({"outbox_id": "x"})).unwrap();
        assert!(matches!(m.check(), Err(Refusal::Detail(_))));
        let big = serde_json::json!({"k": "x".repeat(MAX_EVENT_ENTRY_BYTES)});
        let m = Message::event("b", "s", "d", &big).unwrap();
        assert!(matches!(
            m.check(),
            Err(Refusal::TooLarge {
                service: "EventBridge",
                ..
            })
        ));
    }

    #[test]
    fn json_bodies_escape_what_sqs_refuses() {
        let q = "https://sqs.us-east-1.amazonaws.com/1/n";
        let value = serde_json::json!({"customer_id": "c\u{FFFF}\u{FFFE}d", "n": 1});
        let m = Message::sqs_json(q, &value).unwrap();
        assert_eq!(m.check(), Ok(()));
        assert!(m.body.contains("\\uffff\\ufffe"), "{}", m.body);
        let back: serde_json::Value = serde_json::from_str(&m.body).unwrap();
        assert_eq!(back, value, "the consumer reads the same value");
        let plain = Message::sqs_json(q, &serde_json::json!({"a": "b"})).unwrap();
        assert_eq!(plain.body, r#"{"a":"b"}"#);
    }
}
