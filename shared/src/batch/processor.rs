//! [`Processor`]: one processor for every batch source; a source's own
//! builders live in its folder.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "lambda")]
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use serde::de::DeserializeOwned;
#[cfg(feature = "lambda")]
use serde_json::Value;

use super::delivery::Ids;
use super::key::{KeySelector, MissingKey, PayloadScope};
use super::lanes::fail_after_missing_lane;
use super::pipeline::Pipeline;
use super::report::{BatchReport, FailureReason};
use super::settings::{PreRead, RecordLogs, Settings, UnprotectedOrder};
use super::slot::{Slot, guard};
use super::source::{Prepare, Source};
use crate::engine::Idempotency;
use crate::error::HandlerError;
use crate::parking::Parking;
use crate::write::IntoStaged;

/// Processes the batches of source `S` ([`SqsProcessor`](crate::sqs::SqsProcessor)
/// is `Processor<Sqs>`, and so on). Build it once per execution
/// environment; cheap to clone.
#[derive(Debug, Clone)]
pub struct Processor<S> {
    pub(crate) settings: Settings,
    pub(crate) source: S,
}

/// A source whose records can be parked ([`Processor::parking`]): the
/// ordered streams.
pub trait Parks: Source {}

impl<S: Source + Default> Processor<S> {
    /// A processor over `engine`, keys from `key`, the source's defaults.
    pub fn new(engine: Idempotency, key: KeySelector) -> Self {
        Self::with_source(engine, key, S::default())
    }
}

impl<S: Source> Processor<S> {
    /// A processor over `engine`, keys from `key`, for `source`.
    pub fn with_source(engine: Idempotency, key: KeySelector, source: S) -> Self {
        Self {
            settings: Settings::new(engine, key),
            source,
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Idempotency {
        &self.settings.engine
    }

    /// The source and its settings.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// At most `n` records run at a time (0 counts as 1; records waiting
    /// for their lane or their first copy do not count). Default:
    /// [`DEFAULT_CONCURRENCY`](super::DEFAULT_CONCURRENCY).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.settings.concurrency = Some(n.max(1));
        self
    }

    /// A record whose turn comes when less than `margin` is left of the
    /// invocation fails without starting ([`FailureReason::OutOfTime`]).
    /// Default: [`DEFAULT_DEADLINE_MARGIN`](super::DEFAULT_DEADLINE_MARGIN).
    pub fn deadline_margin(mut self, margin: Duration) -> Self {
        self.settings.deadline_margin = Some(margin);
        self
    }

    /// What to do with records without a key. Default [`MissingKey::Fail`].
    pub fn missing_key(mut self, policy: MissingKey) -> Self {
        self.settings.missing_key = policy;
        self
    }

    /// When to read the batch's records ahead. Default
    /// [`PreRead::OnRedelivery`].
    pub fn pre_read(mut self, policy: PreRead) -> Self {
        self.settings.pre_read = policy;
        self
    }

    /// Which records get their own log line. Default [`RecordLogs::All`].
    pub fn record_logs(mut self, logs: RecordLogs) -> Self {
        self.settings.record_logs = logs;
        self
    }

    /// What payload validation hashes. Default [`PayloadScope::Body`]: the
    /// record's one document, as its source reads it (the parsed SQS body or
    /// opened envelope, the Kinesis `data`, the Kafka value, an SNS
    /// `Message`, a DynamoDB record's `eventName`, `Keys` and images; never
    /// an envelope's ids and times, which differ between two publications
    /// of one business event).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.settings.payload = scope;
        self
    }

    /// What a record run unprotected keeps its order with in a lane cut by
    /// key. Default [`UnprotectedOrder::Lane`].
    pub fn unprotected_order(mut self, order: UnprotectedOrder) -> Self {
        self.settings.unprotected_order = order;
        self
    }

    /// The invocation's answer to `report`: the partial batch response, or
    /// the error that fails the invocation ([`Source::respond`]).
    pub fn response<T>(&self, report: &BatchReport<T>) -> Result<S::Response, S::Error> {
        self.source.respond(report)
    }

