//! The `orders` Lambda function (SQS standard trigger).

fn main() -> Result<(), lambda_runtime::Error> {
    shared::runtime::start(async {
        shared::runtime::init_telemetry();
        // Shared by the invocations a managed instance serves at once.
        let app = shared::runtime::process_wide(orders::App::from_env().await?);
        shared::runtime::run(move |event| app.handle(event)).await
    })
}
