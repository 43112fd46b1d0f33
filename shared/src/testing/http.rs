//! HTTP requests as the four HTTP front doors deliver them: HTTP API (2.0),
//! function URL (2.0), REST API (1.0) and Application Load Balancer.

use serde_json::{Map, Value, json};

use super::events::ACCOUNT;

/// One HTTP request, built once and rendered in each event format: the
/// method, path, headers (lowercase), body and, for the formats with an
/// authorizer, the IAM caller.
///
/// ```
/// use lambda_idempotency::testing::HttpEvent;
/// let event = HttpEvent::post("/payments", r#"{"amount_cents":5}"#)
///     .idempotency_key("k-1")
///     .http_api();
/// assert_eq!(event["headers"]["idempotency-key"], "k-1");
/// ```
#[derive(Debug, Clone)]
pub struct HttpEvent {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
    caller: Option<String>,
}

/// The caller [`HttpEvent`] names unless told otherwise.
pub const DEFAULT_CALLER: &str = "arn:aws:iam::123456789012:user/checkout-service";

impl HttpEvent {
    /// A request `method path` with `body` (JSON by `content-type`),
    /// signed by [`DEFAULT_CALLER`].
    pub fn new(method: &str, path: &str, body: Option<&str>) -> Self {
        let mut headers = vec![("host".to_owned(), "api.example.com".to_owned())];
        if body.is_some() {
            headers.push(("content-type".to_owned(), "application/json".to_owned()));
        }
        Self {
            method: method.to_ascii_uppercase(),
            path: path.to_owned(),
            headers,
            body: body.map(str::to_owned),
            caller: Some(DEFAULT_CALLER.to_owned()),
        }
    }

    /// `POST path` with a JSON `body`.
    pub fn post(path: &str, body: &str) -> Self {
        Self::new("POST", path, Some(body))
    }

    /// With header `name: value` (the name lowercased, as API Gateway
    /// delivers HTTP API headers).
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.to_owned()));
        self
    }

    /// With the `Idempotency-Key` header.
    #[must_use]
    pub fn idempotency_key(self, key: &str) -> Self {
        self.header("idempotency-key", key)
    }

    /// Signed by the IAM principal `user_arn` (`None`: no authorizer, an
    /// anonymous request).
    #[must_use]
    pub fn caller(mut self, user_arn: Option<&str>) -> Self {
        self.caller = user_arn.map(str::to_owned);
        self
    }

    fn header_map(&self) -> Map<String, Value> {
        self.headers
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect()
    }

    fn iam(&self) -> Option<Value> {
        self.caller.as_ref().map(|arn| {
            json!({"iam": {
                "accessKey": "AKIAI44QH8DHBEXAMPLE",
                "accountId": ACCOUNT,
                "callerId": "AIDAJQABLZS4A3QDU576Q",
                "cognitoIdentity": null,
                "principalOrgId": null,
                "userArn": arn,
                "userId": "AIDAJQABLZS4A3QDU576Q",
            }})
        })
    }

    fn v2(&self, api_id: &str, domain: &str, route_key: &str) -> Value {
        let mut context = json!({
            "accountId": ACCOUNT,
            "apiId": api_id,
            "domainName": domain,
            "domainPrefix": api_id,
            "http": {
                "method": self.method,
                "path": self.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.10",
                "userAgent": "curl/8.5.0",
            },
            "requestId": "d3ZpQhLJjoEEMxw=",
            "routeKey": route_key,
            "stage": "$default",
            "time": "01/Dec/2026:02:30:00 +0000",
            "timeEpoch": 1_795_919_400_000u64,
        });
        if let Some(iam) = self.iam() {
            context["authorizer"] = iam;
        }
        let mut event = json!({
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": self.path,
            "rawQueryString": "",
            "headers": self.header_map(),
            "requestContext": context,
            "isBase64Encoded": false,
        });
        if let Some(body) = &self.body {
            event["body"] = json!(body);
        }
        event
    }

    /// As an HTTP API (payload format 2.0) delivers it.
    pub fn http_api(&self) -> Value {
        let route = format!("{} {}", self.method, self.path);
        self.v2(
            "abcdef1234",
            "abcdef1234.execute-api.us-east-1.amazonaws.com",
            &route,
        )
    }

    /// As a function URL delivers it (payload format 2.0, route `$default`;
    /// the caller under `AWS_IAM` auth).
    pub fn function_url(&self) -> Value {
        let id = "a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6";
        self.v2(id, &format!("{id}.lambda-url.us-east-1.on.aws"), "$default")
    }

    /// As a REST API's proxy integration delivers it (payload format 1.0;
    /// the caller as `identity.userArn`, IAM authorization).
    pub fn rest_api(&self) -> Value {
        let headers = self.header_map();
        let multi: Map<String, Value> = headers
            .iter()
            .map(|(k, v)| (k.clone(), json!([v])))
            .collect();
        json!({
            "resource": self.path,
            "path": self.path,
            "httpMethod": self.method,
            "headers": headers,
            "multiValueHeaders": multi,
            "queryStringParameters": null,
            "multiValueQueryStringParameters": null,
            "pathParameters": null,
            "stageVariables": null,
            "requestContext": {
                "accountId": ACCOUNT,
                "apiId": "1234567890",
                "resourceId": "a1b2c3",
                "stage": "prod",
                "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
                "requestTimeEpoch": 1_795_919_400_000u64,
                "path": format!("/prod{}", self.path),
                "resourcePath": self.path,
                "httpMethod": self.method,
                "protocol": "HTTP/1.1",
                "identity": {
                    "sourceIp": "203.0.113.10",
                    "userAgent": "curl/8.5.0",
                    "userArn": self.caller,
                    "accountId": self.caller.as_ref().map(|_| ACCOUNT),
                },
            },
            "body": self.body,
            "isBase64Encoded": false,
        })
    }

    /// As an Application Load Balancer (a Lambda target group) delivers it:
    /// single-valued headers and no authorizer (scope callers with
    /// `Caller::Header`, e.g. `x-amzn-oidc-identity` set by the rule).
    pub fn alb(&self) -> Value {
        json!({
            "requestContext": {"elb": {
                "targetGroupArn": format!(
                    "arn:aws:elasticloadbalancing:us-east-1:{ACCOUNT}:targetgroup/t/abc"
                )
            }},
            "httpMethod": self.method,
            "path": self.path,
            "queryStringParameters": {},
            "headers": self.header_map(),
            "body": self.body.clone().unwrap_or_default(),
            "isBase64Encoded": false,
        })
    }
}
