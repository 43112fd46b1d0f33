//! The ordering policies: how a batch is cut into units, each run one
//! record after another (after a failure, the rest are
//! [`FailureReason::Skipped`]), units concurrently.

use std::collections::HashMap;

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
/// when all its records order by key ([`Within::Key`]).
fn by_lane<Rec>(slots: Vec<Slot<Rec>>) -> Vec<Vec<Slot<Rec>>> {
    group(slots, |slot| {
        slot.ids.lane.clone().filter(|g| !g.is_empty())
    })
    .into_iter()
    .flat_map(|lane| {
        let keyed = lane.len() > 1
            && lane
                .iter()
                .all(|slot| matches!(slot.ids.within, Within::Key(_)));
        if keyed {
            group(lane, |slot| match &slot.ids.within {
                Within::Key(key) => Some(key.clone()),
                Within::Lane | Within::Unknown => None,
            })
        } else {
            vec![lane]
        }
    })
    .collect()
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
