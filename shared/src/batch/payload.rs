//! What a record's payload is read as, one rule for every source: JSON
//! when the handler's type wants JSON, text when it wants a string, bytes
//! when it wants bytes ([`PayloadKind::of`]). A `String` handler gets the
//! payload's text as delivered, JSON or not; a bytes handler ([`Bytes`],
//! `Vec<u8>`, `serde_bytes::ByteBuf`, `bytes::Bytes`) its bytes as
//! delivered. The rule and its reasons: `docs/handlers.md`, "Text and
//! binary payloads".

use std::fmt;
use std::ops::Deref;

use base64::Engine as _;
use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer, forward_to_deserialize_any};
use serde_json::Value;

use super::report::FailureReason;

/// What a handler's record type reads a payload as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PayloadKind {
    /// JSON, parsed into the type (a struct, `serde_json::Value`, a map…).
    Json,
    /// Text: the payload as delivered, UTF-8 (`String`, `Box<str>`, a
    /// newtype over one, an `Option` of one).
    Text,
    /// Bytes: the payload as delivered ([`Bytes`], `Vec<u8>`,
    /// `serde_bytes::ByteBuf`, `bytes::Bytes`, a newtype over one).
    Bytes,
}

impl PayloadKind {
    /// What `M` reads a payload as, found by asking its `Deserialize` impl
    /// which kind of data it asks for first: a string is
    /// [`PayloadKind::Text`], bytes or a sequence of `u8` are
    /// [`PayloadKind::Bytes`], anything else is [`PayloadKind::Json`].
    /// `Option`s and newtypes are looked through.
    pub fn of<M: DeserializeOwned>() -> Self {
        match M::deserialize(Probe) {
            Err(Found(Some(kind))) => kind,
            _ => Self::Json,
        }
    }

    /// Its name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::Text => "text",
            Self::Bytes => "bytes",
        }
    }
}

/// A payload taken as bytes: what a handler typed `Bytes` gets, the record's
/// payload exactly as delivered (base64-decoded for Kinesis and Kafka; after
/// a schema registry's header for a framed Kafka value). Derefs to `[u8]`.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, owned.
    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }
}

impl From<&[u8]> for Bytes {
    fn from(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }
}

impl From<Bytes> for Vec<u8> {
    fn from(bytes: Bytes) -> Self {
        bytes.0
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Bytes;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }

            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }

            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
                Ok(Bytes(v.as_bytes().to_vec()))
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(b) = seq.next_element::<u8>()? {
                    bytes.push(b);
                }
                Ok(Bytes(bytes))
            }
        }
        deserializer.deserialize_byte_buf(BytesVisitor)
    }
}

/// A payload read as `M` under `kind` (not [`PayloadKind::Json`]): its
/// text, or its bytes. `what` and `ident` name it in errors; a text that is
/// not UTF-8 is a [`FailureReason::Parse`] (terminal).
pub(crate) fn decode<M: DeserializeOwned>(
    kind: PayloadKind,
    bytes: &[u8],
    what: &str,
    ident: &str,
) -> Result<M, FailureReason> {
    let type_name = std::any::type_name::<M>();
    let failed = |e: de::value::Error| {
        FailureReason::Parse(format!(
            "{what} of record {ident} does not read as {type_name} ({}): {e}",
            kind.name()
        ))
    };
    match kind {
        PayloadKind::Text => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                FailureReason::Parse(format!(
                    "{what} of record {ident} is not UTF-8 text, which the handler's type \
                     {type_name} takes: {e}; type the handler's record bytes \
                     (lambda_idempotency::Bytes) to take it as bytes"
                ))
            })?;
            M::deserialize(Payload::Text(text)).map_err(failed)
        }
        _ => M::deserialize(Payload::Bytes(bytes)).map_err(failed),
    }
}

/// The document of a payload taken as text or bytes: what keys and the
/// payload hash read, the base64 text of its bytes (one for a text and a
/// bytes handler: the hash covers every byte, whatever the type reads).
pub(crate) fn document(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// What a payload reader asked for first.
#[derive(Debug)]
struct Found(Option<PayloadKind>);

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Found {}

impl de::Error for Found {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Found(None)
    }
}

/// A deserializer answering only which kind of data was asked for.
struct Probe;

macro_rules! found {
    ($kind:expr => $($method:ident)*) => {
        $(fn $method<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
            Err(Found(Some($kind)))
        })*
    };
}

impl<'de> Deserializer<'de> for Probe {
    type Error = Found;

    found!(PayloadKind::Text => deserialize_str deserialize_string deserialize_char);
    found!(PayloadKind::Bytes => deserialize_bytes deserialize_byte_buf);
    found!(PayloadKind::Json => deserialize_any deserialize_bool deserialize_i8 deserialize_i16
        deserialize_i32 deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16
        deserialize_u32 deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64
        deserialize_unit deserialize_map deserialize_identifier deserialize_ignored_any);

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Found> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Found> {
        // serde_json's `RawValue` and friends are JSON.
        match name.starts_with("$serde_json") {
            true => Err(Found(Some(PayloadKind::Json))),
            false => visitor.visit_newtype_struct(self),
        }
    }

