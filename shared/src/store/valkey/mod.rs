//! The Valkey / Redis OSS store: idempotency records next to the function,
//! sub-millisecond claims inside the VPC.
//!
//! Every verb is one round trip and atomic on the server: a Lua script
//! claims (writes the in-progress record only if the key is absent, expired
//! or its lease lapsed, and otherwise returns the record in the way, the
//! `ALL_OLD` equivalent), completes and releases fenced on the owner token
//! (compare, then set or delete: a stale owner gets
//! [`StoreError::LeaseLost`] / [`TransactError::Record`] as on DynamoDB), and
//! a pipeline of `HGETALL`s reads a batch ahead. A record is a hash (the
//! DynamoDB layout's field names) under `<key prefix><record id>`, expiring
//! with the key's TTL.
//!
//! **No staged writes**: a Valkey record cannot commit atomically with a
//! write to a business table, so [`Store::transactions`] is `false`: the
//! engine refuses [`CommitMode::Optimistic`](crate::CommitMode::Optimistic)
//! ([`Idempotency::try_new`](crate::Idempotency::try_new)), and a commit
//! carrying staged writes with the record, or an outbox, is refused with
//! [`StoreError::Invalid`]. In
//! [`CommitMode::ClaimThenComplete`](crate::CommitMode::ClaimThenComplete) the
//! writes commit on their own before the completion, through the store given
//! to [`ValkeyStore::with_tables`] (where the business tables live).
//!
//! **No persistence assumed**: a server restart without persistence (or a
//! failover losing recent writes) forgets every record: claims in flight
//! and completed keys alike, so a redelivery after it runs the handler
//! again. Effects that must not repeat then need their own guard (a
//! conditional, keyed business write).

pub(crate) mod connect;
mod scripts;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};
use std::sync::Arc;
use std::time::Duration;

use super::{Claim, RecordWrite, Store, TransactError};
use crate::clock::{Clock, SystemClock};
use crate::config::DEFAULT_MAX_ITEM_BYTES;
use crate::error::StoreError;
use crate::record::Record;
use crate::store::Attributes;
use crate::write::Write;

/// Environment variable with the server URL (`redis://host:6379`,
/// `rediss://host:6379` for TLS); [`REDIS_URL_ENV`] is read when unset.
pub const URL_ENV: &str = "VALKEY_URL";
/// Fallback of [`URL_ENV`].
pub const REDIS_URL_ENV: &str = "REDIS_URL";
/// Environment variable overriding the key prefix ([`DEFAULT_KEY_PREFIX`]).
pub const KEY_PREFIX_ENV: &str = "VALKEY_KEY_PREFIX";
/// The prefix of every key the store writes, before the record id.
pub const DEFAULT_KEY_PREFIX: &str = "idempotency:";

/// How the store talks to the server: timeouts and reconnects, explicit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValkeyTimeouts {
    /// Time to open a connection (TCP, TLS, `HELLO`).
    pub connect: Duration,
    /// Time a command may take before it fails as a timeout (its outcome
    /// then unknown: the record fails retryably and is redelivered).
    pub response: Duration,
    /// Reconnection attempts after a dropped connection, per command.
    pub reconnect_attempts: usize,
}

impl Default for ValkeyTimeouts {
    /// 1 s to connect, 500 ms per command (a claim takes well under 1 ms
    /// in the same VPC), 2 reconnection attempts.
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(1),
            response: Duration::from_millis(500),
            reconnect_attempts: 2,
        }
    }
}

