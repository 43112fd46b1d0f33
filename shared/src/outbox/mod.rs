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

    /// Sets the FIFO message group to the one [`fifo_group`] derives from
    /// `value`: any value gets a group SQS accepts, the same one every time.
    pub fn group_by(self, value: &str) -> Self {
        self.group(fifo_group(value))
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
        check_queue_url(queue_url)?;
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

/// Whether `queue_url` can name a queue: an `http(s)://` URL without
/// whitespace (what a message's destination and a parking queue need).
pub fn check_queue_url(queue_url: &str) -> Result<(), Refusal> {
    let url_ok = ["https://", "http://"].iter().any(|scheme| {
        queue_url
            .strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty())
    });
    if !url_ok || queue_url.chars().any(char::is_whitespace) {
        return Err(Refusal::QueueUrl(queue_url.to_owned()));
    }
    Ok(())
}

/// A valid `MessageGroupId` for `value` (an order id, an account, a lane):
/// `value` itself when SQS accepts it as a group id ([`check_group_id`]),
/// otherwise `sha256-` and the hex SHA-256 of its UTF-8 bytes (71
/// characters: a value with a space, a character outside ASCII, or over
/// [`MAX_GROUP_ID_CHARS`] characters). The same value always gets the same
/// group, so the messages of one value keep their order; two values that
/// SQS accepts never share one.
pub fn fifo_group(value: &str) -> String {
    if check_group_id(value).is_ok() {
        value.to_owned()
    } else {
        format!("sha256-{}", crate::key::sha256_hex(value.as_bytes()))
    }
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

mod entry;

pub(crate) use entry::encode;
pub use entry::{
    Entry, EventPut, MAX_BATCH_ENTRIES, SqsSend, Unpublishable, chunks, decode, decode_each,
    stable_id,
};

#[cfg(test)]
mod tests;
