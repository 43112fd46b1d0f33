//! The `ledger` Lambda function (Kinesis Data Streams trigger).

fn main() -> Result<(), lambda_runtime::Error> {
    shared::runtime::start(async {
        shared::runtime::init_telemetry();
        let app = ledger::App::from_env().await?;
        shared::runtime::run(|event| app.handle(event)).await
    })
}
