//! An HTTP request from an API Gateway or function URL event, and who sent it.

use aws_lambda_events::apigw::{ApiGatewayProxyRequest, ApiGatewayV2httpRequest};
use aws_lambda_events::http::HeaderMap;
use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Anonymous;
use super::problem::Problem;
use super::response::EventFormat;
use crate::batch::json_type;

/// Where the caller's identity comes from: it scopes idempotency keys, so
/// two callers never share a key space or read each other's responses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Caller {
    /// The principal the event's authorizer names (a JWT's `iss` and `sub`,
    /// IAM's `userArn`, a Lambda authorizer's principal); without one, a REST
    /// API's `identity.userArn`. A block naming none is refused (401).
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
    /// The event's `requestContext.authorizer` block as API Gateway or the
    /// function URL sent it (`None` when absent or `null`: no authorizer
    /// ran). Its principal is read per [`Caller::Principal`].
    pub authorizer: Option<Value>,
    /// A REST API's `requestContext.identity.userArn` (IAM authorization),
    /// if any.
    pub user_arn: Option<String>,
    /// The REST API key id, if any.
    pub api_key_id: Option<String>,
}

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
        let authorizer = event
            .pointer("/requestContext/authorizer")
            .filter(|a| !a.is_null())
            .cloned();
        let user_arn = string_at(&event, "/requestContext/identity/userArn");
        let api_key_id = string_at(&event, "/requestContext/identity/apiKeyId");
        if event.pointer("/requestContext/http").is_some() {
            let e: ApiGatewayV2httpRequest = serde_json::from_value(event)
                .map_err(|e| malformed(format!("malformed HTTP API (2.0) event: {e}")))?;
            let http = e.request_context.http;
            Ok(Self {
                format: EventFormat::HttpApi,
                method: http.method.as_str().to_owned(),
                path: e.raw_path.or(http.path).unwrap_or_else(|| "/".to_owned()),
                headers: e.headers,
                body: decode_body(e.body, e.is_base64_encoded)?,
                request_id: e.request_context.request_id,
                authorizer,
                user_arn,
                api_key_id,
            })
        } else if event.get("httpMethod").is_some() {
            let e: ApiGatewayProxyRequest = serde_json::from_value(event)
                .map_err(|e| malformed(format!("malformed REST API (1.0) event: {e}")))?;
            let mut headers = e.multi_value_headers;
            for (name, value) in &e.headers {
                headers.entry(name).or_insert_with(|| value.clone());
            }
            Ok(Self {
                format: EventFormat::RestApi,
                method: e.http_method.as_str().to_owned(),
                path: e.path.unwrap_or_else(|| "/".to_owned()),
                headers,
                body: decode_body(e.body, e.is_base64_encoded)?,
                request_id: e.request_context.request_id,
                authorizer,
                user_arn,
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

    /// The key scope of the caller `callers` name (the first that names
    /// one), else per `anonymous`; `Err` says why there is none.
    /// `lambda_principal` points into an HTTP API Lambda authorizer's context.
    pub(crate) fn caller(
        &self,
        callers: &[Caller],
        lambda_principal: &str,
        anonymous: Anonymous,
    ) -> Result<String, String> {
        let unresolved = |why: String| format!("this request's authorizer names none: {why}");
        for caller in callers {
            let scope = match caller {
                // An authorizer ran and names no caller: refused, never
                // scoped by a weaker source after it.
                Caller::Principal => self.principal(lambda_principal).map_err(unresolved)?,
                Caller::ApiKeyId => self.api_key_id.as_ref().map(|k| format!("api-key:{k}")),
                Caller::Header(name) => self
                    .header(name)
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| format!("header:{}:{v}", name.to_ascii_lowercase())),
            };
            if let Some(scope) = scope {
                return Ok(scope);
            }
        }
        match (&self.authorizer, anonymous) {
            (Some(_), _) => Err(unresolved(
                "the event carries an authorizer block, and the configured caller sources \
                 (without Caller::Principal) name no caller"
                    .to_owned(),
            )),
            (None, Anonymous::ShareOneScope) => Ok("anonymous".to_owned()),
            (None, Anonymous::Refuse) => Err("this request carries no caller identity".to_owned()),
        }
    }

    /// The scope of the principal the authorizer names (see
    /// [`Caller::Principal`]); `Ok(None)` without an authorizer block or a
    /// REST IAM caller; `Err` (why) when the block names no caller.
    fn principal(&self, lambda_principal: &str) -> Result<Option<String>, String> {
        let Some(authorizer) = &self.authorizer else {
            return Ok(self.user_arn.as_ref().map(|arn| format!("principal:{arn}")));
        };
        let claims = authorizer
            .pointer("/jwt/claims")
            .or_else(|| authorizer.get("claims").filter(|c| c.is_object()));
        if let Some(claims) = claims {
            return match (text_at(claims, "/iss"), text_at(claims, "/sub")) {
                (Some(iss), Some(sub)) => Ok(Some(format!("jwt:{}", Value::from(vec![iss, sub])))),
                _ => Err(
                    "the JWT authorizer's claims lack `iss` or `sub` (a caller is \
                     its issuer and subject together)"
                        .to_owned(),
                ),
            };
        }
        let principal_id = text_at(authorizer, "/principalId");
        let id = if let Some(iam) = authorizer.get("iam") {
            text_at(iam, "/userArn").ok_or("the IAM authorizer block has no `userArn`".to_owned())
        } else if let Some(context) = authorizer.get("lambda") {
            text_at(context, lambda_principal)
                .or(principal_id)
                .ok_or_else(|| {
                    format!(
                        "the Lambda authorizer's context (requestContext.authorizer.lambda) \
                     has no caller id at {lambda_principal:?} (HttpProcessor::\
                     lambda_principal names where it is)"
                    )
                })
        } else {
            principal_id.ok_or_else(|| {
                "the authorizer block names no caller (no JWT claims, IAM userArn, Lambda \
                 authorizer context or principalId)"
                    .to_owned()
            })
        };
        id.map(|id| Some(format!("principal:{id}")))
    }
}

/// The text at `pointer` in `value`: a non-blank string, or a number's
/// digits (a Lambda authorizer's context may hold numbers).
fn text_at(value: &Value, pointer: &str) -> Option<String> {
    match value.pointer(pointer)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
