//! The `payments-api` Lambda function (HTTP API, function URL).

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(payments_api::App::from_env, payments_api::App::handle)
}
