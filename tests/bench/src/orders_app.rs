//! The orders function as `bench orders` and `bench bill` build it (on the
//! outbox), with batch commits on or off.

use lambda_idempotency::{DynamoDbStore, Idempotency, Table, store::TableConfig};

pub fn app(
    ddb: aws_sdk_dynamodb::Client,
    _sqs: aws_sdk_sqs::Client,
    idempotency: String,
    orders_table: String,
    queue_url: String,
    batch_commits: bool,
) -> orders::App {
    app_with(
        ddb,
        idempotency,
        orders_table,
        queue_url,
        orders::App::config()
            .disabled(false)
            .batch_commits(batch_commits),
    )
}

/// The orders function with its engine configured by `config`.
pub fn app_with(
    ddb: aws_sdk_dynamodb::Client,
    idempotency: String,
    orders_table: String,
    queue_url: String,
    config: lambda_idempotency::Config,
) -> orders::App {
    let engine = Idempotency::new(
        DynamoDbStore::new(ddb.clone(), TableConfig::new(idempotency)),
        config,
    );
    orders::App::new(engine, Table::dynamodb(ddb, orders_table), queue_url)
}