/// Why a Valkey store could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValkeyConfigError {
    /// Neither [`URL_ENV`] nor [`REDIS_URL_ENV`] is set.
    #[error("set {URL_ENV} (or {REDIS_URL_ENV}) to redis://host:port or rediss://host:port")]
    MissingUrl,
    /// The URL does not parse, or names a scheme the client does not speak.
    #[error("{URL_ENV} is not a usable Valkey URL")]
    BadUrl(#[source] redis::RedisError),
    /// The first connection failed.
    #[error("cannot connect to Valkey")]
    Connect(#[source] redis::RedisError),
}

/// Idempotency records in Valkey or Redis OSS 7 (one server or an
/// ElastiCache Serverless cache). Cheap to clone: clones share the
/// connection, so build it once per execution environment.
#[derive(Clone)]
pub struct ValkeyStore {
    connection: ConnectionManager,
    key_prefix: Arc<str>,
    max_item_bytes: usize,
    clock: Arc<dyn Clock>,
    tables: Option<Arc<dyn Store>>,
    scripts: Arc<Scripts>,
}

struct Scripts {
    claim: Script,
    complete: Script,
    release: Script,
}

impl std::fmt::Debug for ValkeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValkeyStore")
            .field("key_prefix", &self.key_prefix)
            .field("max_item_bytes", &self.max_item_bytes)
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

impl ValkeyStore {
    /// Connects to `url` (`redis://`, `rediss://` for TLS) with `timeouts`.
    pub async fn connect(url: &str, timeouts: ValkeyTimeouts) -> Result<Self, ValkeyConfigError> {
        if url.starts_with("rediss://") {
            // Several crypto providers may be compiled in: pick one for the
            // process (an error only says one is already installed).
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        }
        let client = redis::Client::open(url).map_err(ValkeyConfigError::BadUrl)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeouts.connect))
            .set_response_timeout(Some(timeouts.response))
            .set_number_of_retries(timeouts.reconnect_attempts)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(ValkeyConfigError::Connect)?;
        Ok(Self {
            connection,
            key_prefix: DEFAULT_KEY_PREFIX.into(),
            max_item_bytes: DEFAULT_MAX_ITEM_BYTES,
            clock: Arc::new(SystemClock),
            tables: None,
            scripts: Arc::new(Scripts {
                claim: Script::new(scripts::CLAIM),
                complete: Script::new(scripts::COMPLETE),
                release: Script::new(scripts::RELEASE),
            }),
        })
    }

    /// Connects to the server in [`URL_ENV`] (or [`REDIS_URL_ENV`]) with the
    /// default timeouts, keys under [`KEY_PREFIX_ENV`] when set.
    pub async fn from_env() -> Result<Self, ValkeyConfigError> {
        let url = [URL_ENV, REDIS_URL_ENV]
            .iter()
            .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
            .ok_or(ValkeyConfigError::MissingUrl)?;
        let store = Self::connect(url.trim(), ValkeyTimeouts::default()).await?;
        Ok(match std::env::var(KEY_PREFIX_ENV) {
            Ok(prefix) if !prefix.is_empty() => store.with_key_prefix(prefix),
            _ => store,
        })
    }

    /// Keys become `<prefix><record id>` (default [`DEFAULT_KEY_PREFIX`]).
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into().into();
        self
    }

    /// Rejects records over `bytes` (default: DynamoDB's limit, so a handler
    /// behaves the same on both stores).
    pub fn with_max_item_bytes(mut self, bytes: usize) -> Self {
        self.max_item_bytes = bytes;
        self
    }

    /// The clock the keys' TTLs are computed with (the engine's clock:
    /// records expire on the server when the engine says they expire).
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Where staged writes commit on their own, without the record, in
    /// claim-then-complete mode and under the kill switch: the store the
    /// business tables live in (a [`DynamoDbStore`](crate::DynamoDbStore)
    /// or a [`MemoryStore`](crate::MemoryStore)). Without it, any staged
    /// write is refused.
    pub fn with_tables(mut self, tables: impl Store + 'static) -> Self {
        self.tables = Some(Arc::new(tables));
        self
    }

    /// The server key of record `id`.
    pub fn key(&self, id: &str) -> String {
        format!("{}{id}", self.key_prefix)
    }

    /// The underlying connection (tests, tooling).
    pub fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    fn check_size(&self, record: &Record) -> Result<(), StoreError> {
        let size = self.item_size(record);
        if size > self.max_item_bytes {
            return Err(StoreError::ItemTooLarge {
                id: record.id.clone(),
                size,
            });
        }
        if record.outbox.is_some() {
            return Err(StoreError::Invalid {
                reason: "the Valkey store cannot carry an outbox: no stream feeds a relay from \
                         it (stage messages only with a DynamoDB store)"
                    .into(),
            });
        }
        Ok(())
    }

    /// Milliseconds the key of `record` lives from now: until the end of its
    /// expiration second, as the claim condition counts (at least 1).
    fn ttl_ms(&self, record: &Record) -> u64 {
        record
            .expiration
            .saturating_add(1)
            .saturating_mul(1000)
            .saturating_sub(self.clock.now_ms())
            .max(1)
    }

    /// Runs `script` on `record`'s key with `head` arguments, then the TTL
    /// and the record's fields.
    async fn write_script(
        &self,
        script: &Script,
        operation: &'static str,
        record: &Record,
        head: &str,
    ) -> Result<Vec<Value>, StoreError> {
        let mut invocation = script.key(self.key(&record.id));
        invocation.arg(head).arg(self.ttl_ms(record));
        for (name, value) in scripts::fields(record) {
            invocation.arg(name).arg(value);
        }
        let mut connection = self.connection.clone();
        invocation
            .invoke_async::<Vec<Value>>(&mut connection)
            .await
            .map_err(|e| backend(operation, e))
    }

    /// The claim script at `now_ms`: `None` when written, `Some(record in
    /// the way)` otherwise.
    async fn put_under_claim(
        &self,
        record: &Record,
        now_ms: u64,
    ) -> Result<Option<Record>, StoreError> {
        self.check_size(record)?;
        let reply = self
            .write_script(
                &self.scripts.claim,
                "claim script",
                record,
                &now_ms.to_string(),
            )
            .await?;
        match tag(&reply) {
            Some("ACQUIRED") => Ok(None),
            Some("EXISTING") => self.record_at(&record.id, reply.get(1)).map(Some),
            _ => Err(self.unexpected(&record.id, &reply)),
        }
    }

    /// The record in a script's `HGETALL` reply.
    fn record_at(&self, id: &str, value: Option<&Value>) -> Result<Record, StoreError> {
        let pairs = value.map(pairs).transpose()?.unwrap_or_default();
        scripts::from_fields(id, pairs)
    }

    /// A reply no script sends but `WRONGTYPE`: the key holds something that
    /// is not ours.
    fn unexpected(&self, id: &str, reply: &[Value]) -> StoreError {
        match (tag(reply), reply.get(1).and_then(text)) {
            (Some("WRONGTYPE"), Some(kind)) => StoreError::Corrupt {
                id: id.to_owned(),
                reason: format!(
                    "key {} holds a Valkey {kind}, not an idempotency record (a hash)",
                    self.key(id)
                ),
            },
            _ => StoreError::Backend {
                operation: "script",
                source: format!("unexpected reply {reply:?}").into(),
            },
        }
    }
}

