//! The `payments-api` Lambda function (HTTP API, function URL).

fn main() -> Result<(), lambda_runtime::Error> {
    shared::runtime::start(async {
        shared::runtime::init_telemetry();
        let app = payments_api::App::from_env().await?;
        shared::runtime::run(|event| app.handle(event)).await
    })
}
