//! Envelopes: an EventBridge event or an SNS notification carried in a
//! record's body, opened only when asked ([`EnvelopeMode`]) and only when
//! strict (the service's own fields and nothing else). Once opened, the
//! handler's body, the key and the payload hash read one document.
//! The rule and its reasons: `docs/sources/envelopes.md`.

use std::any::type_name;
use std::borrow::Cow;
use std::collections::HashMap;

use aws_lambda_events::eventbridge::EventBridgeEvent;
use aws_lambda_events::sns::MessageAttribute;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::payload::{self, PayloadKind};
use super::{FailureReason, json_type};

/// An envelope a record's body was opened from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Envelope {
    /// An EventBridge event; the handler's body is its `detail`.
    EventBridge(Box<EventBridgeEvent<Value>>),
    /// An SNS notification (raw message delivery off), from a standard or a
    /// FIFO topic; the handler's body is its parsed `Message`.
    Sns(Box<SnsNotification>),
}

impl Envelope {
    /// The id the wrapping service gave the event, kept across that
    /// service's retries: the EventBridge `id`, the SNS `MessageId`.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::EventBridge(event) => event.id.as_deref(),
            Self::Sns(notification) => Some(notification.message_id.as_str()),
        }
        .filter(|id| !id.is_empty())
    }

    /// The EventBridge event, when the body was one.
    pub fn eventbridge(&self) -> Option<&EventBridgeEvent<Value>> {
        match self {
            Self::EventBridge(event) => Some(event),
            Self::Sns(_) => None,
        }
    }

    /// The SNS notification, when the body was one.
    pub fn sns(&self) -> Option<&SnsNotification> {
        match self {
            Self::Sns(notification) => Some(notification),
            Self::EventBridge(_) => None,
        }
    }
}

/// An SNS notification as SNS writes it in an SQS body (raw message
/// delivery off). A standard topic signs it (`SignatureVersion`,
/// `Signature`, `SigningCertURL`); a FIFO topic numbers it
/// (`SequenceNumber`) and writes no signature, which is why this is not
/// `aws_lambda_events::sns::SnsMessage` (that type requires the signature).
/// Only a strict notification is opened: a FIFO one from a `.fifo` topic
/// with its `SequenceNumber`, any other with its signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
#[non_exhaustive]
pub struct SnsNotification {
    /// The type of the message: `Notification`.
    #[serde(rename = "Type")]
    pub sns_message_type: String,
    /// The id SNS gave the published message, the same in every copy SNS
    /// delivers ([`KeySelector::EventId`](crate::KeySelector::EventId)).
    pub message_id: String,
    /// The number a FIFO topic gives the message within its message group
    /// (FIFO topics only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<String>,
    /// The ARN of the topic (a FIFO topic's ends in `.fifo`).
    pub topic_arn: String,
    /// The `Subject` it was published with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// When it was published (ISO 8601, UTC), as SNS wrote it.
    pub timestamp: String,
    /// The version of the signature (standard topics only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_version: Option<String>,
    /// The base64 signature (standard topics only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The URL of the certificate it was signed with (standard topics
    /// only).
    #[serde(
        default,
        rename = "SigningCertURL",
        alias = "SigningCertUrl",
        skip_serializing_if = "Option::is_none"
    )]
    pub signing_cert_url: Option<String>,
    /// The URL that unsubscribes the queue from the topic.
    #[serde(rename = "UnsubscribeURL", alias = "UnsubscribeUrl")]
    pub unsubscribe_url: String,
    /// The message as published: the handler's body is read from it.
    pub message: String,
    /// The message attributes it was published with.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub message_attributes: HashMap<String, MessageAttribute>,
}

impl SnsNotification {
    /// Whether a FIFO topic sent it (a `.fifo` topic; it has a
    /// `SequenceNumber`).
    pub fn is_fifo(&self) -> bool {
        is_fifo_topic(&self.topic_arn)
    }
}

/// Whether `arn` names a FIFO topic: SNS requires a FIFO topic's name to
/// end in `.fifo`, and no other topic's may.
fn is_fifo_topic(arn: &str) -> bool {
    arn.ends_with(".fifo")
}

