//! [`KubeAdapter`]: InstantStart's [`KubeApi`] on kube-rs.
//!
//! Every object goes through kube's dynamic API ([`DynamicObject`] + [`ApiResource`]), built
//! from the object's `apiVersion`/`kind` by [`crate::resources`] (a fixed table, then discovery,
//! cached per target). Typed CRDs (HyperPodPyTorchJob, RayJob, RayCluster,
//! InferenceEndpointConfig) are just rows of that table.
//!
//! - `apply`: server-side apply, field manager [`FIELD_MANAGER`], `force=true` (InstantStart owns
//!   the fields it sets; another manager's conflicting value is taken over).
//! - `get`: `404 NotFound` → `Ok(None)`.
//! - `list`: label selector `k=v,…`, all namespaces when none is given, paged 500 at a time;
//!   items get their `apiVersion`/`kind` back (API servers omit them in lists).
//! - `delete`: background propagation; `404` → `Ok(())`.
//! - `logs`: the pod's log as a stream of lines; `follow` keeps it open.
//! - `service_proxy`: a raw `GET`/`POST` to
//!   `/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path}` through the same client (so
//!   the same EKS token and CA); any HTTP status is an answer, the body is read up to
//!   [`PROXY_MAX_RESPONSE_BYTES`] + 1 bytes, the whole call is bounded by its timeout.
//! - `pod_proxy`: the same, `GET` only, to `/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{path}`
//!   (how `crate::dcgm` scrapes the DCGM exporters).
//!
//! With [`KubeAdapter::with_watch_cache`], lists of Nodes and Pods are answered from
//! reflector stores ([`crate::cache`]), except impersonated lists (a target with an identity),
//! which always go to the API server so the cluster's RBAC judges them.
//!
//! Every apply, get, list, delete and the opening of a log stream is bounded by the adapter's
//! request timeout ([`REQUEST_TIMEOUT`] by default): an API server that accepts a connection and
//! never answers (a half-open connection) fails the call as a connection error, which drops the
//! cached client, instead of hanging a step driver forever. A followed log stream, once open, is
//! not bounded: a quiet training job writes nothing for minutes.
//!
//! Errors are [`K8sError`]s mapped to provider errors named `k8s:Apply`, `k8s:Get`, … (the
//! simulator's names). A connection failure or `401` drops the target's cached client so the
//! next call reconnects (new endpoint, new token).

use crate::cache::WatchCache;
use crate::connector::{ConfigConnector, EksConnector, EksEndpointResolver, KubeConnector};
use crate::error::K8sError;
use crate::resources::{self, Resolved};
use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;
use futures::{StreamExt, TryStreamExt};
use instantstart_core::log_lines::LineSplitter;
use instantstart_core::provider::{
    KubeApi, KubeObject, KubeTarget, ListParams, LogStream, ObjectRef, POD_PROXY_API, PROXY_API,
    PROXY_MAX_RESPONSE_BYTES, ProviderError, ProviderErrorKind, ProxyResponse,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, LogParams, Patch, PatchParams};
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "instantstart";

/// Page size of list calls.
const PAGE: u32 = 500;

/// Metadata the server owns; sending it in an apply would conflict or be rejected.
const SERVER_METADATA: &[&str] = &["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"];

type DiscoveryKey = (KubeTarget, String, String);

/// The Kubernetes provider on kube-rs.
pub struct KubeAdapter {
    connector: Arc<dyn KubeConnector>,
    discovered: Mutex<HashMap<DiscoveryKey, Resolved>>,
    cache: Option<WatchCache>,
    request_timeout: std::time::Duration,
}

/// How long one request (apply, get, list with its pages, delete, opening a log stream) may
/// take by default.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl std::fmt::Debug for KubeAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAdapter").finish_non_exhaustive()
    }
}

impl KubeAdapter {
    /// An adapter reaching targets through `connector`.
    pub fn new(connector: Arc<dyn KubeConnector>) -> Self {
        KubeAdapter { connector, discovered: Mutex::new(HashMap::new()), cache: None, request_timeout: REQUEST_TIMEOUT }
    }

