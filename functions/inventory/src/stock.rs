//! Stock levels: the business table (`STOCK_TABLE`, partition key `sku`,
//! attribute `stock` (N)).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use shared::HandlerError;
use std::collections::HashMap;
use std::sync::Mutex;

/// What a reservation attempt found. Refusals are values, not errors:
/// whether they are final is the caller's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// The quantity was taken; this much is left.
    Reserved {
        /// Stock left after the reservation.
        remaining: i64,
    },
    /// Not enough stock: nothing was taken.
    Insufficient {
        /// The stock level seen.
        available: i64,
    },
    /// No such SKU in the table: nothing was taken.
    UnknownSku,
}

/// Where stock levels live.
#[async_trait]
pub trait Stock: Send + Sync + std::fmt::Debug {
    /// Takes `quantity` units of `sku` if at least that many are in stock,
    /// atomically. Not idempotent by itself: the engine makes it so. `Err`
    /// is a failure to find out (retryable, or a corrupt item).
    async fn reserve(&self, sku: &str, quantity: u32) -> Result<Reserve, HandlerError>;

    /// The stock level, if the SKU exists.
    async fn level(&self, sku: &str) -> Result<Option<i64>, HandlerError>;
}

/// Stock in DynamoDB: one `UpdateItem` per reservation,
/// `SET #stock = #stock - :q` on the condition `#stock >= :q`, returning the
/// new level (`UPDATED_NEW`) or, when the condition fails, the item as it was
/// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`): no item means an unknown
/// SKU, an item means insufficient stock. A missing item fails the condition
/// too, so the update never creates one.
#[derive(Debug, Clone)]
pub struct DynamoDbStock {
    client: Client,
    table: String,
}

impl DynamoDbStock {
    /// Stock in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }
}

/// The `stock` attribute of an item (`Ok(None)` when there is no item).
fn stock_of(
    sku: &str,
    item: Option<&HashMap<String, AttributeValue>>,
) -> Result<Option<i64>, HandlerError> {
    let Some(item) = item else {
        return Ok(None);
    };
    match item.get("stock") {
        Some(AttributeValue::N(n)) => n.parse().map(Some).map_err(|_| {
            HandlerError::terminal(format!("stock of {sku} is not a whole number: {n}"))
        }),
        Some(other) => Err(HandlerError::terminal(format!(
            "stock of {sku} has the wrong type: {other:?}"
        ))),
        None => Err(HandlerError::terminal(format!(
            "the item of {sku} has no stock attribute"
        ))),
    }
}

fn sdk_error<E>(err: E) -> HandlerError
where
    E: std::error::Error + Send + Sync + 'static,
{
    HandlerError::retryable(aws_sdk_dynamodb::error::DisplayErrorContext(err).to_string())
}

#[async_trait]
impl Stock for DynamoDbStock {
    async fn reserve(&self, sku: &str, quantity: u32) -> Result<Reserve, HandlerError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("sku", AttributeValue::S(sku.to_owned()))
            .update_expression("SET #stock = #stock - :q")
            .condition_expression("#stock >= :q")
            .expression_attribute_names("#stock", "stock")
            .expression_attribute_values(":q", AttributeValue::N(quantity.to_string()))
            .return_values(ReturnValue::UpdatedNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(out) => match stock_of(sku, out.attributes())? {
                Some(remaining) => Ok(Reserve::Reserved { remaining }),
                None => Err(HandlerError::retryable(
                    "UpdateItem returned no stock level",
                )),
            },
            Err(err) => match err.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    Ok(match stock_of(sku, failed.item())? {
                        Some(available) => Reserve::Insufficient { available },
                        None => Reserve::UnknownSku,
                    })
                }
                _ => Err(sdk_error(err)),
            },
        }
    }

    async fn level(&self, sku: &str) -> Result<Option<i64>, HandlerError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("sku", AttributeValue::S(sku.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        stock_of(sku, out.item())
    }
}

/// Stock in memory (local runs, tests).
#[derive(Debug, Default)]
pub struct MemoryStock(Mutex<HashMap<String, i64>>);

/// The stock [`MemoryStock::sample`] starts with: enough for
/// `events/inventory-order-placed.json`, not for
/// `events/inventory-insufficient-stock.json`.
pub const SAMPLE_STOCK: [(&str, i64); 3] = [
    ("SKU-RED-MUG", 100),
    ("SKU-BLUE-PLATE", 40),
    ("SKU-GREEN-BOWL", 25),
];

impl MemoryStock {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stock with the given levels.
    pub fn with_levels<S: Into<String>>(levels: impl IntoIterator<Item = (S, i64)>) -> Self {
        Self(Mutex::new(
            levels.into_iter().map(|(s, n)| (s.into(), n)).collect(),
        ))
    }

    /// Stock seeded with [`SAMPLE_STOCK`] (local runs).
    pub fn sample() -> Self {
        Self::with_levels(SAMPLE_STOCK)
    }

    /// Sets a level (restocking, tests).
    pub fn set_level(&self, sku: impl Into<String>, level: i64) {
        self.lock().insert(sku.into(), level);
    }
}

#[async_trait]
impl Stock for MemoryStock {
    async fn reserve(&self, sku: &str, quantity: u32) -> Result<Reserve, HandlerError> {
        let mut levels = self.lock();
        let Some(level) = levels.get_mut(sku) else {
            return Ok(Reserve::UnknownSku);
        };
        let quantity = i64::from(quantity);
        if *level < quantity {
            return Ok(Reserve::Insufficient { available: *level });
        }
        *level -= quantity;
        Ok(Reserve::Reserved { remaining: *level })
    }

    async fn level(&self, sku: &str) -> Result<Option<i64>, HandlerError> {
        Ok(self.lock().get(sku).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::ErrorKind;

    #[tokio::test]
    async fn memory_stock_takes_only_what_is_there() {
        let stock = MemoryStock::with_levels([("A", 5)]);
        assert_eq!(
            stock.reserve("A", 3).await.unwrap(),
            Reserve::Reserved { remaining: 2 }
        );
        assert_eq!(
            stock.reserve("A", 3).await.unwrap(),
            Reserve::Insufficient { available: 2 }
        );
        assert_eq!(
            stock.reserve("A", 2).await.unwrap(),
            Reserve::Reserved { remaining: 0 }
        );
        assert_eq!(stock.reserve("B", 1).await.unwrap(), Reserve::UnknownSku);
        assert_eq!(stock.level("A").await.unwrap(), Some(0));
        assert_eq!(stock.level("B").await.unwrap(), None);
    }

    #[test]
    fn stock_attribute_parsing() {
        let item = |v: AttributeValue| HashMap::from([("stock".to_owned(), v)]);
        assert_eq!(stock_of("A", None).unwrap(), None);
        assert_eq!(
            stock_of("A", Some(&item(AttributeValue::N("7".into())))).unwrap(),
            Some(7)
        );
        for bad in [
            item(AttributeValue::N("7.5".into())),
            item(AttributeValue::S("7".into())),
            HashMap::from([("sku".to_owned(), AttributeValue::S("A".into()))]),
        ] {
            let err = stock_of("A", Some(&bad)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Terminal, "{bad:?}");
            assert!(
                err.to_string().contains("stock of A") || err.to_string().contains("item of A")
            );
        }
    }
}
