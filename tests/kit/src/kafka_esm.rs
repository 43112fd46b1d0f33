//! A Kafka event source mapping (Amazon MSK or self-managed), as Lambda runs
//! it, over an in-memory topic (there is no Kafka broker here): batches of up
//! to `batch_size` records from the partitions' committed offsets, each
//! partition's records in order, several partitions in one event (grouped
//! under `"<topic>-<partition>"`), one batch in flight. With [`Options::item_failures`]
//! (a mapping in provisioned mode with `ReportBatchItemFailures`, the Lambda
//! guide's "Configuring error handling controls for Kafka event sources") the
//! answer is read as Lambda reads a Kafka partial batch response:
//!
//! - `{"batchItemFailures": [{"itemIdentifier": {"partition": "orders-0",
//!   "offset": 42}}]}`: partition `orders-0` resumes from the lowest listed
//!   offset, the other partitions of the batch commit all their records;
//! - an empty or absent list (or a null answer): everything commits;
//! - an identifier that is not such an object, or names a partition or an
//!   offset that is not in the batch, and an invocation error: the whole
//!   batch is retried.
//!
//! Without it (the default, as a mapping's) a `batchItemFailures` list is not
//! acted on: an invocation that succeeds commits the whole batch, whatever it
//! names ([`Outcome::Ignored`]); only an invocation error retries it.
//!
//! The identifier's shape is the one Powertools for AWS Lambda (Python)
//! writes for Kafka; `aws_lambda_events` 1.2.1 has no Kafka response type.
//! A partition's record that keeps failing is given up on after
//! `max_retries` retries (the partition's records of the batch from it on are
//! skipped and recorded), then the partition moves on.

use lambda_idempotency::testing::events::{Kafka, KafkaRecord, kafka_event};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;

/// A record produced to a [`Topic`].
#[derive(Debug, Clone)]
pub struct Produced {
    /// Key bytes (`None`: produced without a key).
    pub key: Option<Vec<u8>>,
    /// Value bytes.
    pub value: Vec<u8>,
    /// Headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// An in-memory topic: per partition, its records at offsets 0, 1, 2, …
#[derive(Debug, Clone)]
pub struct Topic {
    /// Topic name.
    pub name: String,
    /// Records of each partition, by offset.
    pub partitions: Vec<Vec<Produced>>,
}

impl Topic {
    /// A topic of `partitions` empty partitions.
    pub fn new(name: &str, partitions: usize) -> Self {
        Self {
            name: name.to_owned(),
            partitions: vec![Vec::new(); partitions],
        }
    }

    /// Appends a record to `partition`; returns its offset.
    ///
    /// # Panics
    /// When the topic has no such partition.
    pub fn produce(
        &mut self,
        partition: usize,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[(&str, &[u8])],
    ) -> i64 {
        let list = &mut self.partitions[partition];
        list.push(Produced {
            key: key.map(<[u8]>::to_vec),
            value: value.to_vec(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.to_vec()))
                .collect(),
        });
        list.len() as i64 - 1
    }

    /// `"<topic>-<partition>"`, the key of a partition's records in an event.
    pub fn partition_key(&self, partition: usize) -> String {
        format!("{}-{partition}", self.name)
    }
}

/// How the mapping runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// MSK or self-managed (the event's `eventSource`).
    pub source: Kafka,
    /// Records per invocation over all partitions (`BatchSize`; default 100).
    pub batch_size: usize,
    /// Retries of a failing record before it is skipped
    /// (`MaximumRetryAttempts`).
    pub max_retries: u32,
    /// Whether the mapping acts on `batchItemFailures` (provisioned mode
    /// with `FunctionResponseTypes: [ReportBatchItemFailures]`). Default
    /// `false`, as a mapping's.
    pub item_failures: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            source: Kafka::Msk,
            batch_size: 100,
            max_retries: 5,
            item_failures: false,
        }
    }
}

/// How an invocation ended, as the mapping read its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every record of the batch commits.
    Success,
    /// These partitions resume from these offsets; the rest commits.
    Partial(BTreeMap<String, i64>),
    /// The invocation returned an error: the whole batch is retried.
    Error,
    /// An identifier was malformed or named no record of the batch: the
    /// whole batch is retried.
    BadResponse,
    /// The answer named records, but the mapping does not act on
    /// `batchItemFailures`: every record of the batch commits, these
    /// (partition key, offset) with the rest.
    Ignored(Vec<(String, i64)>),
}

