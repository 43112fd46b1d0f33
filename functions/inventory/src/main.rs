//! The `inventory` Lambda function (EventBridge rule trigger).

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(inventory::App::from_env, inventory::App::handle)
}