/// Which envelopes a processor opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Envelopes {
    /// EventBridge events (a rule whose target is the queue).
    EventBridge,
    /// SNS notifications (a queue subscribed to a topic).
    Sns,
    /// Either.
    Any,
}

impl Envelopes {
    fn name(self) -> &'static str {
        match self {
            Self::EventBridge => "an EventBridge event",
            Self::Sns => "an SNS notification",
            Self::Any => "an EventBridge event or an SNS notification",
        }
    }
}

/// Whether a processor opens envelopes in record bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EnvelopeMode {
    /// The body is the message; nothing is opened (the default).
    #[default]
    Never,
    /// A body that is a strict envelope of these kinds is opened; any other
    /// body is the message itself (a body that is neither fails its record,
    /// saying why).
    Unwrap(Envelopes),
    /// Every body must be a strict envelope of these kinds; any other body
    /// fails its record, saying why it is not one.
    Require(Envelopes),
}

/// A body opened: the handler's body, the one document keys and the
/// payload hash read (numbers `f64` cannot hold kept as their exact text),
/// and the envelope it came from.
#[derive(Debug)]
pub(crate) struct Opened<M> {
    pub(crate) body: M,
    pub(crate) document: Value,
    pub(crate) envelope: Option<Envelope>,
}

/// Opens the body `text` (already parsed as `value`) of record `ident`
/// under `mode`. Any failure is this record's alone.
pub(crate) fn open<M: DeserializeOwned>(
    mode: EnvelopeMode,
    ident: &str,
    text: &str,
    value: Value,
) -> Result<Opened<M>, FailureReason> {
    let kinds = match mode {
        EnvelopeMode::Never => return plain(ident, text, value),
        EnvelopeMode::Unwrap(kinds) | EnvelopeMode::Require(kinds) => kinds,
    };
    match recognise(kinds, &value) {
        Ok(Kind::EventBridge) => open_eventbridge(ident, text, value),
        Ok(Kind::Sns) => open_notification(ident, value),
        Err(why_not) => match mode {
            EnvelopeMode::Require(_) => Err(required(ident, kinds, &why_not)),
            _ => plain(ident, text, value).map_err(|e| match e {
                FailureReason::Parse(m) => {
                    FailureReason::Parse(format!("{m}; and it is no envelope: {why_not}"))
                }
                other => other,
            }),
        },
    }
}

/// The envelope a body was recognised as.
enum Kind {
    EventBridge,
    Sns,
}

/// Which of `kinds` the body `value` is a strict envelope of, or why it is
/// none of them.
fn recognise(kinds: Envelopes, value: &Value) -> Result<Kind, String> {
    let mut why_not = Vec::new();
    if matches!(kinds, Envelopes::EventBridge | Envelopes::Any) {
        match check_eventbridge(value) {
            Ok(()) => return Ok(Kind::EventBridge),
            Err(why) => why_not.push(format!("not an EventBridge event ({why})")),
        }
    }
    if matches!(kinds, Envelopes::Sns | Envelopes::Any) {
        match check_notification(value) {
            Ok(()) => return Ok(Kind::Sns),
            Err(why) => why_not.push(format!("not an SNS notification ({why})")),
        }
    }
    Err(why_not.join("; "))
}

/// What a body that is no envelope of `kinds` fails with under
/// [`EnvelopeMode::Require`].
fn required(ident: &str, kinds: Envelopes, why_not: &str) -> FailureReason {
    FailureReason::Parse(format!(
        "body of message {ident} must be {} (EnvelopeMode::Require): it is {why_not}",
        kinds.name()
    ))
}

/// An EventBridge event's invalid field, or an SNS notification's.
fn invalid(ident: &str, what: &str, e: serde_json::Error) -> FailureReason {
    FailureReason::Parse(format!(
        "body of message {ident} is {what} but not a valid one: {e}"
    ))
}

