//! The per-record log line and the metric counts, for every source alike.

use tracing::Level;

use crate::engine::Outcome;
use crate::metrics::Counts;

/// What the log line and the counts need to know of a source's failure
/// (the defaults are a batch record's).
pub(crate) trait Failure {
    /// Another invocation holds the key.
    fn in_progress(&self) -> bool;
    /// Part of normal operation (logged as a warning, not an error).
    fn expected(&self) -> bool;
    /// Whether a redelivery can succeed, when the source knows.
    fn retryable(&self) -> Option<bool> {
        None
    }
    /// What happens next, for the log line.
    fn next(&self) -> &'static str {
        "it will be delivered again"
    }
    /// The failure with its causes, for the log line.
    fn describe(&self) -> String;
}

/// A unit's id and lane in their log fields: the fields of their own
/// (`message_id`, `event_id`, `sequence_number`, `offset`; `group`,
/// `shard`, `partition`) or, for a name of a source's own, `id_field` and
/// `id` (`lane_field` and `lane`). At most one of each set.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fields<'a> {
    pub(crate) message_id: Option<&'a str>,
    pub(crate) event_id: Option<&'a str>,
    pub(crate) sequence_number: Option<&'a str>,
    pub(crate) offset: Option<&'a str>,
    pub(crate) id_field: Option<&'static str>,
    pub(crate) id: Option<&'a str>,
    pub(crate) group: Option<&'a str>,
    pub(crate) shard: Option<&'a str>,
    pub(crate) partition: Option<&'a str>,
    pub(crate) lane_field: Option<&'static str>,
    pub(crate) lane: Option<&'a str>,
}

/// One record, event or request, as its log line names it.
#[derive(Debug)]
pub(crate) struct Unit<'a> {
    /// `record`, `event` or `request`.
    pub(crate) noun: &'static str,
    /// Its id ([`Delivery::id`]; or a description of a record without one).
    pub(crate) id: Option<&'a str>,
    /// The log field of `id` ([`SourceNames::id_field`]).
    pub(crate) id_field: &'static str,
    /// Its ordering lane ([`Delivery::lane`]).
    pub(crate) lane: Option<&'a str>,
    /// The log field of `lane` ([`SourceNames::lane_field`]).
    pub(crate) lane_field: &'static str,
    /// The key's hash (the key itself is never logged).
    pub(crate) key: Option<&'a str>,
    /// The first copy of an in-batch duplicate.
    pub(crate) duplicate_of: Option<&'a str>,
    /// The invocation's tenant (Lambda's tenant isolation mode).
    pub(crate) tenant: Option<&'a str>,
}

impl Default for Unit<'_> {
    fn default() -> Self {
        Self {
            noun: "",
            id: None,
            id_field: "message_id",
            lane: None,
            lane_field: "group",
            key: None,
            duplicate_of: None,
            tenant: None,
        }
    }
}

impl<'a> Unit<'a> {
    /// The `noun` whose id `id` goes to its log field `id_field`.
    pub(crate) fn new(noun: &'static str, id: &'a str, id_field: impl Into<&'static str>) -> Self {
        Self {
            noun,
            id: Some(id),
            id_field: id_field.into(),
            ..Self::default()
        }
    }

    /// Its id and lane in their log fields.
    pub(crate) fn fields(&self) -> Fields<'a> {
        let mut f = Fields::default();
        match self.id_field {
            "message_id" => f.message_id = self.id,
            "event_id" => f.event_id = self.id,
            "sequence_number" => f.sequence_number = self.id,
            "offset" => f.offset = self.id,
            name => (f.id_field, f.id) = (self.id.map(|_| name), self.id),
        }
        match self.lane_field {
            "group" => f.group = self.lane,
            "shard" => f.shard = self.lane,
            "partition" => f.partition = self.lane,
            name => (f.lane_field, f.lane) = (self.lane.map(|_| name), self.lane),
        }
        f
    }
}

/// Adds one outcome to `counts`.
pub(crate) fn count<T, F: Failure>(counts: &mut Counts, outcome: Result<&Outcome<T>, &F>) {
    match outcome {
        Ok(Outcome::Executed(_) | Outcome::Unprotected(_)) => counts.processed += 1,
        Ok(Outcome::Replayed(_) | Outcome::Rejected { replayed: true, .. }) => counts.replayed += 1,
        Ok(Outcome::Rejected { .. }) => counts.rejected += 1,
        Ok(Outcome::Parked { .. }) => counts.parked += 1,
        Ok(Outcome::InProgress { .. }) => {
            counts.in_progress += 1;
            counts.failed += 1;
        }
        Ok(Outcome::PayloadMismatch) => counts.failed += 1,
        Err(failure) => {
            counts.failed += 1;
            if failure.in_progress() {
                counts.in_progress += 1;
            }
        }
    }
}

