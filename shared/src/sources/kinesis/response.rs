//! The partial batch response of a Kinesis event source mapping
//! (`ReportBatchItemFailures`): `{"batchItemFailures":[{"itemIdentifier":
//! "<sequenceNumber>"}]}`. Lambda checkpoints at the lowest sequence number
//! listed and redelivers from there; the pipeline's
//! [`Ordering::StopLane`](crate::batch::Ordering::StopLane) names the first
//! failed record of each shard in sequence order: the lowest among its
//! partition keys' first failures.

pub use aws_lambda_events::streams::{KinesisBatchItemFailure, KinesisEventResponse};

use crate::batch::PartialResponse;

impl PartialResponse for KinesisEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        self.add_failure(id);
    }
}
