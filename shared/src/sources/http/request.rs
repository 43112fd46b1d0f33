//! An HTTP request from an API Gateway, function URL or Application Load
//! Balancer event, and who sent it.

use aws_lambda_events::alb::AlbTargetGroupRequest;
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
    /// API's `identity.userArn`. A block naming none is refused (401); a
    /// block whose every field is `null` is no authorizer. An Application
    /// Load Balancer has no authorizer: its requests name none this way.
    Principal,
    /// The API key id of a REST API usage plan (`identity.apiKeyId`).
    ApiKeyId,
    /// A request header set by a trusted layer in front of the function (a
    /// proxy that authenticates the caller, an Application Load Balancer
    /// rule that authenticates every request and sets
    /// `x-amzn-oidc-identity`). Never a header the client chooses freely:
    /// whoever can set it can read others' responses.
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
    /// API Gateway's request id (for a load balancer's request, its
    /// `X-Amzn-Trace-Id` header), if any.
    pub request_id: Option<String>,
    /// The event's `requestContext.authorizer` block as API Gateway or the
    /// function URL sent it (`None` when absent, `null` or naming nothing,
    /// every field `null`: no authorizer ran; always `None` for a load
    /// balancer's request). Its principal is read per [`Caller::Principal`].
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

/// Whether an authorizer block names anything: a block whose every field is
/// `null` (`{"claims": null, "scopes": null}`, what a REST API route without
/// an authorizer can carry), or that has none, is no authorizer.
fn names_something(authorizer: &Value) -> bool {
    match authorizer {
        Value::Null => false,
        Value::Object(fields) => fields.values().any(|v| !v.is_null()),
        _ => true,
    }
}

impl EventFormat {
    /// The payload format of `event`, by the fields that tell them apart:
    /// `requestContext.http` (HTTP API 2.0, function URLs),
    /// `requestContext.elb` (Application Load Balancer; multi-value headers
    /// when it sends `multiValueHeaders`), `httpMethod` (REST API 1.0).
    pub(crate) fn of(event: &Value) -> Option<Self> {
        if event.pointer("/requestContext/http").is_some() {
            Some(Self::HttpApi)
        } else if event.pointer("/requestContext/elb").is_some() {
            let multi_value_headers = event.get("multiValueHeaders").is_some_and(Value::is_object);
            Some(Self::Alb {
                multi_value_headers,
            })
        } else if event.get("httpMethod").is_some() {
            Some(Self::RestApi)
        } else {
            None
        }
    }
}

impl HttpRequest {
    /// The request in an API Gateway HTTP API (2.0), function URL, REST API
    /// (1.0) or Application Load Balancer event. Anything else, or a body
    /// that does not decode, is a 400 problem.
    pub fn from_event(event: Value) -> Result<Self, Problem> {
        if !event.is_object() {
            return Err(malformed(format!(
                "expected an API Gateway, function URL or load balancer event (a JSON object), \
                 got {}",
                json_type(&event)
            )));
        }
        let authorizer = event
            .pointer("/requestContext/authorizer")
            .filter(|a| names_something(a))
            .cloned();
        let user_arn = string_at(&event, "/requestContext/identity/userArn");
        let api_key_id = string_at(&event, "/requestContext/identity/apiKeyId");
        let format = EventFormat::of(&event);
        if format == Some(EventFormat::HttpApi) {
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
        } else if let Some(format @ EventFormat::Alb { .. }) = format {
            let e: AlbTargetGroupRequest = serde_json::from_value(event).map_err(|e| {
                malformed(format!("malformed Application Load Balancer event: {e}"))
            })?;
            let headers = merged(e.multi_value_headers, &e.headers);
            let request_id = (headers.get("x-amzn-trace-id"))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            // A load balancer has no authorizer and no API keys: nothing
            // else in its event names a caller.
            Ok(Self {
                format,
                method: e.http_method.as_str().to_owned(),
                path: e.path.unwrap_or_else(|| "/".to_owned()),
                headers,
                body: decode_body(e.body, e.is_base64_encoded)?,
                request_id,
                authorizer: None,
                user_arn: None,
                api_key_id: None,
            })
        } else if format == Some(EventFormat::RestApi) {
            let e: ApiGatewayProxyRequest = serde_json::from_value(event)
                .map_err(|e| malformed(format!("malformed REST API (1.0) event: {e}")))?;
            let headers = merged(e.multi_value_headers, &e.headers);
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
                "not an API Gateway, function URL or load balancer event (no \
                 requestContext.http, no requestContext.elb, no httpMethod): is the function \
                 wired to the right trigger?",
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
            (None, Anonymous::Refuse) => Err(match self.format {
                EventFormat::Alb { .. } => "this Application Load Balancer request carries no \
                    caller identity (a load balancer has no authorizer): name the header that \
                    carries the caller (Caller::Header: one the load balancer sets after \
                    authenticating every request, such as x-amzn-oidc-identity), or choose \
                    Anonymous::ShareOneScope"
                    .to_owned(),
                _ => "this request carries no caller identity".to_owned(),
            }),
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

/// The multi-value headers with the single-value ones they lack.
fn merged(mut headers: HeaderMap, single: &HeaderMap) -> HeaderMap {
    for (name, value) in single {
        headers.entry(name).or_insert_with(|| value.clone());
    }
    headers
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
