//! The record as a DynamoDB item and the expressions that claim, fence and
//! complete it.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

use crate::error::StoreError;
use crate::record::{Record, Status};
use crate::store::{Attributes, TableConfig};

/// An item as the SDK reads and writes it.
pub(crate) type SdkItem = HashMap<String, AttributeValue>;

/// A condition or update expression with its placeholders.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expr {
    pub(crate) expression: String,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

impl Expr {
    fn names(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }
}

/// `attribute_not_exists(#id) OR #expiration < :now OR (#status = :inprogress AND #in_progress_expiration < :now_ms)`
pub(crate) fn claim_condition(a: &Attributes, now_ms: u64) -> Expr {
    Expr {
        expression: "attribute_not_exists(#id) OR #expiration < :now OR \
                     (#status = :inprogress AND #in_progress_expiration < :now_ms)"
            .into(),
        names: Expr::names(&[
            ("#id", &a.id),
            ("#expiration", &a.expiration),
            ("#status", &a.status),
            ("#in_progress_expiration", &a.in_progress_expiration),
        ]),
        values: HashMap::from([
            (
                ":now".into(),
                AttributeValue::N((now_ms / 1000).to_string()),
            ),
            (":now_ms".into(), AttributeValue::N(now_ms.to_string())),
            (
                ":inprogress".into(),
                AttributeValue::S(Status::InProgress.as_str().into()),
            ),
        ]),
    }
}

/// The fence: `#owner = :owner AND #status = :inprogress`.
pub(crate) fn owner_condition(a: &Attributes, owner: &str) -> Expr {
    Expr {
        expression: "#owner = :owner AND #status = :inprogress".into(),
        names: Expr::names(&[("#owner", &a.owner), ("#status", &a.status)]),
        values: HashMap::from([
            (":owner".into(), AttributeValue::S(owner.into())),
            (
                ":inprogress".into(),
                AttributeValue::S(Status::InProgress.as_str().into()),
            ),
        ]),
    }
}

/// The completion update (`SET` status, expiration and the outcome, `REMOVE`
/// the lease) under the owner fence.
pub(crate) fn complete_update(a: &Attributes, r: &Record, owner: &str) -> Expr {
    let mut fence = owner_condition(a, owner);
    let mut set = vec!["#status = :completed", "#expiration = :expiration"];
    let mut remove = vec!["#in_progress_expiration"];
    fence
        .names
        .insert("#expiration".into(), a.expiration.clone());
    fence.names.insert(
        "#in_progress_expiration".into(),
        a.in_progress_expiration.clone(),
    );
    fence.values.insert(
        ":completed".into(),
        AttributeValue::S(Status::Completed.as_str().into()),
    );
    fence.values.insert(
        ":expiration".into(),
        AttributeValue::N(r.expiration.to_string()),
    );
    for (placeholder, value_placeholder, assignment, name, value) in [
        ("#data", ":data", "#data = :data", &a.data, &r.data),
        ("#error", ":error", "#error = :error", &a.error, &r.error),
        (
            "#outbox",
            ":outbox",
            "#outbox = :outbox",
            &a.outbox,
            &r.outbox,
        ),
    ] {
        fence.names.insert(placeholder.into(), name.clone());
        match value {
            Some(v) => {
                set.push(assignment);
                fence
                    .values
                    .insert(value_placeholder.into(), AttributeValue::S(v.clone()));
            }
            None => remove.push(placeholder),
        }
    }
    Expr {
        expression: format!("SET {} REMOVE {}", set.join(", "), remove.join(", ")),
        // The condition is kept in `fence`'s expression by the caller.
        names: fence.names,
        values: fence.values,
    }
}

/// The key of the record `id` as the table lays it out.
pub(crate) fn record_key(table: &TableConfig, id: &str) -> SdkItem {
    table
        .record_key(id)
        .into_iter()
        .map(|(name, value)| (name, AttributeValue::S(value)))
        .collect()
}

/// Reads a stored item back into a [`Record`]: its key read by the table's
/// layout ([`KeyLayout::record_id`](crate::store::KeyLayout::record_id)).
pub(crate) fn from_item(table: &TableConfig, item: &SdkItem) -> Result<Record, StoreError> {
    let a = &table.attributes;
    let key_part = |name: Option<&str>| match name.and_then(|n| item.get(n)) {
        Some(AttributeValue::S(s)) => Some(s.as_str()),
        _ => None,
    };
    let (partition, sort) = (key_part(Some(&a.id)), key_part(table.key_layout.sort_key()));
    let id = match table.key_layout.record_id(partition, sort) {
        Some(id) => id.to_owned(),
        None => {
            return Err(StoreError::Corrupt {
                id: "<unknown>".into(),
                reason: format!(
                    "not a record in the table's key layout: {} {partition:?}, sort key {sort:?}",
                    a.id
                ),
            });
        }
    };
    let corrupt = |reason: String| StoreError::Corrupt {
        id: id.clone(),
        reason,
    };
    let string = |name: &str| -> Result<Option<String>, StoreError> {
        match item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(s)) => Ok(Some(s.clone())),
            Some(_) => Err(corrupt(format!("{name} is not a string"))),
        }
    };
    let number = |name: &str| -> Result<Option<u64>, StoreError> {
        match item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            // Powertools writes whole numbers; tolerate a fraction.
            Some(AttributeValue::N(n)) => n
                .split('.')
                .next()
                .unwrap_or_default()
                .parse()
                .map(Some)
                .map_err(|_| corrupt(format!("{name} is not a whole number: {n}"))),
            Some(_) => Err(corrupt(format!("{name} is not a number"))),
        }
    };
    let status = string(&a.status)?
        .ok_or_else(|| corrupt(format!("missing {}", a.status)))
        .and_then(|s| Status::parse(&s).ok_or_else(|| corrupt(format!("unknown status {s}"))))?;
    Ok(Record {
        status,
        expiration: number(&a.expiration)?
            .ok_or_else(|| corrupt(format!("missing {}", a.expiration)))?,
        in_progress_expiration: number(&a.in_progress_expiration)?,
        data: string(&a.data)?,
        error: string(&a.error)?,
        validation: string(&a.validation)?,
        owner: string(&a.owner)?,
        outbox: string(&a.outbox)?,
        id: id.clone(),
    })
}
