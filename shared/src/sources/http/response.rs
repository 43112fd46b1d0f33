//! A handler's HTTP response, how it is kept for replay, and how it is
//! rendered for API Gateway, function URLs and Application Load Balancers.

use aws_lambda_events::alb::AlbTargetGroupResponse;
use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The payload format of the event a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventFormat {
    /// API Gateway HTTP API, payload format 2.0, and Lambda function URLs
    /// (the same shape).
    HttpApi,
    /// API Gateway REST API (payload format 1.0).
    RestApi,
    /// An Application Load Balancer's Lambda target group.
    Alb {
        /// The target group sends and takes multi-value headers
        /// (`lambda.multi_value_headers.enabled`): the request came with
        /// `multiValueHeaders`, and the response answers with them.
        multi_value_headers: bool,
    },
}

/// An HTTP response: status, headers (names in lowercase, in order) and body
/// (text, or base64 of binary content with `base64` set).
///
/// This is what a handler returns and what the adapter keeps in the
/// idempotency record for replay (with only the headers worth replaying).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// The body: text, or base64 when `base64` is set.
    #[serde(default)]
    pub body: String,
    /// The body is base64-encoded binary content.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub base64: bool,
}

impl HttpResponse {
    /// A response with `status` and no body.
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: String::new(),
            base64: false,
        }
    }

    /// `status` with `value` as a JSON body (`Content-Type: application/json`).
    pub fn json(status: u16, value: &impl Serialize) -> Self {
        let body = serde_json::to_string(value).unwrap_or_else(|e| {
            tracing::error!(error = %e, "response does not serialize");
            String::new()
        });
        Self::new(status)
            .header("content-type", "application/json")
            .text(body)
    }

    /// Sets (replaces) header `name` (stored in lowercase).
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.into()));
        self
    }

    /// Sets a text body.
    pub fn text(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self.base64 = false;
        self
    }

    /// Sets a binary body (sent base64-encoded, as API Gateway expects).
    pub fn binary(mut self, body: &[u8]) -> Self {
        self.body = base64::engine::general_purpose::STANDARD.encode(body);
        self.base64 = true;
        self
    }

    /// The value of header `name` (case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The copy kept for replay: only the headers named in `keep`.
    pub(crate) fn kept(&self, keep: &[String]) -> Self {
        Self {
            headers: self
                .headers
                .iter()
                .filter(|(n, _)| keep.iter().any(|k| k == n))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// The response as API Gateway or the load balancer (of `format`)
    /// takes it, for a function that calls
    /// [`HttpProcessor::process`](super::HttpProcessor::process) itself. A
    /// header that is not a valid HTTP header is dropped with a warning. A
    /// load balancer gets a `statusDescription` (`201 Created`) and the
    /// headers in the request's form: `multiValueHeaders` when it sent
    /// them, else `headers` (one value per name).
    pub fn render(&self, format: EventFormat) -> HttpEventResponse {
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                (Ok(n), Ok(v)) => {
                    headers.append(n, v);
                }
                _ => tracing::warn!(header = name.as_str(), "invalid response header dropped"),
            }
        }
        let body = (!self.body.is_empty()).then(|| Body::Text(self.body.clone()));
        // The two formats' responses have the same fields.
        macro_rules! response {
            ($kind:ident, $type:ty) => {{
                let mut r = <$type>::default();
                r.status_code = i64::from(self.status);
                (r.headers, r.body, r.is_base64_encoded) = (headers, body, self.base64);
                HttpEventResponse::$kind(r)
            }};
        }
        match format {
            EventFormat::RestApi => response!(RestApi, ApiGatewayProxyResponse),
            EventFormat::HttpApi => response!(HttpApi, ApiGatewayV2httpResponse),
            EventFormat::Alb {
                multi_value_headers,
            } => {
                let mut r = AlbTargetGroupResponse::default();
                r.status_code = i64::from(self.status);
                let reason = StatusCode::from_u16(self.status)
                    .ok()
                    .and_then(|s| s.canonical_reason());
                r.status_description = Some(match reason {
                    Some(reason) => format!("{} {reason}", self.status),
                    None => self.status.to_string(),
                });
                if multi_value_headers {
                    r.multi_value_headers = headers;
                } else {
                    r.headers = headers;
                }
                (r.body, r.is_base64_encoded) = (body, self.base64);
                HttpEventResponse::Alb(r)
            }
        }
    }
}

/// What [`HttpProcessor::handle`](super::HttpProcessor::handle) returns to
/// Lambda: the response in the shape of the event that invoked it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum HttpEventResponse {
    /// For an HTTP API (payload format 2.0) or a function URL.
    HttpApi(ApiGatewayV2httpResponse),
    /// For a REST API (payload format 1.0).
    RestApi(ApiGatewayProxyResponse),
    /// For an Application Load Balancer.
    Alb(AlbTargetGroupResponse),
}
