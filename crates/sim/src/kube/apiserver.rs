//! The simulated Kubernetes worlds over HTTP, following the Kubernetes REST conventions for the
//! subset InstantStart uses, so real clients (kube-rs, kubectl) can talk to them.
//!
//! One router serves every EKS cluster of the [`SimCloud`] under
//! `/clusters/{region}/{eks-cluster}/…`; a client's server URL is that prefix (kubectl and
//! kube-rs keep a path in the server URL). [`SimCloud::serve_kube_api`] serves it on a loopback
//! port and writes kubeconfigs for it.
//!
//! What is served, per cluster:
//! - discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`
//!   — the built-in kinds of [`RESOURCES`] with the CRDs of the EKS add-ons InstantStart uses
//!   (HyperPodPyTorchJob, InferenceEndpointConfig, …), the custom resources of a pinned Helm
//!   chart ([`CHART_RESOURCES`]: RayJob/RayCluster/RayService with the `kuberay-operator`
//!   release, ScaledObject with the `keda` release) only while that release is deployed in the
//!   cluster, and any CustomResourceDefinition applied to the cluster;
//! - `GET` get / list (`labelSelector` with `=`, `==`, `!=`, `in`, `notin`, exists, `!`;
//!   `fieldSelector` on `metadata.name`/`metadata.namespace`), server-side-printed Tables when
//!   the client asks for them (`kubectl get`), and `watch=true` (the current objects as `ADDED`,
//!   then `ADDED`/`MODIFIED`/`DELETED` from a periodic comparison, until `timeoutSeconds`);
//! - `POST` create (`409 AlreadyExists`), `PUT` replace, `PATCH` with
//!   `application/apply-patch+yaml` (server-side apply; JSON bodies, `fieldManager` required) or
//!   `application/merge-patch+json` / `strategic-merge-patch+json` (applied as a JSON merge
//!   patch), `DELETE` (`404` when absent);
//! - `pods/{name}/log` with `follow`, `tailLines`;
//! - the service proxy (`services/{name}:{port}/proxy/…`, `GET` and `POST`) and the pod proxy
//!   (`pods/{name}:{port}/proxy/…`, `GET`: a DCGM exporter pod serves `/metrics`);
//! - errors as `Status` objects with the usual reasons and codes (`NotFound` 404,
//!   `AlreadyExists`/`Conflict` 409, `Invalid` 422, `BadRequest` 400, `Forbidden` 403,
//!   `TooManyRequests` 429, `ServiceUnavailable` 503, `MethodNotAllowed` 405).
//!
//! Every object call goes through the simulator's [`KubeApi`] implementation (so call counters
//! and fault injection apply, `k8s:Apply` etc.); existence checks (create, replace, delete) and
//! watch polling read the world directly and are not counted. A cluster that is missing or
//! being deleted answers `404` without a reason (like an endpoint that does not exist, unlike
//! an absent object); one still creating answers `503`.

use super::kinds::CLUSTER_SCOPED;
pub use super::kinds::{CHART_RESOURCES, RESOURCES};
use super::objects::check_target;
use super::{get as world_get, list as world_list};
use crate::base::Cx;
use crate::base::rkey;
use crate::cloud::SimCloud;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::StreamExt;
use instantstart_core::provider::{
    KubeApi, KubeIdentity, KubeObject, KubeTarget, ListParams, ObjectRef, ProviderError, ProviderErrorKind,
};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

/// A REST resource the simulated API server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResourceInfo {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
}

impl ApiResourceInfo {
    fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

fn resource_info(api_version: &str, kind: &str, plural: &str, short: &[&str]) -> ApiResourceInfo {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResourceInfo {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        namespaced: !CLUSTER_SCOPED.contains(&kind),
        short_names: short.iter().map(|s| s.to_string()).collect(),
    }
}

fn builtin_resources() -> Vec<ApiResourceInfo> {
    RESOURCES.iter().map(|(api_version, kind, plural, short)| resource_info(api_version, kind, plural, short)).collect()
}

/// The resources defined by the CustomResourceDefinitions stored in a cluster.
fn crd_resources(crds: &[Value]) -> Vec<ApiResourceInfo> {
    let mut out = Vec::new();
    for crd in crds {
        let s = |p: &str| crd.pointer(p).and_then(Value::as_str).map(str::to_string);
        let (Some(group), Some(kind), Some(plural)) =
            (s("/spec/group"), s("/spec/names/kind"), s("/spec/names/plural"))
        else {
            continue;
        };
        let namespaced = s("/spec/scope").as_deref() != Some("Cluster");
        let short_names: Vec<String> = crd
            .pointer("/spec/names/shortNames")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        for v in crd.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
            if let Some(version) = v.get("name").and_then(Value::as_str)
                && v.get("served").and_then(Value::as_bool).unwrap_or(true)
            {
                out.push(ApiResourceInfo {
                    group: group.clone(),
                    version: version.into(),
                    kind: kind.clone(),
                    plural: plural.clone(),
                    namespaced,
                    short_names: short_names.clone(),
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Serving

/// The simulated Kubernetes API served on a loopback port. Dropping it stops the server.
#[derive(Debug)]
pub struct KubeApiServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KubeApiServer {
    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API server URL of one EKS cluster (what a kubeconfig's `server:` holds).
    pub fn cluster_url(&self, target: &KubeTarget) -> String {
        cluster_url(&self.url(), target)
    }

    /// A kubeconfig with one cluster/context per target (named `<eks-cluster>.<region>`), the
    /// first one current. No credentials: the simulator does not authenticate.
    pub fn kubeconfig(&self, targets: &[KubeTarget]) -> String {
        kubeconfig(&self.url(), targets)
    }
}

/// The API server URL of `target` under a server at `base`.
pub fn cluster_url(base: &str, target: &KubeTarget) -> String {
    format!("{}/clusters/{}/{}", base.trim_end_matches('/'), target.region, target.eks_cluster)
}

/// A kubeconfig (YAML) for the clusters `targets` of the simulated API server at `base`.
pub fn kubeconfig(base: &str, targets: &[KubeTarget]) -> String {
    let name = |t: &KubeTarget| format!("{}.{}", t.eks_cluster, t.region);
    let mut y = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for t in targets {
        y.push_str(&format!("- name: {}\n  cluster:\n    server: {}\n", name(t), cluster_url(base, t)));
    }
    y.push_str("users:\n- name: sim\n  user: {}\ncontexts:\n");
    for t in targets {
        y.push_str(&format!(
            "- name: {0}\n  context:\n    cluster: {0}\n    user: sim\n    namespace: default\n",
            name(t)
        ));
    }
    y.push_str(&format!("current-context: {}\npreferences: {{}}\n", targets.first().map(name).unwrap_or_default()));
    y
}

impl SimCloud {
    /// The Kubernetes API of every simulated EKS cluster, under `/clusters/{region}/{eks}/…`.
    pub fn kube_api_router(&self) -> Router {
        Router::new()
            .route("/clusters/{region}/{eks}/{*rest}", any(handle))
            .fallback(|| async { status(StatusCode::NOT_FOUND, "", "not a simulated cluster API path", None) })
            .with_state(self.clone())
    }

    /// Serves [`SimCloud::kube_api_router`] on `127.0.0.1` at a free port until the returned
    /// server is dropped.
    pub async fn serve_kube_api(&self) -> std::io::Result<KubeApiServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let router = self.kube_api_router();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "simulator: Kubernetes API server stopped");
            }
        });
        Ok(KubeApiServer { addr, task })
    }
}

// ---------------------------------------------------------------------------------------------
// Responses

fn json_response(code: StatusCode, v: &Value) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

fn ok(v: &Value) -> Response {
    json_response(StatusCode::OK, v)
}

/// Details of a `Status`: the object's name, group and resource.
struct Details<'a> {
    name: &'a str,
    res: &'a ApiResourceInfo,
}

fn status(code: StatusCode, reason: &str, message: &str, details: Option<Details<'_>>) -> Response {
    let mut v = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code.as_u16(),
    });
    if !reason.is_empty() {
        v["reason"] = json!(reason);
    }
    if let Some(d) = details {
        v["details"] = json!({ "name": d.name, "group": d.res.group, "kind": d.res.plural });
    }
    json_response(code, &v)
}

