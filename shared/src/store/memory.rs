//! The embedded in-memory store: local runs and unit tests, with the same
//! conditions, expiry and fencing as DynamoDB.

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Claim, Store};
use crate::config::{Attributes, DEFAULT_MAX_ITEM_BYTES};
use crate::error::StoreError;
use crate::record::{Record, Status};

/// An in-memory store. Clones share the same records.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    records: Arc<Mutex<HashMap<String, Record>>>,
    max_item_bytes: usize,
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
            records: Arc::default(),
            max_item_bytes: DEFAULT_MAX_ITEM_BYTES,
        }
    }

    /// Number of records held (expired ones included, as in DynamoDB until
    /// its TTL sweeper runs).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Record>> {
        // A panic while holding the lock cannot leave a map half-written:
        // every mutation is a single insert or remove.
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_size(&self, record: &Record) -> Result<(), StoreError> {
        let size = record.item_size(&Attributes::default());
        if size > self.max_item_bytes {
            return Err(StoreError::ItemTooLarge {
                id: record.id.clone(),
                size,
            });
        }
        Ok(())
    }
}

fn owned_by(existing: Option<&Record>, owner: Option<&str>) -> bool {
    existing.is_some_and(|r| r.status == Status::InProgress && r.owner.as_deref() == owner)
}

#[async_trait]
impl Store for MemoryStore {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        self.check_size(record)?;
        let mut records = self.lock();
        match records.get(&record.id) {
            Some(existing) if !existing.is_claimable(now_ms) => {
                Ok(Claim::Existing(existing.clone()))
            }
            _ => {
                records.insert(record.id.clone(), record.clone());
                Ok(Claim::Acquired)
            }
        }
    }

    async fn complete(&self, record: &Record) -> Result<(), StoreError> {
        self.check_size(record)?;
        let mut records = self.lock();
        if !owned_by(records.get(&record.id), record.owner.as_deref()) {
            return Err(StoreError::LeaseLost {
                id: record.id.clone(),
            });
        }
        records.insert(record.id.clone(), record.clone());
        Ok(())
    }

    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        let mut records = self.lock();
        if !owned_by(records.get(id), Some(owner)) {
            return Err(StoreError::LeaseLost { id: id.to_owned() });
        }
        records.remove(id);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        Ok(self.lock().get(id).cloned())
    }
}