    /// Bounds every request by `timeout` instead of [`REQUEST_TIMEOUT`].
    pub fn with_request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// `call`, or a connection error when it has not finished within the request timeout.
    async fn bounded<T>(&self, call: impl std::future::Future<Output = Result<T, K8sError>>) -> Result<T, K8sError> {
        match tokio::time::timeout(self.request_timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(K8sError::Connect(format!(
                "the API server did not answer within {:?} (request timeout)",
                self.request_timeout
            ))),
        }
    }

    /// Answers lists of Nodes and Pods from per-target reflector stores ([`WatchCache`])
    /// instead of one API request each.
    pub fn with_watch_cache(mut self) -> Self {
        self.cache = Some(WatchCache::new(self.connector.clone()));
        self
    }

    /// The production adapter: EKS clusters found by `resolver` (endpoint + CA), authenticated
    /// with tokens signed from `credentials`.
    pub fn eks(credentials: SharedCredentialsProvider, resolver: Arc<dyn EksEndpointResolver>) -> Self {
        Self::new(Arc::new(EksConnector::new(credentials, resolver)))
    }

    /// Every target through one `kube::Config` (kubeconfig context or in-cluster).
    pub fn with_config(config: kube::Config) -> Self {
        Self::new(Arc::new(ConfigConnector::new(config)))
    }

    /// The connector (e.g. to share its clients with a cache).
    pub fn connector(&self) -> &Arc<dyn KubeConnector> {
        &self.connector
    }

    /// The REST resource of `api_version`/`kind` on `target`: the built-in table, else a
    /// cached discovery result, else discovery.
    pub async fn resolve(
        &self,
        client: &kube::Client,
        target: &KubeTarget,
        api_version: &str,
        kind: &str,
    ) -> Result<Resolved, K8sError> {
        if let Some(r) = resources::known(api_version, kind) {
            return Ok(r);
        }
        let key = (target.clone(), api_version.to_string(), kind.to_string());
        if let Some(r) = lock(&self.discovered).get(&key) {
            return Ok(r.clone());
        }
        let unknown = || K8sError::UnknownKind { api_version: api_version.into(), kind: kind.into() };
        let (resource, caps) = match kube::discovery::pinned_kind(client, &resources::gvk(api_version, kind)).await {
            Ok(found) => found,
            Err(kube::Error::Discovery(_)) => return Err(unknown()),
            Err(e) => {
                let e = K8sError::from(e);
                return Err(if matches!(e, K8sError::Api { code: 404, .. }) { unknown() } else { e });
            }
        };
        let resolved = Resolved { resource, namespaced: caps.scope == Scope::Namespaced };
        lock(&self.discovered).insert(key, resolved.clone());
        Ok(resolved)
    }

    async fn client(&self, target: &KubeTarget) -> Result<kube::Client, K8sError> {
        self.connector.client(target).await
    }

    /// The provider error for `e`; connection problems and `401`s drop the cached client.
    fn fail(&self, api: &str, target: &KubeTarget, e: K8sError) -> ProviderError {
        if matches!(e, K8sError::Connect(_) | K8sError::Api { code: 401, .. }) {
            self.connector.invalidate(target);
        }
        e.into_provider(api)
    }

