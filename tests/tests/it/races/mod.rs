//! Races: several instances or concurrent invocations over the same keys —
//! hot items meeting `TransactionConflict`, and one process serving several
//! invocations at once (Lambda Managed Instances). Duplicates have one
//! effect, and a conflict is never taken for a duplicate. (Processors racing
//! over overlapping batches: `faults::store` and `exactly_once::batch`.)

mod hot_items;
mod managed_instances;
