//! The partial batch response: the batch's lowest failed `SequenceNumber`.

pub use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use crate::batch::PartialResponse;

impl PartialResponse for DynamoDbEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(id.to_owned());
        self.batch_item_failures.push(failure);
    }
}
