//! [`BatchHook`]: a batch handled as one, not record by record. The hook
//! plans the batch once, before its records run
//! ([`BatchHook::plan`]), sends what the plan holds
//! ([`BatchHook::flush`], before the processor's deadline margin), then
//! settles each record ([`BatchHook::settle`]); the processor does the rest
//! as for any handler: the order records keep, the skip behind a failure,
//! the log lines, the metric counts and the partial batch response.
//! The outbox relay (`functions/outbox-relay`) is one: a batch's messages
//! go out in as few requests as their targets take, and a record is done
//! when every one of its messages is.

use std::future::Future;
use std::time::{Duration, Instant};

use super::key::{KeySelector, PayloadScope};
use super::processor::Processor;
use super::report::{BatchReport, FailureReason};
use super::settings::margin;
use super::slot::{Ready, Slot, State};
use super::source::{Prepare, Source};
use crate::config::Config;
use crate::engine::Idempotency;
use crate::error::HandlerError;
use crate::store::MemoryStore;

/// One record of a batch as a [`BatchHook`] plans it: prepared by its
/// source (the handler's record type: a `DynamoDbRecord`, an
/// `SqsRecord<M>`, ...), or why it could not be.
#[derive(Debug)]
#[non_exhaustive]
pub struct Planned<Rec> {
    /// Its position in the batch: what [`BatchHook::settle`] is called with.
    pub index: usize,
    /// Its id in the source (an SQS `messageId`, a stream's
    /// `SequenceNumber`, ...), when it has one.
    pub id: Option<String>,
    /// The record, or why it could not be prepared (it does not parse, an
    /// image does not convert, it has no lane or no usable key).
    pub record: Result<Rec, FailureReason>,
}

impl<Rec> Planned<Rec> {
    /// The record at `index` with its `id`, prepared or not (a hook's own
    /// tests).
    pub fn new(index: usize, id: Option<String>, record: Result<Rec, FailureReason>) -> Self {
        Self { index, id, record }
    }
}