/// What a mapping run did.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Handler invocations.
    pub invocations: usize,
    /// Records delivered (with redeliveries).
    pub records: usize,
    /// Invocations whose answer listed a failed record.
    pub partial_failures: usize,
    /// Invocations that returned an error.
    pub invocation_errors: usize,
    /// Answers with a bad identifier.
    pub bad_responses: usize,
    /// Records an answer named that the mapping committed anyway (it does
    /// not act on `batchItemFailures`), in order.
    pub committed_failed: Vec<(String, i64)>,
    /// Records given up on (partition key, offset), in order.
    pub skipped: Vec<(String, i64)>,
    /// The next offset to read of each partition (its committed offset).
    pub committed: BTreeMap<String, i64>,
    /// Each invocation: its records (partition key, offset) and outcome.
    pub log: Vec<(Vec<(String, i64)>, Outcome)>,
}

/// Runs the mapping until every partition of `topic` is committed to its
/// end. The handler gets the event as JSON and answers anything that
/// serializes to the function's response (a [`Value`], `()` for success).
pub async fn run<F, Fut, R>(topic: &Topic, options: &Options, handler: F) -> Stats
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
    R: Serialize,
{
    let mut stats = Stats::default();
    let mut next: Vec<i64> = vec![0; topic.partitions.len()];
    let mut failures: HashMap<(usize, i64), u32> = HashMap::new();
    loop {
        // Up to batch_size records, each partition's from its next offset.
        let mut batch: Vec<(usize, Vec<i64>)> = Vec::new();
        let mut room = options.batch_size;
        for (p, records) in topic.partitions.iter().enumerate() {
            let start = next[p] as usize;
            let take = records.len().saturating_sub(start).min(room);
            if take > 0 {
                batch.push((p, (start..start + take).map(|o| o as i64).collect()));
                room -= take;
            }
        }
        if batch.is_empty() {
            break;
        }
        let event = event(topic, options.source, &batch);
        let delivered: Vec<(String, i64)> = batch
            .iter()
            .flat_map(|(p, offsets)| offsets.iter().map(|o| (topic.partition_key(*p), *o)))
            .collect();
        stats.invocations += 1;
        stats.records += delivered.len();
        let outcome = match handler(event).await {
            Ok(answer) => {
                let answer = serde_json::to_value(answer).unwrap_or(Value::Null);
                if options.item_failures {
                    read_response(&answer, &delivered)
                } else {
                    ignored(&answer)
                }
            }
            Err(_) => Outcome::Error,
        };
        // Per partition of the batch: the offset it resumes from (none:
        // all committed).
        let resume: Vec<(usize, Option<i64>)> = batch
            .iter()
            .map(|(p, offsets)| {
                let key = topic.partition_key(*p);
                let from = match &outcome {
                    Outcome::Success | Outcome::Ignored(_) => None,
                    Outcome::Partial(listed) => listed.get(&key).copied(),
                    Outcome::Error | Outcome::BadResponse => Some(offsets[0]),
                };
                (*p, from)
            })
            .collect();
        match &outcome {
            Outcome::Success => {}
            Outcome::Ignored(named) => stats.committed_failed.extend(named.iter().cloned()),
            Outcome::Partial(_) => stats.partial_failures += 1,
            Outcome::Error => stats.invocation_errors += 1,
            Outcome::BadResponse => stats.bad_responses += 1,
        }
        stats.log.push((delivered, outcome));
        for ((p, offsets), (_, from)) in batch.iter().zip(resume) {
            let end = offsets[offsets.len() - 1] + 1;
            let Some(from) = from else {
                next[*p] = end;
                continue;
            };
            next[*p] = from;
            let attempts = failures.entry((*p, from)).or_default();
            *attempts += 1;
            if *attempts > options.max_retries {
                for o in from..end {
                    stats.skipped.push((topic.partition_key(*p), o));
                }
                next[*p] = end;
            }
        }
    }
    stats.committed = next
        .iter()
        .enumerate()
        .map(|(p, n)| (topic.partition_key(p), *n))
        .collect();
    stats
}

