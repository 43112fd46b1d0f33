//! Idempotency keys: canonical JSON key material hashed with SHA-256 under a prefix.

use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::fmt;

use crate::error::KeyError;

/// Writes `value` as canonical JSON: object keys sorted (by UTF-8 bytes), no
/// insignificant whitespace, so reordered objects produce the same text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only JSON text (valid UTF-8) was written.
    String::from_utf8(out).unwrap_or_default()
}

/// Where canonical JSON goes: a buffer, or straight into a hash (no text
/// kept, no allocation per value).
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Sink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// A scalar's (or a key's) JSON text, as serde_json writes it, straight
/// into `out` (no string per value).
fn put_json<T: serde::Serialize + ?Sized>(value: &T, out: &mut impl Sink) {
    struct Adapter<'a, S>(&'a mut S);
    impl<S: Sink> std::io::Write for Adapter<'_, S> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.put(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // Serializing a JSON value or a string into a writer that never fails
    // cannot fail.
    let _ = serde_json::to_writer(Adapter(out), value);
}

fn write_canonical(value: &Value, out: &mut impl Sink) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.put(b"{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                put_json(k.as_str(), out);
                out.put(b":");
                write_canonical(v, out);
            }
            out.put(b"}");
        }
        Value::Array(items) => {
            out.put(b"[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_canonical(v, out);
            }
            out.put(b"]");
        }
        scalar => put_json(scalar, out),
    }
}

