//! The partial batch response of a DynamoDB Streams event source mapping
//! (`ReportBatchItemFailures`): `{"batchItemFailures":[{"itemIdentifier":
//! "<SequenceNumber>"}]}`. Lambda checkpoints before the lowest sequence
//! number listed and redelivers from there; the pipeline's
//! [`Ordering::StopLane`](crate::batch::Ordering::StopLane) names the first
//! failed record of the batch.

pub use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use crate::batch::PartialResponse;

impl PartialResponse for DynamoDbEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(id.to_owned());
        self.batch_item_failures.push(failure);
    }
}