fn event(topic: &Topic, source: Kafka, batch: &[(usize, Vec<i64>)]) -> Value {
    let partitions: Vec<(i64, Vec<KafkaRecord<'_>>)> = batch
        .iter()
        .map(|(p, offsets)| {
            let records = offsets
                .iter()
                .map(|o| {
                    let r = &topic.partitions[*p][*o as usize];
                    KafkaRecord {
                        offset: *o,
                        key: r.key.as_deref(),
                        value: &r.value,
                        headers: r
                            .headers
                            .iter()
                            .map(|(k, v)| (k.as_str(), v.as_slice()))
                            .collect(),
                    }
                })
                .collect();
            (*p as i64, records)
        })
        .collect();
    kafka_event(source, &topic.name, &partitions)
}

/// Reads a function's answer to a batch of `delivered` records (partition
/// key, offset) as Lambda reads a Kafka partial batch response (see the
/// module docs).
pub fn read_response(answer: &Value, delivered: &[(String, i64)]) -> Outcome {
    let failures = match answer.get("batchItemFailures") {
        None | Some(Value::Null) => return Outcome::Success,
        Some(Value::Array(list)) if list.is_empty() => return Outcome::Success,
        Some(Value::Array(list)) => list,
        Some(_) => return Outcome::BadResponse,
    };
    let mut resume: BTreeMap<String, i64> = BTreeMap::new();
    for failure in failures {
        let id = &failure["itemIdentifier"];
        let (Some(partition), Some(offset)) = (id["partition"].as_str(), id["offset"].as_i64())
        else {
            return Outcome::BadResponse;
        };
        if !delivered
            .iter()
            .any(|(p, o)| p == partition && *o == offset)
        {
            return Outcome::BadResponse;
        }
        let lowest = resume.entry(partition.to_owned()).or_insert(offset);
        *lowest = (*lowest).min(offset);
    }
    Outcome::Partial(resume)
}

/// A mapping that does not act on `batchItemFailures` reads no answer:
/// the batch commits. What the answer named, when it is a list of Kafka
/// identifiers, is recorded as committed anyway.
fn ignored(answer: &Value) -> Outcome {
    let named: Vec<(String, i64)> = answer
        .get("batchItemFailures")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|f| {
                    let id = &f["itemIdentifier"];
                    Some((id["partition"].as_str()?.to_owned(), id["offset"].as_i64()?))
                })
                .collect()
        })
        .unwrap_or_default();
    if named.is_empty() {
        Outcome::Success
    } else {
        Outcome::Ignored(named)
    }
}

/// The records of a Kafka event in order: (partition key, offset, the
/// record's JSON).
pub fn records(event: &Value) -> Vec<(String, i64, &Value)> {
    let mut out = Vec::new();
    if let Some(map) = event["records"].as_object() {
        for (key, list) in map {
            for r in list.as_array().map(Vec::as_slice).unwrap_or_default() {
                out.push((key.clone(), r["offset"].as_i64().unwrap_or(-1), r));
            }
        }
    }
    out
}

/// A Kafka partial batch response listing `failed` (partition key, offset).
pub fn response(failed: &[(String, i64)]) -> Value {
    let list: Vec<Value> = failed
        .iter()
        .map(|(p, o)| serde_json::json!({"itemIdentifier": {"partition": p, "offset": o}}))
        .collect();
    serde_json::json!({ "batchItemFailures": list })
}

#[cfg(test)]
mod tests {
    use super::{Outcome, read_response};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn delivered() -> Vec<(String, i64)> {
        vec![("t-0".into(), 4), ("t-0".into(), 5), ("t-1".into(), 9)]
    }

    #[test]
    fn each_listed_partition_resumes_from_its_lowest_offset() {
        let answer = json!({"batchItemFailures": [
            {"itemIdentifier": {"partition": "t-0", "offset": 5}},
            {"itemIdentifier": {"partition": "t-0", "offset": 4}},
        ]});
        assert_eq!(
            read_response(&answer, &delivered()),
            Outcome::Partial(BTreeMap::from([("t-0".to_owned(), 4)]))
        );
        assert_eq!(
            read_response(&json!({"batchItemFailures": []}), &delivered()),
            Outcome::Success
        );
    }

    #[test]
    fn an_identifier_naming_no_record_of_the_batch_fails_it_all() {
        for answer in [
            json!({"batchItemFailures": [{"itemIdentifier": "t-0:4"}]}),
            json!({"batchItemFailures": [{"itemIdentifier": {"partition": "t-0", "offset": 6}}]}),
            json!({"batchItemFailures": [{"itemIdentifier": {"partition": "t-2", "offset": 4}}]}),
            json!({"batchItemFailures": [{"itemIdentifier": {"partition": 0, "offset": 4}}]}),
        ] {
            assert_eq!(
                read_response(&answer, &delivered()),
                Outcome::BadResponse,
                "{answer}"
            );
        }
    }
}
