//! The `orders` Lambda function (SQS standard trigger).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::runtime::init_telemetry();
    let app = orders::App::from_env().await?;
    shared::runtime::run(|event| app.handle(event)).await
}