/// Lowercase hex SHA-256 of `value`'s canonical JSON, hashed as it is
/// written (the same digest as `sha256_hex(canonical_json(value))`).
fn canonical_sha256_hex(value: &Value) -> String {
    let mut hasher = Sha256::new();
    write_canonical(value, &mut hasher);
    hex::encode(hasher.finalize())
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The hash of a payload used for payload validation (same key, other payload).
pub fn payload_hash(payload: &Value) -> String {
    canonical_sha256_hex(payload)
}

/// The key material and payload of a JSON text, exact where `parsed` (the
/// same text through `serde_json::Value`) is not: a number that `f64`
/// cannot hold exactly (an integer beyond `u64`/`i64`, a decimal with more
/// than 15 significant digits) becomes a string of its exact text, so
/// `18446744073709551616` and `18446744073709551617` give different keys and
/// payload hashes. `None` when `parsed` is already exact (no such number):
/// use it, and every key and hash stays what it was.
pub(crate) fn exact_material(text: &str, parsed: &Value) -> Option<Value> {
    if !has_float(parsed) {
        return None;
    }
    let raw: &RawValue = serde_json::from_str(text).ok()?;
    exact_value(raw).ok()
}

fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

fn exact_value(raw: &RawValue) -> Result<Value, serde_json::Error> {
    let text = raw.get().trim_start();
    match text.as_bytes().first() {
        Some(b'{') => {
            let map: std::collections::BTreeMap<String, &RawValue> = serde_json::from_str(text)?;
            map.into_iter()
                .map(|(k, v)| Ok((k, exact_value(v)?)))
                .collect::<Result<serde_json::Map<_, _>, _>>()
                .map(Value::Object)
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            items
                .into_iter()
                .map(exact_value)
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        Some(b'-' | b'0'..=b'9') => {
            let number: Value = serde_json::from_str(text)?;
            let exact = number.as_u64().is_some()
                || number.as_i64().is_some()
                || significant_digits(text.trim_end()) <= 15;
            Ok(if exact {
                number
            } else {
                Value::String(text.trim_end().to_owned())
            })
        }
        _ => serde_json::from_str(text),
    }
}

/// Significant digits of a JSON number's text (an `f64` holds 15 exactly).
fn significant_digits(number: &str) -> usize {
    let mantissa = number
        .trim_start_matches('-')
        .split(['e', 'E'])
        .next()
        .unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    digits.trim_start_matches('0').trim_end_matches('0').len()
}

/// The id of an idempotency record: `<prefix>#<sha256 hex of the canonical key material>`.
///
/// The raw key material is never stored, only its hash.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Builds the key for `material` under `prefix`.
    ///
    /// Null, empty strings, empty objects and empty arrays are rejected: they
    /// would make unrelated messages collide on one record.
    pub fn new(prefix: &str, material: &Value) -> Result<Self, KeyError> {
        match material {
            Value::Null => return Err(KeyError::Null),
            Value::String(s) if s.is_empty() => return Err(KeyError::Empty),
            Value::Object(m) if m.is_empty() => return Err(KeyError::Empty),
            Value::Array(a) if a.is_empty() => return Err(KeyError::Empty),
            _ => {}
        }
        // A bare string hashes as its text, so `"abc"` and a message attribute
        // `abc` give the same key.
        let digest = match material {
            Value::String(s) => sha256_hex(s.as_bytes()),
            other => canonical_sha256_hex(other),
        };
        Ok(Self(format!("{prefix}#{digest}")))
    }

    /// Builds the key for `material` under `prefix`, scoped to `tenant`
    /// (Lambda's tenant isolation mode): `<prefix>#<sha256 hex of the
    /// tenant id>#<sha256 hex of the material>`. Without a tenant (or an
    /// empty one) it is [`IdempotencyKey::new`]'s key, unchanged.
    ///
    /// The tenant id is hashed to a fixed 64 hex digits, so the id never
    /// depends on where one part ends and the next begins: two tenants'
    /// keys never meet, whatever their ids and key material (tenant `a` with
    /// key `b:c` and tenant `a:b` with key `c` are two records), and a
    /// scoped id (two `#`) never equals an unscoped one (one `#`).
    pub fn scoped(prefix: &str, tenant: Option<&str>, material: &Value) -> Result<Self, KeyError> {
        let key = Self::new(prefix, material)?;
        match tenant.filter(|t| !t.is_empty()) {
            None => Ok(key),
            Some(tenant) => {
                let scope = sha256_hex(tenant.as_bytes());
                Ok(Self(format!("{prefix}#{scope}#{}", key.hash())))
            }
        }
    }

    /// The record id as stored (`prefix#hash`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The stable id of the message staged at `position` (0 for the first)
    /// by the handler of this key's record: what the relay publishes it
    /// under (`MessageDeduplicationId`, the `outbox_id` attribute), known
    /// before the commit, so a handler can announce it in its response.
    /// The key a record comes with (`SqsRecord::key`, ...) is the one its
    /// record is stored under, tenant scope included.
    pub fn outbox_id(&self, position: usize) -> String {
        stable_id(self.as_str(), position)
    }

    /// The hash part of the id: safe to log.
    pub fn hash(&self) -> &str {
        self.0.rsplit_once('#').map_or(self.0.as_str(), |(_, h)| h)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The stable id of the message at `position` of the record `record_id`
/// (what [`IdempotencyKey::outbox_id`] gives and the relay publishes
/// under).
pub fn stable_id(record_id: &str, position: usize) -> String {
    sha256_hex(format!("{record_id}/{position}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reordered_object_keys_hash_the_same() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": "é"}});
        let b = json!({"a": {"x": "é", "y": [1, 2]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"é","y":[1,2]},"b":1}"#);
        assert_eq!(
            IdempotencyKey::new("p", &a).unwrap(),
            IdempotencyKey::new("p", &b).unwrap()
        );
        assert_eq!(payload_hash(&a), payload_hash(&b));
        // Hashed as written: the digest of the canonical text.
        let c = json!({"z": [null, true, -1.5e300, "q\"\u{1}"], "é": {}});
        assert_eq!(payload_hash(&c), sha256_hex(canonical_json(&c).as_bytes()));
        assert_eq!(
            canonical_json(&c),
            r#"{"z":[null,true,-1.5e+300,"q\"\u0001"],"é":{}}"#
        );
    }

    #[test]
    fn different_values_and_prefixes_differ() {
        let k1 = IdempotencyKey::new("fn.handler", &json!("pay-1")).unwrap();
        let k2 = IdempotencyKey::new("fn.handler", &json!("pay-2")).unwrap();
        let k3 = IdempotencyKey::new("fn.other", &json!("pay-1")).unwrap();
        assert_ne!(k1, k2);
        assert_ne!(k1.hash(), k2.hash());
        assert_eq!(k1.hash(), k3.hash());
        assert_ne!(k1, k3);
        assert!(k1.as_str().starts_with("fn.handler#"));
        // The id is prefix + 64 hex chars: the raw key is not stored.
        assert_eq!(k1.hash().len(), 64);
        assert!(!k1.as_str().contains("pay-1"));
    }

    #[test]
    fn tenants_never_share_a_key() {
        let material = json!("1001");
        let none = IdempotencyKey::scoped("p", None, &material).unwrap();
        // Without a tenant: today's key, so existing records stay valid.
        assert_eq!(none, IdempotencyKey::new("p", &material).unwrap());
        assert_eq!(
            IdempotencyKey::scoped("p", Some(""), &material).unwrap(),
            none
        );
        let a = IdempotencyKey::scoped("p", Some("a"), &material).unwrap();
        let b = IdempotencyKey::scoped("p", Some("b"), &material).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, none);
        assert!(a.as_str().starts_with("p#"), "the prefix scope still holds");
        assert_eq!(a.hash(), none.hash(), "the logged hash is the material's");
        // Where one part ends and the next begins never matters.
        for (t1, k1, t2, k2) in [
            ("a", "b:c", "a:b", "c"),
            ("a", "b#c", "a#b", "c"),
            ("a", "bc", "ab", "c"),
            ("a#", "c", "a", "#c"),
        ] {
            let one = IdempotencyKey::scoped("p", Some(t1), &json!(k1)).unwrap();
            let two = IdempotencyKey::scoped("p", Some(t2), &json!(k2)).unwrap();
            assert_ne!(one, two, "{t1:?}/{k1:?} vs {t2:?}/{k2:?}");
        }
        // A scoped id never equals an unscoped one: one `#` more.
        let unscoped = IdempotencyKey::new("p", &json!(a.as_str())).unwrap();
        assert_eq!(unscoped.as_str().matches('#').count(), 1);
        assert_eq!(a.as_str().matches('#').count(), 2);
    }

    #[test]
    fn string_key_hashes_its_text() {
        let k = IdempotencyKey::new("p", &json!("abc")).unwrap();
        assert_eq!(
            k.hash(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn degenerate_material_is_rejected() {
        assert_eq!(IdempotencyKey::new("p", &Value::Null), Err(KeyError::Null));
        assert_eq!(IdempotencyKey::new("p", &json!("")), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::new("p", &json!({})), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::new("p", &json!([])), Err(KeyError::Empty));
        assert!(IdempotencyKey::new("p", &json!(0)).is_ok());
    }

    /// Numbers beyond what `f64` holds keep their exact text in keys and
    /// payload hashes; every other body keeps the key it always had.
    #[test]
    fn lossy_numbers_keep_their_exact_text() {
        let key_of = |text: &str| {
            let parsed: Value = serde_json::from_str(text).unwrap();
            let material = exact_material(text, &parsed).unwrap_or(parsed);
            (
                IdempotencyKey::new("p", &material["id"]).unwrap(),
                payload_hash(&material),
            )
        };
        let (a, ha) = key_of(r#"{"id":18446744073709551616}"#);
        let (b, hb) = key_of(r#"{"id":18446744073709551617}"#);
        assert_ne!(a, b, "integers past u64");
        assert_ne!(ha, hb);
        let (c, _) = key_of(r#"{"id":0.12345678901234567890}"#);
        let (d, _) = key_of(r#"{"id":0.12345678901234567891}"#);
        assert_ne!(c, d, "decimals past 15 significant digits");
        // Exact bodies: no second parse, same keys as before.
        for text in [r#"{"id":42,"x":"y"}"#, r#"{"id":1.5,"n":[1,2.25]}"#] {
            let parsed: Value = serde_json::from_str(text).unwrap();
            let material = exact_material(text, &parsed).unwrap_or(parsed.clone());
            assert_eq!(material, parsed, "{text}");
        }
        // Nested and mixed: only the lossy number changes.
        let text = r#"{"a":[1.5,{"b":123456789012345678901234}],"s":"t"}"#;
        let parsed: Value = serde_json::from_str(text).unwrap();
        let exact = exact_material(text, &parsed).unwrap();
        assert_eq!(exact["a"][0], json!(1.5));
        assert_eq!(exact["a"][1]["b"], json!("123456789012345678901234"));
        assert_eq!(exact["s"], json!("t"));
        assert_eq!(significant_digits("-0.00012300e5"), 3);
        assert_eq!(significant_digits("100"), 1);
    }

    #[test]
    fn huge_key_is_hashed_to_a_fixed_size() {
        let huge = "k".repeat(1_000_000);
        let k = IdempotencyKey::new("p", &json!(huge)).unwrap();
        assert_eq!(k.as_str().len(), "p#".len() + 64);
    }
}
