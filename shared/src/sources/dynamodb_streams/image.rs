//! A stream record's images as the library's [`Item`], converted exactly,
//! and as plain JSON.

use base64::Engine as _;
use serde_dynamo::AttributeValue;
use serde_json::{Map, Value};

use crate::value::AttrValue;
use crate::write::{Item, canonical};

/// The image `image` (`Keys`, `NewImage` or `OldImage`) as an [`Item`].
/// An error names the attribute that is not a valid DynamoDB value (a
/// number that is not a decimal, or beyond 38 digits or DynamoDB's range; a
/// `NULL` that is not `true`).
pub fn to_item(image: &serde_dynamo::Item) -> Result<Item, String> {
    image
        .iter()
        .map(|(name, value)| {
            let attr = to_attr(value).and_then(|v| canonical(&v));
            Ok((name.clone(), attr.map_err(|e| format!("{name}: {e}"))?))
        })
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
        AttributeValue::L(items) => {
            AttrValue::L(items.iter().map(to_attr).collect::<Result<_, _>>()?)
        }
        AttributeValue::M(map) => AttrValue::M(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), to_attr(v).map_err(|e| format!("{k}: {e}"))?)))
                .collect::<Result<_, String>>()?,
        ),
        AttributeValue::Ss(ss) => AttrValue::Ss(ss.clone()),
        AttributeValue::Ns(ns) => AttrValue::Ns(ns.clone()),
        AttributeValue::Bs(bs) => AttrValue::Bs(bs.clone()),
    })
}

/// An item as plain JSON: strings and booleans as themselves, numbers as
/// strings of their exact decimal text (`"12.5"`: no `f64` on the way),
/// binaries as base64 strings, lists and sets as arrays, maps as objects,
/// `NULL` as `null`.
pub fn item_json(item: &Item) -> Value {
    Value::Object(
        item.iter()
            .map(|(k, v)| (k.clone(), attr_json(v)))
            .collect::<Map<_, _>>(),
    )
}

fn attr_json(value: &AttrValue) -> Value {
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    match value {
        AttrValue::S(s) | AttrValue::N(s) => Value::String(s.clone()),
        AttrValue::B(b) => b64(b),
        AttrValue::Bool(b) => Value::Bool(*b),
        AttrValue::Null => Value::Null,
        AttrValue::L(items) => Value::Array(items.iter().map(attr_json).collect()),
        AttrValue::M(map) => item_json(map),
        AttrValue::Ss(ss) | AttrValue::Ns(ss) => {
            Value::Array(ss.iter().cloned().map(Value::String).collect())
        }
        AttrValue::Bs(bs) => Value::Array(bs.iter().map(|b| b64(b)).collect()),
    }
}