fn not_found(res: &ApiResourceInfo, name: &str) -> Response {
    let what = if res.group.is_empty() { res.plural.clone() } else { format!("{}.{}", res.plural, res.group) };
    status(StatusCode::NOT_FOUND, "NotFound", &format!("{what} \"{name}\" not found"), Some(Details { name, res }))
}

fn bad_request(message: &str) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message, None)
}

/// A simulated API error as a `Status`.
fn provider_status(e: &ProviderError, details: Option<Details<'_>>) -> Response {
    let (code, reason) = match e.kind {
        ProviderErrorKind::NotFound => (StatusCode::NOT_FOUND, "NotFound"),
        ProviderErrorKind::AlreadyExists => (StatusCode::CONFLICT, "AlreadyExists"),
        ProviderErrorKind::Conflict => (StatusCode::CONFLICT, "Conflict"),
        ProviderErrorKind::InvalidRequest => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
        ProviderErrorKind::AccessDenied if e.message.starts_with("Unauthorized") => {
            (StatusCode::UNAUTHORIZED, "Unauthorized")
        }
        ProviderErrorKind::AccessDenied | ProviderErrorKind::QuotaExceeded => (StatusCode::FORBIDDEN, "Forbidden"),
        ProviderErrorKind::Throttled => (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests"),
        ProviderErrorKind::Transient => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        ProviderErrorKind::Failed => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
    };
    status(code, reason, &e.message, details)
}

/// Gives an object that has none (Nodes, workload pods: computed, never stored) a
/// `metadata.resourceVersion` derived from its content, so it changes when they do. Watch
/// clients (kube-runtime) need one on every object.
fn with_resource_version(mut v: Value) -> Value {
    if v.pointer("/metadata/resourceVersion").and_then(Value::as_str).is_some_and(|rv| !rv.is_empty()) {
        return v;
    }
    let rv = (crate::base::stable_hash(&[&v.to_string()]) >> 12).to_string();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Request parsing

/// What a resource path addresses.
struct ResourcePath {
    res: ApiResourceInfo,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

impl ResourcePath {
    fn object_ref(&self, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: self.res.api_version(),
            kind: self.res.kind.clone(),
            namespace: self.namespace.clone(),
            name: name.into(),
        }
    }
}

/// Splits the segments after `/api/v1` or `/apis/{g}/{v}` into namespace, plural, name and
/// subresource.
/// Namespace, plural, name and subresource of a resource path.
type Tail = (Option<String>, String, Option<String>, Option<String>);

fn split_tail(tail: &[&str]) -> Option<Tail> {
    let owned = |s: &&str| s.to_string();
    match tail {
        ["namespaces", ns, plural, rest @ ..] if !(rest.is_empty() && matches!(*plural, "status" | "finalize")) => {
            match rest {
                [] => Some((Some(ns.to_string()), plural.to_string(), None, None)),
                [name] => Some((Some(ns.to_string()), plural.to_string(), Some(owned(name)), None)),
                [name, sub] => Some((Some(ns.to_string()), plural.to_string(), Some(owned(name)), Some(owned(sub)))),
                _ => None,
            }
        }
        [plural] => Some((None, plural.to_string(), None, None)),
        [plural, name] => Some((None, plural.to_string(), Some(owned(name)), None)),
        [plural, name, sub] => Some((None, plural.to_string(), Some(owned(name)), Some(owned(sub)))),
        _ => None,
    }
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// Parses a label selector (`a=b,c!=d,e in (f,g),h,!i`).
fn parse_selector(s: &str) -> Result<Vec<Requirement>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    let set = |v: &str| -> Result<Vec<String>, String> {
        let v = v.trim();
        let inner = v.strip_prefix('(').and_then(|v| v.strip_suffix(')')).ok_or(format!("bad set {v:?}"))?;
        Ok(inner.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect())
    };
    let mut out = Vec::new();
    for p in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let r = if let Some((k, v)) = p.split_once("!=") {
            Requirement::NotEq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once("==") {
            Requirement::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once('=') {
            Requirement::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once(" notin ") {
            Requirement::NotIn(k.trim().into(), set(v)?)
        } else if let Some((k, v)) = p.split_once(" in ") {
            Requirement::In(k.trim().into(), set(v)?)
        } else if let Some(k) = p.strip_prefix('!') {
            Requirement::NotExists(k.trim().into())
        } else if p.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
            Requirement::Exists(p.into())
        } else {
            return Err(format!("unable to parse requirement {p:?}"));
        };
        out.push(r);
    }
    Ok(out)
}

fn selector_matches(obj: &Value, reqs: &[Requirement]) -> bool {
    let label = |k: &str| obj.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str);
    reqs.iter().all(|r| match r {
        Requirement::Eq(k, v) => label(k) == Some(v.as_str()),
        Requirement::NotEq(k, v) => label(k) != Some(v.as_str()),
        Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
        Requirement::NotIn(k, vs) => label(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
        Requirement::Exists(k) => label(k).is_some(),
        Requirement::NotExists(k) => label(k).is_none(),
    })
}

/// `fieldSelector` support: `metadata.name` and `metadata.namespace` equality.
fn field_matches(obj: &Value, selector: Option<&str>) -> Result<bool, String> {
    let Some(sel) = selector.filter(|s| !s.is_empty()) else { return Ok(true) };
    for part in sel.split(',') {
        let (field, value, negate) = if let Some((f, v)) = part.split_once("!=") {
            (f, v, true)
        } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            (f, v, false)
        } else {
            return Err(format!("invalid field selector {part:?}"));
        };
        let actual = match field.trim() {
            "metadata.name" => obj.pointer("/metadata/name"),
            "metadata.namespace" => obj.pointer("/metadata/namespace"),
            other => return Err(format!("field label not supported by the simulator: {other}")),
        }
        .and_then(Value::as_str)
        .unwrap_or("");
        if (actual == value.trim()) == negate {
            return Ok(false);
        }
    }
    Ok(true)
}

// ---------------------------------------------------------------------------------------------
// The handler

struct Ctx {
    cloud: SimCloud,
    target: KubeTarget,
}

impl Ctx {
    /// The resources this cluster serves: the built-in table, the custom resources of the pinned
    /// charts deployed in it, plus its CRDs.
    fn resources(&self) -> Vec<ApiResourceInfo> {
        let mut out = builtin_resources();
        let crds: Vec<Value> = {
            let st = self.cloud.lock();
            let now = st.now();
            if let Some(kw) = st.world.kube.get(&rkey(&self.target.region, &self.target.eks_cluster)) {
                for (_, api_version, kind, plural, short) in CHART_RESOURCES {
                    if super::kinds::chart_kind_served(kw, api_version, kind, now) {
                        out.push(resource_info(api_version, kind, plural, short));
                    }
                }
                let wkey = rkey(&self.target.region, &self.target.eks_cluster);
                for (api_version, kind, plural) in super::kinds::KARPENTER_RESOURCES {
                    if super::kinds::kind_served(&st.world, &wkey, api_version, kind, now) {
                        out.push(resource_info(api_version, kind, plural, &[]));
                    }
                }
            }
            let params = ListParams {
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                namespace: None,
                labels: vec![],
            };
            world_list(&st.world, &Cx { now, resource_fails: None }, &self.target, &params)
                .map(|v| v.into_iter().map(|o| o.0).collect())
                .unwrap_or_default()
        };
        for r in crd_resources(&crds) {
            if !out.iter().any(|o| o.group == r.group && o.version == r.version && o.plural == r.plural) {
                out.push(r);
            }
        }
        out
    }

    /// Reads an object without counting a call.
    fn peek(&self, r: &ObjectRef) -> Option<Value> {
        let st = self.cloud.lock();
        let now = st.now();
        world_get(&st.world, &Cx { now, resource_fails: None }, &self.target, r).ok().flatten().map(|o| o.0)
    }

    /// Lists without counting a call.
    fn peek_list(&self, p: &ListParams) -> Result<Vec<Value>, ProviderError> {
        let st = self.cloud.lock();
        let now = st.now();
        Ok(world_list(&st.world, &Cx { now, resource_fails: None }, &self.target, p)?
            .into_iter()
            .map(|o| o.0)
            .collect())
    }

    /// The cluster can answer API calls (without counting one).
    fn check(&self) -> Result<(), ProviderError> {
        let st = self.cloud.lock();
        let now = st.now();
        check_target(&st.world, "k8s:Connect", &self.target, now).map(|_| ())
    }

    fn eks_version(&self) -> String {
        let st = self.cloud.lock();
        st.world
            .eks
            .get(&rkey(&self.target.region, &self.target.eks_cluster))
            .map(|c| c.version.clone())
            .unwrap_or_else(|| "1.33".into())
    }
}

async fn handle(
    State(cloud): State<SimCloud>,
    Path((region, eks, rest)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Review #27: kubectl and kube-rs send no `Origin`; a browser always does on a cross-site
    // write, so a web page that finds this loopback port cannot change the simulated world.
    if headers.contains_key(header::ORIGIN) {
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "the simulated Kubernetes API does not serve browsers",
            None,
        );
    }
    let identity = match impersonation(&headers) {
        Ok(id) => id,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", &message, None),
    };
    let cx = Ctx { cloud, target: KubeTarget::new(region, eks).acting_as(identity) };
    if let Err(e) = cx.check() {
        // No such API server: no `NotFound` reason, so clients do not take it for an absent object.
        let code = match e.kind {
            ProviderErrorKind::Transient => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::NOT_FOUND,
        };
        return status(code, "", &e.message, None);
    }
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, tail): (&str, &str, &[&str]) = match segments.as_slice() {
        ["version"] => return ok(&version_doc(&cx.eks_version())),
        ["api"] => {
            return ok(&json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443" }],
            }));
        }
        ["apis"] => return ok(&group_list(&cx.resources())),
        ["apis", group] => {
            return match group_doc(&cx.resources(), group) {
                Some(doc) => ok(&doc),
                None => {
                    status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None)
                }
            };
        }
        ["api", "v1"] => return ok(&resource_list(&cx.resources(), "", "v1")),
        ["apis", group, version] => {
            let resources = cx.resources();
            if !resources.iter().any(|r| r.group == *group && r.version == *version) {
                return status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "the server could not find the requested resource",
                    None,
                );
            }
            return ok(&resource_list(&resources, group, version));
        }
        ["api", "v1", "namespaces", ns, "services", svc, "proxy", path @ ..] => {
            return service_proxy(&cx, ns, svc, &path.join("/"), &method, &body).await;
        }
        ["api", "v1", "namespaces", ns, "pods", pod, "proxy", path @ ..] => {
            return pod_proxy(&cx, ns, pod, &path.join("/"), &method).await;
        }
        ["api", "v1", tail @ ..] => ("", "v1", tail),
        ["apis", group, version, tail @ ..] => (group, version, tail),
        _ => {
            return status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None);
        }
    };
    let Some((namespace, plural, name, sub)) = split_tail(tail) else {
        return status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None);
    };
    let Some(res) = cx.resources().into_iter().find(|r| r.group == group && r.version == version && r.plural == plural)
    else {
        return status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None);
    };
    if namespace.is_some() && !res.namespaced {
        return status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None);
    }
    if namespace.is_none() && res.namespaced && name.is_some() {
        return status(StatusCode::NOT_FOUND, "NotFound", "the server could not find the requested resource", None);
    }
    let path = ResourcePath { res, namespace, name, sub };
    let q = |k: &str| query.get(k).map(String::as_str);
    if let Some(id) = &cx.target.identity {
        // The authorizer runs before anything else, as in a real API server.
        let verb = match (&method, path.name.is_some()) {
            (&Method::GET, false) if matches!(q("watch"), Some("true" | "1")) => "watch",
            (&Method::GET, false) => "list",
            (&Method::GET, true) => "get",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, _) => "delete",
            _ => "unknown",
        };
        let resource = match path.sub.as_deref() {
            Some(sub) => format!("{}/{sub}", path.res.plural),
            None => path.res.plural.clone(),
        };
        let access = super::rbac::Access {
            verb,
            group: &path.res.group,
            resource: &resource,
            namespace: path.namespace.as_deref(),
            name: path.name.as_deref(),
        };
        let denied = {
            let mut st = cx.cloud.lock();
            st.world
                .kube
                .get_mut(&rkey(&cx.target.region, &cx.target.eks_cluster))
                .and_then(|kw| super::rbac::check(kw, id, &access).err())
        };
        if let Some(message) = denied {
            return status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                &message,
                Some(Details { name: path.name.as_deref().unwrap_or(""), res: &path.res }),
            );
        }
    }
    match (&method, path.name.as_deref(), path.sub.as_deref()) {
        (&Method::GET, None, None) if matches!(q("watch"), Some("true" | "1")) => watch(cx, path, &query),
        (&Method::GET, None, None) => list(&cx, &path, &query, &headers).await,
        (&Method::GET, Some(name), None | Some("status")) => get(&cx, &path, name, &query, &headers).await,
        (&Method::GET, Some(name), Some("log")) if path.res.kind == "Pod" && path.res.group.is_empty() => {
            logs(&cx, &path, name, &query).await
        }
        (&Method::POST, None, None) => create(&cx, &path, &body).await,
        (&Method::PUT, Some(name), None | Some("status")) => replace(&cx, &path, name, &body).await,
        (&Method::PATCH, Some(name), None | Some("status")) => patch(&cx, &path, name, &query, &headers, &body).await,
        (&Method::DELETE, Some(name), None) => delete(&cx, &path, name).await,
        _ => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            &format!("the server does not allow this method on the requested resource ({method} {rest})"),
            None,
        ),
    }
}

