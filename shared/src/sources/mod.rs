//! The event sources, one folder each, all laid out alike, each over the
//! core in [`crate::batch`].

pub mod dynamodb_streams;
pub mod eventbridge;
mod from_env;
pub mod http;
pub mod kafka;
pub mod kinesis;
pub mod sns;
pub mod sqs;

#[cfg(test)]
mod payload_tests;

use crate::batch::FailureReason;

/// A body of `size` bytes over `max` (`None`: `default`) is too large.
fn check_size(size: usize, max: Option<usize>, default: usize) -> Result<(), FailureReason> {
    let limit = max.unwrap_or(default);
    match size > limit {
        true => Err(FailureReason::BodyTooLarge { size, limit }),
        false => Ok(()),
    }
}
