//! The outbox relay as a real process under a local Lambda Runtime API, fed
//! by the stream mapping emulator, killed (SIGKILL) right after each of its
//! SQS requests is answered — every boundary in turn — then restarted; the
//! mapping retries the batch. The consumer must see exactly one message per
//! stable id on the FIFO queue and every id (under its own body) on the
//! standard queue, in every trial.

use crate::exactly_once::relay::received_once;
use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use outbox_relay::stable_id;
use serde_json::json;
use std::collections::BTreeSet;
use std::process::Child;
use test_kit::crash::{Process, every_boundary};
use test_kit::esm::create_queue;
use test_kit::runtime_api::{RuntimeApi, spawn_function};
use test_kit::stream_esm::{self, Options};
use test_kit::{create_idempotency_table_with_stream, moto, now_ms, unique_name};

const RECORDS: usize = 12;
const BATCH: usize = 5;

fn spawn(api: &RuntimeApi, allowlist: &str) -> Child {
    spawn_function(
        "outbox-relay",
        api,
        &[(outbox_relay::ALLOWLIST_ENV, allowlist)],
    )
}

/// One trial: kill after the relay's `n`-th SQS request. Returns whether the
/// kill happened.
async fn trial(n: u32) -> bool {
    let ddb = moto().dynamodb().await;
    let sqs = moto().sqs().await;
    // The queues' marker scopes the kill to the relay's SQS requests (the
    // table has its own name: the mapping's stream reads do not count).
    let marker = format!("{}-", unique_name("relayq"));
    let table = format!("{}-idem", unique_name("relay-crash"));
    let arn = create_idempotency_table_with_stream(&ddb, &table, StreamViewType::NewImage).await;
    let fifo = create_queue(&sqs, &format!("{marker}n"), true, 5, 30).await;
    let standard = create_queue(&sqs, &format!("{marker}n"), false, 5, 30).await;
    let (mut fifo_ids, mut standard_ids) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..RECORDS {
        let key = format!("orders.confirm#evt-{i}");
        let entry = |index: usize, url: &str, group: Option<String>| {
            let mut e = json!({
                "id": stable_id(&key, index),
                "destination": {"sqs": {"queue_url": url}},
                "body": json!({"record": key, "index": index}).to_string(),
            });
            if let Some(g) = group {
                e["group_id"] = json!(g);
            }
            e
        };
        let outbox = json!([
            entry(0, &fifo.url, Some(format!("acct-{}", i % 3))),
            entry(1, &standard.url, None),
        ]);
        fifo_ids.insert(stable_id(&key, 0));
        standard_ids.insert(stable_id(&key, 1));
        ddb.put_item()
            .table_name(&table)
            .item("id", AttributeValue::S(key.clone()))
            .item("status", AttributeValue::S("COMPLETED".to_owned()))
            .item("outbox", AttributeValue::S(outbox.to_string()))
            .send()
            .await
            .unwrap();
    }

    let allowlist = json!({"orders.confirm": [&fifo.url, &standard.url]}).to_string();
    let process =
        Process::start_killing_after(n, &marker, |api: &RuntimeApi| spawn(api, &allowlist)).await;
    let state = tokio::sync::Mutex::new(process);
    let streams = moto().dynamodbstreams().await;
    let options = Options {
        batch_size: BATCH,
        max_retries: 10,
        ..Options::default()
    };
    let stats = stream_esm::run(&streams, &arn, &options, |event| {
        let state = &state;
        async move {
            let mut p = state.lock().await;
            let r = p.invoke(event, now_ms() + 30_000).await?;
            Ok(serde_json::from_value(r)?)
        }
    })
    .await;
    let kills = state.into_inner().stop().await;
    assert!(
        stats.skipped.is_empty() && !stats.timed_out,
        "n={n}: {stats:?}"
    );

    let (got, _) = received_once(
        &fifo.url,
        &standard.url,
        &fifo_ids,
        &standard_ids,
        &format!("n={n}"),
    )
    .await;
    assert!(got.iter().all(|m| m.outbox_id == m.dedup_id));
    kills > 0
}

/// 12 records in batches of 5: 3 invocations of 2 `SendMessageBatch` each
/// (one per queue), so at least 6 boundaries, each survived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_survives_a_kill_after_every_request() {
    let _serial = crate::exactly_once::relay::SERIAL.lock().await;
    let boundaries = every_boundary(20, trial).await;
    // At least one boundary per SendMessageBatch of the plan; more when the
    // mapping's reads split the stream into more batches (a loaded machine).
    assert!(
        boundaries >= 2 * RECORDS.div_ceil(BATCH),
        "only {boundaries} kill points were reached"
    );
}
