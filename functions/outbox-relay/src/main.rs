//! The `outbox-relay` Lambda function (DynamoDB stream trigger). With
//! `--event FILE` it runs locally and prints what it would publish.

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(outbox_relay::Relay::from_env, outbox_relay::Relay::handle)
}
