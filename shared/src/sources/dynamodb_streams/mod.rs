//! DynamoDB Streams batches on the batch core: [`DynamoDbStreamsProcessor`],
//! lanes by item, the default key [`keys_and`]. The guide: [`guide::sources::dynamodb_streams`](crate::guide::sources::dynamodb_streams), the repository's `docs/sources/dynamodb-streams.md`.

pub use aws_lambda_events::dynamodb::{EventRecord, StreamRecord, UserIdentity};
pub use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use base64::Engine as _;
use serde_dynamo::AttributeValue;
use serde_json::{Map, Value, json};

use crate::batch::malformed::{Salvage, StreamEvent, parse_stream, text};
use crate::batch::{BatchError, Delivery, FailureReason, KeyInput, Keyed, Within};
use crate::batch::{KeySelector, Ordering, Parks, PartialResponse, Preparing, Reading};
use crate::batch::{Prepare, Prepared, Processor, Source, SourceNames};
use crate::{batch::parking::Ticket, error::KeyError, key::IdempotencyKey};
use crate::{value::AttrValue, write::Item, write::canonical};

/// Processes DynamoDB Streams batches ([`Processor`] over [`DynamoDbStreams`]).
pub type DynamoDbStreamsProcessor = Processor<DynamoDbStreams>;

/// The DynamoDB Streams source (it has no settings of its own).
#[derive(Debug, Clone, Default)]
pub struct DynamoDbStreams;

/// DynamoDB stream records: their lane is their stream (`eventSourceARN`).
static SALVAGE: Salvage = Salvage {
    names: SourceNames {
        id: "SequenceNumber",
        id_field: "sequence_number",
        lane_field: "shard",
        deduplication_id: "a deduplication id (DynamoDB stream records have none)",
        no_lane: "DynamoDB stream record without an eventSourceARN (its stream)",
    },
    expected: "a DynamoDB Streams",
    event_source: "aws:dynamodb",
    event_source_fields: &["eventSource"],
    event_source_optional: true,
    noun: "a DynamoDB stream record",
    id: "/dynamodb/SequenceNumber",
    lane: |raw| text(raw, "/eventSourceARN"),
};

/// A DynamoDB Streams event as parsed: each record parsed on its own.
pub type DynamoDbStreamEvent = StreamEvent<EventRecord>;

impl From<aws_lambda_events::dynamodb::Event> for DynamoDbStreamEvent {
    fn from(event: aws_lambda_events::dynamodb::Event) -> Self {
        Self::new(event.records)
    }
}

/// Parses an invocation payload as a DynamoDB Streams event: a `Records`
/// array whose items come from `aws:dynamodb` or do not say.
pub fn parse_dynamodb_event(value: Value) -> Result<DynamoDbStreamEvent, BatchError> {
    parse_stream(value, &SALVAGE)
}

impl Source for DynamoDbStreams {
    type Event = DynamoDbStreamEvent;
    type Raw = EventRecord;
    type Response = DynamoDbEventResponse;
    type Error = BatchError;
    const ORDERING: Ordering = Ordering::StopLane;
    const NAMES: &'static SourceNames = &SALVAGE.names;

    fn parse(payload: Value) -> Result<DynamoDbStreamEvent, BatchError> {
        parse_dynamodb_event(payload)
    }

    fn within(&self, record: &EventRecord) -> Within {
        item_of(Some(&record.change.keys))
    }

    fn within_malformed(&self, raw: &Value) -> Within {
        let keys = raw.pointer("/dynamodb/Keys").cloned();
        item_of(keys.and_then(|k| serde_json::from_value(k).ok()).as_ref())
    }

    fn ticket(&self, record: &EventRecord) -> Option<Ticket> {
        Ticket::of(
            SALVAGE.event_source,
            record.event_source_arn.as_deref(),
            record,
        )
    }
}

impl PartialResponse for DynamoDbEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(id.to_owned());
        self.batch_item_failures.push(failure);
    }
}

impl Parks for DynamoDbStreams {}