/// The identity a request impersonates: `Impersonate-User` and every `Impersonate-Group`
/// (groups without a user are a `400`, as on a real API server).
fn impersonation(headers: &HeaderMap) -> Result<Option<KubeIdentity>, String> {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let users = values("impersonate-user");
    let groups = values("impersonate-group");
    match users.as_slice() {
        [] if groups.is_empty() => Ok(None),
        [] => Err("requested impersonation of groups without a user".into()),
        [user] => Ok(Some(KubeIdentity { user: user.clone(), groups })),
        _ => Err("only one Impersonate-User may be requested".into()),
    }
}

/// `/api/v1/namespaces/{ns}/services/{[scheme:]name[:port]}/proxy/{path}`: `GET`, or `POST`
/// with a body, to the Service through [`KubeApi::service_proxy`] of the simulated world.
async fn service_proxy(cx: &Ctx, ns: &str, svc: &str, path: &str, method: &Method, body: &Bytes) -> Response {
    let parts: Vec<&str> = svc.split(':').collect();
    let (name, port) = match parts.as_slice() {
        [name] => (*name, None),
        [name, port] | ["http", name, port] => (*name, Some(*port)),
        _ => return bad_request(&format!("invalid service reference {svc:?}")),
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(p) => Some(p),
            Err(_) => return bad_request(&format!("the simulator proxies numeric service ports only, not {p:?}")),
        },
    };
    let port = match port {
        Some(p) => p,
        None => {
            let svc_ref = ObjectRef {
                api_version: "v1".into(),
                kind: "Service".into(),
                namespace: Some(ns.into()),
                name: name.into(),
            };
            match cx.peek(&svc_ref).and_then(|s| s.pointer("/spec/ports/0/port").and_then(Value::as_u64)) {
                Some(p) => p as u16,
                None => {
                    return status(StatusCode::NOT_FOUND, "NotFound", &format!("services \"{name}\" not found"), None);
                }
            }
        }
    };
    let payload = match *method {
        Method::GET => None,
        Method::POST => Some(body.as_ref()),
        _ => {
            return status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the simulator proxies GET and POST to services",
                None,
            );
        }
    };
    match KubeApi::service_proxy(&cx.cloud, &cx.target, ns, name, port, path, payload, Duration::from_secs(60)).await {
        Ok(r) => Response::builder()
            .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r.body))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Err(e) => provider_status(&e, None),
    }
}