    /// A sequence of `u8` is bytes (`Vec<u8>`); of anything else, JSON.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Found> {
        visitor.visit_seq(FirstElement)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: V,
    ) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Json)))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Json)))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        _: V,
    ) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Json)))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Json)))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Json)))
    }
}

/// The first element of a probed sequence: `u8` means bytes.
struct FirstElement;

impl<'de> de::SeqAccess<'de> for FirstElement {
    type Error = Found;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Found> {
        seed.deserialize(Element).map(Some)
    }
}

/// A probed sequence's element.
struct Element;

impl<'de> Deserializer<'de> for Element {
    type Error = Found;

    fn deserialize_u8<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Bytes)))
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(Some(PayloadKind::Json)))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// A payload handed to a text or bytes type.
enum Payload<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
}

impl<'de> Deserializer<'de> for Payload<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self {
            Self::Text(text) => visitor.visit_str(text),
            Self::Bytes(bytes) => visitor.visit_bytes(bytes),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self {
            Self::Text(text) => visitor.visit_string(text.to_owned()),
            Self::Bytes(bytes) => visitor.visit_byte_buf(bytes.to_vec()),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self {
            Self::Text(text) => visitor.visit_string(text.to_owned()),
            Self::Bytes(bytes) => visitor.visit_bytes(bytes),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self {
            Self::Bytes(bytes) => {
                let seq = de::value::SeqDeserializer::<_, de::value::Error>::new(
                    bytes.iter().map(|b| b.into_deserializer()),
                );
                visitor.visit_seq(seq)
            }
            text => text.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str bytes unit unit_struct
        tuple tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Deserialize)]
    struct Order {
        #[allow(dead_code)]
        id: String,
    }

    #[derive(Deserialize)]
    struct Csv(String);

    #[derive(Deserialize)]
    struct Raw(Bytes);

    #[test]
    fn the_type_says_what_a_payload_is_read_as() {
        use PayloadKind::{Json, Text};
        assert_eq!(PayloadKind::of::<String>(), Text);
        assert_eq!(PayloadKind::of::<Box<str>>(), Text);
        assert_eq!(PayloadKind::of::<Option<String>>(), Text);
        assert_eq!(PayloadKind::of::<Csv>(), Text);
        assert_eq!(PayloadKind::of::<Bytes>(), PayloadKind::Bytes);
        assert_eq!(PayloadKind::of::<Raw>(), PayloadKind::Bytes);
        assert_eq!(PayloadKind::of::<Vec<u8>>(), PayloadKind::Bytes);
        assert_eq!(PayloadKind::of::<Option<Vec<u8>>>(), PayloadKind::Bytes);
        assert_eq!(PayloadKind::of::<Value>(), Json);
        assert_eq!(PayloadKind::of::<Order>(), Json);
        assert_eq!(PayloadKind::of::<Vec<Order>>(), Json);
        assert_eq!(PayloadKind::of::<Vec<u16>>(), Json);
        assert_eq!(PayloadKind::of::<Vec<Value>>(), Json);
        assert_eq!(PayloadKind::of::<HashMap<String, i64>>(), Json);
        assert_eq!(PayloadKind::of::<i64>(), Json);
        assert_eq!(PayloadKind::of::<()>(), Json);
        assert_eq!(PayloadKind::of::<Box<serde_json::value::RawValue>>(), Json);
    }

    #[test]
    fn text_and_bytes_read_as_delivered() {
        let text: String = decode(PayloadKind::Text, b"a,b\n1,2", "body", "m1").unwrap();
        assert_eq!(text, "a,b\n1,2");
        let csv: Csv = decode(PayloadKind::Text, b"{\"a\": 1}", "body", "m1").unwrap();
        assert_eq!(csv.0, "{\"a\": 1}", "a JSON body is its text as delivered");
        let some: Option<String> = decode(PayloadKind::Text, b"x", "body", "m1").unwrap();
        assert_eq!(some.as_deref(), Some("x"));
        let gzip = [0x1f, 0x8b, 0x08, 0x00, 0xff];
        let bytes: Bytes = decode(PayloadKind::Bytes, &gzip, "data", "s1").unwrap();
        assert_eq!(bytes.as_slice(), gzip);
        let vec: Vec<u8> = decode(PayloadKind::Bytes, &gzip, "data", "s1").unwrap();
        assert_eq!(vec, gzip);
        let raw: Raw = decode(PayloadKind::Bytes, &gzip, "data", "s1").unwrap();
        assert_eq!(raw.0.as_slice(), gzip);
        let not_utf8 = decode::<String>(PayloadKind::Text, &gzip, "data", "s1").unwrap_err();
        assert!(
            matches!(&not_utf8, FailureReason::Parse(m) if m.contains("data of record s1 is not UTF-8 text")),
            "{not_utf8:?}"
        );
        assert!(not_utf8.is_terminal());
        assert_eq!(document(b"hi"), Value::String("aGk=".into()));
    }
}
