//! The DynamoDB store: the production backend.
//!
//! A conditional `PutItem` to claim (`ReturnValuesOnConditionCheckFailure =
//! ALL_OLD`, so a duplicate costs no extra read; a consistent `GetItem`
//! only when an emulator did not return the old item); a commit is an
//! owner-conditioned `UpdateItem` (fenced), a claim-conditioned `PutItem`
//! (optimistic) or, with staged writes, one `TransactWriteItems` (a lone
//! staged write without a record write: its plain conditional write); an
//! owner-conditioned `DeleteItem` to release; `BatchGetItem` to read ahead
//! (one request per 100 keys, plus retries of unprocessed keys); many
//! records' commits in one `TransactWriteItems` (`batch.rs`, batch
//! commits).

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use std::time::Duration;

use super::{Claim, RecordWrite, Store, TransactError};
use crate::error::StoreError;
use crate::record::Record;
use crate::store::TableConfig;
use crate::write::Write;
use write::{PlainWriteError, build_error, transact_item};

/// Keys per `BatchGetItem` request (the service's limit).
const BATCH_GET_LIMIT: usize = 100;
/// Rounds of retrying `UnprocessedKeys` before giving up.
const BATCH_GET_ROUNDS: u32 = 6;

/// The cancellation reason of an item another request was writing.
const TRANSACTION_CONFLICT: &str = "TransactionConflict";

/// Idempotency records in a DynamoDB table (partition key `id`, S; TTL on
/// `expiration`).
#[derive(Debug, Clone)]
pub struct DynamoDbStore {
    client: Client,
    table: TableConfig,
}

impl DynamoDbStore {
    /// A store over an existing client.
    pub fn new(client: Client, table: TableConfig) -> Self {
        Self { client, table }
    }

    /// A store over an existing client, once its table passed
    /// [`DynamoDbStore::check`] (one `DescribeTable`): the constructor for
    /// a function's start. A global table in multi-Region eventual
    /// consistency is refused (see [`TableCheckError`]).
    pub async fn checked(client: Client, table: TableConfig) -> Result<Self, TableCheckError> {
        let store = Self::new(client, table);
        let check = store.check().await?;
        tracing::debug!(table = %store.table.table_name, ?check, "idempotency table checked");
        Ok(store)
    }

    /// [`DynamoDbStore::checked`] with a client configured from the
    /// environment ([`crate::aws::aws_sdk_config`]: region, credentials,
    /// `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_DYNAMODB`, explicit retries
    /// and timeouts).
    pub async fn from_env(table: TableConfig) -> Result<Self, TableCheckError> {
        let sdk = crate::aws::aws_sdk_config().await;
        Self::checked(Client::new(&sdk), table).await
    }

    /// Checks the table: one `DescribeTable`, then `check_description`
    /// (replicas and multi-Region consistency mode). A table that may be a
    /// replica of a global table of version 2017.11.29, which
    /// `DescribeTable` does not tell (`may_be_legacy_global`: a stream of
    /// new and old images, no replicas), costs one `DescribeGlobalTable`
    /// more, unless the claims are routed to one Region (the answer would
    /// not change the decision).
    pub async fn check(&self) -> Result<TableCheck, TableCheckError> {
        let described = self
            .client
            .describe_table()
            .table_name(&self.table.table_name)
            .send()
            .await
            .map_err(|e| TableCheckError::Describe {
                table: self.table.table_name.clone(),
                reason: aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
            })?;
        let Some(table) = described.table() else {
            return Err(TableCheckError::Describe {
                table: self.table.table_name.clone(),
                reason: "the answer described no table".into(),
            });
        };
        let check = check_description(&self.table, table)?;
        if check != TableCheck::SingleRegion
            || self.table.claims_routed_to_one_region
            || !may_be_legacy_global(table)
        {
            return Ok(check);
        }
        let name = &self.table.table_name;
        match self
            .client
            .describe_global_table()
            .global_table_name(name)
            .send()
            .await
        {
            Ok(out) => match out.global_table_description() {
                Some(global) => check_legacy_global(&self.table, global),
                None => Ok(check),
            },
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_global_table_not_found_exception()) =>
            {
                Ok(check)
            }
            Err(e) => Err(TableCheckError::DescribeGlobal {
                table: name.clone(),
                reason: aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
            }),
        }
    }

    /// The table configuration.
    pub fn table(&self) -> &TableConfig {
        &self.table
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn to_item(&self, r: &Record) -> SdkItem {
        let a = &self.table.attributes;
        let mut item = record_key(&self.table, &r.id);
        item.insert(
            a.status.clone(),
            AttributeValue::S(r.status.as_str().into()),
        );
        item.insert(
            a.expiration.clone(),
            AttributeValue::N(r.expiration.to_string()),
        );
        if let Some(t) = r.in_progress_expiration {
            item.insert(
                a.in_progress_expiration.clone(),
                AttributeValue::N(t.to_string()),
            );
        }
        for (name, value) in [
            (&a.data, &r.data),
            (&a.error, &r.error),
            (&a.validation, &r.validation),
            (&a.owner, &r.owner),
            (&a.outbox, &r.outbox),
        ] {
            if let Some(v) = value {
                item.insert(name.clone(), AttributeValue::S(v.clone()));
            }
        }
        item
    }

    fn backend<E>(operation: &'static str, err: SdkError<E>) -> StoreError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        StoreError::Backend {
            operation,
            source: Box::new(err),
        }
    }
}

