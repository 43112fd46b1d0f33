//! A store that injects faults into the requests it passes to another
//! store: errors, lost answers, delays and requests held until a test lets
//! them go.

use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

use crate::error::StoreError;
use crate::store::{Claim, Commit, CommitsError, Record, RecordWrite, Store, TransactError};
use crate::write::Write;

/// A request of the [`Store`] trait a fault is injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// [`Store::claim`].
    Claim,
    /// [`Store::commit`]: a record's commit, with or without staged writes.
    Commit,
    /// [`Store::commit_many`]: a batch's commits in one transaction (sent
    /// only to a store that commits batches).
    CommitMany,
    /// [`Store::release`].
    Release,
    /// [`Store::get_many`] and [`Store::get`].
    Read,
}

impl Op {
    /// The request's name in errors (`claim`, `commit`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Claim => "claim",
            Self::Commit => "commit",
            Self::CommitMany => "commit_many",
            Self::Release => "release",
            Self::Read => "read",
        }
    }
}

/// What happens to a request a fault is injected into.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Fault {
    /// The request fails before it reaches the store (throttled): nothing
    /// is written, the caller gets [`StoreError::Backend`].
    Error,
    /// The request reaches the store and is applied, then its answer is
    /// lost (a timeout): the write happened but the caller gets
    /// [`StoreError::Backend`].
    LostAnswer,
    /// The request waits this long, then goes on as usual (a slow store).
    Delay(Duration),
    /// The request waits until the [`Gate`] is opened, then goes on as
    /// usual: a test acts while a request is inside the store.
    Hold(Gate),
}

/// Where [`Fault::Hold`] holds a request: the test waits until a request
/// [`reached`](Gate::reached) it, acts, then [`open`](Gate::open)s it.
/// Clones share the gate.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    reached: Arc<Notify>,
    open: Arc<Notify>,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits until a request is held at the gate (returns at once when one
    /// already arrived).
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets the held request go (or, when none is held yet, the next one
    /// that arrives).
    pub fn open(&self) {
        self.open.notify_one();
    }

    async fn hold(&self) {
        self.reached.notify_one();
        self.open.notified().await;
    }
}

#[derive(Debug)]
struct Rule {
    op: Op,
    fault: Fault,
    /// Requests left to inject into (`None`: every one).
    left: Option<usize>,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    seen: HashMap<Op, usize>,
    injected: HashMap<Op, usize>,
}

/// A [`Store`] over `S` that injects [`Fault`]s into the requests it is
/// told to, and counts what it receives. Clones share the rules and counts
/// (give the engine one clone, keep one to inject and observe).
///
/// The rules are taken in the order they were added: a request of an
/// [`Op`] meets the first rule of its op with requests left, which counts
/// one down.
///
/// ```
/// # use lambda_idempotency::{MemoryStore, Store};
/// use lambda_idempotency::testing::{Fault, FaultStore, Op};
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store = FaultStore::new(MemoryStore::new());
/// store.inject(Op::Read, Fault::Error);
/// assert!(store.get("k").await.is_err(), "the first read fails");
/// assert!(store.get("k").await.unwrap().is_none(), "the next one reads");
/// assert_eq!((store.seen(Op::Read), store.injected(Op::Read)), (2, 1));
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct FaultStore<S> {
    inner: S,
    state: Arc<Mutex<State>>,
}

impl<S: Store> FaultStore<S> {
    /// `inner` with no faults yet.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            state: Arc::default(),
        }
    }

    /// The store the requests go to.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Injects `fault` into the next request of `op`.
    pub fn inject(&self, op: Op, fault: Fault) -> &Self {
        self.inject_times(op, fault, 1)
    }

    /// Injects `fault` into the next `times` requests of `op`.
    pub fn inject_times(&self, op: Op, fault: Fault, times: usize) -> &Self {
        self.state().rules.push(Rule {
            op,
            fault,
            left: Some(times),
        });
        self
    }

    /// Injects `fault` into every request of `op` from now on (until
    /// [`FaultStore::clear`]).
    pub fn inject_always(&self, op: Op, fault: Fault) -> &Self {
        self.state().rules.push(Rule {
            op,
            fault,
            left: None,
        });
        self
    }

    /// Removes every rule not used up yet.
    pub fn clear(&self) {
        self.state().rules.clear();
    }

    /// Requests of `op` received so far, faulted or not.
    pub fn seen(&self, op: Op) -> usize {
        self.state().seen.get(&op).copied().unwrap_or(0)
    }

    /// Requests of `op` a fault was injected into so far.
    pub fn injected(&self, op: Op) -> usize {
        self.state().injected.get(&op).copied().unwrap_or(0)
    }

    /// Counts a request of `op` and takes the fault it meets, if any.
    fn take(&self, op: Op) -> Option<Fault> {
        let mut state = self.state();
        *state.seen.entry(op).or_default() += 1;
        let rule = state
            .rules
            .iter_mut()
            .find(|r| r.op == op && r.left != Some(0))?;
        if let Some(left) = &mut rule.left {
            *left -= 1;
        }
        let fault = rule.fault.clone();
        *state.injected.entry(op).or_default() += 1;
        Some(fault)
    }

    /// Runs `request` under the fault `op` meets.
    async fn run<T, E>(
        &self,
        op: Op,
        request: impl Future<Output = Result<T, E>>,
        error: impl FnOnce(StoreError) -> E,
    ) -> Result<T, E> {
        let failure = |what: &str| StoreError::Backend {
            operation: op.name(),
            source: format!("injected fault: {what}").into(),
        };
        match self.take(op) {
            None => request.await,
            Some(Fault::Error) => Err(error(failure("ThrottlingException, nothing applied"))),
            Some(Fault::LostAnswer) => {
                // Applied or refused as the store decides; the caller
                // hears neither.
                let _applied = request.await;
                Err(error(failure(
                    "the request was sent and its answer lost (timeout)",
                )))
            }
            Some(Fault::Delay(delay)) => {
                tokio::time::sleep(delay).await;
                request.await
            }
            Some(Fault::Hold(gate)) => {
                gate.hold().await;
                request.await
            }
        }
    }
}

#[async_trait]
impl<S: Store> Store for FaultStore<S> {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        self.run(Op::Claim, self.inner.claim(record, now_ms), |e| e)
            .await
    }

    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        self.run(
            Op::Commit,
            self.inner.commit(record, writes),
            TransactError::Store,
        )
        .await
    }

    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        self.run(Op::Release, self.inner.release(id, owner), |e| e)
            .await
    }

    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        self.run(Op::Read, self.inner.get_many(ids), |e| e).await
    }

    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        self.run(Op::Read, self.inner.get(id), |e| e).await
    }

    fn item_size(&self, record: &Record) -> usize {
        self.inner.item_size(record)
    }

    fn transactions(&self) -> bool {
        self.inner.transactions()
    }

    async fn commit_many(&self, commits: &[Commit<'_>]) -> Result<(), CommitsError> {
        self.run(Op::CommitMany, self.inner.commit_many(commits), |e| {
            CommitsError::Transaction(TransactError::Store(e))
        })
        .await
    }
}