/// `/api/v1/namespaces/{ns}/pods/{[scheme:]name[:port]}/proxy/{path}`: `GET` to the pod through
/// [`KubeApi::pod_proxy`] of the simulated world (port 80 when none is given, as the API server).
async fn pod_proxy(cx: &Ctx, ns: &str, pod: &str, path: &str, method: &Method) -> Response {
    let parts: Vec<&str> = pod.split(':').collect();
    let (name, port) = match parts.as_slice() {
        [name] => (*name, "80"),
        [name, port] | ["http", name, port] => (*name, *port),
        _ => return bad_request(&format!("invalid pod reference {pod:?}")),
    };
    let Ok(port) = port.parse::<u16>() else {
        return bad_request(&format!("the simulator proxies numeric pod ports only, not {port:?}"));
    };
    if *method != Method::GET {
        return status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "the simulator proxies GET to pods", None);
    }
    match KubeApi::pod_proxy(&cx.cloud, &cx.target, ns, name, port, path, Duration::from_secs(60)).await {
        Ok(r) => {
            let json = r.body.starts_with(b"{");
            Response::builder()
                .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY))
                .header(header::CONTENT_TYPE, if json { "application/json" } else { "text/plain; version=0.0.4" })
                .body(Body::from(r.body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Err(e) => provider_status(&e, None),
    }
}

