//! Writes to business tables a handler stages for the engine to commit in
//! the same transaction as its idempotency record (see
//! [`Idempotency::run`](crate::Idempotency::run), with a
//! [`Staged`] response).
//!
//! A small typed model rather than raw expressions, so that the DynamoDB store
//! renders it to `TransactWriteItems` (the `dynamodb` submodule, with the
//! `dynamodb` feature) and the in-memory store evaluates it with the same
//! meaning: numbers are exact decimals of up to 38 digits in both.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use crate::value::{AttrValue, Decimal};

/// An item (or key): attribute name → value.
pub type Item = HashMap<String, AttrValue>;

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
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn symbol(self) -> &'static str {
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
    Cmp(String, CmpOp, AttrValue),
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
    pub fn eq(attr: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        Cond::Cmp(attr.into(), CmpOp::Eq, value.into())
    }
    /// `attr >= n`
    pub fn ge(attr: impl Into<String>, n: i64) -> Self {
        Cond::Cmp(attr.into(), CmpOp::Ge, AttrValue::n(n))
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
    Set(String, AttrValue),
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
    pub fn set(self, attr: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.change(Change::Set(attr.into(), value.into()))
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
    /// Messages to publish once the commit lands: stored in the record in
    /// the same write, published by the relay (see [`crate::outbox`]).
    pub messages: Vec<crate::outbox::Message>,
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
            messages: Vec::new(),
        }
    }

    /// Adds a write.
    pub fn write(mut self, write: Write) -> Self {
        self.writes.push(write);
        self
    }

    /// Adds a message to publish exactly once: it commits with the record
    /// and the writes, or not at all, and carries a stable id derived from
    /// the idempotency key and its position.
    pub fn publish(mut self, message: crate::outbox::Message) -> Self {
        self.messages.push(message);
        self
    }

    /// The same writes and messages with the response `f` makes of this
    /// one: for a handler that answers in its own terms over the staged
    /// effects of another (an HTTP answer over a payment's credit).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Staged<U> {
        Staged {
            response: f(self.response),
            writes: self.writes,
            messages: self.messages,
        }
    }
}