mod batch;
pub(crate) mod connect;
mod item;
mod table;
mod tables;
pub(crate) mod write;

pub use table::{
    TableCheck, TableCheckError, check_description, check_key_schema, check_legacy_global,
    may_be_legacy_global,
};
pub use write::sdk_error;

use item::{SdkItem, claim_condition, complete_update, from_item, owner_condition, record_key};

impl DynamoDbStore {
    /// A commit of the record alone: one conditional `UpdateItem` (fenced)
    /// or `PutItem` (optimistic), cheaper than a transaction of one item.
    /// A failed condition returns the record as it stood (`ALL_OLD`).
    async fn commit_record(&self, write: RecordWrite<'_>) -> Result<(), TransactError> {
        let a = &self.table.attributes;
        let old = match write {
            RecordWrite::None => return Ok(()),
            RecordWrite::Fenced(record) => {
                let owner = record.owner.as_deref().unwrap_or_default();
                let cond = owner_condition(a, owner);
                let update = complete_update(a, record, owner);
                let result = self
                    .client
                    .update_item()
                    .table_name(&self.table.table_name)
                    .set_key(Some(record_key(&self.table, &record.id)))
                    .update_expression(update.expression)
                    .condition_expression(cond.expression)
                    .set_expression_attribute_names(Some(update.names))
                    .set_expression_attribute_values(Some(update.values))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .send()
                    .await;
                match result {
                    Ok(_) => return Ok(()),
                    Err(SdkError::ServiceError(se))
                        if matches!(
                            se.err(),
                            UpdateItemError::ConditionalCheckFailedException(_)
                        ) =>
                    {
                        match se.into_err() {
                            UpdateItemError::ConditionalCheckFailedException(f) => f.item,
                            _ => None,
                        }
                    }
                    Err(err) => {
                        return Err(TransactError::Store(Self::backend("UpdateItem", err)));
                    }
                }
            }
            RecordWrite::Claim { record, now_ms } => {
                match self
                    .put_under_claim(record, now_ms)
                    .await
                    .map_err(TransactError::Store)?
                {
                    None => return Ok(()),
                    Some(old) => old,
                }
            }
        };
        let old = old
            .filter(|item| !item.is_empty())
            .map(|item| from_item(&self.table, &item))
            .transpose()
            .map_err(TransactError::Store)?;
        Err(TransactError::Record(old))
    }

