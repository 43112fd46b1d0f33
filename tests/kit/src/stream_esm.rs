//! A small DynamoDB stream event source mapping, as Lambda runs it, for
//! end-to-end tests against moto: read the table's stream (`DescribeStream`,
//! `GetShardIterator` TRIM_HORIZON, `GetRecords`), invoke the handler with
//! batches of records shaped as Lambda sends them, honour the partial batch
//! response (retry from the reported `SequenceNumber`, the records before it
//! done), give up on a record after a bounded number of retries ("on
//! failure": the skipped sequence numbers are recorded, as the on-failure
//! destination would get them) and move on. Stream request errors (injected
//! faults) are retried. Bounded in time, and ends once the shard has been
//! read to its end and nothing is pending for `idle`.

use aws_lambda_events::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::time::{Duration, Instant};

/// How the mapping runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Records per invocation (Lambda's `BatchSize`).
    pub batch_size: usize,
    /// Retries of a failing record before it is skipped
    /// (`MaximumRetryAttempts`).
    pub max_retries: u32,
    /// Stop after this long, whatever is left.
    pub max_time: Duration,
    /// Stop once nothing new arrived and nothing is pending for this long.
    pub idle: Duration,
    /// Pause before a retry of a failed batch.
    pub retry_pause: Duration,
    /// Records per `GetRecords` (its `Limit`; at most 1000).
    pub fetch_limit: i32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            batch_size: 100,
            max_retries: 5,
            max_time: Duration::from_secs(60),
            idle: Duration::from_millis(300),
            retry_pause: Duration::from_millis(20),
            fetch_limit: 1000,
        }
    }
}

/// What a mapping run did.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Handler invocations.
    pub invocations: usize,
    /// Records delivered (with redeliveries).
    pub records: usize,
    /// Distinct records read from the stream.
    pub read: usize,
    /// Invocations that answered with a `batchItemFailures` entry.
    pub partial_failures: usize,
    /// Invocations that returned an error (whole batch retried).
    pub invocation_errors: usize,
    /// Sequence numbers given up on ("on failure"), in order.
    pub skipped: Vec<String>,
    /// Stream requests that failed (and were retried).
    pub stream_errors: usize,
    /// Whether it stopped on `max_time` with records pending.
    pub timed_out: bool,
}

/// The stream ARN of `table` (created with a `StreamSpecification`).
pub async fn stream_arn(ddb: &aws_sdk_dynamodb::Client, table: &str) -> String {
    ddb.describe_table()
        .table_name(table)
        .send()
        .await
        .expect("describe table")
        .table()
        .and_then(|t| t.latest_stream_arn())
        .expect("the table has a stream")
        .to_owned()
}

