//! Runs a DynamoDB Streams sample event through the library's
//! `DynamoDbStreamsProcessor` on the in-memory store, twice (the second
//! delivery replays), keyed by the item's keys, the event name and its
//! `version`.
//!
//! ```sh
//! cargo run -p lambda-idempotency --example dynamodb_streams -- events/dynamodb-stream-subscriptions.json
//! ```

use lambda_idempotency::dynamodb_streams::{DynamoDbRecord, DynamoDbStreamsProcessor, keys_and};
use lambda_idempotency::{Config, HandlerError, Idempotency, MemoryStore};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("example.streams"));
    let processor = DynamoDbStreamsProcessor::new(engine, keys_and("version"));
    for path in std::env::args().skip(1) {
        let event: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        for delivery in 1..=2 {
            let response = processor
                .handle(
                    LambdaEvent::new(event.clone(), Context::default()),
                    |r: DynamoDbRecord| async move {
                        let what = if r.is_ttl_deletion() {
                            "a TTL deletion".to_owned()
                        } else {
                            r.event_name.clone()
                        };
                        println!("delivery {delivery}: ran {what} of {:?}", r.keys);
                        Ok::<_, HandlerError>(json!({"done": what}))
                    },
                )
                .await?;
            println!(
                "{path} delivery {delivery}: {}",
                serde_json::to_string(&response)?
            );
        }
    }
    Ok(())
}
