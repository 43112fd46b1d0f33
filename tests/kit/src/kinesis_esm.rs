//! A Kinesis Data Streams event source mapping, as Lambda runs it, for
//! end-to-end tests against moto: read every shard of a stream from the trim
//! horizon (`DescribeStream`, `GetShardIterator` TRIM_HORIZON, `GetRecords`),
//! invoke the handler with batches of one shard's records shaped as Lambda
//! sends them (at most `BatchSize` records and 6 MB), and honour the partial batch response the way Lambda does
//! with `ReportBatchItemFailures`:
//!
//! - an empty or absent `batchItemFailures` (or a null / empty answer) is a
//!   complete success: checkpoint after the batch;
//! - otherwise Lambda checkpoints before the listed record with the lowest
//!   sequence number and retries from it (the records before it are done);
//! - an `itemIdentifier` that is null, empty, or names no record of the
//!   batch, and an invocation error, fail the whole batch: it is retried.
//!
//! A record that keeps failing is given up on after a bounded number of
//! retries (`MaximumRetryAttempts`: the records of the failed batch from it
//! on are skipped and recorded, as the on-failure destination would get
//! them), then the shard moves on. Shards run concurrently, one batch in
//! flight per shard (`ParallelizationFactor` 1): a shard that keeps failing
//! does not hold back another. Stream request errors are retried. Bounded in
//! time; a shard ends once it has been read to its end and nothing is
//! pending for `idle`.
//!
//! moto's Kinesis numbers records 1, 2, 3, … per shard (AWS: 56-digit
//! numbers unique in the stream) and its `PutRecord` is not safe under
//! concurrent requests: put records from one task at a time.

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{PutRecordsRequestEntry, ShardIteratorType};
use base64::Engine as _;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::time::{Duration, Instant};

/// The role Lambda invokes with (`invokeIdentityArn` of every record).
pub use lambda_idempotency::testing::events::INVOKE_IDENTITY_ARN;

/// A stream on moto.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Stream name.
    pub name: String,
    /// Stream ARN (`eventSourceARN`).
    pub arn: String,
    /// Its shards, in `DescribeStream` order.
    pub shards: Vec<Shard>,
}

/// One shard of a [`Stream`].
#[derive(Debug, Clone)]
pub struct Shard {
    /// `shardId-000000000000`, …
    pub id: String,
    /// The lowest hash key it owns: a record put with this explicit hash
    /// key lands in this shard ([`put_to_shard`]).
    pub starting_hash_key: String,
}

impl Stream {
    /// The id of shard `index`.
    ///
    /// # Panics
    /// When the stream has no such shard.
    pub fn shard_id(&self, index: usize) -> &str {
        &self.shards[index].id
    }
}

/// Where a record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    /// Its shard.
    pub shard_id: String,
    /// Its sequence number in that shard.
    pub sequence_number: String,
}

/// Creates a stream of `shards` shards with a unique name.
pub async fn create_stream(kinesis: &Client, prefix: &str, shards: i32) -> Stream {
    let name = crate::unique_name(prefix);
    kinesis
        .create_stream()
        .stream_name(&name)
        .shard_count(shards)
        .send()
        .await
        .expect("create stream on moto");
    describe(kinesis, &name).await
}

/// Describes stream `name` (its ARN and shards).
pub async fn describe(kinesis: &Client, name: &str) -> Stream {
    let out = kinesis
        .describe_stream()
        .stream_name(name)
        .send()
        .await
        .expect("describe stream on moto");
    let d = out.stream_description().expect("a stream description");
    Stream {
        name: d.stream_name().to_owned(),
        arn: d.stream_arn().to_owned(),
        shards: d
            .shards()
            .iter()
            .map(|s| Shard {
                id: s.shard_id().to_owned(),
                starting_hash_key: s
                    .hash_key_range()
                    .map(|r| r.starting_hash_key().to_owned())
                    .unwrap_or_default(),
            })
            .collect(),
    }
}

/// Puts one record; Kinesis picks its shard from the partition key's hash.
pub async fn put_record(
    kinesis: &Client,
    stream: &Stream,
    partition_key: &str,
    data: impl Into<Vec<u8>>,
) -> Put {
    put(kinesis, stream, partition_key, data.into(), None).await
}