/// The `principalId` of the deletions DynamoDB's Time to Live makes.
pub const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// The item a record's `Keys` name (unreadable: [`Within::Unknown`], stream order).
fn item_of(keys: Option<&serde_dynamo::Item>) -> Within {
    match keys.filter(|k| !k.is_empty()).map(to_item) {
        Some(Ok(item)) => Within::Key(crate::write::key_text(&item)),
        _ => Within::Unknown,
    }
}

impl Delivery for EventRecord {
    fn id(&self) -> Option<&str> {
        (self.change.sequence_number.as_deref()).filter(|s| !s.is_empty())
    }

    fn lane(&self) -> Option<&str> {
        self.event_source_arn.as_deref().filter(|s| !s.is_empty())
    }

    fn source(&self) -> &'static SourceNames {
        &SALVAGE.names
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
    /// The handler's view of `record`, its images converted exactly ([`to_item`]).
    pub fn new(record: EventRecord) -> Result<Self, String> {
        Ok(Images::of(&record)?.with(record))
    }

    /// The `SequenceNumber` (its position in the shard).
    pub fn sequence_number(&self) -> Option<&str> {
        self.record.change.sequence_number.as_deref()
    }

    /// The `NewImage`, else the `OldImage`.
    pub fn image(&self) -> Option<&Item> {
        self.new_image.as_ref().or(self.old_image.as_ref())
    }

    /// Whether this is a `REMOVE` by DynamoDB's Time to Live (not by a writer).
    pub fn is_ttl_deletion(&self) -> bool {
        let by_ttl = |u: &UserIdentity| u.type_ == "Service" && u.principal_id == TTL_PRINCIPAL;
        self.record.event_name == "REMOVE" && self.record.user_identity.as_ref().is_some_and(by_ttl)
    }
}

/// What [`DynamoDbRecord`] reads of a stream record: its images, converted.
#[derive(Debug)]
pub struct Images {
    event_name: String,
    keys: Item,
    new_image: Option<Item>,
    old_image: Option<Item>,
}

impl Images {
    /// The images of `record`, converted exactly ([`to_item`]).
    fn of(record: &EventRecord) -> Result<Self, String> {
        let image = |name: &str, item: &serde_dynamo::Item| {
            let item = (!item.is_empty()).then(|| to_item(item));
            item.transpose().map_err(|e| format!("{name}.{e}"))
        };
        Ok(Self {
            event_name: record.event_name.clone(),
            keys: image("Keys", &record.change.keys)?.unwrap_or_default(),
            new_image: image("NewImage", &record.change.new_image)?,
            old_image: image("OldImage", &record.change.old_image)?,
        })
    }

    /// The handler's record of `record` with these images.
    fn with(self, record: EventRecord) -> DynamoDbRecord {
        DynamoDbRecord {
            event_name: self.event_name,
            keys: self.keys,
            new_image: self.new_image,
            old_image: self.old_image,
            record,
            key: None,
        }
    }

    /// [`record_json`] of these images.
    fn json(&self) -> Value {
        view(
            &self.event_name,
            &self.keys,
            [&self.new_image, &self.old_image],
        )
    }
}

/// The JSON view keys and payload hashes read: `eventName`, `Keys`, the images.
pub fn record_json(record: &DynamoDbRecord) -> Value {
    let images = [&record.new_image, &record.old_image];
    view(&record.event_name, &record.keys, images)
}

/// The JSON view of `event_name`, `keys` and the new and old images.
fn view(event_name: &str, keys: &Item, [new, old]: [&Option<Item>; 2]) -> Value {
    let mut view = json!({"eventName": event_name, "Keys": item_json(keys)});
    for (name, image) in [("NewImage", new), ("OldImage", old)] {
        if let Some(image) = image {
            view[name] = item_json(image);
        }
    }
    view
}

