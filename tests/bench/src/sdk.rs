//! `bench sdk`: the CPU one DynamoDB request costs the client in the AWS SDK
//! alone, on a single-threaded runtime as a function runs it: payments'
//! optimistic commit (a `TransactWriteItems` of the conditional record `Put`
//! and the balance `Update`), a claim (a conditional `PutItem` returning the
//! old item on failure) and its completion (an owner-conditioned
//! `UpdateItem`), each ten at a time as a batch of ten sends them, a 10-key
//! `BatchGetItem` (a batch's pre-read), and for comparison ten messages'
//! commits in one `TransactWriteItems` (what a batch-wide commit would cost).
//! The floor under the function's CPU per message: what a function spends
//! beyond it is its own work (event parsing, hashing, logs, the Runtime API). Client settings side by side, interleaved round by round:
//! the functions' client (`lambda_idempotency::aws::aws_sdk_config_loader`), without
//! stalled-stream protection, without retries and timeouts, the SDK's
//! defaults.

use aws_config::retry::RetryConfig;
use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use futures_util::future::join_all;
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};
use test_kit::{create_idempotency_table, create_table, moto_keep_alive};

const ROUNDS: usize = 5;

/// CPU time of the calling thread (`/proc/thread-self/schedstat`, ns).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// The client settings compared, the functions' own first (the ratios' base).
const SETTINGS: [&str; 4] = [
    "functions' client",
    "no stalled-stream protection",
    "no retries, no timeouts",
    "SDK defaults",
];

/// What is measured, in column order: the column's heading and how many keys
/// one unit of it covers (a request; a message for the batch-wide commit).
const MEASURED: [(&str, usize); 5] = [
    ("TransactWriteItems", 1),
    ("PutItem (claim)", 1),
    ("UpdateItem (complete)", 1),
    ("message, 10 commits in one TransactWriteItems", 1),
    ("BatchGetItem (10 keys)", 10),
];

struct Variant {
    label: &'static str,
    client: Client,
    /// CPU per [`MEASURED`] column, summed over the rounds.
    cpu: [Duration; MEASURED.len()],
}

/// The thread's CPU time while `work` runs.
async fn timed(work: impl Future<Output = ()>) -> Duration {
    let start = thread_cpu();
    work.await;
    thread_cpu() - start
}

/// `request` for every key, ten at a time, as a batch of ten sends them.
async fn ten_at_a_time<'k, F, Fut>(keys: &'k [String], request: F)
where
    F: Fn(&'k str) -> Fut,
    Fut: Future<Output = ()>,
{
    for chunk in keys.chunks(10) {
        join_all(chunk.iter().map(|key| request(key))).await;
    }
}

async fn client(label: &str) -> Client {
    let moto = moto_keep_alive();
    let loader = match SETTINGS.iter().position(|s| *s == label) {
        Some(0) => moto.sdk_config_loader(),
        Some(1) => moto
            .sdk_config_loader()
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled()),
        Some(2) => moto
            .sdk_config_loader()
            .retry_config(RetryConfig::disabled())
            .timeout_config(TimeoutConfig::disabled()),
        _ => aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(moto.endpoint())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "moto",
            )),
    };
    Client::new(&loader.load().await)
}

/// A fixed "now" (s): every key is new, so every condition holds.
const NOW: u64 = 1_800_000_000;

/// The store's claim condition: no record, an expired one, or a lapsed lease.
const CLAIM_CONDITION: &str = "attribute_not_exists(#id) OR #expiration < :now OR (#status = :in_progress AND #in_progress_expiration < :now_ms)";

fn claim_names() -> HashMap<String, String> {
    ["id", "expiration", "status", "in_progress_expiration"]
        .into_iter()
        .map(|n| (format!("#{n}"), n.to_owned()))
        .collect()
}

fn claim_values() -> HashMap<String, AttributeValue> {
    HashMap::from([
        (":now".to_owned(), AttributeValue::N(NOW.to_string())),
        (
            ":now_ms".to_owned(),
            AttributeValue::N((NOW * 1000).to_string()),
        ),
        (
            ":in_progress".to_owned(),
            AttributeValue::S("INPROGRESS".into()),
        ),
    ])
}

