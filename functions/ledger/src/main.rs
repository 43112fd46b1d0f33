//! The `ledger` Lambda function (Kinesis Data Streams trigger).

fn main() -> Result<(), lambda_runtime::Error> {
    lambda_idempotency::runtime::serve(ledger::App::from_env, ledger::App::handle)
}
