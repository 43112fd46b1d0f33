//! The DynamoDB side of staged writes and values: conversions between
//! [`AttrValue`] and the SDK's `AttributeValue`, and the rendering of a
//! [`Write`] to expressions, to one item of `TransactWriteItems` and to its
//! plain conditional write. With the rest of `store/dynamodb/`, the only
//! place where SDK types appear.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use std::collections::HashMap;

use crate::error::{HandlerError, StoreError};
use crate::value::AttrValue;
use crate::write::{Change, Cond, Item, Rejection, Write, WriteOp};

impl From<&AttrValue> for AttributeValue {
    fn from(v: &AttrValue) -> Self {
        match v {
            AttrValue::S(s) => AttributeValue::S(s.clone()),
            AttrValue::N(n) => AttributeValue::N(n.clone()),
            AttrValue::B(b) => AttributeValue::B(Blob::new(b.clone())),
            AttrValue::Bool(b) => AttributeValue::Bool(*b),
            AttrValue::Null => AttributeValue::Null(true),
            AttrValue::L(l) => AttributeValue::L(l.iter().map(Into::into).collect()),
            AttrValue::M(m) => AttributeValue::M(to_sdk_item(m)),
            AttrValue::Ss(ss) => AttributeValue::Ss(ss.clone()),
            AttrValue::Ns(ns) => AttributeValue::Ns(ns.clone()),
            AttrValue::Bs(bs) => {
                AttributeValue::Bs(bs.iter().map(|b| Blob::new(b.clone())).collect())
            }
        }
    }
}

impl From<AttrValue> for AttributeValue {
    fn from(v: AttrValue) -> Self {
        (&v).into()
    }
}

impl From<&AttributeValue> for AttrValue {
    /// A value of a type this SDK version does not know reads as `Null`.
    fn from(v: &AttributeValue) -> Self {
        match v {
            AttributeValue::S(s) => AttrValue::S(s.clone()),
            AttributeValue::N(n) => AttrValue::N(n.clone()),
            AttributeValue::B(b) => AttrValue::B(b.as_ref().to_vec()),
            AttributeValue::Bool(b) => AttrValue::Bool(*b),
            AttributeValue::L(l) => AttrValue::L(l.iter().map(Into::into).collect()),
            AttributeValue::M(m) => AttrValue::M(from_sdk_item(m)),
            AttributeValue::Ss(ss) => AttrValue::Ss(ss.clone()),
            AttributeValue::Ns(ns) => AttrValue::Ns(ns.clone()),
            AttributeValue::Bs(bs) => {
                AttrValue::Bs(bs.iter().map(|b| b.as_ref().to_vec()).collect())
            }
            _ => AttrValue::Null,
        }
    }
}

impl From<AttributeValue> for AttrValue {
    fn from(v: AttributeValue) -> Self {
        (&v).into()
    }
}

/// An item in the SDK's types.
pub(crate) fn to_sdk_item(item: &Item) -> HashMap<String, AttributeValue> {
    item.iter().map(|(k, v)| (k.clone(), v.into())).collect()
}

/// An item from the SDK's types.
pub(crate) fn from_sdk_item(item: &HashMap<String, AttributeValue>) -> Item {
    item.iter().map(|(k, v)| (k.clone(), v.into())).collect()
}

/// Expression text with its placeholders, as DynamoDB takes them.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Rendered {
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

impl Rendered {
    fn name(&mut self, attr: &str) -> String {
        if let Some((placeholder, _)) = self.names.iter().find(|(_, a)| *a == attr) {
            return placeholder.clone();
        }
        let placeholder = format!("#n{}", self.names.len());
        self.names.insert(placeholder.clone(), attr.to_owned());
        placeholder
    }

