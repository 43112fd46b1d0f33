//! The records a response or an error says failed: what Lambda delivers
//! again.

use serde::Serialize;
use serde_json::Value;

use crate::batch::{BatchError, Unfinished};

/// The id [`FailedIds`] names when the whole event failed and no record is
/// named (a batch that does not parse, an event of the wrong shape, an
/// error of the handler's own).
pub const WHOLE_EVENT: &str = "*";

/// The ids of the records an answer says failed, in its order: what
/// Lambda delivers again.
///
/// - A partial batch response (SQS, Kinesis, DynamoDB Streams, Kafka, as
///   its type or its JSON): each `batchItemFailures` entry's
///   `itemIdentifier`; a Kafka one as `<topic-partition>@<offset>`.
/// - An error: [`Unfinished`] (SNS, EventBridge, Kafka's fail-batch mode,
///   the layer) each record not done (an SNS `MessageId`, an EventBridge
///   event's `id`, a Kafka `<topic-partition>@<offset>`); any other error
///   [`WHOLE_EVENT`].
/// - A `Result`: its response's, or its error's. Any other response (an
///   EventBridge or SNS handler's `Ok`, an HTTP response) names none.
pub trait FailedIds {
    /// The failed records' ids (empty: every record is done).
    fn failed_ids(&self) -> Vec<String>;
}

impl FailedIds for Value {
    fn failed_ids(&self) -> Vec<String> {
        let Some(failures) = self.get("batchItemFailures").and_then(Value::as_array) else {
            return Vec::new();
        };
        failures
            .iter()
            .map(|f| match &f["itemIdentifier"] {
                Value::String(id) => id.clone(),
                Value::Object(kafka) => format!(
                    "{}@{}",
                    kafka.get("partition").and_then(Value::as_str).unwrap_or(""),
                    kafka.get("offset").unwrap_or(&Value::Null)
                ),
                other => other.to_string(),
            })
            .collect()
    }
}

macro_rules! responses {
    ($($t:ty),*) => {$(
        impl FailedIds for $t {
            fn failed_ids(&self) -> Vec<String> {
                serde_json::to_value(self).unwrap_or_default().failed_ids()
            }
        }
    )*};
}

responses!(
    crate::sqs::SqsBatchResponse,
    crate::kinesis::KinesisEventResponse,
    crate::dynamodb_streams::DynamoDbEventResponse,
    crate::kafka::KafkaEventResponse
);

/// The ids an error names, when it is one of the crate's.
fn error_ids(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    if let Some(Unfinished::Failed {
        message_id,
        records,
        ..
    }) = err.downcast_ref::<Unfinished>()
    {
        if records.is_empty() {
            return vec![message_id.clone()];
        }
        return records.clone();
    }
    vec![WHOLE_EVENT.to_owned()]
}

macro_rules! errors {
    ($($t:ty),*) => {$(
        impl FailedIds for $t {
            fn failed_ids(&self) -> Vec<String> {
                error_ids(self)
            }
        }
    )*};
}

errors!(Unfinished, BatchError);

impl FailedIds for Box<dyn std::error::Error + Send + Sync> {
    fn failed_ids(&self) -> Vec<String> {
        error_ids(&**self)
    }
}

impl<R: Serialize, E: FailedIds> FailedIds for Result<R, E> {
    fn failed_ids(&self) -> Vec<String> {
        match self {
            Ok(response) => serde_json::to_value(response)
                .unwrap_or_default()
                .failed_ids(),
            Err(e) => e.failed_ids(),
        }
    }
}