/// One log line per record or event; the key appears only as its hash. One
/// set of fields for every source and outcome (a field without a value is
/// left out); the level says how it ended.
pub(crate) fn log_outcome<T, F: Failure>(
    unit: &Unit<'_>,
    outcome: Result<&Outcome<T>, &F>,
    latency_ms: u64,
) {
    let Unit {
        noun,
        key,
        duplicate_of,
        tenant,
        ..
    } = *unit;
    let Fields {
        message_id,
        event_id,
        sequence_number,
        offset,
        id_field,
        id,
        group,
        shard,
        partition,
        lane_field,
        lane,
    } = unit.fields();
    let (mut replayed, mut parked_id, mut retryable, mut error) = (None, None, None, None);
    // The message is `{before}{noun}{after}{tail}`.
    let (level, before, after, tail) = match outcome {
        Ok(Outcome::Executed(_)) => (Level::INFO, "", " executed", ""),
        Ok(Outcome::Replayed(_)) => (
            Level::INFO,
            "duplicate ",
            ": the stored outcome is replayed, the handler did not run",
            "",
        ),
        Ok(Outcome::Rejected {
            error: e,
            replayed: r,
        }) => {
            (replayed, error) = (Some(*r), Some(e.clone()));
            let after = " rejected with a recorded terminal error (done, not retried)";
            (Level::WARN, "", after, "")
        }
        Ok(Outcome::Parked { id, reason }) => {
            (parked_id, error) = (Some(id.as_str()), Some(reason.clone()));
            let after = " can never succeed: parked (done, its lane goes on)";
            (Level::WARN, "", after, "")
        }
        Ok(Outcome::Unprotected(_)) => (
            Level::WARN,
            "",
            " executed without idempotency protection",
            "",
        ),
        Ok(_) => (Level::WARN, "", " not done", ""),
        Err(failure) => {
            (retryable, error) = (failure.retryable(), Some(failure.describe()));
            let level = if failure.expected() {
                Level::WARN
            } else {
                Level::ERROR
            };
            (level, "", " failed; ", failure.next())
        }
    };
    let label = outcome.map_or("failed", Outcome::label);
    let error = error.as_deref();
    macro_rules! line {
        ($level:ident) => {
            tracing::$level!(
                message_id,
                event_id,
                sequence_number,
                offset,
                id_field,
                id,
                group,
                shard,
                partition,
                lane_field,
                lane,
                tenant,
                key,
                duplicate_of,
                outcome = label,
                replayed,
                parked_id,
                retryable,
                error,
                latency_ms,
                "{before}{noun}{after}{tail}"
            )
        };
    }
    match level {
        Level::INFO => line!(info),
        Level::WARN => line!(warn),
        _ => line!(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::IdField;

    #[test]
    fn the_log_fields_of_the_shipped_sources_are_unchanged() {
        let unit = Unit {
            lane: Some("shardId-000000000000"),
            lane_field: "shard",
            ..Unit::new("record", "4959", "sequence_number")
        };
        let f = unit.fields();
        assert_eq!(f.sequence_number, Some("4959"));
        assert_eq!(f.shard, Some("shardId-000000000000"));
        let others = [
            f.message_id,
            f.event_id,
            f.offset,
            f.id,
            f.group,
            f.partition,
        ];
        assert_eq!(others, [None; 6]);
        assert_eq!((f.id_field, f.lane_field, f.lane), (None, None, None));
        let f = Unit::new("event", "e-1", IdField::EventId).fields();
        assert_eq!((f.event_id, f.message_id), (Some("e-1"), None));
        // A request has no id field of its own: `message_id`, as before.
        let unit = Unit {
            id: Some("req-1"),
            ..Unit::default()
        };
        assert_eq!(unit.fields().message_id, Some("req-1"));
    }

    #[test]
    fn a_source_of_its_own_names_its_own_log_fields() {
        let unit = Unit {
            lane: Some("orders"),
            lane_field: "queue",
            ..Unit::new("record", "ID:b-1:1:1:1", "mq_message_id")
        };
        let f = unit.fields();
        assert_eq!(
            (f.id_field, f.id),
            (Some("mq_message_id"), Some("ID:b-1:1:1:1"))
        );
        assert_eq!((f.lane_field, f.lane), (Some("queue"), Some("orders")));
        assert_eq!([f.message_id, f.group, f.shard, f.partition], [None; 4]);
        // Without a lane, no lane field either.
        let f = Unit::new("record", "m", "mq_message_id").fields();
        assert_eq!((f.lane_field, f.lane), (None, None));
    }
}