/// Puts one record into shard `shard` (an index into [`Stream::shards`]),
/// whatever its partition key, through an explicit hash key.
pub async fn put_to_shard(
    kinesis: &Client,
    stream: &Stream,
    shard: usize,
    partition_key: &str,
    data: impl Into<Vec<u8>>,
) -> Put {
    let hash = stream.shards[shard].starting_hash_key.clone();
    let put = put(kinesis, stream, partition_key, data.into(), Some(hash)).await;
    assert_eq!(put.shard_id, stream.shards[shard].id, "explicit hash key");
    put
}

async fn put(
    kinesis: &Client,
    stream: &Stream,
    partition_key: &str,
    data: Vec<u8>,
    explicit_hash_key: Option<String>,
) -> Put {
    let out = kinesis
        .put_record()
        .stream_name(&stream.name)
        .partition_key(partition_key)
        .data(Blob::new(data))
        .set_explicit_hash_key(explicit_hash_key)
        .send()
        .await
        .expect("put record on moto");
    Put {
        shard_id: out.shard_id().to_owned(),
        sequence_number: out.sequence_number().to_owned(),
    }
}

/// Puts `records` (partition key, data) in one `PutRecords` request (at
/// most 500); returns where each went, in order.
pub async fn put_records(kinesis: &Client, stream: &Stream, records: &[(&str, &[u8])]) -> Vec<Put> {
    let entries = records
        .iter()
        .map(|(key, data)| {
            PutRecordsRequestEntry::builder()
                .partition_key(*key)
                .data(Blob::new(data.to_vec()))
                .build()
                .expect("put records entry")
        })
        .collect();
    let out = kinesis
        .put_records()
        .stream_name(&stream.name)
        .set_records(Some(entries))
        .send()
        .await
        .expect("put records on moto");
    assert_eq!(out.failed_record_count(), Some(0), "moto failed a record");
    out.records()
        .iter()
        .map(|r| Put {
            shard_id: r.shard_id().unwrap_or_default().to_owned(),
            sequence_number: r.sequence_number().unwrap_or_default().to_owned(),
        })
        .collect()
}

/// How the mapping runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Records per invocation (Lambda's `BatchSize`; default 100).
    pub batch_size: usize,
    /// Bytes of an invocation's event at most (Lambda's 6 MB payload
    /// limit): a batch ends before the record that would pass it (a record
    /// alone is always sent).
    pub max_payload: usize,
    /// Retries of a failing batch before its records from the failing one
    /// on are skipped (`MaximumRetryAttempts`).
    pub max_retries: u32,
    /// Stop after this long, whatever is left.
    pub max_time: Duration,
    /// A shard ends once nothing new arrived and nothing is pending for
    /// this long.
    pub idle: Duration,
    /// Pause before a retry of a failed batch.
    pub retry_pause: Duration,
    /// Records per `GetRecords` (its `Limit`; at most 10000).
    pub fetch_limit: i32,
    /// `invokeIdentityArn` of the records.
    pub invoke_identity_arn: String,
    /// Checkpoints to resume from, by shard id (`AFTER_SEQUENCE_NUMBER`), as
    /// a mapping restarted after [`Stats::checkpoints`]; the other shards
    /// start at the trim horizon.
    pub start_after: BTreeMap<String, String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            batch_size: 100,
            max_payload: crate::events::MAX_INVOCATION_PAYLOAD,
            max_retries: 5,
            max_time: Duration::from_secs(60),
            idle: Duration::from_millis(300),
            retry_pause: Duration::from_millis(20),
            fetch_limit: 1000,
            invoke_identity_arn: INVOKE_IDENTITY_ARN.to_owned(),
            start_after: BTreeMap::new(),
        }
    }
}

/// How an invocation ended, as the mapping read its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The whole batch is done (no failure listed).
    Success,
    /// Checkpointed before this sequence number; the batch is retried from
    /// it.
    Partial(String),
    /// The invocation returned an error: the whole batch is retried.
    Error,
    /// An `itemIdentifier` was null, empty or named no record of the
    /// batch (or `batchItemFailures` was not a list): the whole batch is
    /// retried.
    BadResponse,
}

/// One invocation.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// Its shard.
    pub shard: String,
    /// Sequence numbers of its records, in order.
    pub sequence_numbers: Vec<String>,
    /// When it started, from the start of the run.
    pub started: Duration,
    /// When its answer came, from the start of the run.
    pub ended: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

