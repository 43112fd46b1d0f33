//! The event sources, one folder each, all laid out alike, each over the
//! core in [`crate::batch`].

pub mod dynamodb_streams;
pub mod eventbridge;
pub mod http;
pub mod kafka;
pub mod kinesis;
pub mod sns;
pub mod sqs;
