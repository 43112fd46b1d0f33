//! The idempotency record: one item per key.

/// Record status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Claimed by an invocation that has not finished.
    InProgress,
    /// Finished: the stored outcome is replayed to duplicates.
    Completed,
}

impl Status {
    /// The stored text (`INPROGRESS` / `COMPLETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "INPROGRESS",
            Status::Completed => "COMPLETED",
        }
    }

    /// Parses the stored text.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "INPROGRESS" => Some(Status::InProgress),
            "COMPLETED" => Some(Status::Completed),
            _ => None,
        }
    }
}

/// One idempotency record as the stores read and write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `<prefix>#<sha256 hex>`.
    pub id: String,
    /// In progress or completed.
    pub status: Status,
    /// Record expiry, epoch **seconds** (the TTL attribute).
    pub expiration: u64,
    /// Lease expiry, epoch **milliseconds**, while in progress.
    pub in_progress_expiration: Option<u64>,
    /// Stored response (JSON text), when kept.
    pub data: Option<String>,
    /// Recorded terminal error message, when the outcome was a rejection.
    pub error: Option<String>,
    /// Payload hash, when payload validation is on.
    pub validation: Option<String>,
    /// Owner token of the invocation that wrote the record.
    pub owner: Option<String>,
    /// Messages to publish (JSON array of [`outbox::Entry`]), committed
    /// with the completion and published by the relay from the stream.
    ///
    /// [`outbox::Entry`]: crate::outbox::Entry
    pub outbox: Option<String>,
}

impl Record {
    /// Whether the record has passed its TTL at `now_ms` (`expiration < now`,
    /// compared in whole seconds as the claim condition does).
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expiration < now_ms / 1000
    }

    /// Whether this is an in-progress record whose lease lapsed at `now_ms`.
    pub fn lease_lapsed(&self, now_ms: u64) -> bool {
        self.status == Status::InProgress && self.in_progress_expiration.is_some_and(|t| t < now_ms)
    }

    /// Whether a new claim may replace this record at `now_ms`: exactly the
    /// claim condition minus `attribute_not_exists`.
    pub fn is_claimable(&self, now_ms: u64) -> bool {
        self.is_expired(now_ms) || self.lease_lapsed(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(status: Status, expiration: u64, lease: Option<u64>) -> Record {
        Record {
            id: "p#h".into(),
            status,
            expiration,
            in_progress_expiration: lease,
            data: None,
            error: None,
            validation: None,
            owner: Some("o".into()),
            outbox: None,
        }
    }

    #[test]
    fn expiry_compares_seconds() {
        let r = rec(Status::Completed, 100, None);
        assert!(!r.is_expired(100_999));
        assert!(r.is_expired(101_000));
        assert!(r.is_claimable(101_000));
    }

    #[test]
    fn lease_only_counts_while_in_progress() {
        let r = rec(Status::InProgress, 1_000, Some(5_000));
        assert!(!r.lease_lapsed(5_000));
        assert!(r.lease_lapsed(5_001));
        let done = rec(Status::Completed, 1_000, Some(5_000));
        assert!(!done.lease_lapsed(9_000));
        assert!(!done.is_claimable(9_000));
    }

    #[test]
    fn status_round_trips() {
        for s in [Status::InProgress, Status::Completed] {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("EXPIRED"), None);
    }
}
