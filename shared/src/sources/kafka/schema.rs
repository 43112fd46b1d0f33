//! Schema registry framing of Kafka values: the Confluent wire format and
//! the AWS Glue Schema Registry header, taken off a value before its handler
//! decodes it ([`KafkaProcessor::schema_registry`](super::KafkaProcessor::schema_registry)).

/// The schema registry framing Kafka values ([`KafkaProcessor::schema_registry`](super::KafkaProcessor::schema_registry)):
/// its header is taken off each value, and the schema it names is
/// [`KafkaMessage::schema`](super::KafkaMessage::schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaRegistry {
    /// The Confluent wire format: a magic byte `0`, then the schema id, 4
    /// bytes big-endian (Protobuf values then begin with their message
    /// indexes, `0x00` for the schema's first message).
    Confluent,
    /// The AWS Glue Schema Registry: a header version byte `3`, a
    /// compression byte (`0` none, `5` zlib), then the schema version id, a
    /// 16-byte UUID.
    Glue,
    /// Either, told apart by the first byte.
    Any,
}

/// The schema a framed value names ([`KafkaMessage::schema`](super::KafkaMessage::schema)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaId {
    /// A Confluent schema id.
    Confluent(u32),
    /// An AWS Glue Schema Registry schema version id.
    Glue {
        /// The schema version id (a UUID, its 16 bytes; [`SchemaId::glue_uuid`]).
        version: [u8; 16],
        /// Whether the payload is zlib-compressed (compression byte `5`):
        /// decompress it before decoding (e.g. with the `flate2` crate).
        zlib: bool,
    },
}

impl SchemaId {
    /// A Glue schema version id as its text (`b0a1…-…`, 8-4-4-4-12 hex).
    pub fn glue_uuid(&self) -> Option<String> {
        let Self::Glue { version, .. } = self else {
            return None;
        };
        let hex: String = version.iter().map(|b| format!("{b:02x}")).collect();
        let at = |a: usize, b: usize| &hex[a..b];
        Some(format!(
            "{}-{}-{}-{}-{}",
            at(0, 8),
            at(8, 12),
            at(12, 16),
            at(16, 20),
            at(20, 32)
        ))
    }
}

impl SchemaRegistry {
    /// The schema `value` names and the payload after its header, or why
    /// it is not framed by this registry.
    pub fn split(self, value: &[u8]) -> Result<(SchemaId, &[u8]), String> {
        match (self, value.first()) {
            (Self::Confluent, _) | (Self::Any, Some(0)) => confluent(value),
            (Self::Glue, _) | (Self::Any, _) => glue(value),
        }
    }
}

/// A value in the Confluent wire format, split.
fn confluent(value: &[u8]) -> Result<(SchemaId, &[u8]), String> {
    match value {
        [0, a, b, c, d, rest @ ..] => {
            let id = u32::from_be_bytes([*a, *b, *c, *d]);
            Ok((SchemaId::Confluent(id), rest))
        }
        _ => Err(format!(
            "it is not framed in the Confluent wire format (a magic byte 0 and a 4-byte schema \
             id; it begins {})",
            begins(value)
        )),
    }
}

/// A value framed by the AWS Glue Schema Registry, split.
fn glue(value: &[u8]) -> Result<(SchemaId, &[u8]), String> {
    match value {
        [3, compression @ (0 | 5), rest @ ..] if rest.len() >= 16 => {
            let (id, payload) = rest.split_at(16);
            let version = <[u8; 16]>::try_from(id).unwrap_or_default();
            let zlib = *compression == 5;
            Ok((SchemaId::Glue { version, zlib }, payload))
        }
        _ => Err(format!(
            "it is not framed by the AWS Glue Schema Registry (a header version byte 3, a \
             compression byte 0 or 5 and a 16-byte schema version id; it begins {})",
            begins(value)
        )),
    }
}

/// The first bytes of `value`, in hex, for messages.
fn begins(value: &[u8]) -> String {
    let shown: Vec<String> = value.iter().take(6).map(|b| format!("{b:02x}")).collect();
    match shown.is_empty() {
        true => "empty".to_owned(),
        false => shown.join(" "),
    }
}
