//! Idempotent AWS Lambda handlers for SQS (standard and FIFO), EventBridge
//! and HTTP APIs ([`http`]: an `Idempotency-Key` header).
//!
//! Messages arrive at least once; this crate makes their effects happen once.
//! Each message's idempotency key is claimed with one conditional write; the
//! handler runs only for the claimant; its response is recorded with a TTL and
//! replayed to duplicates.
//!
//! Any single-event handler served by `lambda_runtime` gains idempotency
//! with one line in its `ServiceBuilder`: the tower layer `layer::IdempotencyLayer`
//! (feature `lambda`).
//!
//! Another repository depends on the crate by git (or by path, from a
//! checkout) until it is published:
//!
//! ```toml
//! [dependencies]
//! shared = { git = "https://github.com/lambda-idempotency/lambda-idempotency" }
//! # shared = { path = "../lambda-idempotency/shared" }
//! ```
//!
//! # Quick start (in-memory store)
//!
//! ```
//! use serde_json::json;
//! use shared::{Config, HandlerError, Idempotency, MemoryStore, Outcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), shared::Error> {
//! let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("payments.charge"));
//! let body = json!({"payment_id": "pay-1", "amount_cents": 1250});
//! let key = engine.key(&body["payment_id"]).expect("a payment id");
//!
//! let mut charged = 0;
//! for _delivery in 0..3 {
//!     let outcome = engine
//!         .run(&key, Some(&body), None, || async {
//!             charged += 1;
//!             Ok::<_, HandlerError>(json!({"charge": "ch_1"}))
//!         })
//!         .await?;
//!     match outcome {
//!         Outcome::Executed(r) | Outcome::Replayed(Some(r)) => assert_eq!(r["charge"], "ch_1"),
//!         other => panic!("unexpected {other:?}"),
//!     }
//! }
//! assert_eq!(charged, 1); // three deliveries, one effect
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

/// The workspace's Markdown pages (`README.md`, `docs/**/*.md`), compiled
/// and run as doctests of this crate: one item per page, written by
/// `build.rs`. Only in the workspace (`build.rs` sets `workspace_docs`
/// there): the published package holds none of these pages.
/// The package README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct PackageReadme;

#[cfg(all(doctest, workspace_docs))]
#[allow(non_camel_case_types)]
mod workspace_docs {
    include!(concat!(env!("OUT_DIR"), "/workspace_docs.rs"));
}

mod adapter;
#[cfg(any(feature = "dynamodb", feature = "ssm", feature = "parking-sqs"))]
mod aws;
mod backend;
mod clock;
mod config;
pub mod diagnostic;
mod engine;
mod error;
mod key;
#[cfg(feature = "lambda")]
#[cfg_attr(docsrs, doc(cfg(feature = "lambda")))]
pub mod layer;
pub mod metrics;
pub mod outbox;
mod record;
#[cfg(feature = "lambda")]
pub mod runtime;
mod signature;
mod store;
mod table;
#[cfg(test)]
mod testkit;
mod value;
mod write;

pub use adapter::dynamodb_streams;
pub use adapter::envelope;
pub use adapter::eventbridge;
pub use adapter::http;
pub use adapter::kafka;
pub use adapter::kinesis;
pub use adapter::parking;
pub use adapter::sns;
/// The SQS adapter (standard and FIFO queues), in `adapter/sqs/`.
pub use adapter::sqs as batch;
pub use adapter::{
    Attribute, DEFAULT_CONCURRENCY, DEFAULT_DEADLINE_MARGIN, Delivery, IdField, KeyFn, KeyInput,
    KeySelector, LaneField, MissingKey, PayloadScope, SourceNames,
};
#[cfg(any(feature = "dynamodb", feature = "ssm", feature = "parking-sqs"))]
pub use aws::{aws_sdk_config, aws_sdk_config_loader};
pub use backend::{Backend, BackendError, ConnectError, TableEnv, Wiring};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    BATCH_COMMITS_ENV, CommitMode, Config, DEFAULT_MAX_ITEM_BYTES, DISABLED_ENV, EXPIRES_AFTER_ENV,
    MAX_PREFIX_BYTES, OversizedResponse, PREFIX_ENV, PrefixError, TerminalErrors, check_prefix,
};
pub use engine::{Idempotency, ModeError, Outcome};
pub use error::{Error, ErrorKind, HandlerError, KeyError, StoreError, report};
pub use key::{IdempotencyKey, canonical_json, payload_hash, sha256_hex};
pub use record::{Record, Status};
pub use signature::{
    DEFAULT_SIGNATURE_ATTRIBUTE, SECRET_ENV, SECRET_PARAMETER_ENV, SecretError, SignatureError,
    Verifier,
};
#[cfg(feature = "dynamodb")]
pub use store::DynamoDbStore;
#[cfg(feature = "valkey")]
pub use store::ValkeyStore;
#[cfg(feature = "dynamodb")]
pub use store::dynamodb::write::sdk_error;
#[cfg(feature = "dynamodb")]
pub use store::dynamodb::{TableCheck, TableCheckError};
#[cfg(feature = "valkey")]
pub use store::valkey;
pub use store::{Attributes, CLAIMS_ROUTED_ENV, TABLE_ENV, TableConfig};
pub use store::{
    Claim, Commit, CommitsError, MemoryStore, RecordWrite, STORE_ENV, Store, StoreChoice,
    TransactError,
};
pub use table::{Table, TableStore};
pub use value::{AttrValue, Decimal, MAX_DIGITS, NumberError, item_size, number_size};
pub use write::{
    Change, CmpOp, Cond, Describe, IntoStaged, Item, MAX_STAGED_WRITES, Rejection, Staged, Write,
    WriteOp,
};
