//! The `payments-api` Lambda function (HTTP API, function URL).

fn main() -> Result<(), lambda_runtime::Error> {
    shared::runtime::start(async {
        shared::runtime::init_telemetry();
        // Shared by the invocations a managed instance serves at once.
        let app = shared::runtime::process_wide(payments_api::App::from_env().await?);
        shared::runtime::run(move |event| app.handle(event)).await
    })
}
