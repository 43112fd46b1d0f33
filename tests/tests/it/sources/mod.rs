//! The event sources as Lambda runs them: the event source mapping emulators
//! of `test_kit` (Kinesis, Kafka, asynchronous invocation) behave as Lambda's
//! (batches per shard or partition, the partial batch response, retries),
//! the sample events in `events/` read as the `aws_lambda_events` types, and
//! SQS batches at the 6 MB invocation cap complete once under Lambda's
//! open-file quota, their redelivery settled by the pre-read; stream records
//! parked in an SQS queue (`SqsParking`) read back as they were sent; every
//! fixture of the `aws_lambda_events` package runs through its processor or
//! is listed with why it is not served.

mod async_invoke;
mod big_batch;
mod kafka_esm;
mod kinesis_esm;
mod parking;
mod source_samples;
mod upstream_fixtures;