    fn value(&mut self, value: &AttrValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value.into());
        placeholder
    }

    /// Renders a condition expression.
    pub(crate) fn condition(&mut self, cond: &Cond) -> String {
        match cond {
            Cond::Exists(a) => format!("attribute_exists({})", self.name(a)),
            Cond::NotExists(a) => format!("attribute_not_exists({})", self.name(a)),
            Cond::Cmp(a, op, v) => {
                let n = self.name(a);
                let v = self.value(v);
                format!("{n} {} {v}", op.symbol())
            }
            Cond::And(all) => all
                .iter()
                .map(|c| format!("({})", self.condition(c)))
                .collect::<Vec<_>>()
                .join(" AND "),
        }
    }

    /// Renders an update expression.
    pub(crate) fn update(&mut self, changes: &[Change]) -> String {
        let (mut set, mut add, mut remove) = (Vec::new(), Vec::new(), Vec::new());
        for change in changes {
            match change {
                Change::Set(a, v) => {
                    let n = self.name(a);
                    let v = self.value(v);
                    set.push(format!("{n} = {v}"));
                }
                Change::Add(a, by) => {
                    let n = self.name(a);
                    let v = self.value(&AttrValue::n(by));
                    add.push(format!("{n} {v}"));
                }
                Change::Remove(a) => remove.push(self.name(a)),
            }
        }
        [("SET", set), ("ADD", add), ("REMOVE", remove)]
            .into_iter()
            .filter(|(_, parts)| !parts.is_empty())
            .map(|(verb, parts)| format!("{verb} {}", parts.join(", ")))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// An AWS SDK error (of any service) as a retryable handler error, with its
/// full context (service code and message, not just "service error").
pub fn sdk_error<E>(err: E) -> HandlerError
where
    E: std::error::Error + Send + Sync + 'static,
{
    HandlerError::retryable(aws_sdk_dynamodb::error::DisplayErrorContext(err).to_string())
}

/// [`Table::get`](crate::Table::get) in DynamoDB.
pub(crate) async fn get(
    client: &Client,
    table: &str,
    key: &Item,
) -> Result<Option<Item>, HandlerError> {
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(to_sdk_item(key)))
        .consistent_read(true)
        .send()
        .await
        .map_err(sdk_error)?;
    Ok(out.item().map(from_sdk_item))
}

/// The item a failed condition returned (`ALL_OLD`), `None` when absent.
fn old_item(item: Option<&HashMap<String, AttributeValue>>) -> Option<Item> {
    item.filter(|i| !i.is_empty()).map(from_sdk_item)
}

/// [`Table::write`](crate::Table::write) in DynamoDB: one `UpdateItem`,
/// `PutItem` or `DeleteItem` (a condition check alone: a consistent
/// `GetItem`, evaluated here). `Ok(Err(old))`: the condition failed.
pub(crate) async fn write(
    client: &Client,
    w: &Write,
) -> Result<Result<Option<Item>, Option<Item>>, HandlerError> {
    crate::write::check(std::slice::from_ref(w)).map_err(HandlerError::terminal)?;
    let all_old = Some(ReturnValuesOnConditionCheckFailure::AllOld);
    let written = plain_write(client, w, all_old, Some(ReturnValue::AllNew))
        .await
        .map_err(|e| HandlerError::retryable(e.to_string()))?;
    match (&w.op, written) {
        (WriteOp::Put(item), Ok(_)) => Ok(Ok(Some(
            crate::write::canonical_item(item).map_err(HandlerError::terminal)?,
        ))),
        (_, written) => Ok(written),
    }
}

/// Why a plain write has no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlainWriteError {
    /// DynamoDB's `TransactionConflictException`: the item is being written
    /// by a transaction. Nothing was applied; sending it again is safe.
    #[error("{context}")]
    Conflict {
        /// The request (`PutItem`, `UpdateItem`, `DeleteItem`).
        operation: &'static str,
        /// The SDK error with its full context.
        context: String,
        /// The SDK error.
        #[source]
        source: crate::error::BoxError,
    },
    /// Anything else (throttling, a network error, a timeout).
    #[error("{context}")]
    Backend {
        /// The request (`PutItem`, `UpdateItem`, `DeleteItem`, `GetItem`).
        operation: &'static str,
        /// The SDK error with its full context.
        context: String,
        /// The SDK error.
        #[source]
        source: crate::error::BoxError,
    },
}

