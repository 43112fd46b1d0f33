//! Amazon SNS on the batch core: [`SnsProcessor`] for a function subscribed
//! to a topic (no partial response: [`answer`]); notifications delivered
//! through SQS are [`crate::envelope`]s. The guide: [docs/sources/sns.md].
//!
//! [docs/sources/sns.md]: https://github.com/lambda-idempotency/lambda-idempotency/blob/main/docs/sources/sns.md

pub(crate) mod key;
mod parse;
mod record;
mod response;

pub use aws_lambda_events::sns::{MessageAttribute, SnsEvent, SnsMessage, SnsRecord};
use serde_json::Value;

pub use parse::{SNS_EVENT_SOURCE, SnsStreamEvent, parse_sns_event};
pub use record::Notification;
pub use response::{SnsError, answer};

#[cfg(doc)]
use crate::batch::KeySelector;
use crate::batch::{
    BatchError, BatchReport, MalformedRecord, Ordering, PayloadScope, Processor, Source,
    SourceNames,
};
use record::SNS;

/// Processes the SNS events of a function subscribed to a topic
/// ([`Processor`] over [`Sns`]). Its key is a business key in the `Message`
/// (`KeySelector::pointer("/Message/order_id")`), or the SNS `MessageId`
/// ([`KeySelector::Id`]).
pub type SnsProcessor = Processor<Sns>;

/// The SNS source and its settings: what payload validation hashes.
#[derive(Debug, Clone, Default)]
pub struct Sns {
    payload: PayloadScope,
}

impl Source for Sns {
    type Event = SnsStreamEvent;
    type Raw = SnsRecord;
    type Response = ();
    type Error = SnsError;
    const NAMES: &'static SourceNames = &SNS;

    fn parse(payload: Value) -> Result<SnsStreamEvent, BatchError> {
        parse_sns_event(payload)
    }

    fn ordering(&self, _: &SnsStreamEvent) -> Ordering {
        Ordering::Unordered
    }

    fn records(&self, event: SnsStreamEvent) -> Vec<Result<SnsRecord, MalformedRecord>> {
        event.records
    }

    /// SNS has no partial response: a failure fails the invocation
    /// ([`answer`]).
    fn respond<T>(&self, report: &BatchReport<T>) -> Result<(), SnsError> {
        answer(report)
    }
}

impl Processor<Sns> {
    /// What payload validation hashes. Default [`PayloadScope::Body`] (the
    /// parsed `Message`: the notification's `MessageId`, `Timestamp` and
    /// `Signature` differ between two publications of one business event).
    pub fn payload(mut self, scope: PayloadScope) -> Self {
        self.source.payload = scope;
        self
    }
}

#[cfg(test)]
mod tests;
