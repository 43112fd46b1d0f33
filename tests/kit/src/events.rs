//! Sample events: the files in `events/`, and the suite's synthetic SQS
//! batches (on the library's builders, `lambda_idempotency::testing::events`).

use serde_json::{Value, json};

/// Lambda's invocation payload cap, in bytes (6 MB: "Request must be
/// smaller than 6291456 bytes"): no event of an event source mapping is
/// larger.
pub const MAX_INVOCATION_PAYLOAD: usize = 6 * 1024 * 1024;

/// A file of `events/`, parsed.
pub fn sample(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../events")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

pub use lambda_idempotency::testing::events::{Msg, sqs_event};

/// Message `m{i}` of a `payments` batch: payment `p{i}` of `amount_cents`
/// to `account`, in the account's FIFO group.
pub fn payment(i: usize, account: &str, amount_cents: i64) -> Msg {
    Msg::new(
        format!("m{i}"),
        json!({"payment_id": format!("p{i}"), "account_id": account, "amount_cents": amount_cents})
            .to_string(),
    )
    .in_group(account)
}

/// Messages `{tag}-{k}` with body `{"key": "k{k}"}` for each `k` in
/// `keys`: batches over overlapping key ranges race on the same keys (race
/// tests). On a `.fifo` `queue` they spread over three message groups.
pub fn keyed_batch(queue: &str, keys: std::ops::Range<u32>, tag: &str) -> Vec<Msg> {
    keys.map(|k| {
        let m = Msg::new(
            format!("{tag}-{k}"),
            json!({"key": format!("k{k}")}).to_string(),
        );
        if queue.ends_with(".fifo") {
            m.in_group(format!("g{}", k % 3))
        } else {
            m
        }
    })
    .collect()
}

/// A standard-queue event of `n` orders as Lambda delivers them (bodies of
/// `events/orders-standard.json`'s shape, about 576 bytes a record: 10,000 of
/// them are a 5.76 MB event, under the 6 MB invocation payload cap), keys
/// `{tag}-{i}`.
pub fn orders_event(n: usize, tag: &str) -> Value {
    let messages: Vec<Msg> = (0..n)
        .map(|i| {
            Msg::new(
                format!("{tag}-{i:08}-4d3c-8b1a-5c1e0a11f00d"),
                json!({
                    "event_id": format!("{tag}-{i}"),
                    "order_id": format!("ord-{tag}-{i}"),
                    "customer_id": format!("cust-{:04}", i % 1000),
                    "amount_cents": 1000 + (i % 9000) as i64,
                    "status": "PLACED",
                })
                .to_string(),
            )
        })
        .collect();
    sqs_event("orders", &messages)
}

/// `event` (an SQS event) with its records' `receiptHandle`s lengthened
/// evenly (SQS's real handles are a few hundred characters, the synthetic
/// ones a few dozen) so that its JSON is as close under `bytes` as an even
/// share allows: at most `bytes`, within one byte a record of it.
///
/// # Panics
/// When `event` has no records or is already larger than `bytes`.
pub fn filled_to(mut event: Value, bytes: usize) -> Value {
    let len = serde_json::to_vec(&event).expect("JSON").len();
    let records = event["Records"].as_array_mut().expect("an SQS event");
    assert!(
        !records.is_empty() && len <= bytes,
        "{len} bytes, over {bytes}"
    );
    let pad = (bytes - len) / records.len();
    for r in records {
        let handle = r["receiptHandle"].as_str().expect("receiptHandle");
        r["receiptHandle"] = json!(format!("{handle}{}", "A".repeat(pad)));
    }
    event
}
