//! `stream-ledger`: the `ledger` credit (a payment credits its account once,
//! optimistic commits, a pre-read per batch) behind each stream source, for
//! `bench streams`. `STREAM_SOURCE` picks the source (`kinesis`,
//! `dynamodb-streams`, `kafka`), `STREAM_ORDER` the order: `key` (Kinesis
//! partition key, DynamoDB item, Kafka record key) or `lane` (a Kinesis
//! shard, a Kafka topic-partition; DynamoDB Streams has no lane order and
//! runs by item). The payment is the Kinesis `data`, the Kafka value, or
//! the DynamoDB item's new image (`payment_id`, `account_id`,
//! `amount_cents`).

use lambda_idempotency::batch::PreRead;
use lambda_idempotency::dynamodb_streams::{DynamoDbRecord, DynamoDbStreamsProcessor, keys_and};
use lambda_idempotency::kafka::{KafkaMessage, KafkaProcessor};
use lambda_idempotency::kinesis::{KinesisProcessor, KinesisRecord};
use lambda_idempotency::{HandlerError, KeySelector, value::AttrValue, write::Staged};
use lambda_runtime::LambdaEvent;
use serde_json::Value;

use ledger::{Accounts, Applied, Payment};

// ORDER BEGIN: what the build before stream lanes lacks (it runs by lane).
use lambda_idempotency::kafka::KafkaOrder;
use lambda_idempotency::kinesis::KinesisOrder;

fn kinesis_order(p: KinesisProcessor, by_key: bool) -> KinesisProcessor {
    p.order(if by_key {
        KinesisOrder::PartitionKey
    } else {
        KinesisOrder::Shard
    })
}

fn kafka_order(p: KafkaProcessor, by_key: bool) -> KafkaProcessor {
    p.order(if by_key {
        KafkaOrder::RecordKey
    } else {
        KafkaOrder::Partition
    })
}
// ORDER END

enum Processor {
    Kinesis(KinesisProcessor),
    DynamoDb(DynamoDbStreamsProcessor),
    Kafka(KafkaProcessor),
}

struct App {
    processor: Processor,
    accounts: Accounts,
}

fn payment_of(record: &DynamoDbRecord) -> Result<Payment, HandlerError> {
    let image = record
        .new_image
        .as_ref()
        .ok_or_else(|| HandlerError::terminal("no new image"))?;
    let text = |name: &str| match image.get(name) {
        Some(AttrValue::S(s) | AttrValue::N(s)) => Ok(s.clone()),
        _ => Err(HandlerError::terminal(format!("no {name}"))),
    };
    Ok(Payment {
        payment_id: text("payment_id")?,
        account_id: text("account_id")?,
        amount_cents: text("amount_cents")?
            .parse()
            .map_err(|_| HandlerError::terminal("amount_cents is not a number"))?,
    })
}

impl App {
    async fn from_env() -> Result<Self, lambda_runtime::Error> {
        let config = ledger::App::config().commit_mode_from_env(payments::MODE_ENV)?;
        let (engine, [accounts]) =
            lambda_idempotency::Backend::from_env(config, [payments::ACCOUNTS])
                .await
                .map_err(|e| lambda_idempotency::report(&e))?
                .into_parts();
        let by_key = std::env::var("STREAM_ORDER").as_deref() != Ok("lane");
        let key = || KeySelector::pointer("/payment_id");
        let processor = match std::env::var("STREAM_SOURCE").as_deref() {
            Ok("kinesis") => Processor::Kinesis(kinesis_order(
                KinesisProcessor::new(engine, key()).pre_read(PreRead::Always),
                by_key,
            )),
            Ok("dynamodb-streams") => Processor::DynamoDb(
                DynamoDbStreamsProcessor::new(engine, keys_and("payment_id"))
                    .pre_read(PreRead::Always),
            ),
            Ok("kafka") => Processor::Kafka(kafka_order(
                KafkaProcessor::new(engine, key()).pre_read(PreRead::Always),
                by_key,
            )),
            other => {
                return Err(
                    format!("STREAM_SOURCE {other:?}: kinesis, dynamodb-streams or kafka").into(),
                );
            }
        };
        Ok(Self {
            processor,
            accounts: Accounts::from_table(accounts),
        })
    }

    async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
        let accounts = &self.accounts;
        let stage = |p: &Payment| -> Result<Staged<Applied>, HandlerError> {
            ledger::stage_credit(accounts, p)
        };
        Ok(match &self.processor {
            Processor::Kinesis(p) => serde_json::to_value(
                p.handle(
                    event,
                    |r: KinesisRecord<Payment>| async move { stage(&r.body) },
                )
                .await?,
            )?,
            Processor::DynamoDb(p) => serde_json::to_value(
                p.handle(
                    event,
                    |r: DynamoDbRecord| async move { stage(&payment_of(&r)?) },
                )
                .await?,
            )?,
            Processor::Kafka(p) => serde_json::to_value(
                p.handle(
                    event,
                    |r: KafkaMessage<Payment>| async move { stage(&r.body) },
                )
                .await?,
            )?,
        })
    }
}

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(App::from_env, App::handle)
}
