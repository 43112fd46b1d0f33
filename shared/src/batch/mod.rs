//! The source-neutral batch core: one delivery model ([`Delivery`]), one
//! pipeline ([`Pipeline`]) and one processor ([`Processor`]) for every batch
//! source. A source implements [`Delivery`] for its record, [`Source`] and
//! [`Prepare`] (in its folder under `shared/src/sources/`, CONTRIBUTING.md,
//! "Add a source", or in a crate of its own: all it needs is public here);
//! keys come from a
//! [`KeySelector`], failures are [`FailureReason`]s, and a [`BatchReport`]
//! builds any source's [`PartialResponse`]. What it guarantees:
//! `docs/guarantees.md`.

pub(crate) mod delivery;
pub mod envelope;
mod hook;
pub(crate) mod key;
pub(crate) mod lanes;
mod log;
pub(crate) mod malformed;
pub mod parking;
pub mod payload;
pub(crate) mod pipeline;
mod processor;
pub(crate) mod report;
pub(crate) mod settings;
mod slot;
mod source;
pub mod whole;

pub use delivery::{AsAny, Attribute, Delivery, IdField, Ordering, SourceNames, Within};
pub use hook::{BatchHook, Planned};
pub use key::{KeyFn, KeyInput, KeySelector, MissingKey, PayloadScope};
pub use malformed::{MalformedRecord, Salvage, StreamEvent, parse_stream};
pub use payload::{Bytes, PayloadKind};
pub use pipeline::Pipeline;
pub use processor::{Parks, Processor};
pub(crate) use report::json_type;
pub use report::{BatchError, BatchReport, FailureReason, PartialResponse, RecordResult};
#[cfg(feature = "lambda")]
pub(crate) use settings::remaining_now;
pub use settings::{
    DEFAULT_CONCURRENCY, DEFAULT_DEADLINE_MARGIN, PreRead, RecordLogs, UnprotectedOrder,
};
pub use source::{Answer, Keyed, Prepare, Prepared, Preparing, Reading, Source};
pub use whole::Unfinished;

#[cfg(test)]
mod tests;
