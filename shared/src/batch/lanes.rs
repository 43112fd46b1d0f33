//! The ordering policies: how a batch is cut into units, each run one
//! record after another (after a failure, the rest are
//! [`FailureReason::Skipped`]), units concurrently; and, in a lane cut by
//! key, the [`Turn`] a record that must follow its whole lane waits for.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::delivery::{Ordering, Within};
use super::report::FailureReason;
use super::slot::{Slot, State};

/// In an ordered batch, fails the first record without a lane with
/// `no_lane` and every record after it: it could precede any of them.
pub(crate) fn fail_after_missing_lane<Rec>(
    slots: &mut [Slot<Rec>],
    ordering: Ordering,
    no_lane: FailureReason,
) {
    if !ordering.is_ordered() {
        return;
    }
    let Some(at) = slots
        .iter()
        .position(|s| s.ids.lane.as_deref().is_none_or(str::is_empty))
    else {
        return;
    };
    let culprit = slots[at].ident.clone();
    if !matches!(slots[at].state, State::Failed(_)) {
        slots[at].state = State::Failed(no_lane);
    }
    for slot in &mut slots[at + 1..] {
        if !matches!(slot.state, State::Failed(_)) {
            slot.state = State::Failed(FailureReason::Skipped {
                after: culprit.clone(),
            });
        }
    }
}

/// The units of a batch, each in batch order.
pub(crate) fn units<Rec>(slots: Vec<Slot<Rec>>, ordering: Ordering) -> Vec<Vec<Slot<Rec>>> {
    match ordering {
        Ordering::Unordered => slots.into_iter().map(|slot| vec![slot]).collect(),
        Ordering::StopBatch if slots.is_empty() => Vec::new(),
        Ordering::StopBatch => vec![slots],
        Ordering::SkipLane | Ordering::StopLane => by_lane(slots),
    }
}

/// One unit per lane (a record without one is its own), cut further by key
/// when all its records order by key ([`Within::Key`]); each record of a
/// lane cut into several units gets its [`Turn`] in the lane.
fn by_lane<Rec>(slots: Vec<Slot<Rec>>) -> Vec<Vec<Slot<Rec>>> {
    group(slots, |slot| {
        slot.ids.lane.clone().filter(|g| !g.is_empty())
    })
    .into_iter()
    .flat_map(|mut lane| {
        let keyed = lane.len() > 1
            && lane
                .iter()
                .all(|slot| matches!(slot.ids.within, Within::Key(_)));
        if !keyed {
            return vec![lane];
        }
        let progress = Arc::new(Progress::new(lane.len()));
        for (ordinal, slot) in lane.iter_mut().enumerate() {
            let progress = progress.clone();
            slot.turn = Some(Turn { progress, ordinal });
        }
        group(lane, |slot| match &slot.ids.within {
            Within::Key(key) => Some(key.clone()),
            Within::Lane | Within::Unknown => None,
        })
    })
    .collect()
}

/// A record's place in a lane cut by key into several units: every record
/// of the lane says when it is settled ([`Turn::settle`]); a record that
/// must follow the whole lane, not only its key (one run unprotected: run
/// again on every redelivery from an earlier failure of its lane), waits
/// for every earlier record of the lane ([`Turn::wait`]).
pub(crate) struct Turn {
    progress: Arc<Progress>,
    /// Its place in the lane, in batch order.
    ordinal: usize,
}

/// How far a lane cut by key has settled.
struct Progress {
    state: Mutex<Settled>,
}

struct Settled {
    /// Whether each record of the lane (by ordinal) is settled.
    done: Vec<bool>,
    /// How many of the lane's first records are all settled.
    prefix: usize,
    /// The earliest record of the lane that failed: its ordinal and name.
    first_failure: Option<(usize, String)>,
    /// The records waiting for every record before them (by ordinal).
    waiting: BTreeMap<usize, oneshot::Sender<Option<String>>>,
}

impl Progress {
    fn new(len: usize) -> Self {
        Self {
            state: Mutex::new(Settled {
                done: vec![false; len],
                prefix: 0,
                first_failure: None,
                waiting: BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Settled> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Settled {
    /// The earliest failure before `ordinal`, once all before it are settled.
    fn failure_before(&self, ordinal: usize) -> Option<String> {
        (self.first_failure.as_ref())
            .filter(|(at, _)| *at < ordinal)
            .map(|(_, ident)| ident.clone())
    }
}

impl Turn {
    /// Waits until every earlier record of the lane is settled: the first
    /// of them that failed, if any (the record then must not run).
    pub(crate) async fn wait(&self) -> Option<String> {
        let waiting = {
            let mut state = self.progress.lock();
            if state.prefix >= self.ordinal {
                return state.failure_before(self.ordinal);
            }
            let (tx, rx) = oneshot::channel();
            state.waiting.insert(self.ordinal, tx);
            rx
        };
        // The sender is dropped only with the lane, which this turn holds.
        waiting
            .await
            .unwrap_or_else(|_| Some("an earlier record of its lane".to_owned()))
    }

    /// The record is settled; `failed` names it when it failed.
    pub(crate) fn settle(&self, failed: Option<&str>) {
        let mut state = self.progress.lock();
        let state = &mut *state;
        state.done[self.ordinal] = true;
        if let Some(ident) = failed
            && state
                .first_failure
                .as_ref()
                .is_none_or(|(at, _)| self.ordinal < *at)
        {
            state.first_failure = Some((self.ordinal, ident.to_owned()));
        }
        while state.done.get(state.prefix) == Some(&true) {
            state.prefix += 1;
        }
        let later = state.waiting.split_off(&(state.prefix + 1));
        for (ordinal, tx) in std::mem::replace(&mut state.waiting, later) {
            let _ = tx.send(state.failure_before(ordinal));
        }
    }
}

/// `slots` grouped by `name` in the order names first appear; a slot
/// without a name is a group of its own.
fn group<Rec>(
    slots: Vec<Slot<Rec>>,
    name: impl Fn(&Slot<Rec>) -> Option<String>,
) -> Vec<Vec<Slot<Rec>>> {
    let mut groups: Vec<Vec<Slot<Rec>>> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for slot in slots {
        match name(&slot) {
            Some(name) => {
                let at = *by_name.entry(name).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[at].push(slot);
            }
            None => groups.push(vec![slot]),
        }
    }
    groups
}