    /// Handles one invocation: parses the event, runs
    /// [`process`](Self::process) and answers. An `Err` (not this source's
    /// event, a failed record that cannot be named) fails the invocation.
    #[cfg(feature = "lambda")]
    pub async fn handle<Rec, T, R, H, Fut>(
        &self,
        event: LambdaEvent<Value>,
        handler: H,
    ) -> Result<S::Response, lambda_runtime::Error>
    where
        S: Prepare<Rec>,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Rec) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let (payload, ctx) = event.into_parts();
        let event = S::parse(payload)?;
        let this =
            crate::tenant::scoped(self, ctx.tenant_id.as_deref(), |p, t| p.for_tenant(Some(t)));
        let report = this
            .process(event, super::settings::remaining_now(&ctx), handler)
            .await;
        Ok(self.response(&report)?)
    }

    /// This processor for an invocation of `tenant` (its engine's
    /// [`Idempotency::for_tenant`]): what [`handle`](Self::handle) does
    /// with the invocation's `Context::tenant_id`, for a caller of
    /// [`process`](Self::process).
    pub fn for_tenant(&self, tenant: Option<&str>) -> Self {
        let mut this = self.clone();
        this.settings.engine = this.settings.engine.for_tenant(tenant);
        this
    }

    /// Processes `event`: each record prepared and run through the engine
    /// with `handler`, in the source's order; every failure is one record's.
    /// `remaining` is the invocation's remaining time (`None`: unknown); `T`
    /// is the response recorded and replayed to duplicates.
    pub async fn process<Rec, T, R, H, Fut>(
        &self,
        event: impl Into<S::Event>,
        remaining: Option<Duration>,
        handler: H,
    ) -> BatchReport<T>
    where
        S: Prepare<Rec>,
        T: Serialize + DeserializeOwned,
        R: IntoStaged<T>,
        H: Fn(Rec) -> Fut,
        Fut: Future<Output = Result<R, HandlerError>>,
    {
        let started = Instant::now();
        let event = event.into();
        let pipeline = self.pipeline(&event);
        let slots = self.slots(event, &pipeline);
        pipeline.run(slots, started, remaining, handler).await
    }

    /// The pipeline a batch of `event` runs through.
    pub(super) fn pipeline(&self, event: &S::Event) -> Pipeline<'_> {
        Pipeline {
            settings: &self.settings,
            expected: &self.source,
            ordering: self.source.ordering(event),
            names: S::NAMES,
            unprepared: self.source.unprepared_parking(),
        }
    }

    /// The records of `event`, each prepared (or failed), in batch order.
    pub(super) fn slots<Rec>(&self, event: S::Event, pipeline: &Pipeline<'_>) -> Vec<Slot<Rec>>
    where
        S: Prepare<Rec>,
    {
        let ordering = pipeline.ordering;
        let mut slots: Vec<Slot<Rec>> = self
            .source
            .records(event)
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                let record = match entry {
                    Ok(record) => record,
                    Err(malformed) => {
                        let within = self.source.within_malformed(&malformed.raw);
                        return malformed.into_slot(index, within, pipeline);
                    }
                };
                // Taken before the handler takes the record.
                let ticket = pipeline
                    .parks()
                    .then(|| self.source.ticket(&record))
                    .flatten();
                let ids = Ids::of(&record, self.source.within(&record));
                let ident = ids.ident(index, S::NAMES.id);
                let prepared = guard(|| pipeline.prepare(&self.source, &ident, record))
                    .unwrap_or_else(|panic| {
                        Err(FailureReason::Panic(format!(
                            "preparing record {ident} panicked: {panic}"
                        )))
                    });
                Slot::new(index, ident, ids, prepared, ticket)
            })
            .collect();
        let no_lane = FailureReason::NoLane(S::NAMES.no_lane);
        fail_after_missing_lane(&mut slots, ordering, no_lane);
        slots
    }
}

impl<S: Parks> Processor<S> {
    /// Parks each record that can never succeed in `parking`
    /// ([`crate::parking`]). Default: no parking.
    pub fn parking(mut self, parking: impl Parking + 'static) -> Self {
        self.settings.parking = Some(Arc::new(parking));
        self
    }
}
