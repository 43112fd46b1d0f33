//! The orders function as `bench orders` builds it (on the outbox).

use shared::{DynamoDbStore, Idempotency, Table, TableConfig};

pub fn app(
    ddb: aws_sdk_dynamodb::Client,
    _sqs: aws_sdk_sqs::Client,
    idempotency: String,
    orders_table: String,
    queue_url: String,
) -> orders::App {
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        orders::App::config().disabled(false),
    );
    orders::App::new(engine, Table::dynamodb(ddb, orders_table), queue_url)
}
