//! FIFO queues: recognising them. Grouping by `MessageGroupId` and what a
//! failure takes down are the core's ordering policies
//! ([`Ordering::SkipLane`], [`Ordering::StopBatch`]).

use super::{FifoFailureMode, QueueKind, SqsStreamEvent};
use crate::batch::Ordering;

/// Whether the batch is processed as FIFO.
pub(super) fn is_fifo(kind: QueueKind, event: &SqsStreamEvent) -> bool {
    match kind {
        QueueKind::Standard => false,
        QueueKind::Fifo => true,
        QueueKind::Auto => event.records.iter().any(|r| {
            let arn = match r {
                Ok(message) => message.event_source_arn.as_deref(),
                Err(malformed) => malformed.event_source_arn.as_deref(),
            };
            arn.is_some_and(|arn| arn.ends_with(".fifo"))
        }),
    }
}

/// The ordering policy of a batch.
pub(super) fn ordering(fifo: bool, mode: FifoFailureMode) -> Ordering {
    match (fifo, mode) {
        (false, _) => Ordering::Unordered,
        (true, FifoFailureMode::SkipGroup) => Ordering::SkipLane,
        (true, FifoFailureMode::StopBatch) => Ordering::StopBatch,
    }
}

#[cfg(test)]
mod tests;
