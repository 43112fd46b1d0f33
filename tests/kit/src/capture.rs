//! An SDK interceptor that records every request as sent on the wire.

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use std::sync::{Arc, Mutex};

/// One captured request.
#[derive(Debug, Clone)]
pub struct Captured {
    /// The operation, from `X-Amz-Target` without the service prefix (e.g. `PutItem`).
    pub operation: String,
    /// The JSON body.
    pub body: serde_json::Value,
}

/// Records requests; clones share the log.
#[derive(Debug, Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Captured>>>);

impl Capture {
    /// The requests captured so far.
    pub fn requests(&self) -> Vec<Captured> {
        self.0.lock().expect("capture lock").clone()
    }

    /// The operation names captured so far.
    pub fn operations(&self) -> Vec<String> {
        self.requests().into_iter().map(|c| c.operation).collect()
    }

    /// A DynamoDB client over `sdk` that records every request it sends
    /// here.
    pub fn dynamodb_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(sdk)
                .interceptor(self.clone())
                .build(),
        )
    }

    /// Forgets what was captured.
    pub fn clear(&self) {
        self.0.lock().expect("capture lock").clear();
    }
}

impl Intercept for Capture {
    fn name(&self) -> &'static str {
        "Capture"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        let request = context.request();
        let operation = request
            .headers()
            .get("x-amz-target")
            .map(|t| t.rsplit('.').next().unwrap_or(t).to_owned())
            .unwrap_or_default();
        let body = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or(serde_json::Value::Null);
        self.0
            .lock()
            .expect("capture lock")
            .push(Captured { operation, body });
        Ok(())
    }
}