fn backend(operation: &'static str, err: redis::RedisError) -> StoreError {
    StoreError::Backend {
        operation,
        source: Box::new(err),
    }
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// The first element of a script's reply, its outcome.
fn tag(reply: &[Value]) -> Option<&str> {
    reply.first().and_then(text)
}

/// The field/value pairs of an `HGETALL` reply (RESP2 array or RESP3 map).
fn pairs(value: &Value) -> Result<scripts::Pairs, StoreError> {
    let bytes = |v: &Value| match v {
        Value::BulkString(b) => Ok(b.clone()),
        Value::SimpleString(s) => Ok(s.clone().into_bytes()),
        other => Err(StoreError::Backend {
            operation: "HGETALL",
            source: format!("unexpected value {other:?}").into(),
        }),
    };
    match value {
        Value::Array(items) => items
            .chunks(2)
            .map(|pair| match pair {
                [name, value] => Ok((bytes(name)?, bytes(value)?)),
                _ => Err(StoreError::Backend {
                    operation: "HGETALL",
                    source: "odd number of elements".into(),
                }),
            })
            .collect(),
        Value::Map(items) => items
            .iter()
            .map(|(name, value)| Ok((bytes(name)?, bytes(value)?)))
            .collect(),
        Value::Nil => Ok(Vec::new()),
        other => Err(StoreError::Backend {
            operation: "HGETALL",
            source: format!("unexpected reply {other:?}").into(),
        }),
    }
}

/// Why staged writes cannot commit with a Valkey record.
fn no_atomic_writes(what: &str) -> TransactError {
    TransactError::Store(StoreError::Invalid {
        reason: format!(
            "the Valkey store cannot commit {what} atomically with the idempotency record: use \
             claim-then-complete with a store for the business tables, or a DynamoDB store"
        ),
    })
}

#[async_trait]
impl Store for ValkeyStore {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        Ok(match self.put_under_claim(record, now_ms).await? {
            None => Claim::Acquired,
            Some(existing) => Claim::Existing(existing),
        })
    }

    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        match (record, writes.is_empty()) {
            (RecordWrite::None, true) => Ok(()),
            (RecordWrite::None, false) => match &self.tables {
                Some(tables) => tables.commit(RecordWrite::None, writes).await,
                None => Err(no_atomic_writes(
                    "staged writes without a business-table store, or",
                )),
            },
            (_, false) => Err(no_atomic_writes("staged writes")),
            (RecordWrite::Claim { record, now_ms }, true) => {
                match self
                    .put_under_claim(record, now_ms)
                    .await
                    .map_err(TransactError::Store)?
                {
                    None => Ok(()),
                    Some(existing) => Err(TransactError::Record(Some(existing))),
                }
            }
            (RecordWrite::Fenced(record), true) => {
                self.check_size(record).map_err(TransactError::Store)?;
                let owner = record.owner.as_deref().unwrap_or_default();
                let reply = self
                    .write_script(&self.scripts.complete, "complete script", record, owner)
                    .await
                    .map_err(TransactError::Store)?;
                match tag(&reply) {
                    Some("OK") => Ok(()),
                    Some("LOST") => {
                        let existing = match reply.get(1) {
                            Some(Value::Array(a)) if a.is_empty() => None,
                            Some(Value::Map(m)) if m.is_empty() => None,
                            other => Some(
                                self.record_at(&record.id, other)
                                    .map_err(TransactError::Store)?,
                            ),
                        };
                        Err(TransactError::Record(existing))
                    }
                    _ => Err(TransactError::Store(self.unexpected(&record.id, &reply))),
                }
            }
        }
    }

    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let reply: Vec<Value> = self
            .scripts
            .release
            .key(self.key(id))
            .arg(owner)
            .invoke_async(&mut connection)
            .await
            .map_err(|e| backend("release script", e))?;
        match tag(&reply) {
            Some("OK") => Ok(()),
            Some("LOST") => Err(StoreError::LeaseLost { id: id.to_owned() }),
            _ => Err(self.unexpected(id, &reply)),
        }
    }

    /// One pipeline of `HGETALL`s: one round trip for the whole batch,
    /// each key on its own (no cross-slot multi-key command on a cluster).
    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        let mut unique: Vec<&String> = ids.iter().collect();
        unique.sort();
        unique.dedup();
        if unique.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for id in &unique {
            pipe.cmd("HGETALL").arg(self.key(id));
        }
        let mut connection = self.connection.clone();
        let replies: Vec<Value> = pipe
            .query_async(&mut connection)
            .await
            .map_err(|e| backend("HGETALL pipeline", e))?;
        let mut records = Vec::with_capacity(unique.len());
        for (id, reply) in unique.iter().zip(&replies) {
            match reply {
                Value::ServerError(err) => {
                    return Err(StoreError::Corrupt {
                        id: (*id).clone(),
                        reason: format!(
                            "key {} is not an idempotency record (a hash): {}",
                            self.key(id),
                            err.details().unwrap_or(err.code())
                        ),
                    });
                }
                reply => {
                    let pairs = pairs(reply)?;
                    if !pairs.is_empty() {
                        records.push(scripts::from_fields(id, pairs)?);
                    }
                }
            }
        }
        Ok(records)
    }

    fn item_size(&self, record: &Record) -> usize {
        record.item_size(&Attributes::default())
    }

    fn transactions(&self) -> bool {
        false
    }
}
