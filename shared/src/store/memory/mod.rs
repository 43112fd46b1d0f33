//! The embedded in-memory store: local runs and unit tests, with the same
//! conditions, expiry, fencing and transactions as DynamoDB. This file: the
//! records and the [`Store`] verbs. It also holds business tables
//! (`tables.rs`), so a handler's staged writes commit atomically with its
//! record here too, and shows what a committed outbox would publish
//! (`outbox.rs`).

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Claim, Commit, CommitsError, RecordWrite, Store, TransactError};
use crate::config::DEFAULT_MAX_ITEM_BYTES;
use crate::error::StoreError;
use crate::record::{Record, Status};
use crate::store::Attributes;
use crate::table::Table;
use crate::write::{Item, Write, holds, key_text};

pub(crate) mod connect;
mod outbox;
mod tables;

#[derive(Debug, Default)]
struct Inner {
    records: HashMap<String, Record>,
    /// table → canonical key → item
    tables: HashMap<String, HashMap<String, Item>>,
}

/// An in-memory store. Clones share the same records and tables.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    max_item_bytes: usize,
    attributes: Arc<Attributes>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store that rejects items over DynamoDB's size limit.
    pub fn new() -> Self {
        Self {
            inner: Arc::default(),
            max_item_bytes: DEFAULT_MAX_ITEM_BYTES,
            attributes: Arc::default(),
        }
    }

    /// Counts record sizes with these attribute names, as a DynamoDB table
    /// laid out with them would.
    pub fn with_attributes(mut self, attributes: Attributes) -> Self {
        self.attributes = Arc::new(attributes);
        self
    }

    /// Rejects records over `bytes` (DynamoDB: 400 KB).
    pub fn with_max_item_bytes(mut self, bytes: usize) -> Self {
        self.max_item_bytes = bytes;
        self
    }

    /// Number of idempotency records held (expired ones included, as in
    /// DynamoDB until its TTL sweeper runs).
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// Whether the store holds no idempotency records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-written:
        // every mutation is computed first and applied with inserts/removes.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_size(&self, record: &Record) -> Result<(), StoreError> {
        let size = record.item_size(&self.attributes);
        if size > self.max_item_bytes {
            return Err(StoreError::ItemTooLarge {
                id: record.id.clone(),
                size,
            });
        }
        Ok(())
    }
}

fn invalid(reason: String) -> StoreError {
    StoreError::Backend {
        operation: "TransactWriteItems",
        source: reason.into(),
    }
}

fn owned_by(existing: Option<&Record>, owner: Option<&str>) -> bool {
    existing.is_some_and(|r| r.status == Status::InProgress && r.owner.as_deref() == owner)
}

#[async_trait]
impl Store for MemoryStore {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        self.check_size(record)?;
        let mut inner = self.lock();
        match inner.records.get(&record.id) {
            Some(existing) if !existing.is_claimable(now_ms) => {
                Ok(Claim::Existing(existing.clone()))
            }
            _ => {
                inner.records.insert(record.id.clone(), record.clone());
                Ok(Claim::Acquired)
            }
        }
    }

    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if !owned_by(inner.records.get(id), Some(owner)) {
            return Err(StoreError::LeaseLost { id: id.to_owned() });
        }
        inner.records.remove(id);
        Ok(())
    }

    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        let inner = self.lock();
        Ok(ids
            .iter()
            .filter_map(|id| inner.records.get(id).cloned())
            .collect())
    }

    fn item_size(&self, record: &Record) -> usize {
        record.item_size(&self.attributes)
    }

    async fn commit(
        &self,
        record_write: RecordWrite<'_>,
        writes: &[Write],
    ) -> Result<(), TransactError> {
        let commit = Commit {
            record: record_write,
            writes,
        };
        self.validate(&commit)?;
        let mut inner = self.lock();
        let updates = evaluate(&inner, &commit)?;
        apply_updates(&mut inner, &commit, updates);
        drop(inner);
        show_committed(&commit);
        Ok(())
    }

    async fn commit_many(&self, commits: &[Commit<'_>]) -> Result<(), CommitsError> {
        let size = |r: &Record| r.item_size(&self.attributes);
        super::batch::check(commits, &size).map_err(|reason| {
            CommitsError::Transaction(TransactError::Store(StoreError::Invalid { reason }))
        })?;
        for commit in commits {
            self.validate(commit).map_err(CommitsError::Transaction)?;
        }
        let mut inner = self.lock();
        // Every condition is evaluated against the state before the
        // transaction (no two actions touch one item), every failure is
        // reported, and nothing is applied unless all hold.
        let mut all = Vec::with_capacity(commits.len());
        let mut failed = Vec::new();
        for (i, commit) in commits.iter().enumerate() {
            match evaluate(&inner, commit) {
                Ok(updates) => all.push(updates),
                Err(err @ (TransactError::Record(_) | TransactError::Write { .. })) => {
                    failed.push((i, err));
                }
                Err(err) => return Err(CommitsError::Transaction(err)),
            }
        }
        if !failed.is_empty() {
            return Err(CommitsError::Cancelled(failed));
        }
        for (commit, updates) in commits.iter().zip(all) {
            apply_updates(&mut inner, commit, updates);
        }
        drop(inner);
        commits.iter().for_each(show_committed);
        Ok(())
    }
}

