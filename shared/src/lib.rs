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
//! Until it is published, another project depends on the crate by path, from
//! a checkout of this repository (the repository has no public address yet;
//! write the path to your checkout's `shared/` folder):
//!
//! ```toml
//! [dependencies]
//! lambda-idempotency = { path = "../lambda-idempotency/shared" }
//! ```
//!
//! # Quick start (in-memory store)
//!
//! ```
//! use serde_json::json;
//! use lambda_idempotency::{Config, HandlerError, Idempotency, MemoryStore, Outcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lambda_idempotency::Error> {
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

/// The package README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct PackageReadme;

/// The workspace's pages outside the guide (`README.md`, `CONTRIBUTING.md`),
/// compiled and run as doctests of this crate: one item per page, written by
/// `build.rs`. Only in the workspace (`build.rs` sets `workspace_docs`
/// there): the published package holds neither.
#[cfg(all(doctest, workspace_docs))]
#[allow(non_camel_case_types)]
mod workspace_docs {
    include!(concat!(env!("OUT_DIR"), "/workspace_docs.rs"));
}

#[cfg(any(feature = "dynamodb", feature = "ssm", feature = "parking-sqs"))]
pub mod aws;
pub mod backend;
pub mod batch;
pub mod clock;
pub mod config;
pub mod diagnostic;
mod engine;
pub mod env;
mod error;
pub mod guide;
pub mod key;
#[cfg(feature = "lambda")]
#[cfg_attr(docsrs, doc(cfg(feature = "lambda")))]
pub mod layer;
pub mod metrics;
pub mod outbox;
pub mod parking;
mod record;
#[cfg(feature = "lambda")]
pub mod runtime;
pub mod signature;
mod sources;
pub mod store;
mod table;
pub mod tenant;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod value;
pub mod write;

pub use backend::Backend;
pub use batch::{Bytes, KeyInput, KeySelector, MissingKey, PayloadKind, PayloadScope, envelope};
pub use config::{CommitMode, Config};
pub use engine::{ConfigError, Idempotency, ModeError, Outcome};
pub use error::{Error, ErrorKind, HandlerError, KeyError, StoreError, report};
pub use key::IdempotencyKey;
pub use signature::Verifier;
pub use sources::{dynamodb_streams, eventbridge, http, kafka, kinesis, sns, sqs};
#[cfg(feature = "dynamodb")]
pub use store::DynamoDbStore;
#[cfg(feature = "valkey")]
pub use store::ValkeyStore;
pub use store::{MemoryStore, Store, StoreChoice};
pub use table::Table;
pub use write::{IntoStaged, Item, Write};

#[cfg(test)]
mod testkit;
