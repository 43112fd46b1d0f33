//! The DynamoDB store's connect step: one client from the crate's SDK
//! configuration for the records and the tables; the idempotency table
//! passes its check first (one `DescribeTable`).

use std::sync::Arc;

use aws_sdk_dynamodb::Client;

use super::DynamoDbStore;
use crate::store::TableConfig;
use crate::store::connect::{ConnectError, Connected, Tables};
use crate::table::Table;

async fn client() -> Client {
    Client::new(&crate::aws::aws_sdk_config().await)
}

/// The records in `table`, checked at start (an eventually consistent
/// global table is refused: README "Multi-Region"), and the tables `names`
/// beside them: their writes commit in one transaction with the record.
pub(crate) async fn connect<const N: usize>(
    table: TableConfig,
    names: [String; N],
) -> Result<Connected<N>, ConnectError> {
    let client = client().await;
    let store = DynamoDbStore::checked(client.clone(), table)
        .await
        .map_err(ConnectError::store(
            "the idempotency table failed its check at start",
        ))?;
    let records: Arc<DynamoDbStore> = Arc::new(store);
    Ok(Connected {
        records: records.clone(),
        tables: Tables {
            tables: names.map(|name| Table::dynamodb(client.clone(), name)),
            writes: records,
            local: None,
        },
    })
}

/// The tables `names` alone, for records kept in another store: their
/// writes commit on their own through a store over the same client that
/// never writes a record.
pub(crate) async fn tables<const N: usize>(names: [String; N]) -> Tables<N> {
    let client = client().await;
    let writes = DynamoDbStore::new(
        client.clone(),
        TableConfig::new(names.first().cloned().unwrap_or_default()),
    );
    Tables {
        tables: names.map(|name| Table::dynamodb(client.clone(), name)),
        writes: Arc::new(writes),
        local: None,
    }
}