    async fn do_apply(&self, target: &KubeTarget, object: &KubeObject) -> Result<KubeObject, K8sError> {
        let r = object
            .object_ref()
            .ok_or_else(|| K8sError::InvalidObject("the object needs apiVersion, kind and metadata.name".into()))?;
        let mut body = object.0.clone();
        let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(K8sError::InvalidObject("the object must have metadata".into()));
        };
        for field in SERVER_METADATA {
            meta.remove(*field);
        }
        let client = self.client(target).await?;
        let resolved = self.resolve(&client, target, &r.api_version, &r.kind).await?;
        let namespace = resolved.namespaced.then(|| r.namespace.clone().unwrap_or_else(|| "default".into()));
        match &namespace {
            Some(ns) => meta.insert("namespace".into(), Value::String(ns.clone())),
            None => meta.remove("namespace"),
        };
        let api = dynamic_api(client, &resolved.resource, namespace.as_deref());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = api.patch(&r.name, &params, &Patch::Apply(&body)).await?;
        Ok(KubeObject(to_value(applied, &resolved.resource)?))
    }

    async fn do_get(&self, target: &KubeTarget, r: &ObjectRef) -> Result<Option<KubeObject>, K8sError> {
        let client = self.client(target).await?;
        let resolved = self.resolve(&client, target, &r.api_version, &r.kind).await?;
        let namespace = resolved.namespaced.then(|| r.namespace.as_deref().unwrap_or("default"));
        let api = dynamic_api(client, &resolved.resource, namespace);
        match api.get(&r.name).await.map_err(K8sError::from) {
            Ok(o) => Ok(Some(KubeObject(to_value(o, &resolved.resource)?))),
            Err(e) if e.is_object_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn do_list(&self, target: &KubeTarget, p: &ListParams) -> Result<Vec<KubeObject>, K8sError> {
        // The cache watches every namespace as the control plane: an impersonated list goes to
        // the API server, so the cluster's RBAC judges it.
        if let Some(cache) = &self.cache
            && target.identity.is_none()
            && let Some(cached) = cache.list(target, p).await?
        {
            return Ok(cached);
        }
        let client = self.client(target).await?;
        let resolved = self.resolve(&client, target, &p.api_version, &p.kind).await?;
        let namespace = if resolved.namespaced { p.namespace.as_deref() } else { None };
        let api = dynamic_api(client, &resolved.resource, namespace);
        let selector = p.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        let mut params = kube::api::ListParams::default().limit(PAGE);
        if !selector.is_empty() {
            params = params.labels(&selector);
        }
        let mut out = Vec::new();
        loop {
            let page = api.list(&params).await?;
            for item in page.items {
                out.push(KubeObject(to_value(item, &resolved.resource)?));
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        Ok(out)
    }

    async fn do_delete(&self, target: &KubeTarget, r: &ObjectRef) -> Result<(), K8sError> {
        let client = self.client(target).await?;
        let resolved = self.resolve(&client, target, &r.api_version, &r.kind).await?;
        let namespace = resolved.namespaced.then(|| r.namespace.as_deref().unwrap_or("default"));
        let api = dynamic_api(client, &resolved.resource, namespace);
        match api.delete(&r.name, &DeleteParams::background()).await.map_err(K8sError::from) {
            Ok(_) => Ok(()),
            Err(e) if e.is_object_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn do_logs(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        follow: bool,
        tail_lines: Option<u32>,
    ) -> Result<LogStream, K8sError> {
        let client = self.client(target).await?;
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        let params = LogParams { follow, tail_lines: tail_lines.map(i64::from), ..Default::default() };
        let reader = pods.log_stream(pod, &params).await?;
        Ok(bounded_lines(Box::pin(reader))
            .map_err(|e| ProviderError::new("k8s:Logs", ProviderErrorKind::Transient, format!("log stream broke: {e}")))
            .boxed())
    }
}

/// The lines of a log, split and bounded by [`LineSplitter`] (a line never grows past
/// [`instantstart_core::log_lines::MAX_LOG_LINE_BYTES`], even without a line break).
fn bounded_lines<R>(reader: R) -> impl futures::Stream<Item = std::io::Result<String>> + Send + 'static
where
    R: futures::AsyncRead + Unpin + Send + 'static,
{
    use futures::AsyncReadExt;
    struct State<R> {
        reader: R,
        splitter: LineSplitter,
        ready: std::collections::VecDeque<String>,
        buf: Vec<u8>,
        done: bool,
    }
    let state =
        State { reader, splitter: LineSplitter::new(), ready: Default::default(), buf: vec![0; 8192], done: false };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(line) = st.ready.pop_front() {
                return Some((Ok(line), st));
            }
            if st.done {
                return None;
            }
            match st.reader.read(&mut st.buf).await {
                Ok(0) => {
                    st.done = true;
                    st.ready.extend(st.splitter.finish());
                }
                Ok(n) => {
                    let lines = st.splitter.push(&st.buf[..n]);
                    st.ready.extend(lines);
                }
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
        }
    })
}

impl KubeAdapter {
    #[allow(clippy::too_many_arguments)]
    async fn do_service_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        service: &str,
        port: u16,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<ProxyResponse, K8sError> {
        let path = path.trim_start_matches('/');
        if bad_segment(namespace) || bad_segment(service) || bad_path(path) {
            return Err(K8sError::InvalidObject(format!("invalid service proxy path {namespace}/{service}/{path}")));
        }
        let uri = format!("/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/{path}");
        self.send_proxied(target, &uri, body).await
    }

    /// `GET` through the pod proxy (the same checks of names and path as the service proxy).
    async fn do_pod_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
        path: &str,
    ) -> Result<ProxyResponse, K8sError> {
        let path = path.trim_start_matches('/');
        if bad_segment(namespace) || bad_segment(pod) || bad_path(path) {
            return Err(K8sError::InvalidObject(format!("invalid pod proxy path {namespace}/{pod}/{path}")));
        }
        let uri = format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/{path}");
        self.send_proxied(target, &uri, None).await
    }

    /// Sends a proxied request (`POST` with a JSON body, else `GET`) and reads the answer up to
    /// [`PROXY_MAX_RESPONSE_BYTES`] + 1 bytes.
    async fn send_proxied(
        &self,
        target: &KubeTarget,
        uri: &str,
        body: Option<&[u8]>,
    ) -> Result<ProxyResponse, K8sError> {
        use http_body_util::BodyExt;
        let request = match body {
            Some(b) => http::Request::post(uri).header(http::header::CONTENT_TYPE, "application/json").body(b.to_vec()),
            None => http::Request::get(uri).body(Vec::new()),
        }
        .map_err(|e| K8sError::InvalidObject(e.to_string()))?
        .map(kube::client::Body::from);
        let client = self.client(target).await?;
        let response = client.send(request).await?;
        let status = response.status().as_u16();
        let mut stream = response.into_body();
        let mut out = Vec::new();
        while let Some(frame) = stream.frame().await {
            let frame = frame.map_err(|e| K8sError::Connect(format!("reading the proxied answer: {e}")))?;
            if let Ok(data) = frame.into_data() {
                out.extend_from_slice(&data);
                if out.len() > PROXY_MAX_RESPONSE_BYTES {
                    out.truncate(PROXY_MAX_RESPONSE_BYTES + 1);
                    break;
                }
            }
        }
        Ok(ProxyResponse { status, body: out })
    }
}

/// A name that cannot be one path segment of a proxy URL.
fn bad_segment(s: &str) -> bool {
    s.is_empty() || s.contains(['/', '?', '#', '%']) || s.chars().any(|c| c.is_whitespace())
}

/// A proxied path that would leave the proxy (`..`) or carry a query or fragment.
fn bad_path(path: &str) -> bool {
    path.split('/').any(|seg| seg == ".." || seg == ".") || path.contains(['?', '#'])
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn dynamic_api(client: kube::Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    }
}

/// The object as JSON, with `apiVersion`/`kind` filled in when the server left them out.
fn to_value(o: DynamicObject, resource: &ApiResource) -> Result<Value, K8sError> {
    let mut v = serde_json::to_value(o).map_err(|e| K8sError::Decode(e.to_string()))?;
    if let Some(map) = v.as_object_mut() {
        map.entry("apiVersion").or_insert_with(|| Value::String(resource.api_version.clone()));
        map.entry("kind").or_insert_with(|| Value::String(resource.kind.clone()));
    }
    Ok(v)
}

#[async_trait]
impl KubeApi for KubeAdapter {
    async fn apply(&self, target: &KubeTarget, object: &KubeObject) -> Result<KubeObject, ProviderError> {
        self.bounded(self.do_apply(target, object)).await.map_err(|e| self.fail("k8s:Apply", target, e))
    }

    async fn get(&self, target: &KubeTarget, object: &ObjectRef) -> Result<Option<KubeObject>, ProviderError> {
        self.bounded(self.do_get(target, object)).await.map_err(|e| self.fail("k8s:Get", target, e))
    }

    async fn list(&self, target: &KubeTarget, params: &ListParams) -> Result<Vec<KubeObject>, ProviderError> {
        self.bounded(self.do_list(target, params)).await.map_err(|e| self.fail("k8s:List", target, e))
    }

    async fn delete(&self, target: &KubeTarget, object: &ObjectRef) -> Result<(), ProviderError> {
        self.bounded(self.do_delete(target, object)).await.map_err(|e| self.fail("k8s:Delete", target, e))
    }

    async fn logs(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        follow: bool,
        tail_lines: Option<u32>,
    ) -> Result<LogStream, ProviderError> {
        self.bounded(self.do_logs(target, namespace, pod, follow, tail_lines))
            .await
            .map_err(|e| self.fail("k8s:Logs", target, e))
    }

    async fn service_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        service: &str,
        port: u16,
        path: &str,
        body: Option<&[u8]>,
        timeout: std::time::Duration,
    ) -> Result<ProxyResponse, ProviderError> {
        let call = self.do_service_proxy(target, namespace, service, port, path, body);
        match tokio::time::timeout(timeout, call).await {
            Ok(r) => r.map_err(|e| self.fail(PROXY_API, target, e)),
            Err(_) => Err(ProviderError::proxy_timeout(timeout)),
        }
    }

    async fn pod_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
        path: &str,
        timeout: std::time::Duration,
    ) -> Result<ProxyResponse, ProviderError> {
        let call = self.do_pod_proxy(target, namespace, pod, port, path);
        match tokio::time::timeout(timeout, call).await {
            Ok(r) => r.map_err(|e| self.fail(POD_PROXY_API, target, e)),
            Err(_) => Err(ProviderError::proxy_timeout(timeout)),
        }
    }
}