/// A body that is the message itself.
fn plain<M: DeserializeOwned>(
    ident: &str,
    text: &str,
    value: Value,
) -> Result<Opened<M>, FailureReason> {
    let body: M = serde_json::from_str(text).map_err(|e| {
        FailureReason::Parse(format!(
            "body of message {ident} does not parse as {}: {e}",
            type_name::<M>()
        ))
    })?;
    // A second parse, only for bodies with numbers `f64` cannot hold.
    let document = crate::key::exact_material(text, &value).unwrap_or(value);
    Ok(Opened {
        body,
        document,
        envelope: None,
    })
}

/// A strict EventBridge event: the body and the document are its `detail`.
fn open_eventbridge<M: DeserializeOwned>(
    ident: &str,
    text: &str,
    value: Value,
) -> Result<Opened<M>, FailureReason> {
    let parse = FailureReason::Parse;
    let event = EventBridgeEvent::<Value>::deserialize(&value)
        .map_err(|e| invalid(ident, "an EventBridge event", e))?;
    // `M` from the detail's text, as a plain body is read: a number `f64`
    // cannot hold reaches `M` exactly.
    let body = serde_json::from_str::<Detail<'_>>(text)
        .and_then(|raw| serde_json::from_str::<M>(raw.detail.get()))
        .map_err(|e| {
            parse(format!(
                "detail of the EventBridge event in message {ident} does not parse as {}: {e}",
                type_name::<M>()
            ))
        })?;
    let exact = crate::key::exact_material(text, &value).unwrap_or(value);
    let document = exact.get("detail").cloned().unwrap_or(Value::Null);
    Ok(Opened {
        body,
        document,
        envelope: Some(Envelope::EventBridge(Box::new(event))),
    })
}

/// The `detail` of an EventBridge event, as its text.
#[derive(Deserialize)]
struct Detail<'a> {
    #[serde(borrow)]
    detail: &'a RawValue,
}

/// A strict SNS notification: the body and the document are its parsed
/// `Message`.
fn open_notification<M: DeserializeOwned>(
    ident: &str,
    value: Value,
) -> Result<Opened<M>, FailureReason> {
    let notification = SnsNotification::deserialize(&value)
        .map_err(|e| invalid(ident, "an SNS notification", e))?;
    let opened = open_message::<M>(&format!("message {ident}"), &notification.message)?;
    let envelope = Some(Envelope::Sns(Box::new(notification)));
    Ok(Opened { envelope, ..opened })
}

/// Opens `message`, the `Message` of the SNS notification in `ident`: `M`
/// from its JSON, or from its text as a JSON string when it is not JSON; a
/// handler taking text or bytes ([`PayloadKind`]) takes the `Message` as
/// delivered. One rule for a notification invoking the function and one in
/// a body.
pub(crate) fn open_message<M: DeserializeOwned>(
    ident: &str,
    message: &str,
) -> Result<Opened<M>, FailureReason> {
    let parse = FailureReason::Parse;
    let kind = PayloadKind::of::<M>();
    if kind != PayloadKind::Json {
        let what = format!("the SNS Message in {ident}");
        let body = payload::decode::<M>(kind, message.as_bytes(), &what, ident)?;
        let document = payload::document(message.as_bytes());
        let envelope = None;
        return Ok(Opened {
            body,
            document,
            envelope,
        });
    }
    let (body, document) = match serde_json::from_str::<Value>(message) {
        Ok(value) => {
            let body: M = serde_json::from_str(message).map_err(|e| {
                parse(format!(
                    "the SNS Message in {ident} does not parse as {}: {e}",
                    type_name::<M>()
                ))
            })?;
            (
                body,
                crate::key::exact_material(message, &value).unwrap_or(value),
            )
        }
        Err(not_json) => {
            let text = Value::String(message.to_owned());
            let body = M::deserialize(&text).map_err(|e| {
                parse(format!(
                    "the SNS Message in {ident} is not JSON ({not_json}) and its text does not \
                     parse as {}: {e}",
                    type_name::<M>()
                ))
            })?;
            (body, text)
        }
    };
    Ok(Opened {
        body,
        document,
        envelope: None,
    })
}

