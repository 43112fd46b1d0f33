//! DynamoDB writes a handler stages for the engine to commit in the same
//! transaction as its idempotency record (see
//! [`Idempotency::run`](crate::Idempotency::run)).
//!
//! A small typed model rather than raw expressions, so that the DynamoDB store
//! renders it to `TransactWriteItems` and the in-memory store evaluates it
//! with the same meaning.

use aws_sdk_dynamodb::types::AttributeValue;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

/// A DynamoDB item (or key).
pub type Item = HashMap<String, AttributeValue>;

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A condition on the item a write touches.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// `attribute_exists(attr)`
    Exists(String),
    /// `attribute_not_exists(attr)`
    NotExists(String),
    /// `attr <op> value`
    Cmp(String, CmpOp, AttributeValue),
    /// All of them.
    And(Vec<Cond>),
}

impl Cond {
    /// `attribute_exists(attr)`
    pub fn exists(attr: impl Into<String>) -> Self {
        Cond::Exists(attr.into())
    }
    /// `attribute_not_exists(attr)`
    pub fn not_exists(attr: impl Into<String>) -> Self {
        Cond::NotExists(attr.into())
    }
    /// `attr = value`
    pub fn eq(attr: impl Into<String>, value: AttributeValue) -> Self {
        Cond::Cmp(attr.into(), CmpOp::Eq, value)
    }
    /// `attr >= n`
    pub fn ge(attr: impl Into<String>, n: i64) -> Self {
        Cond::Cmp(attr.into(), CmpOp::Ge, AttributeValue::N(n.to_string()))
    }
    /// Both.
    pub fn and(self, other: Cond) -> Self {
        match self {
            Cond::And(mut all) => {
                all.push(other);
                Cond::And(all)
            }
            one => Cond::And(vec![one, other]),
        }
    }
}

/// One change of an update.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// `SET attr = value`
    Set(String, AttributeValue),
    /// `ADD attr n` (a negative `n` subtracts; a missing attribute counts as 0).
    Add(String, i64),
    /// `REMOVE attr`
    Remove(String),
}

/// What a write does.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    /// Replace the whole item (key attributes included).
    Put(Item),
    /// Change attributes, creating the item if absent.
    Update(Vec<Change>),
    /// Delete the item.
    Delete,
    /// Only check the condition.
    ConditionCheck,
}

/// Builds a rejection message from the item as it stood (`None`: absent).
pub type Describe = Arc<dyn Fn(Option<&Item>) -> String + Send + Sync>;

/// The business outcome a failed condition stands for.
#[derive(Clone)]
pub enum Rejection {
    /// A fixed message.
    Message(String),
    /// A message built from the item as it stood when the condition failed
    /// (`None`: no such item), e.g. "unknown SKU" versus "only 3 left".
    Describe(Describe),
}

impl Rejection {
    /// The message for the item that failed the condition.
    pub fn message(&self, item: Option<&Item>) -> String {
        match self {
            Rejection::Message(m) => m.clone(),
            Rejection::Describe(f) => f(item),
        }
    }
}

impl std::fmt::Debug for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::Message(m) => f.debug_tuple("Message").field(m).finish(),
            Rejection::Describe(_) => f.write_str("Describe(..)"),
        }
    }
}