fn version_doc(eks_version: &str) -> Value {
    let (major, minor) = eks_version.split_once('.').unwrap_or(("1", "33"));
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{major}.{minor}.3-eks-sim"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn groups_of(resources: &[ApiResourceInfo]) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in resources.iter().filter(|r| !r.group.is_empty()) {
        let versions = groups.entry(r.group.clone()).or_default();
        if !versions.contains(&r.version) {
            versions.push(r.version.clone());
        }
    }
    groups
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({ "groupVersion": format!("{group}/{v}"), "version": v });
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

fn group_list(resources: &[ApiResourceInfo]) -> Value {
    let groups: Vec<Value> = groups_of(resources).iter().map(|(g, vs)| group_json(g, vs)).collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

fn group_doc(resources: &[ApiResourceInfo], group: &str) -> Option<Value> {
    let groups = groups_of(resources);
    let mut doc = group_json(group, groups.get(group)?);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_list(resources: &[ApiResourceInfo], group: &str, version: &str) -> Value {
    let mut list = Vec::new();
    for r in resources.iter().filter(|r| r.group == group && r.version == version) {
        let verbs: &[&str] = if r.kind == "Node" && group.is_empty() {
            &["get", "list", "watch", "delete"]
        } else {
            &["create", "delete", "get", "list", "patch", "update", "watch"]
        };
        list.push(json!({
            "name": r.plural,
            "singularName": r.kind.to_lowercase(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs,
            "shortNames": r.short_names,
        }));
        list.push(json!({
            "name": format!("{}/status", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["get", "patch", "update"],
        }));
        if r.kind == "Pod" && group.is_empty() {
            list.push(
                json!({ "name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"] }),
            );
        }
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list })
}

/// The equality requirements of a selector (the simulator's list filters on them).
fn equality_labels(reqs: &[Requirement]) -> Vec<(String, String)> {
    reqs.iter()
        .filter_map(|r| match r {
            Requirement::Eq(k, v) => Some((k.clone(), v.clone())),
            _ => None,
        })
        .collect()
}

fn list_params(path: &ResourcePath, reqs: &[Requirement]) -> ListParams {
    ListParams {
        api_version: path.res.api_version(),
        kind: path.res.kind.clone(),
        namespace: path.namespace.clone(),
        labels: equality_labels(reqs),
    }
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("as=Table"))
}

fn resource_version(cx: &Ctx) -> String {
    let st = cx.cloud.lock();
    st.world
        .kube
        .get(&rkey(&cx.target.region, &cx.target.eks_cluster))
        .map(|k| k.resource_version.to_string())
        .unwrap_or_else(|| "0".into())
}

async fn list(cx: &Ctx, path: &ResourcePath, query: &HashMap<String, String>, headers: &HeaderMap) -> Response {
    let reqs = match parse_selector(query.get("labelSelector").map(String::as_str).unwrap_or("")) {
        Ok(r) => r,
        Err(e) => return bad_request(&e),
    };
    let items = match cx.cloud.list(&cx.target, &list_params(path, &reqs)).await {
        Ok(items) => items,
        Err(e) => return provider_status(&e, None),
    };
    let mut kept = Vec::new();
    for o in items.into_iter().map(|o| with_resource_version(o.0)).filter(|o| selector_matches(o, &reqs)) {
        match field_matches(&o, query.get("fieldSelector").map(String::as_str)) {
            Ok(true) => kept.push(o),
            Ok(false) => {}
            Err(e) => return bad_request(&e),
        }
    }
    let rv = resource_version(cx);
    if wants_table(headers) {
        return ok(&table(cx, &path.res, &kept, &rv, query.get("includeObject").map(String::as_str)));
    }
    ok(&json!({
        "kind": format!("{}List", path.res.kind),
        "apiVersion": path.res.api_version(),
        "metadata": { "resourceVersion": rv },
        "items": kept,
    }))
}

async fn get(
    cx: &Ctx,
    path: &ResourcePath,
    name: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Response {
    match cx.cloud.get(&cx.target, &path.object_ref(name)).await {
        Ok(Some(o)) if wants_table(headers) => ok(&table(
            cx,
            &path.res,
            &[with_resource_version(o.0)],
            &resource_version(cx),
            query.get("includeObject").map(String::as_str),
        )),
        Ok(Some(o)) => ok(&with_resource_version(o.0)),
        Ok(None) => not_found(&path.res, name),
        Err(e) => provider_status(&e, Some(Details { name, res: &path.res })),
    }
}

/// Parses a request body as a JSON object (YAML is not supported by the simulator).
fn body_object(body: &Bytes) -> Result<Value, String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err("the request body must be an object".to_string()),
        Err(e) => Err(format!("the simulator accepts JSON request bodies only: {e}")),
    }
}

