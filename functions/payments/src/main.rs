//! The `payments` Lambda function (SQS FIFO trigger).

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(payments::App::from_env, payments::App::handle)
}
