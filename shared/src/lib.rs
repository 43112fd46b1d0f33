//! Idempotent AWS Lambda handlers for SQS (standard and FIFO), EventBridge
//! and HTTP APIs ([`http`]: an `Idempotency-Key` header).
//!
//! Messages arrive at least once; this crate makes their effects happen once.
//! Each message's idempotency key is claimed with one conditional write; the
//! handler runs only for the claimant; its response is recorded with a TTL and
//! replayed to duplicates.
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

/// The documentation's pages (README.md, CONTRIBUTING.md and every page of
/// `docs/`), each compiled and run as doctests: every Rust block of them
/// builds with the current API. A new page gets its line here.
#[cfg(doctest)]
mod doc_pages {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../CONTRIBUTING.md")]
    struct Contributing;
    #[doc = include_str!("../../docs/handlers.md")]
    struct Handlers;
    #[doc = include_str!("../../docs/guarantees.md")]
    struct Guarantees;
    #[doc = include_str!("../../docs/operations.md")]
    struct Operations;
    #[doc = include_str!("../../docs/cost.md")]
    struct Cost;
    #[doc = include_str!("../../docs/benchmarks.md")]
    struct Benchmarks;
    #[doc = include_str!("../../docs/sources/sqs.md")]
    struct SqsPage;
    #[doc = include_str!("../../docs/sources/eventbridge.md")]
    struct EventBridgePage;
    #[doc = include_str!("../../docs/sources/http.md")]
    struct HttpPage;
    #[doc = include_str!("../../docs/sources/kinesis.md")]
    struct KinesisPage;
    #[doc = include_str!("../../docs/sources/dynamodb-streams.md")]
    struct DynamoDbStreamsPage;
    #[doc = include_str!("../../docs/sources/kafka.md")]
    struct KafkaPage;
    #[doc = include_str!("../../docs/sources/sns.md")]
    struct SnsPage;
    #[doc = include_str!("../../docs/sources/envelopes.md")]
    struct EnvelopesPage;
    #[doc = include_str!("../../docs/stores/dynamodb.md")]
    struct DynamoDbStorePage;
    #[doc = include_str!("../../docs/stores/memory.md")]
    struct MemoryStorePage;
    #[doc = include_str!("../../docs/stores/valkey.md")]
    struct ValkeyStorePage;
    #[doc = include_str!("../../docs/stores/custom-store.md")]
    struct CustomStorePage;
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
pub mod key;
pub mod metrics;
pub mod outbox;
mod record;
#[cfg(feature = "lambda")]
pub mod runtime;
pub mod signature;
mod sources;
pub mod store;
mod table;
#[cfg(test)]
mod testkit;
pub mod value;
pub mod write;

pub use backend::Backend;
pub use batch::{KeyInput, KeySelector, MissingKey, PayloadScope, envelope, parking};
pub use config::{CommitMode, Config};
pub use engine::{Idempotency, ModeError, Outcome};
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