#[cfg(test)]
mod bounded_lines_tests {
    use super::*;

    #[tokio::test]
    async fn a_progress_bar_without_newlines_does_not_become_one_huge_line() {
        use instantstart_core::log_lines::MAX_LOG_LINE_BYTES;
        let mut log = Vec::new();
        log.extend_from_slice(b"start\n");
        log.extend(std::iter::repeat_n(b'#', 4 << 20));
        log.extend_from_slice(b"\r 50%\r100%\r\nend");
        let lines: Vec<String> =
            bounded_lines(futures::io::Cursor::new(log)).map(Result::unwrap).collect::<Vec<_>>().await;
        assert_eq!(lines.len(), 5, "{:?}", lines.iter().map(|l| l.len()).collect::<Vec<_>>());
        assert_eq!(lines[0], "start");
        assert!(lines[1].len() < MAX_LOG_LINE_BYTES + 40 && lines[1].ends_with("bytes cut]"));
        assert_eq!(&lines[2..], [" 50%", "100%", "end"]);
    }
}

#[cfg(test)]
mod request_timeout_tests {
    use super::*;
    use crate::connector::ConfigConnector;

    /// An API server that accepts connections and never answers: every kind of request fails
    /// within the timeout as a transient connection error instead of hanging.
    #[tokio::test]
    async fn a_silent_api_server_fails_the_call_instead_of_hanging() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let connector = ConfigConnector::url_per_target(move |_| format!("http://{addr}"));
        let adapter = KubeAdapter::new(Arc::new(connector)).with_request_timeout(std::time::Duration::from_millis(300));
        let target = KubeTarget::new("us-east-1", "silent");
        let pod = ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("default".into()),
            name: "p".into(),
        };
        let started = std::time::Instant::now();
        let errors = [
            adapter.get(&target, &pod).await.unwrap_err(),
            adapter.delete(&target, &pod).await.unwrap_err(),
            adapter.logs(&target, "default", "p", true, None).await.err().expect("no log stream"),
        ];
        for e in errors {
            assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
            assert!(e.message.contains("request timeout"), "{e}");
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
        held.abort();
    }
}