impl PlainWriteError {
    fn new<E>(operation: &'static str, conflict: bool, err: SdkError<E>) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
        SdkError<E>: std::error::Error + Send + Sync + 'static,
    {
        let context = aws_sdk_dynamodb::error::DisplayErrorContext(&err).to_string();
        let source = Box::new(err);
        if conflict {
            Self::Conflict {
                operation,
                context,
                source,
            }
        } else {
            Self::Backend {
                operation,
                context,
                source,
            }
        }
    }
}

/// Whether a failed condition of `w` should return the item
/// (`ALL_OLD`): only a rejection built from the item needs it. The
/// transaction item and the plain write of a commit both ask by this rule.
fn all_old_for(w: &Write) -> Option<ReturnValuesOnConditionCheckFailure> {
    w.rejection
        .as_ref()
        .filter(|r| matches!(r, Rejection::Describe(_)))
        .map(|_| ReturnValuesOnConditionCheckFailure::AllOld)
}

/// A staged write of a commit as a request of its own (the commit has no
/// record write and no other staged write): the same conditional
/// `PutItem`, `UpdateItem` or `DeleteItem` as its transaction item, one
/// write unit per KB where the one-item transaction costs two. A condition
/// check alone has no plain write: it is a consistent `GetItem` whose item
/// the condition is evaluated against here ([`super::holds`], the memory
/// store's rule), as [`Table::write`](crate::Table::write) does; with
/// nothing else in the commit there is nothing for it to be atomic with.
/// `Ok(Err(old))`: the condition failed (`old` as the transaction would
/// have returned it: only for a rejection built from the item).
pub(crate) async fn commit_one(
    client: &Client,
    w: &Write,
) -> Result<Result<(), Option<Item>>, PlainWriteError> {
    let all_old = all_old_for(w);
    let describe = all_old.is_some();
    Ok(plain_write(client, w, all_old, None)
        .await?
        .map(drop)
        .map_err(|old| old.filter(|_| describe)))
}

/// The answer of one plain write: the item afterwards (`after`), the item
/// that stood in the way of its condition (`failed` reads it from a
/// `ConditionalCheckFailedException`), or the error (`conflict`: a
/// `TransactionConflictException`, sent again by the engine).
fn plain_answer<O, E>(
    operation: &'static str,
    out: Result<O, SdkError<E>>,
    after: impl FnOnce(O) -> Option<Item>,
    failed: impl Fn(&E) -> Option<Option<&HashMap<String, AttributeValue>>>,
    conflict: impl Fn(&E) -> bool,
) -> Result<Result<Option<Item>, Option<Item>>, PlainWriteError>
where
    E: std::error::Error + Send + Sync + 'static,
    SdkError<E>: std::error::Error + Send + Sync + 'static,
{
    match out {
        Ok(out) => Ok(Ok(after(out))),
        Err(SdkError::ServiceError(se)) if failed(se.err()).is_some() => {
            Ok(Err(old_item(failed(se.err()).flatten())))
        }
        Err(e) => {
            let conflicted = matches!(&e, SdkError::ServiceError(se) if conflict(se.err()));
            Err(PlainWriteError::new(operation, conflicted, e))
        }
    }
}

/// One conditional `UpdateItem`, `PutItem` or `DeleteItem` (a condition
/// check alone: a consistent `GetItem`, evaluated here). `Ok(Ok(item))`:
/// the item as it stands afterwards (an update's only with `return_new`, a
/// put's never: the caller has it);
/// `Ok(Err(old))`: the condition failed (`old` with `all_old`).
async fn plain_write(
    client: &Client,
    w: &Write,
    all_old: Option<ReturnValuesOnConditionCheckFailure>,
    return_new: Option<ReturnValue>,
) -> Result<Result<Option<Item>, Option<Item>>, PlainWriteError> {
    let mut r = Rendered::default();
    let condition = w.condition.as_ref().map(|c| r.condition(c));
    let update = match &w.op {
        WriteOp::Update(changes) => Some(r.update(changes)),
        _ => None,
    };
    let (names, values) = (none_if_empty(r.names), none_if_empty(r.values));
    let key = Some(to_sdk_item(&w.key));
    match &w.op {
        WriteOp::Update(_) => {
            let out = client
                .update_item()
                .table_name(&w.table)
                .set_key(key)
                .set_update_expression(update)
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values(return_new)
                .set_return_values_on_condition_check_failure(all_old)
                .send()
                .await;
            plain_answer(
                "UpdateItem",
                out,
                |out| out.attributes().map(from_sdk_item),
                |e| match e {
                    UpdateItemError::ConditionalCheckFailedException(f) => Some(f.item()),
                    _ => None,
                },
                |e| matches!(e, UpdateItemError::TransactionConflictException(_)),
            )
        }
        WriteOp::Put(item) => {
            let out = client
                .put_item()
                .table_name(&w.table)
                .set_item(Some(to_sdk_item(item)))
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values_on_condition_check_failure(all_old)
                .send()
                .await;
            // The item written: the caller has it.
            plain_answer(
                "PutItem",
                out,
                |_| None,
                |e| match e {
                    PutItemError::ConditionalCheckFailedException(f) => Some(f.item()),
                    _ => None,
                },
                |e| matches!(e, PutItemError::TransactionConflictException(_)),
            )
        }
        WriteOp::Delete => {
            let out = client
                .delete_item()
                .table_name(&w.table)
                .set_key(key)
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values_on_condition_check_failure(all_old)
                .send()
                .await;
            plain_answer(
                "DeleteItem",
                out,
                |_| None,
                |e| match e {
                    DeleteItemError::ConditionalCheckFailedException(f) => Some(f.item()),
                    _ => None,
                },
                |e| matches!(e, DeleteItemError::TransactionConflictException(_)),
            )
        }
        WriteOp::ConditionCheck => {
            let out = client
                .get_item()
                .table_name(&w.table)
                .set_key(key)
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| PlainWriteError::new("GetItem", false, e))?;
            let item = out.item().map(from_sdk_item);
            let holds = w
                .condition
                .as_ref()
                .is_none_or(|c| crate::write::holds(c, item.as_ref()));
            Ok(if holds { Ok(item) } else { Err(item) })
        }
    }
}

