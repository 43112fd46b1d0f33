//! Exactly once: each function and adapter applies each effect once whatever
//! its source delivers again — SQS redeliveries and in-batch duplicates,
//! a producer's resends, EventBridge's and Lambda's retries, a DLQ redrive, a
//! Kinesis or DynamoDB stream read again — and the outbox publishes each
//! staged message once under its stable id. Against moto, through the event
//! source mapping emulators of `test_kit`.
//!
//! FIFO skipping (a failed record holds back the rest of its group, other
//! groups go on) is tested at three layers: the pipeline on the memory store
//! (`lambda-idempotency`, `batch::tests::lanes::skip_lane_holds_back_only_the_failed_lane`),
//! the adapter on DynamoDB ([`batch`]`::fifo_groups_on_dynamodb_keep_order_and_skip_after_failure`)
//! and the `payments` function on its sample poison event
//! ([`payments`]`::sample_poison_event_fails_only_its_group`).

mod batch;
mod batch_commits;
mod dynamodb_streams;
mod inventory;
mod layer;
pub(crate) mod ledger;
pub(crate) mod orders;
mod payments;
pub(crate) mod payments_api;
pub(crate) mod relay;
mod tenants;
