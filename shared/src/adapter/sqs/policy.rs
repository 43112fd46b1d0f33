//! The batch processor's policies: queue kind, FIFO failure handling,
//! EventBridge envelopes and SNS notifications in bodies.

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

/// Whether record bodies are envelopes: EventBridge events (a rule whose
/// target is the queue) or SNS notifications (a queue subscribed to a
/// topic with raw message delivery off). The handler gets the event's
/// `detail` or the notification's parsed `Message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvelopeMode {
    /// An EventBridge envelope when the body is an object with string
    /// `detail-type` and `source` and a `detail`; an SNS notification when
    /// it is an object with `Type` `Notification` and string `MessageId`,
    /// `TopicArn` and `Message`.
    #[default]
    Auto,
    /// Bodies are never envelopes.
    Never,
    /// Bodies must be envelopes (of either kind); any other body fails its
    /// record.
    Required,
}
