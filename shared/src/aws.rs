//! The AWS SDK configuration every AWS client of this crate uses (the
//! DynamoDB store and tables, the SSM signature secret): one place for the
//! region, credentials, endpoint, retry and timeout settings, and the one
//! SSM request (the signature secret), so that no SDK type is used outside
//! this file and `store/dynamodb/`.

/// The AWS SDK configuration every client of this crate uses: region and
/// credentials from the environment, `AWS_ENDPOINT_URL` (and the per-service
/// `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_SQS`) honoured, and the
/// explicit retry and timeout settings of [`aws_sdk_config_loader`].
pub async fn aws_sdk_config() -> aws_config::SdkConfig {
    aws_sdk_config_loader().load().await
}

/// The loader behind [`aws_sdk_config`], for callers that add settings:
/// 3 attempts with standard exponential backoff (50 ms initial), 1 s to
/// connect, 3 s per attempt, 8 s per operation (well under a Lambda timeout
/// of 30 s, so a slow store fails a record, not the invocation).
///
/// Stalled-stream protection is off: its grace period (20 s) is longer than
/// an attempt (3 s, the response body read included), so it could never
/// fire first, and it costs a timer per body poll on every request.
pub fn aws_sdk_config_loader() -> aws_config::ConfigLoader {
    use aws_config::retry::RetryConfig;
    use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
    use aws_config::timeout::TimeoutConfig;
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(std::time::Duration::from_millis(50)),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(std::time::Duration::from_secs(1))
                .operation_attempt_timeout(std::time::Duration::from_secs(3))
                .operation_timeout(std::time::Duration::from_secs(8))
                .build(),
        )
}

/// The value of the SSM parameter `name`, decrypted (a `SecureString`:
/// `WithDecryption=true`); `None` when it has none. One `GetParameter`.
///
/// # Errors
/// The request failed: the SDK's error with its context, as text.
#[cfg(feature = "ssm")]
pub(crate) async fn ssm_parameter(
    config: &aws_config::SdkConfig,
    name: &str,
) -> Result<Option<String>, String> {
    let out = aws_sdk_ssm::Client::new(config)
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| aws_sdk_ssm::error::DisplayErrorContext(e).to_string())?;
    Ok(out.parameter().and_then(|p| p.value()).map(str::to_owned))
}
