//! The outbox relay as a real process under a local Lambda Runtime API, fed
//! by the stream mapping emulator, killed (SIGKILL) right after each of its
//! SQS requests is answered — every boundary in turn — then restarted; the
//! mapping retries the batch. The consumer must see exactly one message per
//! stable id on the FIFO queue and every id (under its own body) on the
//! standard queue, in every trial.

use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use outbox_relay::stable_id;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Child;
use std::time::Duration;
use test_kit::esm::create_queue;
use test_kit::runtime_api::{Invocation, RuntimeApi, function_binary, lambda_command};
use test_kit::stream_esm::{self, Options};
use test_kit::{create_idempotency_table_with_stream, moto, now_ms, unique_name};

const RECORDS: usize = 12;
const BATCH: usize = 5;

fn spawn(api: &RuntimeApi, allowlist: &str) -> Child {
    let mut command = lambda_command(&function_binary("outbox-relay"), "outbox-relay", api);
    moto().apply_env(&mut command);
    command
        .env("RUST_LOG", "warn")
        .env(outbox_relay::ALLOWLIST_ENV, allowlist)
        .spawn()
        .expect("start the outbox-relay binary")
}

struct Proc {
    api: RuntimeApi,
    child: Child,
    kills: usize,
}

/// Invokes and waits for the answer, or for the process to die (`None`).
async fn invoke_watching(p: &mut Proc, event: Value) -> Option<Invocation> {
    let invoke = p
        .api
        .invoke(event, now_ms() + 30_000, Duration::from_secs(20));
    tokio::pin!(invoke);
    loop {
        tokio::select! {
            result = &mut invoke => return result,
            _ = tokio::time::sleep(Duration::from_millis(10)) => {
                if let Ok(Some(_)) = p.child.try_wait() {
                    return None;
                }
            }
        }
    }
}

/// Every message of a queue (received once each, deleted): (body, outbox_id,
/// deduplication id).
async fn drain(url: &str) -> Vec<(String, Option<String>, Option<String>)> {
    let sqs = moto().sqs().await;
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 2 {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receive");
        if got.messages().is_empty() {
            empty += 1;
            continue;
        }
        for m in got.messages() {
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("delete");
            out.push((
                m.body().unwrap_or_default().to_owned(),
                m.message_attributes()
                    .and_then(|a| a.get("outbox_id"))
                    .and_then(|v| v.string_value())
                    .map(str::to_owned),
                m.attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::MessageDeduplicationId))
                    .cloned(),
            ));
        }
    }
    out
}

/// Ids received, with counts; each body under the id its record and index
/// give.
fn ids(messages: &[(String, Option<String>, Option<String>)]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for (body, outbox_id, _) in messages {
        let body: Value = serde_json::from_str(body).unwrap();
        let expected = stable_id(
            body["record"].as_str().unwrap(),
            body["index"].as_u64().unwrap() as usize,
        );
        assert_eq!(outbox_id.as_deref(), Some(expected.as_str()));
        *seen.entry(expected).or_insert(0) += 1;
    }
    seen
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

    let api = RuntimeApi::start().await;
    let allowlist = json!({"orders.confirm": [&fifo.url, &standard.url]}).to_string();
    let child = spawn(&api, &allowlist);
    moto().kill_after(n, child.id(), &marker).await;
    let state = tokio::sync::Mutex::new(Proc {
        api,
        child,
        kills: 0,
    });
    let streams = moto().dynamodbstreams().await;
    let options = Options {
        batch_size: BATCH,
        max_retries: 10,
        ..Options::default()
    };
    let stats = stream_esm::run(&streams, &arn, &options, |event| {
        let state = &state;
        let marker = &marker;
        let allowlist = &allowlist;
        async move {
            let mut p = state.lock().await;
            match invoke_watching(&mut p, event).await {
                Some(Invocation::Response(r)) => Ok(serde_json::from_value(r)?),
                other => {
                    if matches!(p.child.try_wait(), Ok(Some(_))) {
                        // Killed: disarm (the launcher refuses the marker's
                        // requests once the kill fired) and restart.
                        p.kills += 1;
                        moto().kill_after(u32::MAX, 0, marker).await;
                        p.api = RuntimeApi::start().await;
                        p.child = spawn(&p.api, allowlist);
                    }
                    Err(format!("the relay did not answer: {other:?}").into())
                }
            }
        }
    })
    .await;
    let mut p = state.into_inner();
    // A kill after the last request can land after the relay answered its
    // last invocation: nothing is invoked afterwards to notice it. Give it
    // the time the launcher takes to fire, then look.
    tokio::time::sleep(Duration::from_millis(100)).await;
    if matches!(p.child.try_wait(), Ok(Some(status)) if !status.success()) {
        p.kills += 1;
    }
    let _ = p.child.kill();
    let _ = p.child.wait();
    moto().kill_after(u32::MAX, 0, &marker).await;
    assert!(
        stats.skipped.is_empty() && !stats.timed_out,
        "n={n}: {stats:?}"
    );

    let got = drain(&fifo.url).await;
    let seen = ids(&got);
    assert_eq!(
        seen.keys().cloned().collect::<BTreeSet<_>>(),
        fifo_ids,
        "n={n}"
    );
    assert!(
        seen.values().all(|c| *c == 1),
        "n={n}: FIFO once per id: {seen:?}"
    );
    assert!(got.iter().all(|(_, id, dedup)| id == dedup));
    let seen = ids(&drain(&standard.url).await);
    assert_eq!(
        seen.keys().cloned().collect::<BTreeSet<_>>(),
        standard_ids,
        "n={n}"
    );
    p.kills > 0
}

/// 12 records in batches of 5: 3 invocations of 2 `SendMessageBatch` each
/// (one per queue), so at least 6 boundaries, each survived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_survives_a_kill_after_every_request() {
    let _serial = crate::exactly_once::relay::SERIAL.lock().await;
    let mut boundaries = 0;
    for n in 1..=20 {
        if !trial(n).await {
            break;
        }
        boundaries += 1;
    }
    // At least one boundary per SendMessageBatch of the plan; more when the
    // mapping's reads split the stream into more batches (a loaded machine).
    assert!(
        boundaries >= 2 * RECORDS.div_ceil(BATCH),
        "only {boundaries} kill points were reached"
    );
}