/// What the mapping did on one shard.
#[derive(Debug, Default, Clone)]
pub struct ShardStats {
    /// Handler invocations.
    pub invocations: usize,
    /// Records delivered (with redeliveries).
    pub records: usize,
    /// Distinct records read from the shard.
    pub read: usize,
    /// Invocations whose answer listed a failed record.
    pub partial_failures: usize,
    /// Invocations that returned an error (whole batch retried).
    pub invocation_errors: usize,
    /// Answers with a bad `itemIdentifier` (whole batch retried).
    pub bad_responses: usize,
    /// Sequence numbers given up on ("on failure"), in order.
    pub skipped: Vec<String>,
    /// The last sequence number checkpointed (done or skipped).
    pub checkpoint: Option<String>,
    /// Stream requests that failed (and were retried).
    pub stream_errors: usize,
    /// Whether it stopped on `max_time` with records pending.
    pub timed_out: bool,
    /// Every invocation, in order.
    pub log: Vec<Invocation>,
}

/// What a mapping run did: totals over the shards, and each shard's own.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Handler invocations.
    pub invocations: usize,
    /// Records delivered (with redeliveries).
    pub records: usize,
    /// Distinct records read from the stream.
    pub read: usize,
    /// Invocations whose answer listed a failed record.
    pub partial_failures: usize,
    /// Invocations that returned an error (whole batch retried).
    pub invocation_errors: usize,
    /// Answers with a bad `itemIdentifier` (whole batch retried).
    pub bad_responses: usize,
    /// Sequence numbers given up on, shard by shard (in shard order).
    pub skipped: Vec<String>,
    /// Stream requests that failed (and were retried).
    pub stream_errors: usize,
    /// Whether some shard stopped on `max_time` with records pending.
    pub timed_out: bool,
    /// Per shard, by shard id.
    pub shards: BTreeMap<String, ShardStats>,
}

impl Stats {
    fn add(&mut self, shard: String, s: ShardStats) {
        self.invocations += s.invocations;
        self.records += s.records;
        self.read += s.read;
        self.partial_failures += s.partial_failures;
        self.invocation_errors += s.invocation_errors;
        self.bad_responses += s.bad_responses;
        self.skipped.extend(s.skipped.iter().cloned());
        self.stream_errors += s.stream_errors;
        self.timed_out |= s.timed_out;
        self.shards.insert(shard, s);
    }

    /// The last checkpoint of each shard that has one: a later run resumes
    /// there with [`Options::start_after`].
    pub fn checkpoints(&self) -> BTreeMap<String, String> {
        self.shards
            .iter()
            .filter_map(|(id, s)| s.checkpoint.clone().map(|c| (id.clone(), c)))
            .collect()
    }

    /// One shard's stats.
    ///
    /// # Panics
    /// When the run had no such shard.
    pub fn shard(&self, id: &str) -> &ShardStats {
        self.shards
            .get(id)
            .unwrap_or_else(|| panic!("no shard {id} in {:?}", self.shards.keys()))
    }
}

/// Runs the mapping over every shard of `stream` from the trim horizon (or
/// [`Options::start_after`]), the shards concurrently. The handler gets the
/// event as JSON and answers anything that serializes to the function's
/// response:
/// [`KinesisEventResponse`](aws_lambda_events::streams::KinesisEventResponse),
/// a [`Value`], `()` / `None` (success).
pub async fn run<F, Fut, R>(
    kinesis: &Client,
    stream: &Stream,
    options: &Options,
    handler: F,
) -> Stats
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
    R: Serialize,
{
    let start = Instant::now();
    let deadline = start + options.max_time;
    let shards = futures_util::future::join_all(stream.shards.iter().map(|shard| {
        run_shard(
            kinesis, stream, &shard.id, options, start, deadline, &handler,
        )
    }))
    .await;
    let mut stats = Stats::default();
    for (shard, s) in stream.shards.iter().zip(shards) {
        stats.add(shard.id.clone(), s);
    }
    stats
}