/// Runs the mapping over every shard of `stream_arn` (moto has one), from
/// the trim horizon.
pub async fn run<F, Fut>(streams: &Client, stream_arn: &str, options: &Options, handler: F) -> Stats
where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<DynamoDbEventResponse, lambda_runtime::Error>>,
{
    let start = Instant::now();
    let deadline = start + options.max_time;
    let mut stats = Stats::default();
    let Some(described) = retrying!(
        stats,
        deadline,
        streams.describe_stream().stream_arn(stream_arn)
    ) else {
        stats.timed_out = true;
        return stats;
    };
    let shards: Vec<String> = described
        .stream_description()
        .map(|d| {
            d.shards()
                .iter()
                .filter_map(|s| s.shard_id().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for shard in shards {
        run_shard(
            streams, stream_arn, &shard, options, deadline, &mut stats, &handler,
        )
        .await;
    }
    stats
}

async fn run_shard<F, Fut>(
    streams: &Client,
    stream_arn: &str,
    shard: &str,
    options: &Options,
    deadline: Instant,
    stats: &mut Stats,
    handler: &F,
) where
    F: Fn(Value) -> Fut,
    Fut: Future<Output = Result<DynamoDbEventResponse, lambda_runtime::Error>>,
{
    let Some(out) = retrying!(
        stats,
        deadline,
        streams
            .get_shard_iterator()
            .stream_arn(stream_arn)
            .shard_id(shard)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
    ) else {
        stats.timed_out = true;
        return;
    };
    let mut iterator = out.shard_iterator().map(str::to_owned);
    let mut pending: VecDeque<Value> = VecDeque::new();
    // Failed attempts of the record at the head of `pending`.
    let mut head_failures: HashMap<String, u32> = HashMap::new();
    let mut idle_since = Instant::now();
    loop {
        if Instant::now() >= deadline {
            stats.timed_out = !pending.is_empty();
            return;
        }
        if pending.len() < options.batch_size
            && let Some(it) = iterator.clone()
        {
            let Some(out) = retrying!(
                stats,
                deadline,
                streams
                    .get_records()
                    .shard_iterator(&it)
                    .limit(options.fetch_limit)
            ) else {
                stats.timed_out = true;
                return;
            };
            iterator = out.next_shard_iterator().map(str::to_owned);
            let records = out.records();
            if !records.is_empty() {
                idle_since = Instant::now();
            }
            stats.read += records.len();
            pending.extend(records.iter().map(|r| lambda_record(r, stream_arn)));
        }
        if pending.is_empty() {
            if idle_since.elapsed() >= options.idle {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        idle_since = Instant::now();
        let n = pending.len().min(options.batch_size);
        let batch: Vec<Value> = pending.iter().take(n).cloned().collect();
        stats.invocations += 1;
        stats.records += n;
        // Index of the first record to retry (n: none).
        let retry_from = match handler(json!({ "Records": batch })).await {
            Ok(response) => match response.batch_item_failures.first() {
                None => n,
                Some(failure) => {
                    stats.partial_failures += 1;
                    let id = failure.item_identifier.as_deref().unwrap_or_default();
                    // An identifier that names no record fails the whole batch.
                    batch
                        .iter()
                        .position(|r| sequence_number(r) == id)
                        .unwrap_or(0)
                }
            },
            Err(_) => {
                stats.invocation_errors += 1;
                0
            }
        };
        pending.drain(..retry_from);
        if retry_from < n {
            let head = sequence_number(&pending[0]).to_owned();
            let failures = head_failures.entry(head).or_default();
            *failures += 1;
            if *failures > options.max_retries {
                // On failure: skip what was retried, as Lambda does (the
                // records of the failed batch from the failing one on).
                for r in pending.drain(..n - retry_from) {
                    stats.skipped.push(sequence_number(&r).to_owned());
                }
            } else {
                tokio::time::sleep(options.retry_pause).await;
            }
        }
    }
}

fn sequence_number(record: &Value) -> &str {
    record["dynamodb"]["SequenceNumber"]
        .as_str()
        .unwrap_or_default()
}

/// One event record as Lambda's DynamoDB stream poller builds it.
pub fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    let mut change = Map::new();
    if let Some(s) = record.dynamodb() {
        if let Some(t) = s.approximate_creation_date_time() {
            change.insert(
                "ApproximateCreationDateTime".into(),
                json!(t.as_secs_f64().floor()),
            );
        }
        if let Some(keys) = s.keys() {
            change.insert("Keys".into(), image(keys));
        }
        if let Some(new) = s.new_image() {
            change.insert("NewImage".into(), image(new));
        }
        if let Some(old) = s.old_image() {
            change.insert("OldImage".into(), image(old));
        }
        change.insert("SequenceNumber".into(), json!(s.sequence_number()));
        change.insert("SizeBytes".into(), json!(s.size_bytes().unwrap_or(0)));
        if let Some(v) = s.stream_view_type() {
            change.insert("StreamViewType".into(), json!(v.as_str()));
        }
    }
    json!({
        "eventID": record.event_id(),
        "eventName": record.event_name().map(|n| n.as_str()),
        "eventVersion": record.event_version().unwrap_or("1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region().unwrap_or("us-east-1"),
        "dynamodb": change,
        "eventSourceARN": stream_arn,
    })
}

fn image(item: &HashMap<String, AttributeValue>) -> Value {
    Value::Object(
        item.iter()
            .map(|(k, v)| (k.clone(), attribute(v)))
            .collect(),
    )
}

/// An attribute value in DynamoDB JSON (`{"S": ...}`, `{"N": ...}`, ...).
pub fn attribute(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(b) => json!({ "NULL": b }),
        AttributeValue::B(b) => json!({ "B": base64(b.as_ref()) }),
        AttributeValue::Ss(v) => json!({ "SS": v }),
        AttributeValue::Ns(v) => json!({ "NS": v }),
        AttributeValue::Bs(v) => {
            json!({ "BS": v.iter().map(|b| base64(b.as_ref())).collect::<Vec<_>>() })
        }
        AttributeValue::L(v) => json!({ "L": v.iter().map(attribute).collect::<Vec<_>>() }),
        AttributeValue::M(m) => json!({ "M": image(m) }),
        _ => json!({ "NULL": true }),
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