/// Opens the body `text` of record `ident` under `mode` for a handler that
/// takes text or bytes: the payload it takes (the body as delivered; an
/// opened SNS notification's `Message` as delivered; an opened EventBridge
/// event's `detail` as its JSON text) and the envelope it came from. The
/// same envelopes as [`open`] are opened, by the same checks.
pub(crate) fn open_raw<'t>(
    mode: EnvelopeMode,
    ident: &str,
    text: &'t str,
) -> Result<(Cow<'t, str>, Option<Envelope>), FailureReason> {
    let kinds = match mode {
        EnvelopeMode::Never => return Ok((Cow::Borrowed(text), None)),
        EnvelopeMode::Unwrap(kinds) | EnvelopeMode::Require(kinds) => kinds,
    };
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(e) if matches!(mode, EnvelopeMode::Require(_)) => {
            return Err(required(ident, kinds, &format!("not JSON ({e})")));
        }
        Err(_) => return Ok((Cow::Borrowed(text), None)),
    };
    match recognise(kinds, &value) {
        Ok(Kind::EventBridge) => {
            let bad = |e| invalid(ident, "an EventBridge event", e);
            let event = EventBridgeEvent::<Value>::deserialize(&value).map_err(bad)?;
            let detail = serde_json::from_str::<Detail<'t>>(text).map_err(bad)?;
            let envelope = Envelope::EventBridge(Box::new(event));
            Ok((Cow::Borrowed(detail.detail.get()), Some(envelope)))
        }
        Ok(Kind::Sns) => {
            let notification = SnsNotification::deserialize(&value)
                .map_err(|e| invalid(ident, "an SNS notification", e))?;
            let message = Cow::Owned(notification.message.clone());
            Ok((message, Some(Envelope::Sns(Box::new(notification)))))
        }
        Err(why_not) if matches!(mode, EnvelopeMode::Require(_)) => {
            Err(required(ident, kinds, &why_not))
        }
        Err(_) => Ok((Cow::Borrowed(text), None)),
    }
}

/// The top-level fields of an EventBridge event (EventBridge User Guide,
/// "Amazon service event metadata").
const EVENTBRIDGE_FIELDS: &[&str] = &[
    "version",
    "id",
    "detail-type",
    "source",
    "account",
    "time",
    "region",
    "replay-name",
    "resources",
    "detail",
];
/// What an EventBridge event must have to be opened.
const EVENTBRIDGE_REQUIRED: &[&str] = &["id", "detail-type", "source", "detail"];

/// The top-level fields of an SNS notification (SNS Developer Guide,
/// "HTTP/HTTPS notification JSON format"; `SequenceNumber` on FIFO topics;
/// the `…Url` spellings are Lambda's).
const SNS_FIELDS: &[&str] = &[
    "Type",
    "MessageId",
    "SequenceNumber",
    "TopicArn",
    "Subject",
    "Message",
    "Timestamp",
    "SignatureVersion",
    "Signature",
    "SigningCertURL",
    "SigningCertUrl",
    "UnsubscribeURL",
    "UnsubscribeUrl",
    "MessageAttributes",
];
/// What SNS always writes in a notification, from any topic.
const SNS_REQUIRED: &[&str] = &["Type", "MessageId", "TopicArn", "Message", "Timestamp"];
/// What SNS writes besides in every notification, each field in either
/// spelling.
const SNS_ALWAYS: &[&[&str]] = &[&["UnsubscribeURL", "UnsubscribeUrl"]];
/// What a standard topic writes besides: its signature.
const SNS_SIGNED: &[&[&str]] = &[
    &["SignatureVersion"],
    &["Signature"],
    &["SigningCertURL", "SigningCertUrl"],
];
/// What a FIFO topic writes besides, and no signature: the message's number
/// in its group.
const SNS_NUMBERED: &[&[&str]] = &[&["SequenceNumber"]];

