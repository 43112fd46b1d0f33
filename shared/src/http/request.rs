//! An HTTP request from an API Gateway or function URL event, and who sent it.

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayV2httpRequest};
use aws_lambda_events::http::HeaderMap;
use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::problem::Problem;
use crate::adapter::json_type;

/// The payload format of the event a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventFormat {
    /// API Gateway HTTP API, payload format 2.0, and Lambda function URLs
    /// (the same shape).
    HttpApi,
    /// API Gateway REST API (payload format 1.0).
    RestApi,
}

/// Where the caller's identity comes from: it scopes idempotency keys, so
/// two callers never share a key space or read each other's responses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Caller {
    /// The authorizer's principal: a JWT authorizer's `sub` claim, an IAM
    /// caller's `userArn` (HTTP API, function URL with `AWS_IAM`, REST
    /// API), a Lambda authorizer's `principalId`, a Cognito user pool
    /// authorizer's `sub` (REST API).
    Principal,
    /// The API key id of a REST API usage plan (`identity.apiKeyId`).
    ApiKeyId,
    /// A request header set by a trusted layer in front of the function (a
    /// proxy that authenticates the caller). Never a header the client
    /// chooses freely: whoever can set it can read others' responses.
    Header(String),
}

/// One HTTP request, whatever event brought it: method, path, headers, the
/// decoded body (`isBase64Encoded` honoured) and the caller's identity.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpRequest {
    /// The event's payload format (the response takes the same).
    pub format: EventFormat,
    /// The method, upper case.
    pub method: String,
    /// The path as the client sent it (`rawPath`, or `path` for REST APIs).
    pub path: String,
    /// The headers (names in lowercase).
    pub headers: HeaderMap,
    /// The body, base64-decoded when the event says it is encoded.
    pub body: Vec<u8>,
    /// API Gateway's request id, if any.
    pub request_id: Option<String>,
    /// The authorizer's principal, if any (see [`Caller::Principal`]).
    pub principal: Option<String>,
    /// The REST API key id, if any.
    pub api_key_id: Option<String>,
}

/// Where the authorizer puts the principal, by payload format, first found wins.
const PRINCIPAL_POINTERS: [&str; 6] = [
    "/requestContext/authorizer/jwt/claims/sub",
    "/requestContext/authorizer/iam/userArn",
    "/requestContext/authorizer/lambda/principalId",
    "/requestContext/authorizer/principalId",
    "/requestContext/authorizer/claims/sub",
    "/requestContext/identity/userArn",
];

fn string_at(event: &Value, pointer: &str) -> Option<String> {
    event
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
}

fn malformed(detail: impl Into<String>) -> Problem {
    Problem::bad_request(detail)
}

fn decode_body(body: Option<String>, base64: bool) -> Result<Vec<u8>, Problem> {
    let body = body.unwrap_or_default();
    if !base64 {
        return Ok(body.into_bytes());
    }
    base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|e| {
            malformed(format!(
                "isBase64Encoded is true but the body is not base64: {e}"
            ))
        })
}

impl HttpRequest {
    /// The request in an API Gateway HTTP API (2.0), function URL or REST
    /// API (1.0) event. Anything else, or a body that does not decode, is a
    /// 400 problem.
    pub fn from_event(event: Value) -> Result<Self, Problem> {
        if !event.is_object() {
            return Err(malformed(format!(
                "expected an API Gateway or function URL event (a JSON object), got {}",
                json_type(&event)
            )));
        }
        let principal = PRINCIPAL_POINTERS.iter().find_map(|p| string_at(&event, p));
        let api_key_id = string_at(&event, "/requestContext/identity/apiKeyId");
        let is_v2 = event.pointer("/requestContext/http").is_some();
        if is_v2 {
            let e: ApiGatewayV2httpRequest = serde_json::from_value(event)
                .map_err(|e| malformed(format!("malformed HTTP API (2.0) event: {e}")))?;
            let method = e.request_context.http.method.as_str().to_owned();
            let path = e
                .raw_path
                .or(e.request_context.http.path)
                .unwrap_or_else(|| "/".to_owned());
            Ok(Self {
                format: EventFormat::HttpApi,
                method,
                path,
                headers: e.headers,
                body: decode_body(e.body, e.is_base64_encoded)?,
                request_id: e.request_context.request_id,
                principal,
                api_key_id,
            })
        } else if event.get("httpMethod").is_some() {
            let e: ApiGatewayProxyRequest = serde_json::from_value(event)
                .map_err(|e| malformed(format!("malformed REST API (1.0) event: {e}")))?;
            let mut headers = e.multi_value_headers;
            for (name, value) in &e.headers {
                if !headers.contains_key(name) {
                    headers.insert(name.clone(), value.clone());
                }
            }
            Ok(Self {
                format: EventFormat::RestApi,
                method: e.http_method.as_str().to_owned(),
                path: e.path.unwrap_or_else(|| "/".to_owned()),
                headers,
                body: decode_body(e.body, e.is_base64_encoded)?,
                request_id: e.request_context.request_id,
                principal,
                api_key_id,
            })
        } else {
            Err(malformed(
                "not an API Gateway or function URL event (no requestContext.http, no \
                 httpMethod): is the function wired to the right trigger?",
            ))
        }
    }

    /// The first value of header `name`, as text (UTF-8, so a unicode value
    /// reads as sent); `None` when absent or not UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
    }

    /// The body parsed as JSON into `T`; a 400 problem saying why not.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Problem> {
        if self.body.is_empty() {
            return Err(malformed("the body is empty; a JSON object is expected"));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| malformed(format!("the body is not the expected JSON: {e}")))
    }

    /// The caller's scope under `callers` (the first that names one), as
    /// `source:identity`; `None` when the request carries none.
    pub(crate) fn scope(&self, callers: &[Caller]) -> Option<String> {
        callers.iter().find_map(|caller| match caller {
            Caller::Principal => self.principal.as_ref().map(|p| format!("principal:{p}")),
            Caller::ApiKeyId => self.api_key_id.as_ref().map(|k| format!("api-key:{k}")),
            Caller::Header(name) => self
                .header(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| format!("header:{}:{v}", name.to_ascii_lowercase())),
        })
    }
}