/// Checks a body against the path and fills in apiVersion, kind, namespace and name.
fn normalise(path: &ResourcePath, mut obj: Value, name: Option<&str>) -> Result<Value, String> {
    let api_version = path.res.api_version();
    let o = obj.as_object_mut().ok_or_else(|| "the request body must be an object".to_string())?;
    for (field, expected) in [("apiVersion", &api_version), ("kind", &path.res.kind)] {
        match o.get(field).and_then(Value::as_str) {
            Some(v) if v != expected.as_str() => {
                return Err(format!("{field} {v:?} does not match the request path ({expected})"));
            }
            Some(_) => {}
            None => {
                o.insert(field.into(), json!(expected));
            }
        }
    }
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    let meta = meta.as_object_mut().ok_or_else(|| "metadata must be an object".to_string())?;
    if let Some(ns) = &path.namespace {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(v) if v != ns => {
                return Err(
                    "the namespace of the provided object does not match the namespace sent on the request".to_string()
                );
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    }
    if let Some(name) = name {
        match meta.get("name").and_then(Value::as_str) {
            Some(v) if v != name => {
                return Err("the name of the object does not match the name on the URL".to_string());
            }
            _ => {
                meta.insert("name".into(), json!(name));
            }
        }
    }
    Ok(obj)
}

fn invalid(path: &ResourcePath, name: &str, message: &str) -> Response {
    status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message, Some(Details { name, res: &path.res }))
}

async fn do_apply(cx: &Ctx, path: &ResourcePath, name: &str, obj: Value, code: StatusCode) -> Response {
    match cx.cloud.apply(&cx.target, &KubeObject(obj)).await {
        Ok(o) => json_response(code, &with_resource_version(o.0)),
        Err(e) => provider_status(&e, Some(Details { name, res: &path.res })),
    }
}

async fn create(cx: &Ctx, path: &ResourcePath, body: &Bytes) -> Response {
    let obj = match body_object(body).and_then(|o| normalise(path, o, None)) {
        Ok(o) => o,
        Err(e) => return bad_request(&e),
    };
    let mut obj = obj;
    let name = match obj.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match obj.pointer("/metadata/generateName").and_then(Value::as_str) {
            Some(prefix) => {
                let suffix = uuid_suffix(&cx.cloud);
                let n = format!("{prefix}{suffix}");
                obj["metadata"]["name"] = json!(n);
                n
            }
            None => return invalid(path, "", "metadata.name: Required value: name or generateName is required"),
        },
    };
    if cx.peek(&path.object_ref(&name)).is_some() {
        let what = if path.res.group.is_empty() {
            path.res.plural.clone()
        } else {
            format!("{}.{}", path.res.plural, path.res.group)
        };
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            &format!("{what} \"{name}\" already exists"),
            Some(Details { name: &name, res: &path.res }),
        );
    }
    do_apply(cx, path, &name, obj, StatusCode::CREATED).await
}

/// Five lowercase alphanumerics for `generateName`.
fn uuid_suffix(cloud: &SimCloud) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut st = cloud.lock();
    let mut x = st.world.next_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

async fn replace(cx: &Ctx, path: &ResourcePath, name: &str, body: &Bytes) -> Response {
    let obj = match body_object(body).and_then(|o| normalise(path, o, Some(name))) {
        Ok(o) => o,
        Err(e) => return bad_request(&e),
    };
    if cx.peek(&path.object_ref(name)).is_none() {
        return not_found(&path.res, name);
    }
    do_apply(cx, path, name, obj, StatusCode::OK).await
}

async fn patch(
    cx: &Ctx,
    path: &ResourcePath,
    name: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let content_type = content_type.split(';').next().unwrap_or("").trim();
    let patch = match body_object(body) {
        Ok(p) => p,
        Err(e) => return bad_request(&e),
    };
    match content_type {
        "application/apply-patch+yaml" => {
            if query.get("fieldManager").is_none_or(|m| m.is_empty()) {
                return invalid(
                    path,
                    name,
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                );
            }
            // Created → 201, updated → 200, as a real API server answers an apply.
            let code = if cx.peek(&path.object_ref(name)).is_some() { StatusCode::OK } else { StatusCode::CREATED };
            match normalise(path, patch, Some(name)) {
                Ok(obj) => do_apply(cx, path, name, obj, code).await,
                Err(e) => bad_request(&e),
            }
        }
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            let Some(mut current) = cx.peek(&path.object_ref(name)) else {
                return not_found(&path.res, name);
            };
            merge_patch(&mut current, &patch);
            match normalise(path, current, Some(name)) {
                Ok(obj) => do_apply(cx, path, name, obj, StatusCode::OK).await,
                Err(e) => bad_request(&e),
            }
        }
        other => status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format: {other} (the simulator supports apply-patch+yaml with JSON bodies, merge-patch+json and strategic-merge-patch+json)"
            ),
            None,
        ),
    }
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else { return };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

async fn delete(cx: &Ctx, path: &ResourcePath, name: &str) -> Response {
    let r = path.object_ref(name);
    if cx.peek(&r).is_none() {
        return not_found(&path.res, name);
    }
    match cx.cloud.delete(&cx.target, &r).await {
        Ok(()) => ok(&json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": { "name": name, "group": path.res.group, "kind": path.res.plural },
        })),
        Err(e) => provider_status(&e, Some(Details { name, res: &path.res })),
    }
}