/// Whether `value` is a strict EventBridge event: only
/// [`EVENTBRIDGE_FIELDS`], the required ones present, every field a string
/// but `resources` (strings) and `detail` (an object). `Err` says why not.
pub(crate) fn check_eventbridge(value: &Value) -> Result<(), String> {
    let object = fields(value, EVENTBRIDGE_FIELDS, EVENTBRIDGE_REQUIRED)?;
    types(object, |name, field| match name {
        "detail" => field.is_object(),
        "resources" => (field.as_array()).is_some_and(|items| items.iter().all(Value::is_string)),
        _ => field.is_string(),
    })
}

/// Whether `value` is a strict SNS notification: only [`SNS_FIELDS`], the
/// required ones present, `Type` `Notification`, every field a string but
/// `MessageAttributes` (an object); from a FIFO topic (a `.fifo`
/// `TopicArn`) with its `SequenceNumber`, from any other topic signed and
/// unnumbered. `Err` says why not.
pub(crate) fn check_notification(value: &Value) -> Result<(), String> {
    let object = fields(value, SNS_FIELDS, SNS_REQUIRED)?;
    types(object, |name, field| match name {
        "MessageAttributes" => field.is_object(),
        _ => field.is_string(),
    })?;
    if value.get("Type").and_then(Value::as_str) != Some("Notification") {
        return Err("its Type is not Notification".to_owned());
    }
    let topic = value.get("TopicArn").and_then(Value::as_str);
    let fifo = topic.is_some_and(is_fifo_topic);
    let (kind, needs) = if fifo {
        ("FIFO", SNS_NUMBERED)
    } else {
        ("standard", SNS_SIGNED)
    };
    let missing: Vec<&str> = (SNS_ALWAYS.iter().chain(needs))
        .filter(|names| !names.iter().any(|name| object.contains_key(*name)))
        .map(|names| names[0])
        .collect();
    if !missing.is_empty() {
        let missing = missing.join(", ");
        return Err(format!("it has no {missing} (its topic is {kind})"));
    }
    if !fifo && object.contains_key("SequenceNumber") {
        return Err("it has a SequenceNumber but its topic is not FIFO".to_owned());
    }
    Ok(())
}

/// Whether every field of `object` is of the type `ok` wants.
fn types(object: &Map<String, Value>, ok: impl Fn(&str, &Value) -> bool) -> Result<(), String> {
    match object.iter().find(|(name, field)| !ok(name, field)) {
        Some((name, field)) => Err(format!("its {name} is {}", json_type(field))),
        None => Ok(()),
    }
}

/// `value`'s object when it has every `required` field and no field
/// outside `allowed`.
fn fields<'v>(
    value: &'v Value,
    allowed: &[&str],
    required: &[&str],
) -> Result<&'v Map<String, Value>, String> {
    let Some(object) = value.as_object() else {
        return Err(format!("it is {}", json_type(value)));
    };
    let missing: Vec<&str> = (required.iter().copied())
        .filter(|k| !object.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(format!("it has no {}", missing.join(", ")));
    }
    let foreign: Vec<&str> = (object.keys().map(String::as_str))
        .filter(|k| !allowed.contains(k))
        .collect();
    if !foreign.is_empty() {
        let foreign = foreign.join(", ");
        return Err(format!(
            "it has fields of its own at the top level: {foreign}"
        ));
    }
    Ok(object)
}

