//! The batch processor's policies: queue kind and FIFO failure handling.

/// Standard or FIFO processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueKind {
    /// FIFO when a record's `eventSourceARN` ends with `.fifo`.
    #[default]
    Auto,
    /// Every record independent.
    Standard,
    /// Order kept within each `MessageGroupId`.
    Fifo,
}

/// What a failed record takes down with it on a FIFO queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FifoFailureMode {
    /// The later records of the failed record's `MessageGroupId` are failed
    /// without running; other groups go on. Groups run concurrently.
    #[default]
    SkipGroup,
    /// AWS's documented mode: at the first failure, that record and every
    /// record after it in the batch are failed without running. The batch
    /// then runs one record at a time in batch order (the mode is only exact
    /// that way), whatever the concurrency.
    StopBatch,
}
