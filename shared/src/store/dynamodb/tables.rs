//! Business tables in DynamoDB: the client is their [`TableStore`], each
//! request one consistent `GetItem` or one plain conditional write
//! (`write.rs`).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;

use crate::error::HandlerError;
use crate::table::{Table, TableStore};
use crate::write::{Item, Write};

#[async_trait]
impl TableStore for Client {
    async fn get_item(&self, table: &str, key: &Item) -> Result<Option<Item>, HandlerError> {
        super::write::get(self, table, key).await
    }

    async fn write_item(
        &self,
        write: &Write,
    ) -> Result<Result<Option<Item>, Option<Item>>, HandlerError> {
        super::write::write(self, write).await
    }
}

impl Table {
    /// The DynamoDB table `name`. For staged writes to commit with the
    /// idempotency record, the engine's store must be a
    /// [`DynamoDbStore`](crate::DynamoDbStore) in the same account and region.
    pub fn dynamodb(client: Client, name: impl Into<String>) -> Self {
        Self::new(client, name)
    }
}
