//! The `orders` Lambda function (SQS standard trigger).

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(orders::App::from_env, orders::App::handle)
}