/// A batch handled as one ([`Processor::process_hooked`]): planned once
/// before its records run, its work sent, then each record settled.
///
/// The records run without idempotency (no key, no store): what a hook
/// does must be safe to do again, as the outbox relay's publications are
/// under their stable ids. Each record's outcome is
/// [`settle`](Self::settle)'s: `Ok` is done, an `Err` fails the record,
/// and the source's ordering applies as to any failure (a stream retries
/// its shard from the first failed record; the later records of its unit
/// are skipped).
///
/// ```
/// use std::sync::Mutex;
/// use lambda_idempotency::batch::{BatchHook, FailureReason, Planned};
/// use lambda_idempotency::sqs::{SqsProcessor, SqsRecord};
/// use serde_json::{Value, json};
///
/// /// Sums the batch's numbers and "sends" the sum once.
/// #[derive(Default)]
/// struct Sum(Mutex<Vec<u64>>);
///
/// struct Plan {
///     sum: u64,
///     /// The records with no number, and why.
///     bad: Vec<(usize, FailureReason)>,
/// }
///
/// impl BatchHook<SqsRecord<Value>> for Sum {
///     type Plan = Plan;
///
///     fn plan(&self, records: Vec<Planned<SqsRecord<Value>>>) -> Plan {
///         let mut plan = Plan { sum: 0, bad: Vec::new() };
///         for planned in records {
///             match planned.record.map(|r| r.body["n"].as_u64()) {
///                 Ok(Some(n)) => plan.sum += n,
///                 Ok(None) => plan.bad.push((planned.index, FailureReason::Parse("no n".into()))),
///                 Err(reason) => plan.bad.push((planned.index, reason)),
///             }
///         }
///         plan
///     }
///
///     async fn flush(&self, plan: &Plan, _cutoff: Option<std::time::Instant>) {
///         self.0.lock().unwrap().push(plan.sum); // one request for the batch
///     }
///
///     fn settle(&self, plan: &Plan, index: usize) -> Result<(), FailureReason> {
///         match plan.bad.iter().find(|(i, _)| *i == index) {
///             Some((_, reason)) => Err(reason.clone()),
///             None => Ok(()),
///         }
///     }
/// }
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() {
///     let message = |id: &str, body: Value| {
///         json!({"messageId": id, "body": body.to_string(), "eventSource": "aws:sqs"})
///     };
///     let event = json!({"Records": [
///         message("m1", json!({"n": 2})),
///         message("m2", json!({"n": 3})),
///         message("m3", json!({"text": "no number"})),
///     ]});
///     let processor = SqsProcessor::plain();
///     let event = lambda_idempotency::sqs::parse_sqs_event(event).unwrap();
///     let hook = Sum::default();
///     let (report, plan) = processor.process_hooked(event, None, &hook).await;
///     assert_eq!(*hook.0.lock().unwrap(), [5], "one send for the batch");
///     assert_eq!(plan.sum, 5);
///     let response = processor.response(&report).unwrap();
///     assert_eq!(response.batch_item_failures.len(), 1);
///     assert_eq!(response.batch_item_failures[0].item_identifier, "m3");
/// }
/// ```
pub trait BatchHook<Rec>: Send + Sync {
    /// What the hook knows of one batch: built by [`plan`](Self::plan),
    /// read by [`flush`](Self::flush) and [`settle`](Self::settle), and
    /// handed back with the batch's report.
    type Plan: Send + Sync;

    /// Plans a batch from its records, in batch order, before any of them
    /// runs. Called once per batch.
    fn plan(&self, records: Vec<Planned<Rec>>) -> Self::Plan;

    /// Does the batch's work (sends its requests). No request should start
    /// at or after `cutoff`: the invocation's end less the processor's
    /// [`deadline_margin`](Processor::deadline_margin) (`None`: the
    /// remaining time is unknown). What it could not do,
    /// [`settle`](Self::settle) reports as its records' failures.
    fn flush(&self, plan: &Self::Plan, cutoff: Option<Instant>) -> impl Future<Output = ()> + Send;

    /// The outcome of the record at `index` once the batch is flushed:
    /// `Ok` when it is done, else why it fails (a [`FailureReason`]: a
    /// retryable [`FailureReason::Handler`] for a request to try again; a
    /// record that could not be prepared may keep its own reason, or be
    /// done when the hook skips it).
    fn settle(&self, plan: &Self::Plan, index: usize) -> Result<(), FailureReason>;
}

impl<S: Source + Default> Processor<S> {
    /// A processor without idempotency, for a [`BatchHook`]
    /// ([`process_hooked`](Self::process_hooked)): its records run
    /// unprotected (the engine's kill switch is on, and no store is ever
    /// called); a record is named by its id ([`KeySelector::Id`]), and no
    /// payload is hashed ([`PayloadScope::None`]: no record's document is
    /// built).
    pub fn plain() -> Self {
        let config = Config::with_prefix("plain").disabled(true);
        let engine = Idempotency::new(MemoryStore::new(), config);
        Self::new(engine, KeySelector::Id).payload(PayloadScope::None)
    }
}

impl<S: Source> Processor<S> {
    /// Processes `event` as one batch with `hook`: each record prepared by
    /// the source; the batch planned ([`BatchHook::plan`]) and flushed
    /// ([`BatchHook::flush`], the cutoff this processor's deadline margin
    /// before the end of `remaining`); then each record settled
    /// ([`BatchHook::settle`]) and run through the pipeline in the
    /// source's order, unprotected. Returns the batch's report (its
    /// [`response`](Self::response) is the answer) and the hook's plan.
    pub async fn process_hooked<Rec, H>(
        &self,
        event: impl Into<S::Event>,
        remaining: Option<Duration>,
        hook: &H,
    ) -> (BatchReport<()>, H::Plan)
    where
        S: Prepare<Rec>,
        H: BatchHook<Rec>,
    {
        let started = Instant::now();
        let event = event.into();
        let pipeline = self.pipeline(&event);
        let mut shells = Vec::new();
        let planned = (self.slots::<Rec>(event, &pipeline).into_iter())
            .map(|slot| {
                let record = match slot.state {
                    State::Ready { record, .. } => Ok(*record),
                    State::Failed(reason) => Err(reason),
                };
                let (index, id) = (slot.index, slot.ids.id.clone());
                shells.push((slot.index, slot.ident, slot.ids, slot.ticket));
                Planned { index, id, record }
            })
            .collect();
        let plan = hook.plan(planned);
        let set = self.settings.deadline_margin;
        let cutoff = remaining.map(|left| started + left.saturating_sub(margin(set, Some(left))));
        hook.flush(&plan, cutoff).await;
        let slots = (shells.into_iter())
            .map(|(index, ident, ids, ticket)| {
                let settled = hook.settle(&plan, index);
                let ready = |()| Ready {
                    record: (),
                    key: None,
                    payload: None,
                };
                let prepared = settled.map(ready);
                Slot::new(index, ident, ids, prepared, ticket)
            })
            .collect();
        // The flush kept the deadline: a settled record has nothing left to
        // do that the margin could cut off.
        let done = |()| async { Ok::<(), HandlerError>(()) };
        let report = pipeline.run(slots, started, None, done).await;
        (report, plan)
    }
}

#[cfg(test)]
mod tests;
