//! A source of its own over the public API alone: the pipeline keys its
//! records, hashes them and hands the key back; its document is built only
//! when read.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use serde_json::{Value, json};

use crate::batch::{BatchError, BatchReport, Delivery, FailureReason, Keyed, Prepare, Prepared};
use crate::batch::{Preparing, Processor, Reading, Source, SourceNames, StreamEvent};
use crate::testkit::memory_engine;
use crate::{HandlerError, IdempotencyKey, KeySelector, Outcome, PayloadScope};

static NAMES: SourceNames = SourceNames {
    id: "jobId",
    id_field: "job_id",
    lane_field: "queue",
    deduplication_id: "a deduplication id (jobs have none)",
    no_lane: "job without a queue",
};

/// How many documents the source built (each test its own counter).
static BUILT: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug, Clone)]
struct Job {
    id: String,
    data: Vec<u8>,
}

impl Delivery for Job {
    fn id(&self) -> Option<&str> {
        Some(&self.id)
    }

    fn source(&self) -> &'static SourceNames {
        &NAMES
    }
}

#[derive(Debug, Clone, Default)]
struct Jobs {
    /// The document built through `Reading::document`.
    lazy: bool,
}

impl Source for Jobs {
    type Event = StreamEvent<Job>;
    type Raw = Job;
    type Response = ();
    type Error = crate::batch::Unfinished;
    const NAMES: &'static SourceNames = &NAMES;

    fn parse(_: Value) -> Result<Self::Event, BatchError> {
        unreachable!("the tests process events")
    }
}

#[derive(Debug)]
struct JobRecord {
    body: Value,
    job: Job,
    key: Option<IdempotencyKey>,
}

impl Prepare<JobRecord> for Jobs {
    type Body = Value;

    fn prepare<'r>(&self, at: &Reading<'_>, job: &'r Job) -> Preparing<'r, Value> {
        if !self.lazy {
            return Prepared::from_payload(at.ident(), "data", Some(job.data.as_slice()));
        }
        let document = at.document(|| {
            BUILT.fetch_add(1, SeqCst);
            serde_json::from_slice(&job.data).unwrap_or(Value::Null)
        });
        Ok(Prepared::new(Value::Null, document))
    }

    fn record(&self, job: Job, body: Value, keyed: Keyed) -> JobRecord {
        JobRecord {
            body,
            job,
            key: keyed.key,
        }
    }
}

fn job(id: &str, data: Value) -> Job {
    let data = serde_json::to_vec(&data).unwrap();
    let id = id.to_owned();
    Job { id, data }
}

#[tokio::test]
async fn a_source_of_its_own_is_keyed_and_hashed_by_the_pipeline() {
    let (engine, _, _) = memory_engine();
    let processor = Processor::<Jobs>::new(engine, KeySelector::pointer("/order"));
    let event = StreamEvent::new(vec![
        job("j-1", json!({"order": "o-1", "cents": 100})),
        job("j-2", json!({"order": "o-1", "cents": 100})),
        job("j-3", json!({"order": "o-1", "cents": 999})),
        job("j-4", json!({"cents": 5})),
    ]);
    let keys = std::sync::Mutex::new(Vec::new());
    let report: BatchReport<Value> = processor
        .process(event, None, |r: JobRecord| {
            keys.lock().unwrap().push((r.job.id.clone(), r.key.clone()));
            let body = r.body;
            async move { Ok::<_, HandlerError>(body) }
        })
        .await;
    let outcomes: Vec<_> = report.records.iter().map(|r| &r.outcome).collect();
    assert!(matches!(outcomes[0], Ok(Outcome::Executed(_))));
    // The same key and payload: its first copy's outcome.
    assert!(matches!(outcomes[1], Ok(Outcome::Replayed(_))));
    // The same key, another payload: the pipeline hashed the document.
    assert!(matches!(outcomes[2], Err(FailureReason::PayloadMismatch)));
    // No key: it fails before its handler (MissingKey::Fail).
    assert!(matches!(outcomes[3], Err(FailureReason::Key(_))));
    // Only the first ran, with the key the pipeline made.
    let keys = keys.into_inner().unwrap();
    assert_eq!(keys.len(), 1);
    let (id, key) = &keys[0];
    assert_eq!(id, "j-1");
    let key = key.as_ref().expect("the record has its key");
    assert_eq!(Some(key.hash()), report.records[0].key_hash.as_deref());
}

#[tokio::test]
async fn a_document_is_built_only_when_the_key_or_the_payload_hash_reads_it() {
    let (engine, _, _) = memory_engine();
    let jobs = Jobs { lazy: true };
    let by_id = Processor::with_source(engine.clone(), KeySelector::Id, jobs.clone());
    let handler = |_: JobRecord| async { Ok::<_, HandlerError>(json!(null)) };
    let event = || StreamEvent::new(vec![job("j-1", json!({"order": "o-1"}))]);
    BUILT.store(0, SeqCst);
    let unread = by_id.clone().payload(PayloadScope::None);
    let report: BatchReport<Value> = unread.process(event(), None, handler).await;
    assert!(matches!(
        report.records[0].outcome,
        Ok(Outcome::Executed(_))
    ));
    assert_eq!(BUILT.load(SeqCst), 0, "keyed by id, nothing hashed");
    let hashed: BatchReport<Value> = by_id.process(event(), None, handler).await;
    assert!(matches!(
        hashed.records[0].outcome,
        Ok(Outcome::Replayed(_))
    ));
    assert_eq!(BUILT.load(SeqCst), 1, "hashed: built");
    let by_pointer = Processor::with_source(engine, KeySelector::pointer("/order"), jobs);
    let by_pointer = by_pointer.payload(PayloadScope::None);
    let _: BatchReport<Value> = by_pointer.process(event(), None, handler).await;
    assert_eq!(BUILT.load(SeqCst), 2, "keyed by pointer: built");
}
