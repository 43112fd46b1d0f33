//! Runs Kafka sample events through the library's `KafkaProcessor` on the
//! in-memory store, twice each: the second delivery replays.
//!
//! ```sh
//! cargo run -p lambda-idempotency --example kafka -- events/kafka-msk-orders.json events/kafka-self-managed-orders.json
//! ```

use lambda_idempotency::kafka::{KafkaMessage, KafkaProcessor};
use lambda_idempotency::{Config, HandlerError, Idempotency, KeySelector, MemoryStore};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    let engine = Idempotency::new(MemoryStore::new(), Config::with_prefix("example.kafka"));
    let processor = KafkaProcessor::new(engine, KeySelector::pointer("/event_id"));
    for path in std::env::args().skip(1) {
        let event: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        for delivery in 1..=2 {
            let response = processor
                .handle(
                    LambdaEvent::new(event.clone(), Context::default()),
                    |m: KafkaMessage<Value>| {
                        let path = path.clone();
                        async move {
                            println!("{path} delivery {delivery}: ran {}", m.body);
                            Ok::<_, HandlerError>(json!({"done": m.body["event_id"]}))
                        }
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