impl MemoryStore {
    /// What DynamoDB refuses in a commit before evaluating it: invalid
    /// staged writes, a record over the item limit.
    #[allow(clippy::result_large_err)] // the answer `Store::commit` gives
    fn validate(&self, commit: &Commit<'_>) -> Result<(), TransactError> {
        crate::write::check(commit.writes)
            .map_err(|reason| TransactError::Store(StoreError::Invalid { reason }))?;
        if let Some(record) = record_of(commit.record) {
            self.check_size(record).map_err(TransactError::Store)?;
        }
        Ok(())
    }
}

/// The items a commit writes: (table, key, new item or `None` to delete).
type Updates = Vec<(String, String, Option<Item>)>;

fn record_of(write: RecordWrite<'_>) -> Option<&Record> {
    match write {
        RecordWrite::Fenced(r) | RecordWrite::Claim { record: r, .. } => Some(r),
        RecordWrite::None => None,
    }
}

/// Checks a commit's conditions against the current state and computes
/// every new item, applying nothing.
#[allow(clippy::result_large_err)] // the answer `Store::commit` gives
fn evaluate(inner: &Inner, commit: &Commit<'_>) -> Result<Updates, TransactError> {
    if let Some(record) = record_of(commit.record) {
        let existing = inner.records.get(&record.id);
        let record_ok = match commit.record {
            RecordWrite::Fenced(r) => owned_by(existing, r.owner.as_deref()),
            RecordWrite::Claim { now_ms, .. } => existing.is_none_or(|e| e.is_claimable(now_ms)),
            RecordWrite::None => true,
        };
        if !record_ok {
            return Err(TransactError::Record(existing.cloned()));
        }
    }
    let mut updates = Vec::with_capacity(commit.writes.len());
    for (i, w) in commit.writes.iter().enumerate() {
        let key = key_text(&w.key);
        let current = inner.tables.get(&w.table).and_then(|t| t.get(&key));
        if let Some(cond) = &w.condition
            && !holds(cond, current)
        {
            return Err(TransactError::Write {
                index: i,
                item: current.cloned(),
            });
        }
        let new = crate::write::apply(w, current.cloned())
            .map_err(|e| TransactError::Store(invalid(e)))?;
        updates.push((w.table.clone(), key, new));
    }
    Ok(updates)
}

/// Applies what [`evaluate`] computed, and the record.
fn apply_updates(inner: &mut Inner, commit: &Commit<'_>, updates: Updates) {
    for (table, key, new) in updates {
        let table = inner.tables.entry(table).or_default();
        match new {
            Some(item) => table.insert(key, item),
            None => table.remove(&key),
        };
    }
    if let Some(record) = record_of(commit.record) {
        inner.records.insert(record.id.clone(), record.clone());
    }
}

fn show_committed(commit: &Commit<'_>) {
    if let Some(outbox) = record_of(commit.record).and_then(|r| r.outbox.as_deref()) {
        outbox::show(outbox);
    }
}

impl Table {
    /// The table `name` inside `store`. Pass the engine's own store, so that
    /// staged writes commit atomically with the records.
    pub fn memory(store: MemoryStore, name: impl Into<String>) -> Self {
        Self::new(store, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::value::AttrValue;
    use crate::write::Cond;

    fn key(pk: &str) -> Item {
        Item::from([("pk".to_owned(), AttrValue::s(pk))])
    }

    #[tokio::test]
    async fn memory_tables_read_and_write_in_the_store() {
        let store = MemoryStore::new();
        let t = Table::memory(store.clone(), "t");
        t.put(&key("a"), Item::from([("n".to_owned(), AttrValue::n(1))]))
            .await
            .unwrap();
        assert_eq!(store.item("t", &key("a")).unwrap()["n"], AttrValue::n(1));
        let add = Write::update("t", key("a")).add("n", i64::MAX);
        let after = t.write(&add).await.unwrap().unwrap();
        assert_eq!(after["n"], AttrValue::n("9223372036854775808"));
        let guarded =
            Write::delete("t", key("a")).when(Cond::ge("n", 0).and(Cond::not_exists("pk")));
        let err = t.write(&guarded.clone()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Retryable);
        let err = t
            .write(&guarded.or_reject_with(|i| format!("still {}", i.is_some())))
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind(), err.to_string()),
            (ErrorKind::Terminal, "still true".into())
        );
        let sibling = t.sibling("u");
        assert_eq!(sibling.name(), "u");
        assert_eq!(sibling.get(&key("a")).await.unwrap(), None);
        let empty = Write::update("t", key("a"));
        assert!(t.write(&empty).await.is_err(), "an update without changes");
    }
}