    /// Puts `record` under the claim condition at `now_ms` (one conditional
    /// `PutItem`, `ALL_OLD` on failure): `None` when written, `Some(old)`
    /// when the condition failed (`old`: the item in the way, if returned).
    /// The claim and the optimistic commit without writes both send it.
    async fn put_under_claim(
        &self,
        record: &Record,
        now_ms: u64,
    ) -> Result<Option<Option<SdkItem>>, StoreError> {
        let cond = claim_condition(&self.table.attributes, now_ms);
        let result = self
            .client
            .put_item()
            .table_name(&self.table.table_name)
            .set_item(Some(self.to_item(record)))
            .condition_expression(cond.expression)
            .set_expression_attribute_names(Some(cond.names))
            .set_expression_attribute_values(Some(cond.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(None),
            Err(SdkError::ServiceError(se))
                if matches!(se.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                match se.into_err() {
                    PutItemError::ConditionalCheckFailedException(f) => Ok(Some(f.item)),
                    _ => Ok(Some(None)),
                }
            }
            // Throttling, 500s (after the SDK's retries), timeouts: the SDK
            // error as it is, so the report says which.
            Err(err) => Err(Self::backend("PutItem", err)),
        }
    }

    /// The record's part of a transaction.
    fn record_item(&self, write: RecordWrite<'_>) -> Result<Option<TransactWriteItem>, StoreError> {
        let a = &self.table.attributes;
        let item = match write {
            RecordWrite::None => return Ok(None),
            RecordWrite::Fenced(record) => {
                let owner = record.owner.as_deref().unwrap_or_default();
                let cond = owner_condition(a, owner);
                let update = complete_update(a, record, owner);
                let update = Update::builder()
                    .table_name(&self.table.table_name)
                    .set_key(Some(record_key(&self.table, &record.id)))
                    .update_expression(update.expression)
                    .condition_expression(cond.expression)
                    .set_expression_attribute_names(Some(update.names))
                    .set_expression_attribute_values(Some(update.values))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .build()
                    .map_err(build_error)?;
                TransactWriteItem::builder().update(update).build()
            }
            RecordWrite::Claim { record, now_ms } => {
                let cond = claim_condition(a, now_ms);
                let put = Put::builder()
                    .table_name(&self.table.table_name)
                    .set_item(Some(self.to_item(record)))
                    .condition_expression(cond.expression)
                    .set_expression_attribute_names(Some(cond.names))
                    .set_expression_attribute_values(Some(cond.values))
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .build()
                    .map_err(build_error)?;
                TransactWriteItem::builder().put(put).build()
            }
        };
        Ok(Some(item))
    }
}

#[async_trait]
impl Store for DynamoDbStore {
    async fn claim(&self, record: &Record, now_ms: u64) -> Result<Claim, StoreError> {
        let old = match self.put_under_claim(record, now_ms).await? {
            None => return Ok(Claim::Acquired),
            Some(old) => old.filter(|item| !item.is_empty()),
        };
        match old {
            Some(old) => from_item(&self.table, &old).map(Claim::Existing),
            // Older emulators do not return ALL_OLD: read it.
            None => match self.get(&record.id).await? {
                Some(old) => Ok(Claim::Existing(old)),
                None => Ok(Claim::Vanished),
            },
        }
    }

    async fn release(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        let a = &self.table.attributes;
        let cond = owner_condition(a, owner);
        let result = self
            .client
            .delete_item()
            .table_name(&self.table.table_name)
            .set_key(Some(record_key(&self.table, id)))
            .condition_expression(cond.expression)
            .set_expression_attribute_names(Some(cond.names))
            .set_expression_attribute_values(Some(cond.values))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(ref se))
                if matches!(
                    se.err(),
                    DeleteItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Err(StoreError::LeaseLost { id: id.to_owned() })
            }
            Err(err) => Err(Self::backend("DeleteItem", err)),
        }
    }

    async fn get(&self, id: &str) -> Result<Option<Record>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table.table_name)
            .set_key(Some(record_key(&self.table, id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Self::backend("GetItem", e))?;
        out.item()
            .map(|item| from_item(&self.table, item))
            .transpose()
    }

    async fn get_many(&self, ids: &[String]) -> Result<Vec<Record>, StoreError> {
        let mut records = Vec::with_capacity(ids.len());
        let mut unique: Vec<&String> = ids.iter().collect();
        unique.sort();
        unique.dedup();
        for chunk in unique.chunks(BATCH_GET_LIMIT) {
            let keys: Vec<_> = chunk.iter().map(|id| record_key(&self.table, id)).collect();
            let mut request = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| StoreError::Backend {
                        operation: "BatchGetItem",
                        source: Box::new(e),
                    })?,
            );
            let mut round = 0;
            while let Some(keys) = request.take() {
                if round == BATCH_GET_ROUNDS {
                    return Err(StoreError::Backend {
                        operation: "BatchGetItem",
                        source: "unprocessed keys remained after retries".into(),
                    });
                }
                if round > 0 {
                    tokio::time::sleep(Duration::from_millis(10 << round)).await;
                }
                round += 1;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table.table_name, keys)
                    .send()
                    .await
                    .map_err(|e| Self::backend("BatchGetItem", e))?;
                if let Some(items) = out.responses().and_then(|r| r.get(&self.table.table_name)) {
                    for item in items {
                        records.push(from_item(&self.table, item)?);
                    }
                }
                request = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(&self.table.table_name))
                    .filter(|k| !k.keys().is_empty())
                    .cloned();
            }
        }
        Ok(records)
    }

    fn item_size(&self, record: &Record) -> usize {
        self.table.item_size(record)
    }

    async fn commit_many(&self, commits: &[super::Commit<'_>]) -> Result<(), super::CommitsError> {
        self.transact_many(commits).await
    }

    async fn commit(&self, record: RecordWrite<'_>, writes: &[Write]) -> Result<(), TransactError> {
        if writes.is_empty() {
            return self.commit_record(record).await;
        }
        crate::write::check(writes)
            .map_err(|reason| TransactError::Store(StoreError::Invalid { reason }))?;
        if let (RecordWrite::None, [write]) = (&record, writes) {
            return commit_one(&self.client, write).await;
        }
        let mut items = writes
            .iter()
            .map(transact_item)
            .collect::<Result<Vec<_>, _>>()
            .map_err(TransactError::Store)?;
        items.extend(self.record_item(record).map_err(TransactError::Store)?);
        if items.is_empty() {
            return Ok(());
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(()),
            Err(err) => err,
        };
        if let SdkError::ServiceError(ref se) = err
            && let TransactWriteItemsError::TransactionCanceledException(cancel) = se.err()
        {
            let reasons = cancel.cancellation_reasons();
            let has_record = !matches!(record, RecordWrite::None);
            if let Some(failure) = self
                .failure(reasons, writes.len(), has_record)
                .map_err(TransactError::Store)?
            {
                return Err(failure);
            }
            // No condition failed: an item was being written by another
            // transaction (a hot item). Nothing applied; the engine retries.
            if reasons
                .iter()
                .any(|r| r.code() == Some(TRANSACTION_CONFLICT))
            {
                return Err(TransactError::Conflict(Self::backend(
                    "TransactWriteItems",
                    err,
                )));
            }
        }
        Err(TransactError::Store(Self::backend(
            "TransactWriteItems",
            err,
        )))
    }
}

