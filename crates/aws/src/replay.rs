//! Test support: an HTTP client for the SDK that records every request and answers from a
//! function, so tests see the exact requests the adapter sends (method, path, target, body)
//! and feed it recorded service responses.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_sts::config::{Credentials, SharedCredentialsProvider};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::RetryConfig;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One request as the SDK sent it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The full URL (host included: it names the region).
    pub url: String,
    /// Path and query.
    pub uri: String,
    /// `X-Amz-Target` (JSON protocols), e.g. `SageMaker.UpdateCluster`.
    pub target: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Recorded {
    /// The operation: the JSON target's suffix, the query protocols' `Action`, or
    /// `METHOD /path` for REST protocols.
    pub fn operation(&self) -> String {
        if let Some(t) = &self.target {
            return t.rsplit('.').next().unwrap_or_default().to_string();
        }
        if let Some(a) = self.form().get("Action") {
            return a.clone();
        }
        let path = self.uri.split('?').next().unwrap_or_default();
        format!("{} {path}", self.method)
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// Form-encoded parameters (EC2, IAM, STS query protocols).
    pub fn form(&self) -> BTreeMap<String, String> {
        if self.headers.get("content-type").is_none_or(|c| !c.contains("x-www-form-urlencoded")) {
            return BTreeMap::new();
        }
        let decode = |s: &str| percent_decode(&s.replace('+', " "));
        self.body.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect()
    }

    pub fn query(&self) -> BTreeMap<String, String> {
        self.uri
            .split_once('?')
            .map(|(_, q)| q.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect())
            .unwrap_or_default()
    }
}

/// A canned response.
#[derive(Debug, Clone)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Canned {
    pub fn json(body: Value) -> Canned {
        Canned {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    /// An AWS JSON-protocol error (`__type` + message).
    pub fn json_error(status: u16, code: &str, message: &str) -> Canned {
        Canned {
            status,
            headers: vec![
                ("content-type".into(), "application/x-amz-json-1.1".into()),
                ("x-amzn-errortype".into(), code.into()),
            ],
            body: serde_json::json!({ "__type": code, "message": message }).to_string(),
        }
    }

    pub fn xml(body: &str) -> Canned {
        Canned { status: 200, headers: vec![("content-type".into(), "text/xml".into())], body: body.into() }
    }

    /// An EC2 query-protocol error.
    pub fn ec2_error(status: u16, code: &str, message: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type".into(), "text/xml".into())],
            body: format!(
                "<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>r</RequestID></Response>"
            ),
        }
    }

    /// An IAM/STS query-protocol error.
    pub fn query_error(status: u16, code: &str, message: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type".into(), "text/xml".into())],
            body: format!(
                "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>r</RequestId></ErrorResponse>"
            ),
        }
    }

    pub fn status(status: u16) -> Canned {
        Canned { status, headers: vec![], body: String::new() }
    }

    pub fn header(mut self, k: &str, v: &str) -> Canned {
        self.headers.push((k.into(), v.into()));
        self
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> Canned + Send + Sync>;

/// The recording HTTP client.
#[derive(Clone)]
pub struct Replay {
    log: Arc<Mutex<Vec<Recorded>>>,
    responder: Responder,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").finish_non_exhaustive()
    }
}

impl Replay {
    pub fn new(responder: impl Fn(&Recorded) -> Canned + Send + Sync + 'static) -> Replay {
        Replay { log: Arc::default(), responder: Arc::new(responder) }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The requests of one operation.
    pub fn of(&self, operation: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.operation() == operation).collect()
    }

    /// The operations called, in order.
    pub fn operations(&self) -> Vec<String> {
        self.requests().iter().map(Recorded::operation).collect()
    }

    /// An SDK configuration sending everything here: us-east-1, static credentials, no retries.
    pub fn sdk_config(&self) -> SdkConfig {
        SdkConfig::builder()
            .region(Region::new("us-east-1"))
            .behavior_version(BehaviorVersion::latest())
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "AKID", "SECRET", None, None, "test",
            )))
            .retry_config(RetryConfig::disabled())
            .http_client(self.clone())
            .build()
    }

    /// The adapter on this client.
    pub fn provider(&self) -> crate::AwsProvider {
        crate::AwsProvider::from_sdk_config(self.sdk_config())
    }
}

impl HttpConnector for Replay {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let headers: BTreeMap<String, String> =
            request.headers().iter().map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())).collect();
        let recorded = Recorded {
            method: request.method().to_string(),
            url: request.uri().to_string(),
            uri: request
                .uri()
                .to_string()
                .split_once("amazonaws.com")
                .map(|(_, p)| p.to_string())
                .unwrap_or_else(|| request.uri().to_string()),
            target: headers.get("x-amz-target").cloned(),
            body: request.body().bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default(),
            headers,
        };
        let canned = (self.responder)(&recorded);
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(recorded);
        let mut response = HttpResponse::new(
            StatusCode::try_from(canned.status).unwrap_or_else(|_| StatusCode::try_from(500).expect("500")),
            SdkBody::from(canned.body),
        );
        for (k, v) in canned.headers {
            response.headers_mut().insert(k, v);
        }
        HttpConnectorFuture::ready(Ok(response))
    }
}

impl HttpClient for Replay {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

/// Percent-decoding of a URL or form component (`+` stays `+`: a form replaces it first).
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
