//! The whole-batch answer, for every source without a partial response
//! (SNS and EventBridge invoking the function, Kafka's fail-batch mode, the
//! tower layer): the invocation succeeds when every record is done, else it
//! fails ([`Unfinished`]) so that Lambda delivers the batch again, and the
//! records that were done replay.

use std::future::Future;
use std::sync::Mutex;

use futures_util::future::{Either, Ready, ready};

use super::report::{BatchReport, FailureReason};
use crate::engine::Outcome;
use crate::error::{ErrorType, HandlerError, UNCLASSIFIED};

/// A batch answered whole had records not done: return it from the
/// function so that Lambda delivers the batch (the event) again. Its
/// `errorType` is its reason's ([`FailureReason`]'s `ErrorType`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unfinished {
    /// Records failed, or were skipped behind a failure.
    #[error(
        "{} not done ({}): {message_id} failed: {reason}; failing the invocation so that Lambda \
         delivers it again{}",
        count(*failed),
        shown(.records),
        then(reason)
    )]
    Failed {
        /// The first record that failed (not one skipped behind a failure):
        /// its id (an SNS `MessageId`, an EventBridge event `id`, a Kafka
        /// `<topic-partition>@<offset>`) or a description of a record
        /// without one.
        message_id: String,
        /// Why it failed.
        reason: FailureReason,
        /// How many of the event's records are not done.
        failed: usize,
        /// Every record not done, in batch order (as `message_id`).
        records: Vec<String>,
    },
}

fn count(failed: usize) -> String {
    match failed {
        1 => "1 record".to_owned(),
        n => format!("{n} records"),
    }
}

fn shown(records: &[String]) -> String {
    let text = records[..records.len().min(20)].join(", ");
    match records.len().saturating_sub(20) {
        0 => text,
        more => format!("{text} and {more} more"),
    }
}

fn then(reason: &FailureReason) -> &'static str {
    if reason.is_terminal() {
        " (permanent: after Lambda's retries it goes to the DLQ or on-failure destination)"
    } else {
        ""
    }
}

impl Unfinished {
    /// The first failed record's reason.
    pub fn reason(&self) -> &FailureReason {
        let Self::Failed { reason, .. } = self;
        reason
    }

    /// Whether a redelivery can succeed (the reason is not
    /// [terminal](FailureReason::is_terminal)).
    pub fn is_retryable(&self) -> bool {
        !self.reason().is_terminal()
    }
}

impl ErrorType for Unfinished {
    fn error_type(&self) -> &'static str {
        self.reason().error_type()
    }
}

impl ErrorType for FailureReason {
    fn error_type(&self) -> &'static str {
        match self {
            Self::Parse(_)
            | Self::NotAccepted(_)
            | Self::BodyTooLarge { .. }
            | Self::BadSignature(_) => "InvalidEvent",
            Self::Key(_) => "InvalidKey",
            Self::InProgress { .. } => "InProgress",
            Self::PayloadMismatch => "PayloadMismatch",
            Self::Handler { .. } if self.is_terminal() => "HandlerRejected",
            Self::Handler { .. } => "HandlerFailed",
            Self::Store(_) => "StoreUnavailable",
            Self::DuplicateOf { reason, .. } => reason.error_type(),
            _ => UNCLASSIFIED,
        }
    }
}

/// The whole-batch answer to `report`: `Ok` when every record is done, else
/// [`Unfinished::Failed`], naming the first record that failed (not one
/// skipped behind a failure) and every record not done.
pub fn answer<T>(report: &BatchReport<T>) -> Result<(), Unfinished> {
    let (mut records, mut first) = (Vec::new(), None);
    for r in report.failures() {
        let id = r.message_id.clone().filter(|id| !id.is_empty());
        let id = id.unwrap_or_else(|| format!("record #{} (no {})", r.position, report.id_name()));
        if let Err(reason) = &r.outcome {
            let skipped = matches!(reason, FailureReason::Skipped { .. });
            match &first {
                None => first = Some((id.clone(), reason, skipped)),
                Some((_, _, true)) if !skipped => first = Some((id.clone(), reason, false)),
                _ => {}
            }
        }
        records.push(id);
    }
    let Some((message_id, reason, _)) = first else {
        return Ok(());
    };
    Err(Unfinished::Failed {
        message_id,
        reason: reason.clone(),
        failed: records.len(),
        records,
    })
}

