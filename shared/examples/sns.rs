//! Runs SNS sample events on the in-memory store, twice each (the second
//! delivery replays): a subscribed function's event through `SnsProcessor`,
//! a subscribed queue's batch (bodies that are SNS notifications) through
//! `SqsProcessor`, which opens them (`EnvelopeMode::Require`), both keyed
//! by the SNS `MessageId` (`KeySelector::event_id()`).
//!
//! ```sh
//! cargo run -p lambda-idempotency --example sns -- events/sns-notification.json events/sns-via-sqs.json
//! ```

use lambda_idempotency::sns::{Notification, SnsProcessor};
use lambda_idempotency::sqs::{EnvelopeMode, Envelopes, SqsProcessor, SqsRecord};
use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    let store = MemoryStore::new();
    let engine = Idempotency::new(store, Config::with_prefix("example.sns"));
    let subscribed = SnsProcessor::new(engine.clone(), KeySelector::event_id());
    let queued = SqsProcessor::new(engine, KeySelector::event_id())
        .envelope(EnvelopeMode::Require(Envelopes::Sns));
    for path in std::env::args().skip(1) {
        let event: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        let from_queue = event["Records"][0]["eventSource"] == "aws:sqs";
        for delivery in 1..=2 {
            let ctx = Context::default();
            if from_queue {
                let response = queued
                    .handle(
                        LambdaEvent::new(event.clone(), ctx),
                        |r: SqsRecord<Value>| {
                            let path = path.clone();
                            async move {
                                println!("{path} delivery {delivery}: ran {}", r.body);
                                Ok::<_, HandlerError>(json!({"done": r.body["event_id"]}))
                            }
                        },
                    )
                    .await?;
                println!(
                    "{path} delivery {delivery}: {}",
                    serde_json::to_string(&response)?
                );
            } else {
                subscribed
                    .handle(
                        LambdaEvent::new(event.clone(), ctx),
                        |n: Notification<Value>| {
                            let path = path.clone();
                            async move {
                                println!("{path} delivery {delivery}: ran {}", n.body);
                                Ok::<_, HandlerError>(json!({"done": n.body["event_id"]}))
                            }
                        },
                    )
                    .await?;
                println!("{path} delivery {delivery}: done");
            }
        }
    }
    Ok(())
}