/// The default key of a stream record: its `Keys`, its `eventName` and
/// `attribute` of its `NewImage` (its `OldImage` on a `REMOVE`).
pub fn keys_and(attribute: impl Into<String>) -> KeySelector {
    let attribute = attribute.into();
    KeySelector::custom(move |input: KeyInput<'_>| {
        let view = input.value;
        let keys = (view.get("Keys").and_then(Value::as_object)).filter(|k| !k.is_empty());
        let keys = keys.ok_or_else(|| KeyError::Missing("Keys".to_owned()))?;
        // The OldImage only without a NewImage (never a previous change's value).
        let image = view.get("NewImage").map_or("OldImage", |_| "NewImage");
        let value = view.get(image).and_then(|i| i.get(&attribute));
        let value = value.ok_or_else(|| KeyError::Missing(format!("{image}.{attribute}")))?;
        match value {
            Value::Null => Err(KeyError::Missing(format!("{image}.{attribute} (null)"))),
            Value::String(s) if s.is_empty() => Err(KeyError::Empty),
            value => {
                let event = &view["eventName"];
                Ok(json!({"keys": keys, "event": event, "attribute": [attribute, value]}))
            }
        }
    })
}

impl Prepare<DynamoDbRecord> for DynamoDbStreams {
    type Body = Images;

    fn prepare<'r>(&self, at: &Reading<'_>, record: &'r EventRecord) -> Preparing<'r, Images> {
        let ident = at.ident();
        let images =
            Images::of(record).map_err(|e| FailureReason::Parse(format!("record {ident}: {e}")))?;
        let view = at.document(|| images.json());
        Ok(Prepared::new(images, view))
    }

    fn record(&self, record: EventRecord, images: Images, keyed: Keyed) -> DynamoDbRecord {
        let mut record = images.with(record);
        record.key = keyed.key;
        record
    }
}

/// A stream image as an [`Item`]; an error names an attribute DynamoDB never sends.
pub fn to_item(image: &serde_dynamo::Item) -> Result<Item, String> {
    each(image.iter(), |v| to_attr(v).and_then(|v| canonical(&v)))
}

/// Each attribute converted by `convert`, an error prefixed with its name.
fn each<'a, T: FromIterator<(String, AttrValue)>>(
    map: impl Iterator<Item = (&'a String, &'a AttributeValue)>,
    convert: impl Fn(&AttributeValue) -> Result<AttrValue, String>,
) -> Result<T, String> {
    map.map(|(k, v)| Ok((k.clone(), convert(v).map_err(|e| format!("{k}: {e}"))?)))
        .collect()
}

fn to_attr(value: &AttributeValue) -> Result<AttrValue, String> {
    Ok(match value {
        AttributeValue::S(s) => AttrValue::S(s.clone()),
        AttributeValue::N(n) => AttrValue::N(n.clone()),
        AttributeValue::B(b) => AttrValue::B(b.clone()),
        AttributeValue::Bool(b) => AttrValue::Bool(*b),
        AttributeValue::Null(true) => AttrValue::Null,
        AttributeValue::Null(false) => return Err("NULL is false (DynamoDB sends true)".to_owned()),
        AttributeValue::L(l) => AttrValue::L(l.iter().map(to_attr).collect::<Result<_, _>>()?),
        AttributeValue::M(map) => AttrValue::M(each(map.iter(), to_attr)?),
        AttributeValue::Ss(ss) => AttrValue::Ss(ss.clone()),
        AttributeValue::Ns(ns) => AttrValue::Ns(ns.clone()),
        AttributeValue::Bs(bs) => AttrValue::Bs(bs.clone()),
    })
}

/// An item as plain JSON, numbers as strings of their exact decimal text.
pub fn item_json(item: &Item) -> Value {
    Value::Object(Map::from_iter(
        item.iter().map(|(k, v)| (k.clone(), attr_json(v))),
    ))
}

fn attr_json(value: &AttrValue) -> Value {
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    match value {
        AttrValue::S(s) | AttrValue::N(s) => Value::String(s.clone()),
        AttrValue::B(b) => b64(b),
        AttrValue::Bool(b) => Value::Bool(*b),
        AttrValue::Null => Value::Null,
        AttrValue::L(items) => items.iter().map(attr_json).collect(),
        AttrValue::M(map) => item_json(map),
        AttrValue::Ss(ss) | AttrValue::Ns(ss) => ss.iter().cloned().map(Value::String).collect(),
        AttrValue::Bs(bs) => bs.iter().map(|b| b64(b)).collect(),
    }
}

#[cfg(test)]
mod tests;
