//! `orders` as a real process under the local Lambda Runtime API, killed
//! (SIGKILL) right after each of its DynamoDB requests is answered — every
//! boundary in turn — restarted, its batch redelivered, then `outbox-relay`
//! run over the idempotency table's stream. The setup (tables, the stream,
//! the notifications queue, what the consumer reads) is the end-to-end
//! test's (`exactly_once::orders`).

use crate::exactly_once::orders::{Setup, by_id, once, order, setup};
use orders::OrderEvent;
use serde_json::Value;
use std::process::Child;
use std::time::Duration;
use test_kit::crash::{every_boundary, sqs_batch_trial};
use test_kit::events::{Msg, sqs_event};
use test_kit::runtime_api::{RuntimeApi, spawn_function};

/// `orders` as a real process under the local Lambda Runtime API.
fn spawn_orders(api: &RuntimeApi, s: &Setup<'_>, batch_commits: bool) -> Child {
    spawn_function(
        "orders",
        api,
        &[
            (
                lambda_idempotency::env::BATCH_COMMITS_ENV,
                &batch_commits.to_string(),
            ),
            ("IDEMPOTENCY_TABLE", &s.idempotency),
            ("ORDERS_TABLE", &s.orders_table),
            ("NOTIFICATIONS_QUEUE_URL", &s.notifications),
        ],
    )
}

const LEASE: Duration = Duration::from_millis(1500);

/// One crash trial: the orders process killed right after its `n`-th
/// DynamoDB request is answered, restarted, the batch redelivered until it
/// succeeds, then the relay run. Returns whether the kill happened, and the
/// setup to read the results from.
async fn crash_trial(n: u32, event: &Value, batch_commits: bool) -> (bool, Setup<'static>) {
    let s = setup(3).await;
    let spawn = |api: &RuntimeApi| spawn_orders(api, &s, batch_commits);
    let label = format!("batch commits {batch_commits}");
    let killed = sqs_batch_trial(n, &s.idempotency, LEASE, event, spawn, &label).await;
    s.relay().await;
    (killed, s)
}

/// `orders` killed (SIGKILL) right after each of its DynamoDB requests is
/// answered, every boundary in turn, restarted, the batch (with an in-batch
/// duplicate) redelivered, then the relay run: in every trial each order is
/// written once with its content and the consumer receives exactly one
/// `OrderConfirmed` per event. Without a `SendMessage` in the function there
/// is no boundary between the effect and its record to crash in. With batch
/// commits (the default) and without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_survive_a_kill_at_every_request_boundary() {
    let new: Vec<OrderEvent> = (0..4).map(order).collect();
    let mut messages: Vec<Msg> = new
        .iter()
        .enumerate()
        .map(|(i, o)| Msg::new(format!("m{i}"), serde_json::to_string(o).unwrap()))
        .collect();
    messages.push(Msg::new("m-dup", serde_json::to_string(&new[0]).unwrap()));
    let event = sqs_event("orders", &messages);
    for batch_commits in [true, false] {
        let boundaries = every_boundary(20, |n| {
            let (event, new) = (&event, &new);
            async move {
                let (killed, s) = crash_trial(n, event, batch_commits).await;
                assert_eq!(
                    s.notifications_by_event().await,
                    once(new.iter().map(|o| o.event_id.as_str())),
                    "batch commits {batch_commits}: killed after request {n}"
                );
                assert_eq!(
                    s.orders().await,
                    by_id(new),
                    "batch commits {batch_commits}: killed after request {n}"
                );
                killed
            }
        })
        .await;
        // Batch commits: one transaction for the batch's four new orders
        // (the copy waits for its first). Per record: one each.
        let requests = if batch_commits { 1 } else { new.len() };
        assert_eq!(boundaries, requests, "batch commits {batch_commits}");
    }
}