/// One message's optimistic commit: the record's conditional `Put` and the
/// account's `Update`.
fn message_actions(
    records: &str,
    accounts: &str,
    key: &str,
    account: &str,
) -> [TransactWriteItem; 2] {
    let put = Put::builder()
        .table_name(records)
        .item("id", AttributeValue::S(key.to_owned()))
        .item("status", AttributeValue::S("COMPLETED".into()))
        .item("expiration", AttributeValue::N((NOW + 86_400).to_string()))
        .item("data", AttributeValue::S(r#"{"credited":true}"#.into()))
        .item("validation", AttributeValue::S("9f".repeat(32)))
        .condition_expression(CLAIM_CONDITION)
        .set_expression_attribute_names(Some(claim_names()))
        .set_expression_attribute_values(Some(claim_values()))
        .build()
        .expect("put");
    let update = Update::builder()
        .table_name(accounts)
        .key("account_id", AttributeValue::S(account.to_owned()))
        .update_expression("ADD #balance :amount")
        .expression_attribute_names("#balance", "balance_cents")
        .expression_attribute_values(":amount", AttributeValue::N("100".into()))
        .build()
        .expect("update");
    [
        TransactWriteItem::builder().put(put).build(),
        TransactWriteItem::builder().update(update).build(),
    ]
}

async fn transact(client: &Client, records: &str, accounts: &str, key: &str) {
    let account = format!("acct-{}", key.len() % 20);
    client
        .transact_write_items()
        .set_transact_items(Some(
            message_actions(records, accounts, key, &account).into(),
        ))
        .send()
        .await
        .expect("TransactWriteItems");
}

/// Ten messages' commits in one transaction (20 actions, one account each):
/// what a batch-wide commit would cost, for comparison.
async fn transact_batch(client: &Client, records: &str, accounts: &str, keys: &[String]) {
    let actions = keys
        .iter()
        .enumerate()
        .flat_map(|(i, key)| message_actions(records, accounts, key, &format!("acct-{i}")))
        .collect();
    client
        .transact_write_items()
        .set_transact_items(Some(actions))
        .send()
        .await
        .expect("TransactWriteItems of a batch");
}

async fn claim(client: &Client, records: &str, key: &str) {
    client
        .put_item()
        .table_name(records)
        .item("id", AttributeValue::S(key.to_owned()))
        .item("status", AttributeValue::S("INPROGRESS".into()))
        .item("expiration", AttributeValue::N((NOW + 86_400).to_string()))
        .item(
            "in_progress_expiration",
            AttributeValue::N((NOW * 1000 + 30_000).to_string()),
        )
        .item("owner", AttributeValue::S(format!("owner-{key}")))
        .item("validation", AttributeValue::S("9f".repeat(32)))
        .condition_expression(CLAIM_CONDITION)
        .set_expression_attribute_names(Some(claim_names()))
        .set_expression_attribute_values(Some(claim_values()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await
        .expect("PutItem");
}

/// Claim/complete's completion: the owner-conditioned `UpdateItem`.
async fn complete(client: &Client, records: &str, key: &str) {
    client
        .update_item()
        .table_name(records)
        .key("id", AttributeValue::S(key.to_owned()))
        .update_expression("SET #status = :completed, #data = :data REMOVE #in_progress_expiration")
        .condition_expression("#owner = :owner")
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#data", "data")
        .expression_attribute_names("#in_progress_expiration", "in_progress_expiration")
        .expression_attribute_names("#owner", "owner")
        .expression_attribute_values(":completed", AttributeValue::S("COMPLETED".into()))
        .expression_attribute_values(":data", AttributeValue::S(r#"{"credited":true}"#.into()))
        .expression_attribute_values(":owner", AttributeValue::S(format!("owner-{key}")))
        .send()
        .await
        .expect("UpdateItem");
}

async fn batch_get(client: &Client, records: &str, keys: &[String]) {
    let mut request = KeysAndAttributes::builder().consistent_read(true);
    for key in keys {
        request = request.keys(HashMap::from([(
            "id".to_owned(),
            AttributeValue::S(key.clone()),
        )]));
    }
    client
        .batch_get_item()
        .request_items(records, request.build().expect("keys"))
        .send()
        .await
        .expect("BatchGetItem");
}

/// `bench sdk [CALLS]`: CALLS requests of each kind per client setting.
pub fn run(calls: usize) -> Result<(), String> {
    let calls = calls.clamp(ROUNDS * 10, 50_000) / ROUNDS * ROUNDS;
    let per_round = calls / ROUNDS;
    // One current-thread runtime, as `lambda_idempotency::runtime::start` gives a function
    // below 1,769 MB: the thread's CPU is the client's whole cost.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let setup = client("functions' client").await;
        let records = create_idempotency_table(&setup).await;
        let accounts = create_table(&setup, "bench-sdk-accounts", "account_id", None).await;
        let mut variants = Vec::new();
        for label in SETTINGS {
            let client = client(label).await;
            // Warm: credentials, endpoint, a pooled connection.
            transact(&client, &records, &accounts, &format!("warm-{label}")).await;
            variants.push(Variant {
                label,
                client,
                cpu: [Duration::ZERO; MEASURED.len()],
            });
        }
        let deadline = Instant::now() + Duration::from_secs(900);
        for round in 0..ROUNDS {
            for (v, variant) in variants.iter_mut().enumerate() {
                let keys: Vec<String> = (0..per_round)
                    .map(|i| format!("sdk-{v}-{round}-{i}"))
                    .collect();
                let claims: Vec<String> = keys.iter().map(|k| format!("claim-{k}")).collect();
                let batched: Vec<String> = keys.iter().map(|k| format!("batch-{k}")).collect();
                let (client, records, accounts) = (&variant.client, &records, &accounts);
                let spent = [
                    timed(ten_at_a_time(&keys, |k| transact(client, records, accounts, k))).await,
                    timed(ten_at_a_time(&claims, |k| claim(client, records, k))).await,
                    timed(ten_at_a_time(&claims, |k| complete(client, records, k))).await,
                    timed(async {
                        for chunk in batched.chunks(10) {
                            transact_batch(client, records, accounts, chunk).await;
                        }
                    })
                    .await,
                    timed(async {
                        for chunk in keys.chunks(10) {
                            batch_get(client, records, chunk).await;
                        }
                    })
                    .await,
                ];
                for (total, spent) in variant.cpu.iter_mut().zip(spent) {
                    *total += spent;
                }
            }
            if Instant::now() > deadline {
                return Err(format!("bench sdk: over 15 min after round {round}"));
            }
        }
        println!(
            "DynamoDB requests from one current-thread runtime against moto (kept-alive connections): {calls} TransactWriteItems (payments' optimistic commit), {calls} PutItem (a claim), {calls} UpdateItem (its completion), 10 concurrent, {calls} messages' commits 10 to a TransactWriteItems, and {} BatchGetItem of 10 keys per setting, {ROUNDS} interleaved rounds; CPU = the thread's time on CPU",
            calls / 10
        );
        let headings: String = MEASURED
            .iter()
            .map(|(heading, _)| format!(" CPU / {heading} | ratio |"))
            .collect();
        println!("| client setting |{headings}");
        println!("| --- |{}", " --- | --- |".repeat(MEASURED.len()));
        let base = variants[0].cpu;
        for v in &variants {
            let cells: String = MEASURED
                .iter()
                .zip(v.cpu.iter().zip(base))
                .map(|((_, keys_per_unit), (cpu, base))| {
                    let per_unit = cpu.as_secs_f64() * 1000.0 / (calls / keys_per_unit) as f64;
                    let ratio = cpu.as_secs_f64() / base.as_secs_f64();
                    format!(" {per_unit:.3} ms | {ratio:.2}x |")
                })
                .collect();
            println!("| {} |{cells}", v.label);
        }
        Ok(())
    })
}
