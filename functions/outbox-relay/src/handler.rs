//! The relay function: its publisher and policy, built once per execution
//! environment, and the invocation handler.

use std::sync::Arc;

use lambda_idempotency::dynamodb_streams::DynamoDbEventResponse;
use lambda_runtime::LambdaEvent;
use serde_json::Value;

use crate::{
    ALLOWLIST_ENV, Allowlist, AllowlistError, Policy, PrintPublisher, Publisher, args, aws,
    deadline, emf, relay_until,
};

/// The relay function: a publisher and the invocation handler.
#[derive(Clone)]
pub struct Relay {
    publisher: Arc<dyn Publisher>,
    policy: Arc<Policy>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay over `publisher`, publishing what `policy` allows.
    pub fn new(publisher: Arc<dyn Publisher>, policy: Policy) -> Self {
        Self {
            publisher,
            policy: Arc::new(policy),
        }
    }

    /// Printing publisher for a local run (`--event` among `args`), SQS and
    /// EventBridge clients otherwise (built once per execution environment,
    /// `AWS_ENDPOINT_URL` honoured). The allowlist comes from
    /// [`ALLOWLIST_ENV`]: required under Lambda (an error without it: the
    /// relay never guesses who may publish); a local run without it prints
    /// every entry, with a warning.
    pub async fn for_args(args: impl IntoIterator<Item = String>) -> Result<Self, AllowlistError> {
        let local = args::is_local(args);
        let allowlist = match Allowlist::from_env() {
            Err(AllowlistError::Missing) if local => {
                tracing::warn!(
                    "{ALLOWLIST_ENV} not set: a local run prints every entry, whoever wrote it"
                );
                Allowlist::everything()
            }
            other => other?,
        };
        let publisher: Arc<dyn Publisher> = if local {
            Arc::new(PrintPublisher)
        } else {
            Arc::new(aws::AwsPublisher::from_env().await)
        };
        Ok(Self::new(publisher, Policy::new(allowlist)))
    }

    /// [`for_args`](Self::for_args) over the process's command line: the
    /// relay's `main` connects with it. A relay that cannot start says why
    /// in the log.
    ///
    /// # Errors
    /// As [`for_args`](Self::for_args).
    pub async fn from_env() -> Result<Self, AllowlistError> {
        Self::for_args(std::env::args().skip(1))
            .await
            .inspect_err(|e| tracing::error!("the relay cannot start: {e}"))
    }

    /// Handles one invocation: the partial batch response, and one EMF
    /// metrics line under Lambda. An `Err` (the payload is not a DynamoDB
    /// Streams event; the record to report has no `SequenceNumber`) fails
    /// the invocation with the library's `errorType`.
    pub async fn handle(
        &self,
        event: LambdaEvent<Value>,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        // A bare bus name and a queue URL in the allowlist are the relay's
        // own account and Region: its function ARN says which.
        self.policy
            .allowlist
            .set_home(&event.context.invoked_function_arn);
        let cutoff = deadline::cutoff(event.context.deadline);
        let report = relay_until(&event.payload, &*self.publisher, &self.policy, cutoff).await?;
        tracing::info!(
            records = report.records,
            published = report.published,
            unpublished = report.unpublished,
            poison = report.poison,
            refused = report.refused,
            requests = report.requests,
            "relayed"
        );
        if lambda_idempotency::metrics::enabled() {
            eprintln!(
                "{}",
                emf::emf_line(&report, lambda_idempotency::metrics::service())
            );
        }
        Ok(report.response)
    }
}
