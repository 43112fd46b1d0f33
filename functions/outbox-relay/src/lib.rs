//! The outbox relay: a DynamoDB Streams handler on the library's
//! [`DynamoDbStreamsProcessor`], a [`BatchHook`](lambda_idempotency::batch::BatchHook)
//! that publishes the messages handlers staged in their idempotency records
//! ([`lambda_idempotency::outbox`]) where the [`Allowlist`] lets their
//! writer publish. Delivery, order, poison and
//! refused entries: `docs/handlers.md`, *The relay: delivery, order, poison*.

pub mod allowlist;
pub mod aws;
mod publish;

use std::sync::Arc;
use std::time::Duration;

use lambda_idempotency::batch::{BatchError, RecordLogs, Source, UnprotectedOrder};
use lambda_idempotency::dynamodb_streams::DynamoDbStreamsProcessor;
use lambda_idempotency::dynamodb_streams::{DynamoDbEventResponse, DynamoDbStreams};
use lambda_idempotency::runtime;
use lambda_idempotency::store::{KeyLayout, TABLE_ENV, TableConfig};
use lambda_runtime::LambdaEvent;
use serde_json::Value;

pub use allowlist::{ALLOWLIST_ENV, Allowlist, AllowlistError};
pub use aws::{Delivery, Publisher, Request};
pub use lambda_idempotency::outbox::{Destination, stable_id};
pub use publish::{RecordPlan, Report, plan};

/// What the relay trusts: the record layout's attribute names, where a
/// record's key sits in the table's key, and which writers may publish
/// where.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The idempotency table's attribute names.
    pub attributes: lambda_idempotency::store::Attributes,
    /// Where a record's key sits in the table's key: in a table shared with
    /// the team's items, only the items this layout reads as records are
    /// relayed ([`KeyLayout::record_id`]).
    pub key_layout: KeyLayout,
    /// Which key prefixes may publish to which destinations.
    pub allowlist: Allowlist,
}

impl Policy {
    /// The default attribute names and key (a table of records alone) and
    /// `allowlist`.
    pub fn new(allowlist: Allowlist) -> Self {
        Self {
            attributes: Default::default(),
            key_layout: KeyLayout::PartitionKey,
            allowlist,
        }
    }

    /// This policy for records kept as `table` keeps them (its attribute
    /// names and key layout).
    pub fn for_table(mut self, table: &TableConfig) -> Self {
        self.attributes = table.attributes.clone();
        self.key_layout = table.key_layout.clone();
        self
    }
}

/// Why the relay cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The allowlist is missing or invalid.
    #[error(transparent)]
    Allowlist(#[from] AllowlistError),
    /// The table's key variables (`IDEMPOTENCY_SORT_KEY_ATTR`,
    /// `IDEMPOTENCY_KEY_LAYOUT`, ...) do not name a layout.
    #[error("{0}")]
    TableKey(String),
}

/// The record layout of the table the relay reads the stream of, as the
/// functions' environment names it ([`TableConfig::from_vars`]; the table's
/// name is not needed to read its stream).
pub fn table_key_from_env() -> Result<TableConfig, String> {
    let var = |name: &str| match name {
        TABLE_ENV => Some("stream".to_owned()),
        _ => std::env::var(name).ok(),
    };
    Ok(TableConfig::from_vars(var)?.unwrap_or_else(|| TableConfig::new("stream")))
}

/// Time kept in hand at the end of an invocation, or half the time left
/// when that is less (`docs/handlers.md`).
pub const REQUEST_BUDGET: Duration = Duration::from_secs(9);

/// The relay: the library's DynamoDB Streams processor running each
/// record's publication ([`Relay::handle`]).
#[derive(Debug, Clone)]
pub struct Relay {
    processor: DynamoDbStreamsProcessor,
    publisher: Arc<dyn Publisher>,
    policy: Arc<Policy>,
}

impl Relay {
    /// A relay over `publisher`, publishing what `policy` allows; its
    /// processor keeps no record and logs failed records only.
    pub fn new(publisher: Arc<dyn Publisher>, policy: Policy) -> Self {
        let processor = DynamoDbStreamsProcessor::plain()
            .record_logs(RecordLogs::Failures)
            .unprotected_order(UnprotectedOrder::Key);
        let policy = Arc::new(policy);
        Self {
            processor,
            publisher,
            policy,
        }
    }

    /// SQS and EventBridge clients, or printing for a local run; the
    /// allowlist ([`ALLOWLIST_ENV`]) is required under Lambda.
    pub async fn from_env() -> Result<Self, StartError> {
        let table = table_key_from_env().map_err(StartError::TableKey)?;
        let local = runtime::is_local_run();
        let allowlist = match Allowlist::from_env() {
            Err(AllowlistError::Missing) if local => {
                tracing::warn!("{ALLOWLIST_ENV} not set: a local run prints every entry");
                Allowlist::everything()
            }
            other => other.inspect_err(|e| tracing::error!("the relay cannot start: {e}"))?,
        };
        let publisher: Arc<dyn Publisher> = match local {
            true => Arc::new(aws::PrintPublisher),
            false => Arc::new(aws::AwsPublisher::from_env().await),
        };
        Ok(Self::new(
            publisher,
            Policy::new(allowlist).for_table(&table),
        ))
    }

    /// Handles one invocation: the partial batch response and the relay's
    /// EMF line; an `Err` (not a DynamoDB Streams event; the record to
    /// report has no `SequenceNumber`) fails it.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        let (payload, ctx) = event.into_parts();
        // A bare bus name and a queue URL in the allowlist are the relay's
        // own account and Region: its function ARN says which.
        self.policy.allowlist.set_home(&ctx.invoked_function_arn);
        // A deadline already past is unknown (`cargo lambda watch` gives
        // 600000), not a zero that would publish nothing.
        let remaining = runtime::remaining(&ctx).filter(|left| !left.is_zero());
        let report = self.relay(payload, remaining).await?;
        let [published, unpublished, poison, refused, requests] = report.metrics().map(|m| m.1);
        tracing::info!(published, unpublished, poison, refused, requests, "relayed");
        lambda_idempotency::metrics::emit_named(&report.metrics());
        Ok(report.response)
    }

    /// Relays one DynamoDB Streams event with `remaining` time (`None`:
    /// unknown).
    pub async fn relay(
        &self,
        payload: Value,
        remaining: Option<Duration>,
    ) -> Result<Report, BatchError> {
        let event = DynamoDbStreams::parse(payload)?;
        // No request starts within this margin of the deadline.
        let margin = remaining.map_or(REQUEST_BUDGET, |left| REQUEST_BUDGET.min(left / 2));
        let processor = self.processor.clone().deadline_margin(margin);
        let (publisher, policy) = (&*self.publisher, &*self.policy);
        let hook = publish::Relaying { publisher, policy };
        let (report, batch) = processor.process_hooked(event, remaining, &hook).await;
        Ok(batch.report(processor.response(&report)?))
    }
}

#[cfg(test)]
mod tests;