fn none_if_empty<V>(map: HashMap<String, V>) -> Option<HashMap<String, V>> {
    (!map.is_empty()).then_some(map)
}

pub(crate) fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Backend {
        operation: "TransactWriteItems",
        source: Box::new(e),
    }
}

/// A staged write as one item of `TransactWriteItems`.
pub(crate) fn transact_item(w: &Write) -> Result<TransactWriteItem, StoreError> {
    let mut r = Rendered::default();
    let condition = w.condition.as_ref().map(|c| r.condition(c));
    let update = match &w.op {
        WriteOp::Update(changes) => Some(r.update(changes)),
        _ => None,
    };
    // A rejection built from the item needs the item back when the
    // condition fails.
    let all_old = all_old_for(w);
    let (names, values) = (none_if_empty(r.names), none_if_empty(r.values));
    // The four operations' builders are distinct types with the same
    // condition setters.
    macro_rules! conditioned {
        ($builder:expr) => {
            $builder
                .table_name(&w.table)
                .set_condition_expression(condition)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .set_return_values_on_condition_check_failure(all_old)
                .build()
                .map_err(build_error)?
        };
    }
    let key = Some(to_sdk_item(&w.key));
    let item = match &w.op {
        WriteOp::Put(item) => TransactWriteItem::builder()
            .put(conditioned!(
                Put::builder().set_item(Some(to_sdk_item(item)))
            ))
            .build(),
        WriteOp::Update(_) => TransactWriteItem::builder()
            .update(conditioned!(
                Update::builder().set_key(key).set_update_expression(update)
            ))
            .build(),
        WriteOp::Delete => TransactWriteItem::builder()
            .delete(conditioned!(Delete::builder().set_key(key)))
            .build(),
        WriteOp::ConditionCheck => TransactWriteItem::builder()
            .condition_check(conditioned!(ConditionCheck::builder().set_key(key)))
            .build(),
    };
    Ok(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttrValue {
        AttrValue::s(v)
    }
    fn n(v: i64) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }
    fn key(v: &str) -> Item {
        Item::from([("pk".to_owned(), s(v))])
    }

    #[test]
    fn conditions_render_with_every_placeholder_used() {
        let cond = Cond::exists("pk")
            .and(Cond::ge("stock", 2))
            .and(Cond::eq("state", s("open")));
        let mut r = Rendered::default();
        let text = r.condition(&cond);
        assert_eq!(
            text,
            "(attribute_exists(#n0)) AND (#n1 >= :v0) AND (#n2 = :v1)"
        );
        assert_eq!(r.names.len(), 3);
        assert_eq!(r.values[":v0"], n(2));
    }

    #[test]
    fn updates_render_by_verb_and_reuse_names() {
        let w = Write::update("t", key("a"))
            .add("stock", -2)
            .set("last", s("o-1"))
            .remove("hold")
            .when(Cond::ge("stock", 2));
        let WriteOp::Update(changes) = &w.op else {
            panic!("an update");
        };
        let mut r = Rendered::default();
        let update = r.update(changes);
        let cond = r.condition(w.condition.as_ref().unwrap());
        assert_eq!(update, "SET #n1 = :v1 ADD #n0 :v0 REMOVE #n2");
        assert_eq!(cond, "#n0 >= :v2");
        assert_eq!(r.names.len(), 3);
        assert_eq!(r.values.len(), 3);
    }

    #[test]
    fn values_round_trip_through_the_sdk() {
        let value = AttrValue::M(Item::from([
            ("s".to_owned(), s("x")),
            ("n".to_owned(), AttrValue::n("9223372036854775808")),
            ("b".to_owned(), AttrValue::B(vec![0, 1])),
            ("t".to_owned(), AttrValue::Bool(true)),
            ("z".to_owned(), AttrValue::Null),
            ("l".to_owned(), AttrValue::L(vec![s("a"), AttrValue::n(1)])),
            ("ss".to_owned(), AttrValue::Ss(vec!["a".into()])),
            ("ns".to_owned(), AttrValue::Ns(vec!["1.5".into()])),
            ("bs".to_owned(), AttrValue::Bs(vec![vec![2]])),
        ]));
        let sdk = AttributeValue::from(&value);
        assert_eq!(AttrValue::from(&sdk), value);
    }
}