/// Orders two values as DynamoDB does: numbers as exact decimals (never
/// through `f64`), strings and binaries by their bytes; other types only
/// by equality.
fn compare(a: &AttrValue, b: &AttrValue) -> Option<Ordering> {
    match (a, b) {
        (AttrValue::N(_), AttrValue::N(_)) => Some(a.as_decimal()?.cmp(&b.as_decimal()?)),
        (AttrValue::S(x), AttrValue::S(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (AttrValue::B(x), AttrValue::B(y)) => Some(x.cmp(y)),
        _ if a == b => Some(Ordering::Equal),
        _ => None,
    }
}

/// Staged writes per commit: one transaction holds 100 items, one of them
/// the idempotency record.
pub const MAX_STAGED_WRITES: usize = 99;

/// A canonical text form of a key, what every store compares keys by: one
/// item, one text. Attribute order does not matter, and numbers are
/// [`canonical`], as DynamoDB compares them (`N "1"`, `N "1.0"`, `N "1e0"`
/// and `N "10E-1"` name one item; `-0` is `0`). A number no store accepts
/// keeps its text (the write is refused by [`check`] anyway).
pub(crate) fn key_text(key: &Item) -> String {
    let mut parts: Vec<String> = key
        .iter()
        .map(|(k, v)| format!("{k}={:?}", canonical(v).unwrap_or_else(|_| v.clone())))
        .collect();
    parts.sort();
    parts.join("\u{1f}")
}

/// The numbers in `value` in canonical form (as DynamoDB stores them:
/// `12.50` is kept as `12.5`); an error names a number no store accepts.
pub(crate) fn canonical(value: &AttrValue) -> Result<AttrValue, String> {
    let number = |n: &str| {
        n.parse::<Decimal>()
            .map(|d| d.to_string())
            .map_err(|e| format!("number {n:?}: {e}"))
    };
    Ok(match value {
        AttrValue::N(n) => AttrValue::N(number(n)?),
        AttrValue::Ns(ns) => AttrValue::Ns(ns.iter().map(|n| number(n)).collect::<Result<_, _>>()?),
        AttrValue::L(l) => AttrValue::L(l.iter().map(canonical).collect::<Result<_, _>>()?),
        AttrValue::M(m) => AttrValue::M(canonical_item(m)?),
        other => other.clone(),
    })
}

/// [`canonical`] for every attribute of an item.
pub(crate) fn canonical_item(item: &Item) -> Result<Item, String> {
    item.iter()
        .map(|(k, v)| Ok((k.clone(), canonical(v)?)))
        .collect()
}

/// Every value a write carries (key, item, changes, condition).
fn values(w: &Write) -> Vec<&AttrValue> {
    fn cond_values<'a>(c: &'a Cond, out: &mut Vec<&'a AttrValue>) {
        match c {
            Cond::Cmp(_, _, v) => out.push(v),
            Cond::And(all) => all.iter().for_each(|c| cond_values(c, out)),
            Cond::Exists(_) | Cond::NotExists(_) => {}
        }
    }
    let mut out: Vec<&AttrValue> = w.key.values().collect();
    match &w.op {
        WriteOp::Put(item) => out.extend(item.values()),
        WriteOp::Update(changes) => out.extend(changes.iter().filter_map(|c| match c {
            Change::Set(_, v) => Some(v),
            _ => None,
        })),
        WriteOp::Delete | WriteOp::ConditionCheck => {}
    }
    if let Some(c) = &w.condition {
        cond_values(c, &mut out);
    }
    out
}

/// Refuses staged writes that DynamoDB refuses as a whole (so every store
/// gives the same answer): more than [`MAX_STAGED_WRITES`], two writes on
/// one item, an update without changes, a number that is not a decimal of
/// at most 38 significant digits in DynamoDB's range.
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
        for v in values(w) {
            canonical(v).map_err(|e| format!("a write on table {}: {e}", w.table))?;
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
        WriteOp::Put(new) => Ok(Some(canonical_item(new)?)),
        WriteOp::Delete => Ok(None),
        WriteOp::ConditionCheck => Ok(item),
        WriteOp::Update(changes) => {
            let mut item = match item {
                Some(item) => item,
                None => canonical_item(&write.key)?,
            };
            for change in changes {
                match change {
                    Change::Set(a, v) => {
                        item.insert(a.clone(), canonical(v)?);
                    }
                    Change::Remove(a) => {
                        item.remove(a);
                    }
                    Change::Add(a, by) => {
                        // Exact decimal addition, as DynamoDB does it: past
                        // i64::MAX is fine, past 38 digits is refused.
                        let current = match item.get(a) {
                            None => Decimal::ZERO,
                            Some(AttrValue::N(n)) => n
                                .parse::<Decimal>()
                                .map_err(|e| format!("ADD on {a}: {e}"))?,
                            Some(_) => return Err(format!("ADD on {a}: not a number")),
                        };
                        let sum = current
                            .checked_add(Decimal::from(*by))
                            .map_err(|e| format!("ADD on {a}: {e}"))?;
                        item.insert(a.clone(), AttrValue::n(sum));
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

    fn s(v: &str) -> AttrValue {
        AttrValue::s(v)
    }
    fn n(v: i64) -> AttrValue {
        AttrValue::n(v)
    }
    fn key(v: &str) -> Item {
        Item::from([("pk".to_owned(), s(v))])
    }

    #[test]
    fn map_changes_the_response_and_keeps_the_effects() {
        let message = crate::outbox::Message::sqs("https://q.local/1/q", "hi");
        let staged = Staged::new(7)
            .write(Write::put("t", key("a"), Item::new()))
            .publish(message.clone());
        let mapped: Staged<String> = staged.clone().map(|n| format!("{n} credited"));
        assert_eq!(mapped.response, "7 credited");
        assert_eq!(mapped.writes, staged.writes);
        assert_eq!(mapped.messages, vec![message]);
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

    /// A numeric key attribute (`N`) names one item whatever its text, as
    /// DynamoDB stores numbers ("Leading and trailing zeroes are trimmed").
    #[test]
    fn a_numeric_key_is_one_item_whatever_its_text() {
        let number = |text: &str| Item::from([("pk".to_owned(), AttrValue::N(text.to_owned()))]);
        for text in ["1.0", "1e0", "10E-1", "+1", "01", "1.000E+0"] {
            assert_eq!(key_text(&number(text)), key_text(&number("1")), "{text}");
        }
        assert_eq!(key_text(&number("-0")), key_text(&number("0")));
        assert_eq!(key_text(&number("0.0e5")), key_text(&number("0")));
        assert_ne!(key_text(&number("1")), key_text(&number("10")));
        assert_ne!(key_text(&number("1")), key_text(&number("-1")));
        assert_ne!(
            key_text(&number("1")),
            key_text(&key("1")),
            "N 1 is not S 1"
        );
        // Two staged writes on one item are refused, however it is written.
        let err = check(&[
            Write::update("t", number("1")).add("balance", 1),
            Write::update("t", number("1.0")).add("balance", 1),
        ])
        .unwrap_err();
        assert!(err.contains("two staged writes touch one item"), "{err}");
        // An item created by an update keeps its key as DynamoDB does.
        let created = apply(&Write::update("t", number("10E-1")).add("b", 1), None).unwrap();
        assert_eq!(created.unwrap()["pk"], AttrValue::N("1".to_owned()));
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
    fn numbers_add_and_compare_exactly() {
        // ADD past i64::MAX: an exact decimal, as in DynamoDB.
        let w = Write::update("t", key("a")).add("balance", i64::MAX);
        let one = Item::from([("balance".to_owned(), n(1))]);
        let sum = apply(&w, Some(one)).unwrap().unwrap();
        assert_eq!(sum["balance"], AttrValue::n("9223372036854775808"));
        // Past 38 digits: refused.
        let big = Item::from([(
            "balance".to_owned(),
            AttrValue::n("99999999999999999999999999999999999999"),
        )]);
        assert!(apply(&w, Some(big)).is_err());
        // Not through f64: 2^53 + 1 is not 2^53.
        let stock = Item::from([("stock".to_owned(), n(9_007_199_254_740_992))]);
        assert!(!holds(
            &Cond::ge("stock", 9_007_199_254_740_993),
            Some(&stock)
        ));
        assert!(holds(
            &Cond::ge("stock", 9_007_199_254_740_992),
            Some(&stock)
        ));
        let decimal = Item::from([("x".to_owned(), AttrValue::n("12.50"))]);
        assert!(holds(&Cond::eq("x", AttrValue::n("12.5")), Some(&decimal)));
    }

    #[test]
    fn numbers_are_stored_canonical_and_checked() {
        let w = Write::update("t", key("a")).set("x", AttrValue::n("012.50"));
        assert_eq!(apply(&w, None).unwrap().unwrap()["x"], AttrValue::n("12.5"));
        for bad in [
            "1.2.3",
            "abc",
            "1E+200",
            "123456789012345678901234567890123456789",
        ] {
            let w = Write::update("t", key("a")).set("x", AttrValue::n(bad));
            assert!(check(&[w]).is_err(), "{bad}");
            let c = Write::check("t", key("a"), Cond::eq("x", AttrValue::n(bad)));
            assert!(check(&[c]).is_err(), "{bad}");
        }
        assert!(
            check(&[Write::update("t", key("a"))]).is_err(),
            "no changes"
        );
        let writes: Vec<_> = (0..100)
            .map(|i| Write::update("t", key(&i.to_string())).add("n", 1))
            .collect();
        assert!(check(&writes[..99]).is_ok());
        assert!(check(&writes).is_err(), "over 99");
        let twice = [
            Write::update("t", key("a")).add("n", 1),
            Write::delete("t", key("a")),
        ];
        assert!(check(&twice).is_err(), "one item twice");
    }

    #[test]
    fn put_holds_its_key() {
        let w = Write::put("t", key("a"), Item::from([("v".to_owned(), n(1))]));
        let item = apply(&w, None).unwrap().unwrap();
        assert_eq!(item["pk"], s("a"));
        assert_eq!(item["v"], n(1));
    }
}
