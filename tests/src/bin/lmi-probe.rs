//! A probe function for the Lambda Managed Instances tests: the shared
//! runtime (`lambda_idempotency::runtime::run`) around a handler that says what its
//! invocation saw. Payload `{"tag": T, "sleep_ms": N}` sleeps N ms and
//! answers `{"tag", "requestId", "deadlineMs", "remainingMs"}` (its own
//! context, read at the start), logging `probe` lines tagged T;
//! `{"panic": "why"}` panics.

use lambda_runtime::LambdaEvent;
use serde_json::{Value, json};
use std::time::Duration;

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::start(async {
        lambda_idempotency::runtime::init_telemetry();
        lambda_idempotency::runtime::run(|event: LambdaEvent<Value>| async move {
            let (payload, ctx) = (event.payload, event.context);
            let now =
                lambda_idempotency::clock::Clock::now_ms(&lambda_idempotency::clock::SystemClock);
            if let Some(why) = payload["panic"].as_str() {
                panic!("probe asked to panic: {why}");
            }
            let tag = payload["tag"].clone();
            lambda_runtime::tracing::info!(tag = %tag, "probe started");
            let sleep = payload["sleep_ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(sleep)).await;
            lambda_runtime::tracing::info!(tag = %tag, "probe done");
            Ok::<_, lambda_runtime::Error>(json!({
                "tag": tag,
                "requestId": ctx.request_id,
                "deadlineMs": ctx.deadline,
                "remainingMs": ctx.deadline.saturating_sub(now),
            }))
        })
        .await
    })
}
