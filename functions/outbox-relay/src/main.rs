//! The `outbox-relay` Lambda function (DynamoDB stream trigger). With
//! `--event FILE` it runs locally and prints what it would publish.

fn main() -> Result<(), lambda_runtime::Error> {
    shared::runtime::start(async {
        shared::runtime::init_telemetry();
        let relay = outbox_relay::Relay::for_args(std::env::args().skip(1))
            .await
            .inspect_err(|e| tracing::error!("the relay cannot start: {e}"))?;
        // Shared by the invocations a managed instance serves at once.
        let relay = shared::runtime::process_wide(relay);
        shared::runtime::run(move |event| relay.handle(event)).await
    })
}