/// The outcome of a one-record event (EventBridge, the tower layer): the
/// record's, or [`answer`]'s error.
pub fn single<T>(report: BatchReport<T>) -> Result<Outcome<T>, Unfinished> {
    answer(&report)?;
    let outcome = report.records.into_iter().next().map(|r| r.outcome);
    match outcome {
        Some(Ok(outcome)) => Ok(outcome),
        _ => Err(Unfinished::Failed {
            message_id: "(no record)".to_owned(),
            reason: FailureReason::Idempotency("the event held no record".to_owned()),
            failed: 1,
            records: vec!["(no record)".to_owned()],
        }),
    }
}

/// A handler that runs at most once, for the one record of an event: the
/// pipeline takes `Fn`, a one-record source's caller may hand an `FnOnce`.
/// A second call (never made for one record) fails, retryable.
pub(crate) fn once<A, R, H, Fut>(
    handler: H,
) -> impl Fn(A) -> Either<Fut, Ready<Result<R, HandlerError>>>
where
    H: FnOnce(A) -> Fut,
    Fut: Future<Output = Result<R, HandlerError>>,
{
    let cell = Mutex::new(Some(handler));
    move |record| {
        let handler = cell.lock().map(|mut h| h.take()).ok().flatten();
        match handler {
            Some(handler) => Either::Left(handler(record)),
            None => Either::Right(ready(Err(HandlerError::retryable(
                "the handler of a one-record event was called twice",
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::delivery::{Ordering, SourceNames};
    use crate::batch::report::RecordResult;
    use crate::error::ErrorKind;

    static NAMES: SourceNames = SourceNames {
        id: "offset",
        id_field: "offset",
        lane_field: "partition",
        deduplication_id: "none",
        no_lane: "no lane",
    };

    fn record(
        position: usize,
        id: Option<&str>,
        outcome: Result<Outcome<()>, FailureReason>,
    ) -> RecordResult<()> {
        RecordResult {
            position,
            message_id: id.map(str::to_owned),
            lane: None,
            key_hash: None,
            outcome,
        }
    }

    /// The answer names the first record that failed, not one skipped
    /// behind it, and every record not done, in batch order.
    #[test]
    fn the_first_failure_not_skipped_is_named() {
        let handler = FailureReason::Handler {
            message: "down".into(),
            kind: ErrorKind::Retryable,
        };
        let skipped = FailureReason::Skipped {
            after: "p@1".into(),
        };
        let report = BatchReport::new(
            vec![
                record(0, Some("p@0"), Ok(Outcome::Executed(()))),
                record(1, Some("p@2"), Err(skipped)),
                record(2, None, Err(handler.clone())),
            ],
            Ordering::StopLane,
            &NAMES,
        );
        let err = answer(&report).unwrap_err();
        assert_eq!(
            err,
            Unfinished::Failed {
                message_id: "record #2 (no offset)".into(),
                reason: handler,
                failed: 2,
                records: vec!["p@2".into(), "record #2 (no offset)".into()],
            }
        );
        assert!(err.is_retryable());
        assert_eq!(crate::diagnostic::error_type(&err), "HandlerFailed");
        assert!(
            err.to_string()
                .starts_with("2 records not done (p@2, record #2 (no offset))")
        );
        let done = BatchReport::new(
            vec![record(0, Some("p@0"), Ok(Outcome::Executed(())))],
            Ordering::StopLane,
            &NAMES,
        );
        assert_eq!(answer(&done), Ok(()));
        assert_eq!(single(done), Ok(Outcome::Executed(())));
    }

    /// A one-record event's handler runs once; a second call fails.
    #[tokio::test]
    async fn once_runs_the_handler_once() {
        let handler = once(|n: u32| async move { Ok::<_, HandlerError>(n + 1) });
        assert_eq!(handler(1).await.unwrap(), 2);
        assert!(handler(1).await.is_err());
    }
}