async fn run_shard<F, Fut, R>(
    kinesis: &Client,
    stream: &Stream,
    shard: &str,
    options: &Options,
    start: Instant,
    deadline: Instant,
    handler: &F,
) -> ShardStats
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
    R: Serialize,
{
    let mut stats = ShardStats::default();
    let resume = options.start_after.get(shard);
    stats.checkpoint = resume.cloned();
    let Some(out) = retrying!(
        stats,
        deadline,
        kinesis
            .get_shard_iterator()
            .stream_name(&stream.name)
            .shard_id(shard)
            .shard_iterator_type(match resume {
                Some(_) => ShardIteratorType::AfterSequenceNumber,
                None => ShardIteratorType::TrimHorizon,
            })
            .set_starting_sequence_number(resume.cloned())
    ) else {
        stats.timed_out = true;
        return stats;
    };
    let mut iterator = out.shard_iterator().map(str::to_owned);
    let mut pending: VecDeque<Value> = VecDeque::new();
    // Failed attempts of the batch starting at a given sequence number.
    let mut failures: HashMap<String, u32> = HashMap::new();
    let mut idle_since = Instant::now();
    loop {
        if Instant::now() >= deadline {
            stats.timed_out = !pending.is_empty();
            return stats;
        }
        if pending.len() < options.batch_size
            && let Some(it) = iterator.clone()
        {
            let Some(out) = retrying!(
                stats,
                deadline,
                kinesis
                    .get_records()
                    .shard_iterator(&it)
                    .limit(options.fetch_limit)
            ) else {
                stats.timed_out = true;
                return stats;
            };
            iterator = out.next_shard_iterator().map(str::to_owned);
            let records = out.records();
            if !records.is_empty() {
                idle_since = Instant::now();
            }
            stats.read += records.len();
            pending.extend(
                records
                    .iter()
                    .map(|r| lambda_record(r, shard, &stream.arn, &options.invoke_identity_arn)),
            );
        }
        if pending.is_empty() {
            if idle_since.elapsed() >= options.idle {
                return stats;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        idle_since = Instant::now();
        let n = batch_len(&pending, options);
        let batch: Vec<Value> = pending.iter().take(n).cloned().collect();
        stats.invocations += 1;
        stats.records += n;
        let started = start.elapsed();
        let outcome = match handler(json!({ "Records": batch })).await {
            Ok(answer) => {
                read_response(&serde_json::to_value(answer).unwrap_or(Value::Null), &batch)
            }
            Err(_) => Outcome::Error,
        };
        let retry_from = match &outcome {
            Outcome::Success => n,
            Outcome::Partial(seq) => {
                stats.partial_failures += 1;
                batch
                    .iter()
                    .position(|r| sequence_number(r) == seq)
                    .unwrap_or(0)
            }
            Outcome::Error => {
                stats.invocation_errors += 1;
                0
            }
            Outcome::BadResponse => {
                stats.bad_responses += 1;
                0
            }
        };
        stats.log.push(Invocation {
            shard: shard.to_owned(),
            sequence_numbers: batch
                .iter()
                .map(|r| sequence_number(r).to_owned())
                .collect(),
            started,
            ended: start.elapsed(),
            outcome,
        });
        if retry_from > 0 {
            stats.checkpoint = Some(sequence_number(&batch[retry_from - 1]).to_owned());
        }
        pending.drain(..retry_from);
        if retry_from < n {
            let head = sequence_number(&pending[0]).to_owned();
            let attempts = failures.entry(head).or_default();
            *attempts += 1;
            if *attempts > options.max_retries {
                // On failure: give up on the retried records of the batch,
                // as Lambda does, and move on.
                for r in pending.drain(..n - retry_from) {
                    let seq = sequence_number(&r).to_owned();
                    stats.checkpoint = Some(seq.clone());
                    stats.skipped.push(seq);
                }
            } else {
                tokio::time::sleep(options.retry_pause).await;
            }
        }
    }
}

/// How many of the `pending` records the next batch takes: at most
/// `batch_size`, and no more than fit in `max_payload` (at least one).
fn batch_len(pending: &VecDeque<Value>, options: &Options) -> usize {
    // `{"Records":[` … `]}` and a comma per record.
    let mut size = 14;
    let mut n = 0;
    for record in pending.iter().take(options.batch_size) {
        size += record.to_string().len() + 1;
        if n > 0 && size > options.max_payload {
            break;
        }
        n += 1;
    }
    n
}

/// Reads a function's answer to `batch` as Lambda does with
/// `ReportBatchItemFailures` (see the module docs): anything but an object
/// with a non-empty `batchItemFailures` list is a success; a list checkpoints
/// before its lowest record; an entry that names no record of the batch fails
/// the whole batch.
pub fn read_response(answer: &Value, batch: &[Value]) -> Outcome {
    let failures = match answer.get("batchItemFailures") {
        None | Some(Value::Null) => return Outcome::Success,
        Some(Value::Array(list)) if list.is_empty() => return Outcome::Success,
        Some(Value::Array(list)) => list,
        Some(_) => return Outcome::BadResponse,
    };
    let mut lowest: Option<usize> = None;
    for failure in failures {
        let id = failure.get("itemIdentifier").and_then(Value::as_str);
        let Some(index) = id
            .filter(|id| !id.is_empty())
            .and_then(|id| batch.iter().position(|r| sequence_number(r) == id))
        else {
            return Outcome::BadResponse;
        };
        lowest = Some(lowest.map_or(index, |l| l.min(index)));
    }
    match lowest {
        Some(index) => Outcome::Partial(sequence_number(&batch[index]).to_owned()),
        None => Outcome::Success,
    }
}

/// `kinesis.sequenceNumber` of an event record.
pub fn sequence_number(record: &Value) -> &str {
    record["kinesis"]["sequenceNumber"]
        .as_str()
        .unwrap_or_default()
}

/// `kinesis.partitionKey` of an event record.
pub fn partition_key(record: &Value) -> &str {
    record["kinesis"]["partitionKey"]
        .as_str()
        .unwrap_or_default()
}

/// The shard of an event record (its `eventID` is `shardId-…:sequence`).
pub fn shard_of(record: &Value) -> &str {
    record["eventID"]
        .as_str()
        .and_then(|id| id.split_once(':'))
        .map(|(shard, _)| shard)
        .unwrap_or_default()
}

/// The decoded `kinesis.data` of an event record.
///
/// # Panics
/// When it is not base64.
pub fn data(record: &Value) -> Vec<u8> {
    let text = record["kinesis"]["data"].as_str().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("kinesis.data {text:?} is not base64: {e}"))
}

/// The records of an event (its `Records`).
pub fn records(event: &Value) -> &[Value] {
    event["Records"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// One event record as Lambda's Kinesis poller builds it.
pub fn lambda_record(
    record: &aws_sdk_kinesis::types::Record,
    shard: &str,
    stream_arn: &str,
    invoke_identity_arn: &str,
) -> Value {
    let arrival = record
        .approximate_arrival_timestamp()
        .map(|t| t.secs() as f64 + f64::from(t.subsec_nanos() / 1_000_000) / 1000.0)
        .unwrap_or_default();
    let region = stream_arn.split(':').nth(3).unwrap_or("us-east-1");
    json!({
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record.partition_key().unwrap_or_default(),
            "sequenceNumber": record.sequence_number(),
            "data": base64::engine::general_purpose::STANDARD.encode(record.data().as_ref()),
            "approximateArrivalTimestamp": arrival,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": format!("{shard}:{}", record.sequence_number()),
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": invoke_identity_arn,
        "awsRegion": region,
        "eventSourceARN": stream_arn,
    })
}

#[cfg(test)]
mod tests {
    use super::{Outcome, read_response};
    use serde_json::{Value, json};

    fn batch() -> Vec<Value> {
        ["7", "8", "9"]
            .iter()
            .map(|s| json!({"kinesis": {"sequenceNumber": s}}))
            .collect()
    }

    #[test]
    fn no_failures_listed_is_a_success() {
        for answer in [
            Value::Null,
            json!({}),
            json!({"batchItemFailures": null}),
            json!({"batchItemFailures": []}),
        ] {
            assert_eq!(
                read_response(&answer, &batch()),
                Outcome::Success,
                "{answer}"
            );
        }
    }

    #[test]
    fn the_lowest_listed_record_is_where_the_retry_starts() {
        let answer =
            json!({"batchItemFailures": [{"itemIdentifier": "9"}, {"itemIdentifier": "8"}]});
        assert_eq!(
            read_response(&answer, &batch()),
            Outcome::Partial("8".into())
        );
    }

    #[test]
    fn a_bad_identifier_fails_the_whole_batch() {
        for answer in [
            json!({"batchItemFailures": [{"itemIdentifier": null}]}),
            json!({"batchItemFailures": [{"itemIdentifier": ""}]}),
            json!({"batchItemFailures": [{"itemId": "8"}]}),
            json!({"batchItemFailures": [{"itemIdentifier": "8"}, {"itemIdentifier": "10"}]}),
            json!({"batchItemFailures": "8"}),
        ] {
            assert_eq!(
                read_response(&answer, &batch()),
                Outcome::BadResponse,
                "{answer}"
            );
        }
    }
}