impl PartialEq for Rejection {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Rejection::Message(a), Rejection::Message(b)) => a == b,
            (Rejection::Describe(a), Rejection::Describe(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// One staged write.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// Table name.
    pub table: String,
    /// Primary key.
    pub key: Item,
    /// The operation.
    pub op: WriteOp,
    /// Its condition, if any.
    pub condition: Option<Cond>,
    /// The terminal error the handler's outcome becomes when the condition
    /// fails (a business rule: "insufficient stock"). Without it a failed
    /// condition is a retryable error.
    pub rejection: Option<Rejection>,
}

impl Write {
    fn new(table: impl Into<String>, key: Item, op: WriteOp) -> Self {
        Self {
            table: table.into(),
            key,
            op,
            condition: None,
            rejection: None,
        }
    }

    /// Puts `item` (which holds its key attributes) under `key`.
    pub fn put(table: impl Into<String>, key: Item, mut item: Item) -> Self {
        item.extend(key.clone());
        Self::new(table, key, WriteOp::Put(item))
    }

    /// An update of the item at `key`; add changes with [`Write::set`],
    /// [`Write::add`], [`Write::remove`].
    pub fn update(table: impl Into<String>, key: Item) -> Self {
        Self::new(table, key, WriteOp::Update(Vec::new()))
    }

    /// Deletes the item at `key`.
    pub fn delete(table: impl Into<String>, key: Item) -> Self {
        Self::new(table, key, WriteOp::Delete)
    }

    /// Checks `condition` on the item at `key` without writing.
    pub fn check(table: impl Into<String>, key: Item, condition: Cond) -> Self {
        Self::new(table, key, WriteOp::ConditionCheck).when(condition)
    }

    fn change(mut self, change: Change) -> Self {
        if let WriteOp::Update(changes) = &mut self.op {
            changes.push(change);
        }
        self
    }

    /// `SET attr = value` (updates only).
    pub fn set(self, attr: impl Into<String>, value: AttributeValue) -> Self {
        self.change(Change::Set(attr.into(), value))
    }

    /// `ADD attr n` (updates only).
    pub fn add(self, attr: impl Into<String>, n: i64) -> Self {
        self.change(Change::Add(attr.into(), n))
    }

    /// `REMOVE attr` (updates only).
    pub fn remove(self, attr: impl Into<String>) -> Self {
        self.change(Change::Remove(attr.into()))
    }

    /// Adds a condition (and-ed with any earlier one).
    pub fn when(mut self, condition: Cond) -> Self {
        self.condition = Some(match self.condition.take() {
            Some(existing) => existing.and(condition),
            None => condition,
        });
        self
    }

    /// Makes a failed condition the terminal business outcome `message`.
    pub fn or_reject(mut self, message: impl Into<String>) -> Self {
        self.rejection = Some(Rejection::Message(message.into()));
        self
    }

    /// Makes a failed condition a terminal business outcome whose message
    /// `describe` builds from the item as it stood (`None`: absent). The
    /// store asks for that item with the failed condition
    /// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`): no extra read.
    pub fn or_reject_with(
        mut self,
        describe: impl Fn(Option<&Item>) -> String + Send + Sync + 'static,
    ) -> Self {
        self.rejection = Some(Rejection::Describe(Arc::new(describe)));
        self
    }
}

/// A handler's result in transactional mode: its response and the writes to
/// commit with the idempotency record.
#[derive(Debug, Clone, PartialEq)]
pub struct Staged<T> {
    /// The response, recorded and replayed to duplicates.
    pub response: T,
    /// The writes, committed atomically with the record (at most 99: one
    /// transaction holds 100 items; no two may touch the same item).
    pub writes: Vec<Write>,
}

/// What a handler returns: its response, alone (no writes) or as a
/// [`Staged`] response with the writes to commit with its record.
pub trait IntoStaged<T> {
    /// The response and its writes.
    fn into_staged(self) -> Staged<T>;
}

impl<T> IntoStaged<T> for Staged<T> {
    fn into_staged(self) -> Staged<T> {
        self
    }
}

/// A plain response is a staged one with no writes. (`Staged` itself is
/// not `Serialize`, so the response type is always inferred.)
impl<T: serde::Serialize> IntoStaged<T> for T {
    fn into_staged(self) -> Staged<T> {
        Staged::new(self)
    }
}

impl<T> Staged<T> {
    /// A response with no writes yet.
    pub fn new(response: T) -> Self {
        Self {
            response,
            writes: Vec::new(),
        }
    }

    /// Adds a write.
    pub fn write(mut self, write: Write) -> Self {
        self.writes.push(write);
        self
    }
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

    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// Renders a condition expression.
    pub(crate) fn condition(&mut self, cond: &Cond) -> String {
        match cond {
            Cond::Exists(a) => format!("attribute_exists({})", self.name(a)),
            Cond::NotExists(a) => format!("attribute_not_exists({})", self.name(a)),
            Cond::Cmp(a, op, v) => {
                let n = self.name(a);
                let v = self.value(v.clone());
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
                    let v = self.value(v.clone());
                    set.push(format!("{n} = {v}"));
                }
                Change::Add(a, by) => {
                    let n = self.name(a);
                    let v = self.value(AttributeValue::N(by.to_string()));
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

fn number(v: &AttributeValue) -> Option<f64> {
    v.as_n().ok().and_then(|n| n.parse().ok())
}

fn compare(a: &AttributeValue, b: &AttributeValue) -> Option<Ordering> {
    match (a, b) {
        (AttributeValue::N(_), AttributeValue::N(_)) => number(a)?.partial_cmp(&number(b)?),
        (AttributeValue::S(x), AttributeValue::S(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ if a == b => Some(Ordering::Equal),
        _ => None,
    }
}

/// Staged writes per commit: one transaction holds 100 items, one of them
/// the idempotency record.
pub const MAX_STAGED_WRITES: usize = 99;

/// A canonical text form of a key (attribute order does not matter).
pub(crate) fn key_text(key: &Item) -> String {
    let mut parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    parts.sort();
    parts.join("\u{1f}")
}

/// Refuses staged writes that DynamoDB refuses as a whole (so every store
/// gives the same answer): more than [`MAX_STAGED_WRITES`], two writes on
/// one item, an update without changes.
pub(crate) fn check(writes: &[Write]) -> Result<(), String> {
    if writes.len() > MAX_STAGED_WRITES {
        return Err(format!(
            "{} staged writes, over the limit of {MAX_STAGED_WRITES} per commit",
            writes.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for w in writes {
        if !seen.insert((w.table.as_str(), key_text(&w.key))) {
            return Err(format!(
                "two staged writes touch one item of table {}",
                w.table
            ));
        }
        if matches!(&w.op, WriteOp::Update(changes) if changes.is_empty()) {
            return Err(format!("an update of table {} has no changes", w.table));
        }
    }
    Ok(())
}

/// Evaluates `cond` on `item` (`None`: no item) as DynamoDB does.
pub(crate) fn holds(cond: &Cond, item: Option<&Item>) -> bool {
    let attr = |a: &str| item.and_then(|i| i.get(a));
    match cond {
        Cond::Exists(a) => attr(a).is_some(),
        Cond::NotExists(a) => attr(a).is_none(),
        Cond::Cmp(a, op, v) => attr(a).is_some_and(|x| match (op, compare(x, v)) {
            (CmpOp::Ne, ord) => ord != Some(Ordering::Equal),
            (_, None) => false,
            (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
            (CmpOp::Lt, Some(o)) => o == Ordering::Less,
            (CmpOp::Le, Some(o)) => o != Ordering::Greater,
            (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
            (CmpOp::Ge, Some(o)) => o != Ordering::Less,
        }),
        Cond::And(all) => all.iter().all(|c| holds(c, item)),
    }
}

/// Applies `write` (its condition already checked) to the item at its key:
/// returns the new item, or `None` when it is deleted or absent.
pub(crate) fn apply(write: &Write, item: Option<Item>) -> Result<Option<Item>, String> {
    match &write.op {
        WriteOp::Put(new) => Ok(Some(new.clone())),
        WriteOp::Delete => Ok(None),
        WriteOp::ConditionCheck => Ok(item),
        WriteOp::Update(changes) => {
            let mut item = item.unwrap_or_else(|| write.key.clone());
            for change in changes {
                match change {
                    Change::Set(a, v) => {
                        item.insert(a.clone(), v.clone());
                    }
                    Change::Remove(a) => {
                        item.remove(a);
                    }
                    Change::Add(a, by) => {
                        let current = match item.get(a) {
                            None => 0,
                            Some(AttributeValue::N(n)) => n
                                .parse::<i64>()
                                .map_err(|_| format!("ADD on {a}: {n} is not an integer"))?,
                            Some(_) => return Err(format!("ADD on {a}: not a number")),
                        };
                        let sum = current
                            .checked_add(*by)
                            .ok_or_else(|| format!("ADD on {a} overflows"))?;
                        item.insert(a.clone(), AttributeValue::N(sum.to_string()));
                    }
                }
            }
            Ok(Some(item))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
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
    fn conditions_evaluate_like_dynamodb() {
        let item = Item::from([("pk".to_owned(), s("a")), ("stock".to_owned(), n(5))]);
        assert!(holds(&Cond::ge("stock", 5), Some(&item)));
        assert!(!holds(&Cond::ge("stock", 6), Some(&item)));
        assert!(
            !holds(&Cond::ge("stock", 0), None),
            "missing item: comparisons fail"
        );
        assert!(holds(&Cond::not_exists("pk"), None));
        assert!(!holds(&Cond::exists("pk"), None));
        assert!(holds(
            &Cond::Cmp("pk".into(), CmpOp::Ne, s("b")),
            Some(&item)
        ));
        assert!(!holds(
            &Cond::Cmp("nope".into(), CmpOp::Ne, s("b")),
            Some(&item)
        ));
        assert!(!holds(
            &Cond::Cmp("stock".into(), CmpOp::Eq, s("5")),
            Some(&item)
        ));
    }

    #[test]
    fn updates_apply_and_create_missing_items() {
        let w = Write::update("t", key("a"))
            .add("balance", 7)
            .set("x", s("y"));
        let created = apply(&w, None).unwrap().unwrap();
        assert_eq!(created["balance"], n(7));
        assert_eq!(created["pk"], s("a"));
        let again = apply(&w, Some(created)).unwrap().unwrap();
        assert_eq!(again["balance"], n(14));
        let bad = Item::from([("balance".to_owned(), s("x"))]);
        assert!(apply(&w, Some(bad)).is_err());
        assert_eq!(
            apply(&Write::delete("t", key("a")), Some(again)).unwrap(),
            None
        );
    }

    #[test]
    fn put_holds_its_key() {
        let w = Write::put("t", key("a"), Item::from([("v".to_owned(), n(1))]));
        let item = apply(&w, None).unwrap().unwrap();
        assert_eq!(item["pk"], s("a"));
        assert_eq!(item["v"], n(1));
    }
}