/// A commit of one staged write and nothing else: the plain conditional
/// write ([`write::commit_one`]: one write unit per KB
/// where a one-item `TransactWriteItems` costs two), its failed condition
/// reported as the transaction's would be (`Write { index: 0 }`).
async fn commit_one(client: &Client, write: &Write) -> Result<(), TransactError> {
    match write::commit_one(client, write).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(item)) => Err(TransactError::Write { index: 0, item }),
        Err(PlainWriteError::Conflict {
            operation, source, ..
        }) => Err(TransactError::Conflict(StoreError::Backend {
            operation,
            source,
        })),
        Err(PlainWriteError::Backend {
            operation, source, ..
        }) => Err(TransactError::Store(StoreError::Backend {
            operation,
            source,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::item::Expr;
    use super::*;
    use crate::record::Status;
    use crate::store::Attributes;

    /// Every `#name` and `:value` defined is used, and every one used is
    /// defined (DynamoDB rejects both; moto answers the first with HTTP 500).
    fn assert_placeholders_match(expressions: &[&str], e: &Expr) {
        let text = expressions.join(" ");
        let used = |sigil: char| -> std::collections::BTreeSet<String> {
            text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == sigil))
                .filter(|t| t.starts_with(sigil))
                .map(str::to_owned)
                .collect()
        };
        let names: std::collections::BTreeSet<_> = e.names.keys().cloned().collect();
        let values: std::collections::BTreeSet<_> = e.values.keys().cloned().collect();
        assert_eq!(used('#'), names, "names in {text}");
        assert_eq!(used(':'), values, "values in {text}");
    }

    fn record(data: Option<&str>, error: Option<&str>) -> Record {
        Record {
            id: "p#h".into(),
            status: Status::Completed,
            expiration: 1_700_000_000,
            in_progress_expiration: None,
            data: data.map(Into::into),
            error: error.map(Into::into),
            validation: Some("v".into()),
            owner: Some("tok".into()),
            outbox: None,
        }
    }

    #[test]
    fn claim_condition_placeholders_all_used() {
        let c = claim_condition(&Attributes::default(), 1_700_000_123_456);
        assert_placeholders_match(&[&c.expression], &c);
        assert_eq!(c.values[":now"], AttributeValue::N("1700000123".into()));
        assert_eq!(
            c.values[":now_ms"],
            AttributeValue::N("1700000123456".into())
        );
    }

    #[test]
    fn complete_update_placeholders_all_used() {
        let a = Attributes::default();
        for (data, error) in [
            (Some("{}"), None),
            (None, Some("boom")),
            (None, None),
            (Some("1"), Some("x")),
        ] {
            let r = record(data, error);
            let u = complete_update(&a, &r, "tok");
            let c = owner_condition(&a, "tok");
            assert_placeholders_match(&[&u.expression, &c.expression], &u);
        }
        let u = complete_update(&a, &record(Some("{}"), None), "tok");
        assert_eq!(
            u.expression,
            "SET #status = :completed, #expiration = :expiration, #data = :data \
             REMOVE #in_progress_expiration, #error, #outbox"
        );
        let mut with_outbox = record(None, None);
        with_outbox.outbox = Some("[]".into());
        let u = complete_update(&a, &with_outbox, "tok");
        assert!(
            u.expression.contains("#outbox = :outbox"),
            "{}",
            u.expression
        );
        assert_placeholders_match(&[&u.expression, &owner_condition(&a, "tok").expression], &u);
    }

    #[test]
    fn owner_condition_placeholders_all_used() {
        let c = owner_condition(&Attributes::default(), "tok");
        assert_placeholders_match(&[&c.expression], &c);
    }

    #[test]
    fn item_round_trips_with_custom_names() {
        let a = Attributes {
            id: "pk".into(),
            owner: "who".into(),
            outbox: "box".into(),
            ..Attributes::default()
        };
        let store_names = TableConfig {
            attributes: a.clone(),
            ..TableConfig::new("t")
        };
        let mut r = record(Some("{\"ok\":true}"), None);
        r.in_progress_expiration = Some(1_700_000_000_999);
        r.outbox = Some("[{\"id\":\"x\"}]".into());
        let client = Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
                .build(),
        );
        let store = DynamoDbStore::new(client, store_names);
        let item = store.to_item(&r);
        assert!(item.contains_key("pk") && item.contains_key("who") && item.contains_key("box"));
        assert_eq!(from_item(store.table(), &item).unwrap(), r);
    }

    /// Under a sort key, the item holds the key as the layout says, reads
    /// back to the record, and its size is the size the check counts.
    #[test]
    fn items_round_trip_in_each_composite_layout() {
        use crate::store::KeyLayout;
        let client = Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
                .build(),
        );
        let r = record(Some("{}"), None);
        for (layout, pk, sk) in [
            (
                KeyLayout::Spread {
                    sort_key: "SK".into(),
                },
                "IDEMPOTENCY#p#h",
                "IDEMPOTENCY",
            ),
            (
                KeyLayout::FixedPartition {
                    sort_key: "SK".into(),
                    partition_value: "idempotency#fn".into(),
                },
                "idempotency#fn",
                "p#h",
            ),
        ] {
            let table = TableConfig::new("t").partition_key("PK").key_layout(layout);
            let store = DynamoDbStore::new(client.clone(), table.clone());
            let item = store.to_item(&r);
            assert_eq!(item["PK"], AttributeValue::S(pk.into()));
            assert_eq!(item["SK"], AttributeValue::S(sk.into()));
            assert_eq!(record_key(&table, &r.id).len(), 2);
            assert_eq!(from_item(&table, &item).unwrap(), r);
            assert_eq!(
                table.item_size(&r),
                crate::value::item_size(&write::from_sdk_item(&item))
            );
            // A team's own item in the table is not read as a record.
            let mut theirs = item.clone();
            theirs.insert("PK".into(), AttributeValue::S("ORDER#1".into()));
            let err = from_item(&table, &theirs).unwrap_err();
            assert!(err.to_string().contains("key layout"), "{err}");
        }
    }

    /// The record's size check and the size of the item the store writes
    /// are one rule: they agree to the byte.
    #[test]
    fn record_size_is_the_size_of_its_item() {
        let client = Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
                .build(),
        );
        let store = DynamoDbStore::new(client, TableConfig::new("t"));
        let mut r = record(Some("{\"ok\":true}"), Some("boom"));
        r.in_progress_expiration = Some(1_700_000_000_999);
        r.outbox = Some("[{\"id\":\"x\"}]".into());
        let item = write::from_sdk_item(&store.to_item(&r));
        assert_eq!(
            r.item_size(&Attributes::default()),
            crate::value::item_size(&item)
        );
    }

    #[test]
    fn corrupt_items_are_reported() {
        let a = TableConfig::new("t");
        let mut item = SdkItem::new();
        item.insert("id".into(), AttributeValue::S("p#h".into()));
        item.insert("status".into(), AttributeValue::S("WEIRD".into()));
        item.insert("expiration".into(), AttributeValue::N("1".into()));
        let err = from_item(&a, &item).unwrap_err();
        assert!(err.to_string().contains("unknown status WEIRD"), "{err}");
        item.insert("status".into(), AttributeValue::S("COMPLETED".into()));
        item.insert("expiration".into(), AttributeValue::S("soon".into()));
        assert!(from_item(&a, &item).is_err());
    }
}
