//! One record on its way through the pipeline ([`Slot`]): ready to run
//! ([`Ready`]) or failed, alone or linked to an in-batch duplicate.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;
use tokio::sync::watch;

use super::delivery::Ids;
use super::lanes::Turn;
use super::parking::Ticket;
use super::report::FailureReason;
use crate::engine::panic_message;
use crate::key::IdempotencyKey;

/// A record ready to run: what the handler takes, its key, what payload
/// validation hashes (the pipeline's, from a source's
/// [`Prepared`](super::Prepared)).
#[derive(Debug)]
pub(crate) struct Ready<Rec> {
    /// What the handler takes.
    pub(crate) record: Rec,
    /// Its idempotency key (`None`: it runs unprotected).
    pub(crate) key: Option<IdempotencyKey>,
    /// What payload validation hashes (`None`: nothing).
    pub(crate) payload: Option<Value>,
}

/// One record on its way through the pipeline (`Rec`: what the handler gets).
pub(crate) struct Slot<Rec> {
    pub(crate) index: usize,
    /// The id, or a description of the record when it has none.
    pub(crate) ident: String,
    pub(crate) ids: Ids,
    pub(crate) state: State<Rec>,
    pub(crate) role: Role,
    /// What the record is parked as when it fails terminally ([`Pipeline::parks`]).
    pub(crate) ticket: Option<Ticket>,
    /// Its place in its lane when the lane is cut by key into several units.
    pub(crate) turn: Option<Turn>,
}

impl<Rec> Slot<Rec> {
    /// The slot of the record at `index`, with what its preparation gave
    /// and its parking `ticket`.
    pub(crate) fn new(
        index: usize,
        ident: String,
        ids: Ids,
        prepared: Result<Ready<Rec>, FailureReason>,
        ticket: Option<Ticket>,
    ) -> Self {
        let state = match prepared {
            Ok(Ready {
                record,
                key,
                payload,
            }) => State::Ready {
                record: Box::new(record),
                key,
                payload,
            },
            Err(reason) => State::Failed(reason),
        };
        Self {
            index,
            ident,
            ids,
            state,
            role: Role::Solo,
            ticket,
            turn: None,
        }
    }
}

pub(crate) enum State<Rec> {
    Ready {
        record: Box<Rec>,
        /// `None`: run unprotected.
        key: Option<IdempotencyKey>,
        payload: Option<Value>,
    },
    Failed(FailureReason),
}

/// A record's part in in-batch deduplication.
pub(crate) enum Role {
    Solo,
    /// The first record of its key, with later copies waiting for its outcome.
    Leader(watch::Sender<Option<Shared>>),
    /// A later copy: waits for the first one and takes its outcome.
    Follower {
        first: String,
        outcome: watch::Receiver<Option<Shared>>,
    },
}

/// A first copy's outcome as its in-batch duplicates receive it.
#[derive(Clone)]
pub(crate) enum Shared {
    Done(Option<Value>),
    Rejected(String),
    Failed(FailureReason),
}

/// Runs `f`, turning a panic into its message.
pub(crate) fn guard<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| panic_message(&*panic))
}
