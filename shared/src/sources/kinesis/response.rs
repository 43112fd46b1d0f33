//! The partial batch response: the lowest failed `sequenceNumber` of the
//! shard ([`Ordering::StopLane`](crate::batch::Ordering::StopLane)).

pub use aws_lambda_events::streams::{KinesisBatchItemFailure, KinesisEventResponse};

use crate::batch::PartialResponse;

impl PartialResponse for KinesisEventResponse {
    fn add_item_failure(&mut self, id: &str) {
        self.add_failure(id);
    }
}