async fn logs(cx: &Ctx, path: &ResourcePath, name: &str, query: &HashMap<String, String>) -> Response {
    let namespace = path.namespace.clone().unwrap_or_else(|| "default".into());
    let follow = matches!(query.get("follow").map(String::as_str), Some("true" | "1"));
    let tail = match query.get("tailLines").map(|t| t.parse::<u32>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return bad_request("tailLines must be a non-negative integer"),
    };
    match cx.cloud.logs(&cx.target, &namespace, name, follow, tail).await {
        Ok(stream) => {
            // One chunk carries every line that is ready (a fast log is then a few chunks per
            // second, not one per line).
            let body = stream.take_while(|r| futures::future::ready(r.is_ok())).ready_chunks(4096).map(|lines| {
                let mut chunk = String::new();
                for line in lines {
                    chunk.push_str(&line.unwrap_or_default());
                    chunk.push('\n');
                }
                Ok::<_, std::io::Error>(Bytes::from(chunk))
            });
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from_stream(body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Err(e) if e.kind == ProviderErrorKind::NotFound => not_found(&path.res, name),
        // "container … is waiting to start" is a 400 from a real API server.
        Err(e) if e.kind == ProviderErrorKind::InvalidRequest => bad_request(&e.message),
        Err(e) => provider_status(&e, Some(Details { name, res: &path.res })),
    }
}

/// Default and maximum length of a watch, in wall-clock seconds.
const WATCH_TIMEOUT: u64 = 1800;
/// How often a watch compares the world with what it sent: every simulated second, but at most
/// every [`WATCH_POLL_MIN`] and at least every [`WATCH_POLL_MAX`] of wall-clock time (statuses
/// change with simulated time, so a watch cache fed by a slower poll lags behind reads).
fn watch_poll(speed: f64) -> Duration {
    Duration::from_secs_f64(1.0 / speed.max(1e-3)).clamp(WATCH_POLL_MIN, WATCH_POLL_MAX)
}
const WATCH_POLL_MIN: Duration = Duration::from_millis(2);
const WATCH_POLL_MAX: Duration = Duration::from_millis(200);

fn object_key(o: &Value) -> (String, String) {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    (s("/metadata/namespace"), s("/metadata/name"))
}

fn watch(cx: Ctx, path: ResourcePath, query: &HashMap<String, String>) -> Response {
    let reqs = match parse_selector(query.get("labelSelector").map(String::as_str).unwrap_or("")) {
        Ok(r) => r,
        Err(e) => return bad_request(&e),
    };
    let fields = query.get("fieldSelector").cloned();
    if let Err(e) = field_matches(&json!({}), fields.as_deref()) {
        return bad_request(&e);
    }
    let timeout = query.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).unwrap_or(WATCH_TIMEOUT);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout.min(WATCH_TIMEOUT));
    let params = list_params(&path, &reqs);
    let snapshot = move |cx: &Ctx| -> Option<BTreeMap<(String, String), Value>> {
        let items = cx.peek_list(&params).ok()?;
        Some(
            items
                .into_iter()
                .filter(|o| selector_matches(o, &reqs) && field_matches(o, fields.as_deref()).unwrap_or(false))
                .map(|o| (object_key(&o), with_resource_version(o)))
                .collect(),
        )
    };
    struct W<F> {
        cx: Ctx,
        snapshot: F,
        sent: BTreeMap<(String, String), Value>,
        pending: std::collections::VecDeque<Value>,
        deadline: tokio::time::Instant,
        first: bool,
    }
    let state = W { cx, snapshot, sent: BTreeMap::new(), pending: Default::default(), deadline, first: true };
    let stream = futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.pending.pop_front() {
                return Some((Ok::<_, std::io::Error>(Bytes::from(format!("{event}\n"))), s));
            }
            if !s.first {
                if tokio::time::Instant::now() >= s.deadline {
                    return None;
                }
                tokio::time::sleep(watch_poll(s.cx.cloud.speed())).await;
            }
            s.first = false;
            // The cluster went away: end the watch (the client re-lists and sees the error).
            let now = (s.snapshot)(&s.cx)?;
            for (k, o) in &now {
                match s.sent.get(k) {
                    None => s.pending.push_back(json!({ "type": "ADDED", "object": o })),
                    Some(old) if old != o => s.pending.push_back(json!({ "type": "MODIFIED", "object": o })),
                    Some(_) => {}
                }
            }
            for (k, o) in &s.sent {
                if !now.contains_key(k) {
                    s.pending.push_back(json!({ "type": "DELETED", "object": o }));
                }
            }
            s.sent = now;
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

// ---------------------------------------------------------------------------------------------
// Server-side printing (what `kubectl get` shows)

/// `kubectl`-style age of something created at `created` (RFC 3339) at `now`.
fn age(created: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> String {
    let Some(t) = created.and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok()) else {
        return "<unknown>".into();
    };
    let s = (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if d < 2 => format!("{h}h"),
        _ if d < 8 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

fn column(name: &str, kind: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({ "name": name, "type": kind, "format": format, "description": "", "priority": priority })
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn none_if_empty(s: &str) -> String {
    if s.is_empty() { "<none>".into() } else { s.into() }
}

/// Columns and cells for a kind (the Name and Age columns of any kind, more for common ones).
fn printer(kind: &str, o: &Value, age: String) -> (Vec<Value>, Vec<Value>) {
    let name = json!(str_at(o, "/metadata/name"));
    let n = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    match kind {
        "Pod" => {
            let statuses = o.pointer("/status/containerStatuses").and_then(Value::as_array);
            let total = o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
            let ready = statuses.map_or(0, |s| s.iter().filter(|c| c["ready"] == json!(true)).count());
            let restarts: i64 = statuses.map_or(0, |s| s.iter().filter_map(|c| c["restartCount"].as_i64()).sum());
            let waiting = statuses.and_then(|s| {
                s.iter().find_map(|c| {
                    c.pointer("/state/waiting/reason").or(c.pointer("/state/terminated/reason")).and_then(Value::as_str)
                })
            });
            let phase = str_at(o, "/status/phase");
            let shown = waiting.filter(|_| phase != "Succeeded").unwrap_or(phase);
            (
                vec![
                    column("Name", "string", 0),
                    column("Ready", "string", 0),
                    column("Status", "string", 0),
                    column("Restarts", "string", 0),
                    column("Age", "string", 0),
                    column("IP", "string", 1),
                    column("Node", "string", 1),
                ],
                vec![
                    name,
                    json!(format!("{ready}/{total}")),
                    json!(shown),
                    json!(restarts.to_string()),
                    json!(age),
                    json!(none_if_empty(str_at(o, "/status/podIP"))),
                    json!(none_if_empty(str_at(o, "/spec/nodeName"))),
                ],
            )
        }
        "Node" => {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            (
                vec![
                    column("Name", "string", 0),
                    column("Status", "string", 0),
                    column("Roles", "string", 0),
                    column("Age", "string", 0),
                    column("Version", "string", 0),
                    column("Instance-Type", "string", 1),
                ],
                vec![
                    name,
                    json!(if ready { "Ready" } else { "NotReady" }),
                    json!("<none>"),
                    json!(age),
                    json!(str_at(o, "/status/nodeInfo/kubeletVersion")),
                    json!(
                        o.pointer("/metadata/labels/node.kubernetes.io~1instance-type")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                    ),
                ],
            )
        }
        "Deployment" => (
            vec![
                column("Name", "string", 0),
                column("Ready", "string", 0),
                column("Up-to-date", "integer", 0),
                column("Available", "integer", 0),
                column("Age", "string", 0),
            ],
            vec![
                name,
                json!(format!("{}/{}", n("/status/readyReplicas"), n("/spec/replicas"))),
                json!(n("/status/updatedReplicas")),
                json!(n("/status/availableReplicas")),
                json!(age),
            ],
        ),
        "Job" => (
            vec![column("Name", "string", 0), column("Completions", "string", 0), column("Age", "string", 0)],
            vec![name, json!(format!("{}/{}", n("/status/succeeded"), n("/spec/completions").max(1))), json!(age)],
        ),
        "Service" => {
            let ports: Vec<String> = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter().map(|p| format!("{}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP"))).collect()
                })
                .unwrap_or_default();
            (
                vec![
                    column("Name", "string", 0),
                    column("Type", "string", 0),
                    column("Cluster-IP", "string", 0),
                    column("External-IP", "string", 0),
                    column("Port(s)", "string", 0),
                    column("Age", "string", 0),
                ],
                vec![
                    name,
                    json!(if str_at(o, "/spec/type").is_empty() { "ClusterIP" } else { str_at(o, "/spec/type") }),
                    json!(none_if_empty(str_at(o, "/spec/clusterIP"))),
                    json!(none_if_empty(str_at(o, "/status/loadBalancer/ingress/0/hostname"))),
                    json!(if ports.is_empty() { "<none>".to_string() } else { ports.join(",") }),
                    json!(age),
                ],
            )
        }
        "Namespace" | "PersistentVolume" | "PersistentVolumeClaim" => (
            vec![column("Name", "string", 0), column("Status", "string", 0), column("Age", "string", 0)],
            vec![name, json!(str_at(o, "/status/phase")), json!(age)],
        ),
        _ => (vec![column("Name", "string", 0), column("Age", "string", 0)], vec![name, json!(age)]),
    }
}

/// A `meta.k8s.io/v1` Table of `objects`.
fn table(cx: &Ctx, res: &ApiResourceInfo, objects: &[Value], rv: &str, include: Option<&str>) -> Value {
    let now = cx.cloud.sim_time();
    let mut columns = printer(&res.kind, &json!({}), String::new()).0;
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let (cols, cells) =
                printer(&res.kind, o, age(o.pointer("/metadata/creationTimestamp").and_then(Value::as_str), now));
            columns = cols;
            let object = match include {
                Some("None") => Value::Null,
                Some("Object") => o.clone(),
                _ => json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
                }),
            };
            json!({ "cells": cells, "object": object })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": { "resourceVersion": rv },
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review #27: a request carrying `Origin` (a browser page) is refused before it reaches
    /// the world; the same request without it (kubectl, kube-rs) is served.
    #[tokio::test]
    async fn requests_from_browsers_are_refused() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let cloud = SimCloud::new(crate::SimConfig::with_speed(1.0)).unwrap();
        let server = cloud.serve_kube_api().await.unwrap();
        let ask = |origin: Option<&'static str>| async move {
            let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
            let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
            let req = format!(
                "GET /clusters/us-east-1/none/version HTTP/1.1\r\nHost: x\r\n{origin}Connection: close\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out.lines().next().unwrap_or_default().to_string()
        };
        assert!(ask(Some("http://evil.example")).await.contains(" 403 "));
        assert!(!ask(None).await.contains(" 403 "), "no Origin: answered as before");
    }

    #[test]
    fn watches_poll_every_simulated_second_within_bounds() {
        assert_eq!(watch_poll(1.0), WATCH_POLL_MAX);
        assert_eq!(watch_poll(20.0), Duration::from_millis(50));
        assert_eq!(watch_poll(2000.0), WATCH_POLL_MIN);
    }

    #[test]
    fn label_selectors_parse_and_match() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let ok = |s: &str| selector_matches(&obj, &parse_selector(s).unwrap());
        assert!(ok(""));
        assert!(ok("app=web,tier==front"));
        assert!(!ok("app!=web"));
        assert!(ok("app in (web, api),tier"));
        assert!(!ok("app notin (web)"));
        assert!(ok("!missing"));
        assert!(!ok("missing"));
        assert!(parse_selector("a in b").is_err());
    }

    #[test]
    fn paths_split_into_namespace_resource_name_and_subresource() {
        let s = |p: &str| split_tail(&p.split('/').collect::<Vec<_>>());
        assert_eq!(s("pods"), Some((None, "pods".into(), None, None)));
        assert_eq!(s("namespaces"), Some((None, "namespaces".into(), None, None)));
        assert_eq!(s("namespaces/team"), Some((None, "namespaces".into(), Some("team".into()), None)));
        assert_eq!(
            s("namespaces/team/status"),
            Some((None, "namespaces".into(), Some("team".into()), Some("status".into())))
        );
        assert_eq!(s("namespaces/team/pods"), Some((Some("team".into()), "pods".into(), None, None)));
        assert_eq!(
            s("namespaces/team/pods/p/log"),
            Some((Some("team".into()), "pods".into(), Some("p".into()), Some("log".into())))
        );
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
        assert_eq!(age(Some("2026-01-01T23:59:30Z"), now), "30s");
        assert_eq!(age(Some("2026-01-01T23:55:00Z"), now), "5m0s");
        assert_eq!(age(Some("2026-01-01T20:00:00Z"), now), "4h0m");
        assert_eq!(age(None, now), "<unknown>");
    }
}
