//! The outbox relay: a DynamoDB Streams handler on the library's
//! [`DynamoDbStreamsProcessor`](lambda_idempotency::dynamodb_streams::DynamoDbStreamsProcessor)
//! that publishes the messages handlers staged in their idempotency records
//! ([`lambda_idempotency::outbox`]: each under its stable id, in the
//! library's publication format). Its own: the plan of what each record
//! publishes (`plan.rs`), the [`Allowlist`], and the publishers, ten
//! messages per request and target across records (`publish.rs`, `aws.rs`).
//! Delivery, order, poison and refused entries: `docs/handlers.md`,
//! section *The relay: delivery, order, poison*.

pub mod allowlist;
pub mod aws;
mod handler;
mod plan;
mod publish;

pub use allowlist::{ALLOWLIST_ENV, Allowlist, AllowlistError};
pub use aws::{Delivery, PrintPublisher, Publisher, Request};
pub use handler::{REQUEST_BUDGET, Relay};
pub use lambda_idempotency::outbox::{Destination, Entry as OutboxEntry, OUTBOX_ID, stable_id};
pub use plan::{RecordPlan, plan_record};
pub use publish::Report;

/// What the relay trusts: the record layout's attribute names and which
/// writers may publish where.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The idempotency table's attribute names.
    pub attributes: lambda_idempotency::store::Attributes,
    /// Which key prefixes may publish to which destinations.
    pub allowlist: Allowlist,
}

impl Policy {
    /// The default attribute names and `allowlist`.
    pub fn new(allowlist: Allowlist) -> Self {
        let attributes = Default::default();
        Self {
            attributes,
            allowlist,
        }
    }
}

#[cfg(test)]
mod tests;
