//! FIFO queues: recognising them, grouping records by `MessageGroupId`, and
//! what a failure takes down with it.
//!
//! A unit is a list of records run one after another; after the first
//! failure in a unit, its later records are failed without running.
//! [`FifoFailureMode::SkipGroup`] makes each group a unit (groups run
//! concurrently); [`FifoFailureMode::StopBatch`] makes the whole batch one
//! unit. A record without `MessageGroupId` belongs to no known group, so
//! every record after it in the batch is held back.

use std::collections::HashMap;

use super::pipeline::{Slot, State};
use super::{FailureReason, FifoFailureMode, QueueKind, SqsEvent};

/// Whether the batch is processed as FIFO.
pub(super) fn is_fifo(kind: QueueKind, event: &SqsEvent) -> bool {
    match kind {
        QueueKind::Standard => false,
        QueueKind::Fifo => true,
        QueueKind::Auto => event.records.iter().any(|r| {
            r.event_source_arn
                .as_deref()
                .is_some_and(|arn| arn.ends_with(".fifo"))
        }),
    }
}

/// Fails the first record without a `MessageGroupId` and every record after
/// it (without running them): its group is unknown, so it could precede any
/// of them in its group. Records before it are unaffected.
pub(super) fn fail_after_missing_group<M>(slots: &mut [Slot<M>]) {
    let Some(at) = slots
        .iter()
        .position(|s| s.group.as_deref().is_none_or(str::is_empty))
    else {
        return;
    };
    let culprit = slots[at].ident.clone();
    if !matches!(slots[at].state, State::Failed(_)) {
        slots[at].state = State::Failed(FailureReason::NoGroupId);
    }
    for slot in &mut slots[at + 1..] {
        if !matches!(slot.state, State::Failed(_)) {
            slot.state = State::Failed(FailureReason::Skipped {
                after: culprit.clone(),
            });
        }
    }
}

/// The units of a FIFO batch, each in batch order.
pub(super) fn units<M>(slots: Vec<Slot<M>>, mode: FifoFailureMode) -> Vec<Vec<Slot<M>>> {
    if mode == FifoFailureMode::StopBatch {
        return if slots.is_empty() {
            Vec::new()
        } else {
            vec![slots]
        };
    }
    let mut units: Vec<Vec<Slot<M>>> = Vec::new();
    let mut by_group: HashMap<String, usize> = HashMap::new();
    for slot in slots {
        match slot.group.clone().filter(|g| !g.is_empty()) {
            Some(group) => {
                let unit = *by_group.entry(group).or_insert_with(|| {
                    units.push(Vec::new());
                    units.len() - 1
                });
                units[unit].push(slot);
            }
            None => units.push(vec![slot]),
        }
    }
    units
}

#[cfg(test)]
mod tests;
