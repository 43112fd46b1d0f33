//! Batch commits in DynamoDB: the commits of many records in one
//! `TransactWriteItems`, each cancellation reason mapped back to its
//! commit.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::CancellationReason;

use super::write::{from_sdk_item, transact_item};
use super::{DynamoDbStore, TRANSACTION_CONFLICT, from_item};
use crate::error::StoreError;
use crate::record::Record;
use crate::store::batch::{self, Commit, CommitsError};
use crate::store::{RecordWrite, TransactError};

/// The cancellation reason of a failed condition.
const CONDITIONAL_CHECK_FAILED: &str = "ConditionalCheckFailed";

impl DynamoDbStore {
    /// [`Store::commit_many`](crate::Store::commit_many): one
    /// `TransactWriteItems` holding, for each commit in turn, its staged
    /// writes then its record write (the order [`Store::commit`](crate::Store::commit)
    /// sends them in).
    pub(super) async fn transact_many(&self, commits: &[Commit<'_>]) -> Result<(), CommitsError> {
        let invalid = |reason| {
            CommitsError::Transaction(TransactError::Store(StoreError::Invalid { reason }))
        };
        let size = |r: &Record| self.table.item_size(r);
        batch::check(commits, &size).map_err(invalid)?;
        let mut items = Vec::new();
        for commit in commits {
            crate::write::check(commit.writes).map_err(invalid)?;
            for w in commit.writes {
                items.push(
                    transact_item(w)
                        .map_err(|e| CommitsError::Transaction(TransactError::Store(e)))?,
                );
            }
            items.extend(
                self.record_item(commit.record)
                    .map_err(|e| CommitsError::Transaction(TransactError::Store(e)))?,
            );
        }
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
        let whole = |err| {
            CommitsError::Transaction(TransactError::Store(Self::backend(
                "TransactWriteItems",
                err,
            )))
        };
        let reasons = match &err {
            SdkError::ServiceError(se) => match se.err() {
                TransactWriteItemsError::TransactionCanceledException(cancel) => {
                    cancel.cancellation_reasons().to_vec()
                }
                _ => return Err(whole(err)),
            },
            _ => return Err(whole(err)),
        };
        let mut failed = Vec::new();
        let mut at = 0;
        for (i, commit) in commits.iter().enumerate() {
            let has_record = !matches!(commit.record, RecordWrite::None);
            let span = commit.writes.len() + usize::from(has_record);
            let mine = reasons.get(at..at + span).unwrap_or_default();
            at += span;
            if let Some(failure) = self
                .failure(mine, commit.writes.len(), has_record)
                .map_err(|e| CommitsError::Transaction(TransactError::Store(e)))?
            {
                failed.push((i, failure));
            }
        }
        if !failed.is_empty() {
            return Err(CommitsError::Cancelled(failed));
        }
        // No condition failed: an item was being written by another
        // transaction (a hot item). Nothing applied; the engine retries.
        if reasons
            .iter()
            .any(|r| r.code() == Some(TRANSACTION_CONFLICT))
        {
            return Err(CommitsError::Transaction(TransactError::Conflict(
                Self::backend("TransactWriteItems", err),
            )));
        }
        Err(whole(err))
    }

    /// What one commit's cancellation reasons (its staged writes', then its
    /// record's) say about it: `None` when none of its conditions failed.
    /// Both commit paths read cancellations with it.
    pub(super) fn failure(
        &self,
        reasons: &[CancellationReason],
        writes: usize,
        has_record: bool,
    ) -> Result<Option<TransactError>, StoreError> {
        let failed = |i: usize| {
            reasons
                .get(i)
                .and_then(|r| r.code())
                .is_some_and(|c| c == CONDITIONAL_CHECK_FAILED)
        };
        if has_record && failed(writes) {
            let old = reasons
                .get(writes)
                .and_then(|r| r.item())
                .filter(|item| !item.is_empty())
                .map(|item| from_item(&self.table, item))
                .transpose()?;
            return Ok(Some(TransactError::Record(old)));
        }
        Ok((0..writes).find(|&i| failed(i)).map(|i| {
            let item = reasons
                .get(i)
                .and_then(|r| r.item())
                .filter(|item| !item.is_empty())
                .map(from_sdk_item);
            TransactError::Write { index: i, item }
        }))
    }
}