/// Whether `value` has the shape of an EventBridge event: an object with
/// string `detail-type` and `source` and a `detail`. A hint for error
/// messages and the direct-invocation check, never a reason to open a body.
pub(crate) fn looks_like_eventbridge(value: &Value) -> bool {
    value.get("detail-type").is_some_and(Value::is_string)
        && value.get("source").is_some_and(Value::is_string)
        && value.get("detail").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event() -> Value {
        json!({
            "version": "0", "id": "e-1", "detail-type": "PaymentReceived", "source": "shop.payments",
            "account": "123456789012", "time": "2026-12-01T00:00:00Z", "region": "us-east-1",
            "resources": [], "detail": {"payment_id": "P", "amount_cents": 100},
        })
    }

    fn notification(message: &str) -> Value {
        json!({
            "Type": "Notification", "MessageId": "sns-1",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:payments",
            "Message": message, "Timestamp": "2026-12-01T00:00:00.000Z",
            "SignatureVersion": "1", "Signature": "EXAMPLE",
            "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
        })
    }

    /// A FIFO topic's notification as SNS writes it in an SQS body: a
    /// `SequenceNumber`, a `.fifo` topic, no signature.
    fn fifo_notification(message: &str) -> Value {
        json!({
            "Type": "Notification", "MessageId": "a7c9d2fa-77fa-5184-9de9-89391027cc7d",
            "SequenceNumber": "10000000000000004000",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:payments.fifo",
            "Message": message, "Timestamp": "2026-12-01T00:00:00.000Z",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
        })
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Payment {
        payment_id: String,
        amount_cents: i64,
    }

    fn open_value(mode: EnvelopeMode, value: &Value) -> Result<Opened<Payment>, FailureReason> {
        open(mode, "m-1", &value.to_string(), value.clone())
    }

    #[test]
    fn strict_envelopes_pass_and_lookalikes_do_not() {
        assert_eq!(check_eventbridge(&event()), Ok(()));
        assert_eq!(check_notification(&notification("{}")), Ok(()));
        let mut lookalike = event();
        lookalike["payment_id"] = json!("Q");
        let why = check_eventbridge(&lookalike).unwrap_err();
        assert!(why.contains("payment_id"), "{why}");
        let mut no_id = event();
        no_id.as_object_mut().unwrap().remove("id");
        assert!(check_eventbridge(&no_id).unwrap_err().contains("no id"));
        let mut bad_detail = event();
        bad_detail["detail"] = json!("text");
        assert!(
            check_eventbridge(&bad_detail)
                .unwrap_err()
                .contains("detail")
        );
        let mut bad_resources = event();
        bad_resources["resources"] = json!([1]);
        assert!(check_eventbridge(&bad_resources).is_err());
        let mut extra = notification("{}");
        extra["payment_id"] = json!("Q");
        assert!(
            check_notification(&extra)
                .unwrap_err()
                .contains("payment_id")
        );
        let mut not_notification = notification("{}");
        not_notification["Type"] = json!("SubscriptionConfirmation");
        assert!(check_notification(&not_notification).is_err());
        let mut unsigned = notification("{}");
        unsigned.as_object_mut().unwrap().remove("Signature");
        assert!(
            check_notification(&unsigned)
                .unwrap_err()
                .contains("Signature")
        );
        assert!(check_eventbridge(&json!([])).is_err());
    }

    #[test]
    fn a_fifo_notification_is_strict_without_a_signature() {
        assert_eq!(check_notification(&fifo_notification("{}")), Ok(()));
        let mut subject = fifo_notification("{}");
        subject["Subject"] = json!("PaymentReceived");
        assert_eq!(check_notification(&subject), Ok(()));
        // A FIFO topic numbers its messages.
        let mut unnumbered = fifo_notification("{}");
        unnumbered.as_object_mut().unwrap().remove("SequenceNumber");
        let why = check_notification(&unnumbered).unwrap_err();
        assert!(why.contains("SequenceNumber"), "{why}");
        // Any other topic signs them, and numbers none.
        let mut standard = fifo_notification("{}");
        standard["TopicArn"] = json!("arn:aws:sns:us-east-1:123456789012:payments");
        let why = check_notification(&standard).unwrap_err();
        assert!(why.contains("SignatureVersion, Signature"), "{why}");
        let mut numbered = notification("{}");
        numbered["SequenceNumber"] = json!("10000000000000004000");
        let why = check_notification(&numbered).unwrap_err();
        assert!(why.contains("SequenceNumber"), "{why}");
        // Still nothing of its own at the top level.
        let mut extra = fifo_notification("{}");
        extra["payment_id"] = json!("Q");
        assert!(
            check_notification(&extra)
                .unwrap_err()
                .contains("payment_id")
        );
        // Opened, it is one document, keyed by its MessageId.
        let fifo = fifo_notification(r#"{"payment_id":"P","amount_cents":100}"#);
        let opened = open_value(EnvelopeMode::Require(Envelopes::Sns), &fifo).unwrap();
        assert_eq!(opened.body.payment_id, "P");
        assert_eq!(
            opened.document,
            json!({"payment_id": "P", "amount_cents": 100})
        );
        assert_eq!(
            opened.envelope.as_ref().and_then(Envelope::id),
            Some("a7c9d2fa-77fa-5184-9de9-89391027cc7d")
        );
    }

    #[test]
    fn never_reads_the_body_as_the_message() {
        let body = json!({"payment_id": "Q", "amount_cents": 5, "detail": {"payment_id": "P"}});
        let opened = open_value(EnvelopeMode::Never, &body).unwrap();
        assert_eq!(opened.body.payment_id, "Q");
        assert_eq!(opened.document, body);
        assert!(opened.envelope.is_none());
        // A strict envelope too is the message under Never.
        let err = open_value(EnvelopeMode::Never, &event()).unwrap_err();
        assert!(matches!(err, FailureReason::Parse(m) if m.contains("missing field `payment_id`")));
    }

    #[test]
    fn an_opened_envelope_is_one_document() {
        let opened = open_value(EnvelopeMode::Unwrap(Envelopes::Any), &event()).unwrap();
        assert_eq!(opened.body.payment_id, "P");
        assert_eq!(opened.document, event()["detail"]);
        assert_eq!(opened.envelope.as_ref().and_then(Envelope::id), Some("e-1"));
        let sns = notification(r#"{"payment_id":"P","amount_cents":100}"#);
        let opened = open_value(EnvelopeMode::Unwrap(Envelopes::Sns), &sns).unwrap();
        assert_eq!(opened.body.payment_id, "P");
        assert_eq!(
            opened.document,
            json!({"payment_id": "P", "amount_cents": 100})
        );
        assert_eq!(
            opened.envelope.as_ref().and_then(Envelope::id),
            Some("sns-1")
        );
        // Only the kinds asked for are opened.
        let err = open_value(EnvelopeMode::Unwrap(Envelopes::EventBridge), &sns).unwrap_err();
        assert!(matches!(err, FailureReason::Parse(m) if m.contains("not an EventBridge event")));
    }

    #[test]
    fn a_lookalike_is_the_message_or_fails_saying_why() {
        // Outer payment Q, inner payment P: not an envelope, so the body is
        // read whole, as Q.
        let mut lookalike = event();
        lookalike["payment_id"] = json!("Q");
        lookalike["amount_cents"] = json!(7);
        let opened = open_value(EnvelopeMode::Unwrap(Envelopes::Any), &lookalike).unwrap();
        assert_eq!(opened.body.payment_id, "Q");
        assert!(opened.envelope.is_none());
        assert_eq!(opened.document["payment_id"], json!("Q"));
        // Without a payment of its own it fails, naming both reasons.
        let mut lookalike = event();
        lookalike["note"] = json!("x");
        let Err(FailureReason::Parse(m)) =
            open_value(EnvelopeMode::Unwrap(Envelopes::Any), &lookalike)
        else {
            panic!("a lookalike that is no payment must fail");
        };
        assert!(m.contains("does not parse as"), "{m}");
        assert!(
            m.contains(
                "not an EventBridge event (it has fields of its own at the top level: note)"
            ),
            "{m}"
        );
        assert!(m.contains("not an SNS notification"), "{m}");
        // Require: a plain body fails, saying it is not an envelope.
        let plain = json!({"payment_id": "P", "amount_cents": 1});
        let Err(FailureReason::Parse(m)) =
            open_value(EnvelopeMode::Require(Envelopes::EventBridge), &plain)
        else {
            panic!("Require refuses a plain body");
        };
        assert!(m.contains("must be an EventBridge event"), "{m}");
    }

    #[test]
    fn exact_numbers_in_an_opened_detail() {
        let text = r#"{"id":"e","detail-type":"t","source":"s","detail":{"payment_id":"P","amount_cents":1,"n":123456789012345678901234}}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let opened: Opened<Payment> = open(
            EnvelopeMode::Unwrap(Envelopes::EventBridge),
            "m",
            text,
            value,
        )
        .unwrap();
        assert_eq!(opened.document["n"], json!("123456789012345678901234"));
    }
}
