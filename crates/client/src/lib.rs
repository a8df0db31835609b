//! `instantstart-client`: a typed async client of the InstantStart REST API.
//!
//! It is the one way the CLI (and the MCP server) talk to the control plane: every method maps
//! to one endpoint and returns the core types (`Operation`, `AuditEntry`, `StepSpec`,
//! `ClusterNode`, `HyperPodInstanceGroupStatus`, `ManagedFeatures`, …) and the views of
//! `instantstart_core::api` (a cluster is a `ClusterView` in lists and a `ClusterDetail` with its
//! live state, the context a `ContextView`, the session a `SessionInfo`), the same types the
//! server serializes. Two answers stay JSON ([`serde_json::Value`]) on purpose: the simulated
//! cloud's fault settings (their type belongs to the simulator, which no face depends on) and a
//! model's chat completion (the model server's OpenAI document, passed through).
//! Errors are typed ([`Error`]): API failures carry the server's problem document with every
//! validation finding.
//!
//! - Auth: `Authorization: Bearer <token>`; every request names its face
//!   (`X-InstantStart-Face: cli|agent|api`) for the audit log.
//! - Mutations take [`MutationOptions`]: `dry_run` returns the plan ([`Submitted::DryRun`]:
//!   steps, explicit diff, preflight checks); an idempotency key makes a retried request return
//!   the same operation instead of creating a second one. Changes of existing resources
//!   (instance groups, managed features) follow the explicit-diff contract: only the fields set
//!   in the patch are sent, and a request matching the real state is [`Submitted::NoChange`]. The client retries a request whose connection failed only when that is safe:
//!   reads, and mutations that carry an idempotency key.
//! - Progress: [`Client::follow`] streams operation updates over the WebSocket
//!   `/api/operations/stream` and falls back to polling ([`follow`]).
//! - Workloads (storage, downloads, training jobs, endpoints, pools) are in `workloads.rs`;
//!   [`Client::follow_job_logs`] streams a job's log lines over WebSocket ([`logs`]).
//! - Configuration: [`config`] resolves the server URL and token from flags, environment and
//!   the config file written by `instantstart login`.

pub mod config;
mod error;
pub mod follow;
pub mod logs;
mod mlflow;
mod pages;
mod workloads;

pub use error::{Error, Problem};
pub use follow::{FollowOptions, Follower};
pub use logs::{LogEvent, LogStream, RESUME_TAIL, ReconnectPolicy, ResumingLogStream};
pub use pages::{ListPage, PageArgs};

use instantstart_core::api::capacity::ClusterCapacity;
use instantstart_core::api::clusters::{ClusterDetail, ClusterView};
use instantstart_core::api::context::{ContextView, EksClusterCandidate, InstanceTypeView};
use instantstart_core::api::metrics::{MetricsQuery, MetricsView};
use instantstart_core::api::session::SessionInfo;
use instantstart_core::credentials::{CreateTokenRequest, MintedToken, TokenInfo};
use instantstart_core::diff::FeaturesPatch;
use instantstart_core::governance::{GovernanceSpec, GovernanceView};
use instantstart_core::operation::{AuditEntry, Face, Operation, OperationStatus, StepSpec};
use instantstart_core::provider::{
    AvailabilityZone, ClusterEventPage, ClusterEventQuery, ClusterNode, ClusterNodeDetail, HyperPodInstanceGroupStatus,
    NodeAction, OfferingQuery, QuotaUsage, TrainingPlanOffering, TrainingPlanSummary,
};
use instantstart_core::spec::{ClusterCreateRequest, InstanceGroupSpec, ManagedFeatures};
use instantstart_core::workflow::hyperpod_attach::AddHyperPodBody;
use instantstart_core::workflow::import_cluster::ImportClusterRequest;
use instantstart_core::workflow::instance_groups::InstanceGroupPatch;
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// Header naming the face of a request.
pub const FACE_HEADER: &str = "x-instantstart-face";
/// Header carrying a mutation's idempotency key.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// How many times a request whose connection failed is sent again (when safe).
const CONNECT_RETRIES: u32 = 2;

/// Options of a mutating call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MutationOptions {
    /// Return the plan without changing anything.
    pub dry_run: bool,
    /// Same key + same body returns the existing operation; with another body the server
    /// answers `409`. With a key, a request whose connection failed is retried safely.
    pub idempotency_key: Option<String>,
}

/// What a cluster deletion also removes or keeps (`DELETE /api/clusters/{cluster}` query).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteClusterOptions {
    /// Also delete the shared bucket if InstantStart created it (only when empty).
    pub delete_bucket: bool,
    /// Keep the MLflow tracking servers created for the cluster (default: deleted with it).
    pub keep_tracking_servers: bool,
}

impl MutationOptions {
    /// Options with a fresh random idempotency key.
    pub fn with_fresh_key() -> Self {
        MutationOptions { dry_run: false, idempotency_key: Some(fresh_idempotency_key()) }
    }
}

/// A fresh random idempotency key (`is-<uuid>`).
pub fn fresh_idempotency_key() -> String {
    format!("is-{}", uuid::Uuid::new_v4().simple())
}

/// Result of a mutation: the recorded operation, the plan of a dry run, or nothing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    Accepted(Accepted),
    DryRun(Plan),
    /// The real state already matches the request: no operation was created.
    NoChange(NoChange),
}

impl Submitted {
    /// The response body as the server sent it (stable JSON for scripts).
    pub fn raw(&self) -> &Value {
        match self {
            Submitted::Accepted(a) => &a.raw,
            Submitted::DryRun(p) => &p.raw,
            Submitted::NoChange(n) => &n.raw,
        }
    }
}

/// The server found nothing to change (`200` without an operation).
#[derive(Debug, Clone, PartialEq)]
pub struct NoChange {
    /// The server's explanation (the empty plan, rendered).
    pub message: String,
    pub raw: Value,
}

/// The answer of `GET /healthz`: the server is serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// What the server said (`ok`), as text.
    pub message: String,
}

/// A mutation the server recorded (`202`).
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub operation: Operation,
    /// True when an earlier identical request with the same idempotency key was returned.
    pub replayed: bool,
    pub raw: Value,
}

/// The plan of a dry run (`200`): nothing was changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// e.g. `cluster/demo`.
    pub target: String,
    /// The request as it would be recorded (defaults filled in).
    pub request: Value,
    pub steps: Vec<StepSpec>,
    /// Preflight checks (`{check, field, status: pass|warn|fail, detail, remedy}`); a `fail`
    /// means the request would be refused.
    pub checks: Vec<Value>,
    /// The explicit diff against the real state (`{target, changes: [{field, from, to}]}`), for
    /// changes of existing resources.
    pub diff: Option<Value>,
    pub raw: Value,
}

impl Plan {
    /// Whether a preflight check blocks the request.
    pub fn blocked(&self) -> bool {
        self.checks.iter().any(|c| c.get("status").and_then(Value::as_str) == Some("fail"))
    }
}

/// The managed features of a cluster as they really are ([`Client::features`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// Training operator, inference operator, tiered checkpointing, managed autoscaling.
    #[serde(flatten)]
    pub features: ManagedFeatures,
    /// What managed autoscaling manages: HyperPod instance groups only (from zero), not general
    /// EC2 capacity.
    #[serde(default)]
    pub autoscaling_scope: String,
    /// With managed autoscaling on: the instance groups Karpenter may scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_instance_groups: Option<Vec<String>>,
}

/// The path segment of a node action (`reboot`, `replace`, `delete`).
pub fn node_action_name(action: NodeAction) -> &'static str {
    match action {
        NodeAction::Reboot => "reboot",
        NodeAction::Replace => "replace",
        NodeAction::Delete => "delete",
    }
}

/// Filters of [`Client::list_operations`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperationQuery {
    /// e.g. `cluster/demo`.
    pub target: Option<String>,
    pub status: Option<OperationStatus>,
    /// 1-500 (server default 100), newest first: the page size.
    pub limit: Option<u32>,
    /// `true`: the archived operations instead of the current ones (finished before the
    /// server's retention window; `GET /api/operations?archived=true`).
    pub archived: bool,
}

/// A typed client of one InstantStart server. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
    face: Face,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("face", &self.face)
            .finish()
    }
}

#[derive(Clone)]
struct Call<'a> {
    method: Method,
    path: &'a [&'a str],
    query: Vec<(&'static str, String)>,
    body: Option<&'a Value>,
    idempotency_key: Option<&'a str>,
}

impl<'a> Call<'a> {
    fn new(method: Method, path: &'a [&'a str]) -> Self {
        Call { method, path, query: vec![], body: None, idempotency_key: None }
    }

    fn query(mut self, key: &'static str, value: Option<impl ToString>) -> Self {
        if let Some(v) = value {
            self.query.push((key, v.to_string()));
        }
        self
    }

    fn body(mut self, body: &'a Value) -> Self {
        self.body = Some(body);
        self
    }

    fn mutation(mut self, opts: &'a MutationOptions) -> Self {
        if opts.dry_run {
            self.query.push(("dry_run", "true".into()));
        }
        self.idempotency_key = opts.idempotency_key.as_deref();
        self
    }

    /// A request may be sent again after a failure when it cannot double-apply.
    fn retry_safe(&self) -> bool {
        self.method == Method::GET || self.idempotency_key.is_some()
    }
}

/// Set to `1` to let a client send its token over plain `http://` to a host other than
/// loopback (review #15: by default it refuses).
pub const INSECURE_HTTP_ENV: &str = "INSTANTSTART_INSECURE_HTTP";

fn insecure_http_allowed() -> bool {
    std::env::var(INSECURE_HTTP_ENV).is_ok_and(|v| v == "1")
}

/// `http://` to a host that is not this machine (`localhost`, `127.0.0.0/8`, `::1`).
fn cleartext_to_another_host(url: &Url) -> bool {
    if url.scheme() != "http" {
        return false;
    }
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => !ip.is_loopback(),
        Err(_) => !host.eq_ignore_ascii_case("localhost"),
    }
}

impl Client {
    /// A client of the server at `base_url` (`http://host:port`, optionally with a path prefix)
    /// sending `token` as a bearer token and `face` in `X-InstantStart-Face`.
    ///
    /// # Guarantees
    /// A token is never sent in cleartext off the machine: `http://` with a token to a host
    /// other than loopback is an [`Error::InvalidUrl`] unless [`INSECURE_HTTP_ENV`] is `1`.
    pub fn new(base_url: &str, token: Option<String>, face: Face) -> Result<Client, Error> {
        let invalid = |message: String| Error::InvalidUrl { url: base_url.to_string(), message };
        let mut base = Url::parse(base_url.trim()).map_err(|e| invalid(e.to_string()))?;
        match base.scheme() {
            "http" => {}
            "https" if cfg!(feature = "tls") => {}
            "https" => return Err(invalid("https needs the client built with the `tls` feature".into())),
            other => return Err(invalid(format!("unsupported scheme {other}; use http:// or https://"))),
        }
        if base.cannot_be_a_base() || base.host().is_none() {
            return Err(invalid("expected http://host:port".into()));
        }
        let token = token.filter(|t| !t.is_empty());
        if token.is_some() && cleartext_to_another_host(&base) && !insecure_http_allowed() {
            return Err(invalid(format!(
                "the API token would travel in cleartext over http:// to {}; use https://, or a tunnel to 127.0.0.1 (SSH, SSM port forwarding), or set {INSECURE_HTTP_ENV}=1 to accept the risk",
                base.host_str().unwrap_or_default()
            )));
        }
        base.set_query(None);
        base.set_fragment(None);
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .user_agent(concat!("instantstart-client/", env!("CARGO_PKG_VERSION")));
        #[cfg(feature = "tls")]
        let builder = builder.tls_backend_preconfigured(tls::client_config());
        let http = builder.build().map_err(|e| invalid(e.to_string()))?;
        Ok(Client { http, base, token, face })
    }

    /// A client of the server and token resolved from flags, environment and the config file
    /// (see [`config`]), e.g. `Client::from_resolved(&config::resolve(None, None)?, Face::Agent)`.
    pub fn from_resolved(resolved: &config::Resolved, face: Face) -> Result<Client, Error> {
        Client::new(&resolved.url, resolved.token.clone(), face)
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The face this client sends.
    pub fn face(&self) -> Face {
        self.face
    }

    /// Absolute URL of an API path given as segments (each one percent-encoded).
    pub(crate) fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.base.clone();
        {
            let mut path = url.path_segments_mut().expect("checked in new: a base URL");
            path.pop_if_empty();
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    async fn execute(&self, call: &Call<'_>) -> Result<(StatusCode, Value), Error> {
        self.execute_page(call).await.map(|(status, value, _)| (status, value))
    }

    /// Like `execute`, with the cursor of the next page when the answer is a page of a list
    /// (`Link: <…&cursor=…>; rel="next"`).
    async fn execute_page(&self, call: &Call<'_>) -> Result<(StatusCode, Value, Option<String>), Error> {
        let (url, resp) = self.send(call).await?;
        Self::decode(&url, resp).await
    }

    /// Sends `call` (retrying what never reached the server, and what is safe to repeat); the
    /// URL and the response, whatever its status.
    async fn send(&self, call: &Call<'_>) -> Result<(Url, reqwest::Response), Error> {
        let url = self.url(call.path, &call.query);
        let mut attempt = 0;
        loop {
            let mut req = self.http.request(call.method.clone(), url.clone()).header(FACE_HEADER, self.face.as_str());
            if let Some(t) = &self.token {
                req = req.bearer_auth(t);
            }
            if let Some(k) = call.idempotency_key {
                req = req.header(IDEMPOTENCY_HEADER, k);
            }
            if let Some(b) = call.body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(resp) => return Ok((url, resp)),
                Err(e) => {
                    // A refused connection never reached the server; anything else might have.
                    let may_retry = e.is_connect() || call.retry_safe();
                    if attempt < CONNECT_RETRIES && may_retry && (e.is_connect() || e.is_timeout() || e.is_request()) {
                        attempt += 1;
                        tracing::debug!(%url, attempt, error = %e, "retrying request");
                        tokio::time::sleep(Duration::from_millis(200 * 2u64.pow(attempt))).await;
                        continue;
                    }
                    return Err(Error::connection(&url, &e));
                }
            }
        }
    }

    async fn decode(url: &Url, resp: reqwest::Response) -> Result<(StatusCode, Value, Option<String>), Error> {
        let status = resp.status();
        let next = pages::next_cursor(resp.headers());
        let bytes = resp.bytes().await.map_err(|e| Error::connection(url, &e))?;
        if status.is_success() {
            if bytes.is_empty() {
                return Ok((status, Value::Null, next));
            }
            let value = serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
                url: url.to_string(),
                message: format!("HTTP {status}: body is not JSON ({e})"),
            })?;
            return Ok((status, value, next));
        }
        let text = String::from_utf8_lossy(&bytes);
        let problem = serde_json::from_slice::<Problem>(&bytes)
            .ok()
            .filter(|p| p.status != 0 || !p.title.is_empty())
            .unwrap_or_else(|| Problem::from_status(status.as_u16(), &text));
        Err(Error::Api { status: status.as_u16(), problem: Box::new(problem) })
    }

    async fn call<T: DeserializeOwned>(&self, call: Call<'_>) -> Result<T, Error> {
        let (_, value) = self.execute(&call).await?;
        typed(&self.url(call.path, &call.query), value)
    }

    async fn submit(&self, call: Call<'_>) -> Result<Submitted, Error> {
        let url = self.url(call.path, &call.query);
        let (status, raw) = self.execute(&call).await?;
        if status == StatusCode::OK && raw.get("dry_run").and_then(Value::as_bool) == Some(true) {
            return Ok(Submitted::DryRun(Plan {
                target: raw.get("target").and_then(Value::as_str).unwrap_or_default().to_string(),
                request: raw.get("request").cloned().unwrap_or(Value::Null),
                steps: typed(&url, raw.get("steps").cloned().unwrap_or(Value::Null))?,
                checks: raw.get("checks").and_then(Value::as_array).cloned().unwrap_or_default(),
                diff: raw.get("plan").filter(|p| !p.is_null()).cloned(),
                raw,
            }));
        }
        if raw.get("operation").is_none() {
            let message = raw.get("message").and_then(Value::as_str).unwrap_or("nothing to change").to_string();
            return Ok(Submitted::NoChange(NoChange { message, raw }));
        }
        let operation = typed(&url, raw.get("operation").cloned().unwrap_or(Value::Null))?;
        let replayed = raw.get("replayed").and_then(Value::as_bool).unwrap_or(false);
        Ok(Submitted::Accepted(Accepted { operation, replayed, raw }))
    }

    // ----- meta and session -----

    /// `GET /healthz` (no auth): whether the server is serving. The server answers plain text
    /// (`ok`), not JSON; an error status is an [`Error::Api`] as for every other call.
    pub async fn healthz(&self) -> Result<Health, Error> {
        let (url, resp) = self.send(&Call::new(Method::GET, &["healthz"])).await?;
        if !resp.status().is_success() {
            return Self::decode(&url, resp).await.map(|_| Health { message: String::new() });
        }
        let message = resp.text().await.map_err(|e| Error::connection(&url, &e))?;
        Ok(Health { message: message.trim().to_string() })
    }

    /// `GET /api/session`: the token's name and scope.
    pub async fn session(&self) -> Result<SessionInfo, Error> {
        self.call(Call::new(Method::GET, &["api", "session"])).await
    }

    // ----- tokens (admin only) -----

    /// `GET /api/tokens` (every page): every API token (never their secrets). Admin token only.
    pub async fn list_tokens(&self) -> Result<Vec<TokenInfo>, Error> {
        self.all(Call::new(Method::GET, &["api", "tokens"])).await
    }

    /// `POST /api/tokens`: mints a token; its secret is in [`MintedToken::token`], answered
    /// only this once. Admin token only.
    pub async fn create_token(&self, request: &CreateTokenRequest) -> Result<MintedToken, Error> {
        let body = to_value(request)?;
        self.call(Call::new(Method::POST, &["api", "tokens"]).body(&body)).await
    }

    /// `DELETE /api/tokens/{name}`: revokes a token and every browser session minted from it.
    /// Admin token only.
    pub async fn revoke_token(&self, name: &str) -> Result<(), Error> {
        self.execute(&Call::new(Method::DELETE, &["api", "tokens", name])).await.map(|_| ())
    }

    // ----- context -----

    /// `GET /api/context`: provider (`sim`/`aws`), `sim_speed`, identity, default region,
    /// active cluster, version.
    pub async fn context(&self) -> Result<ContextView, Error> {
        self.call(Call::new(Method::GET, &["api", "context"])).await
    }

    /// `GET /api/context/zones`: Availability Zones of `region` (server default when `None`).
    pub async fn zones(&self, region: Option<&str>) -> Result<Vec<AvailabilityZone>, Error> {
        self.call(Call::new(Method::GET, &["api", "context", "zones"]).query("region", region)).await
    }

    /// `GET /api/context/eks-clusters`: the EKS clusters of `region` with their HyperPod
    /// clusters, the InstantStart cluster managing each (if any) and whether the control plane
    /// has an access entry on it.
    pub async fn eks_clusters(&self, region: Option<&str>) -> Result<Vec<EksClusterCandidate>, Error> {
        self.call(Call::new(Method::GET, &["api", "context", "eks-clusters"]).query("region", region)).await
    }

    /// `GET /api/context/instance-types`: every HyperPod instance type with the AZs of `region`
    /// that offer it and EC2's specs (`info`, `None` when EC2 does not describe the type).
    pub async fn instance_types(&self, region: Option<&str>) -> Result<Vec<InstanceTypeView>, Error> {
        self.call(Call::new(Method::GET, &["api", "context", "instance-types"]).query("region", region)).await
    }

    /// `GET /api/context/quotas`: the HyperPod instance quotas of `region` with the instances
    /// its HyperPod clusters use and what is still available.
    pub async fn quotas(&self, region: Option<&str>) -> Result<Vec<QuotaUsage>, Error> {
        self.call(Call::new(Method::GET, &["api", "context", "quotas"]).query("region", region)).await
    }

    /// `GET /api/context/training-plans`: the account's training plans in `region`.
    pub async fn training_plans(&self, region: Option<&str>) -> Result<Vec<TrainingPlanSummary>, Error> {
        self.call(Call::new(Method::GET, &["api", "context", "training-plans"]).query("region", region)).await
    }

    /// `GET /api/context/training-plan-offerings`: what a training plan for HyperPod clusters
    /// could reserve in `region` (a search; nothing is bought).
    pub async fn training_plan_offerings(
        &self,
        region: Option<&str>,
        q: &OfferingQuery,
    ) -> Result<Vec<TrainingPlanOffering>, Error> {
        let call = Call::new(Method::GET, &["api", "context", "training-plan-offerings"])
            .query("region", region)
            .query("instance_type", Some(&q.instance_type))
            .query("instance_count", Some(q.instance_count))
            .query("duration_hours", Some(q.duration_hours))
            .query("start_after", q.start_after.map(|t| t.format("%Y-%m-%dT%H:%M:%SZ")))
            .query("end_before", q.end_before.map(|t| t.format("%Y-%m-%dT%H:%M:%SZ")));
        self.call(call).await
    }

    // ----- clusters -----

    /// `GET /api/clusters` (every page): every cluster with `active`, `status` and `last_operation`.
    pub async fn list_clusters(&self) -> Result<Vec<ClusterView>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters"])).await
    }

    /// `GET /api/clusters/{cluster}`: a cluster with live EKS/HyperPod state and nodes.
    pub async fn get_cluster(&self, name: &str) -> Result<ClusterDetail, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", name])).await
    }

    /// `POST /api/clusters`: create a cluster (network → EKS → add-ons → HyperPod → storage).
    pub async fn create_cluster(
        &self,
        request: &ClusterCreateRequest,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.create_cluster_json(&to_value(request)?, opts).await
    }

    /// [`Client::create_cluster`] with a JSON body as given (e.g. read from a file or an agent);
    /// the server validates its shape and reports every finding.
    pub async fn create_cluster_json(&self, request: &Value, opts: &MutationOptions) -> Result<Submitted, Error> {
        self.submit(Call::new(Method::POST, &["api", "clusters"]).body(request).mutation(opts)).await
    }

    /// `POST /api/clusters/import`: register an existing EKS (and HyperPod) cluster.
    pub async fn import_cluster(
        &self,
        request: &ImportClusterRequest,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.import_cluster_json(&to_value(request)?, opts).await
    }

    /// [`Client::import_cluster`] with a JSON body as given.
    pub async fn import_cluster_json(&self, request: &Value, opts: &MutationOptions) -> Result<Submitted, Error> {
        self.submit(Call::new(Method::POST, &["api", "clusters", "import"]).body(request).mutation(opts)).await
    }

    /// `DELETE /api/clusters/{cluster}`: the reverse pipeline, with the MLflow tracking servers
    /// created for the cluster unless `what.keep_tracking_servers` (imported clusters are only
    /// forgotten); `what.delete_bucket` also deletes the shared bucket if InstantStart created it.
    pub async fn delete_cluster(
        &self,
        name: &str,
        what: DeleteClusterOptions,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", name];
        let call = Call::new(Method::DELETE, &path)
            .query("delete_bucket", what.delete_bucket.then_some("true"))
            .query("keep_tracking_servers", what.keep_tracking_servers.then_some("true"));
        self.submit(call.mutation(opts)).await
    }

    /// `POST /api/clusters/{cluster}/hyperpod`: add a HyperPod cluster to an EKS-only cluster
    /// (the missing dependencies, execution role, lifecycle script, compute subnets, HyperPod,
    /// storage). A cluster that has one is a `409`.
    pub async fn add_hyperpod(
        &self,
        cluster: &str,
        body: &AddHyperPodBody,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.add_hyperpod_json(cluster, &to_value(body)?, opts).await
    }

    /// [`Client::add_hyperpod`] with a JSON body as given (`{hyperpod, bucket?}`).
    pub async fn add_hyperpod_json(
        &self,
        cluster: &str,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.submit(Call::new(Method::POST, &["api", "clusters", cluster, "hyperpod"]).body(body).mutation(opts)).await
    }

    /// `DELETE /api/clusters/{cluster}/hyperpod`: remove the cluster's HyperPod cluster and what
    /// InstantStart made for it; EKS and its add-ons stay. A cluster without one is a `409`.
    pub async fn remove_hyperpod(&self, cluster: &str, opts: &MutationOptions) -> Result<Submitted, Error> {
        self.submit(Call::new(Method::DELETE, &["api", "clusters", cluster, "hyperpod"]).mutation(opts)).await
    }

    /// `GET /api/active-cluster`.
    pub async fn active_cluster(&self) -> Result<Option<String>, Error> {
        let v: Value = self.call(Call::new(Method::GET, &["api", "active-cluster"])).await?;
        Ok(v.get("name").and_then(Value::as_str).map(str::to_string))
    }

    /// `PUT /api/active-cluster`: select the active cluster (`None` clears it).
    pub async fn set_active_cluster(&self, name: Option<&str>) -> Result<Option<String>, Error> {
        let body = serde_json::json!({ "name": name });
        let v: Value = self.call(Call::new(Method::PUT, &["api", "active-cluster"]).body(&body)).await?;
        Ok(v.get("name").and_then(Value::as_str).map(str::to_string))
    }

    // ----- HyperPod day 2: instance groups, nodes, managed features -----

    /// `GET /api/clusters/{cluster}/instance-groups` (every page): the HyperPod cluster's instance groups with
    /// live current/target counts, capacity type, interface mode and subnets.
    pub async fn list_instance_groups(&self, cluster: &str) -> Result<Vec<HyperPodInstanceGroupStatus>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters", cluster, "instance-groups"])).await
    }

    /// `POST /api/clusters/{cluster}/instance-groups`: add an instance group; its capacity type,
    /// interface mode and subnet placement are decided in one operation. A dry run carries the
    /// preflight checks (quota, offering, training plan, address space).
    pub async fn add_instance_group(
        &self,
        cluster: &str,
        group: &InstanceGroupSpec,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.add_instance_group_json(cluster, &to_value(group)?, opts).await
    }

    /// [`Client::add_instance_group`] with a JSON body as given (an `InstanceGroupSpec`).
    pub async fn add_instance_group_json(
        &self,
        cluster: &str,
        group: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "instance-groups"];
        self.submit(Call::new(Method::POST, &path).body(group).mutation(opts)).await
    }

    /// `PATCH /api/clusters/{cluster}/instance-groups/{group}`: send only the fields set in `patch`
    /// (explicit diff). Changing an immutable field (capacity, interface mode, instance type,
    /// AZ) is a `422` naming `patch.<field>`; a patch matching the real group is
    /// [`Submitted::NoChange`] and starts nothing.
    pub async fn update_instance_group(
        &self,
        cluster: &str,
        group: &str,
        patch: &InstanceGroupPatch,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.update_instance_group_json(cluster, group, &explicit(to_value(patch)?), opts).await
    }

    /// [`Client::update_instance_group`] with a JSON patch as given.
    pub async fn update_instance_group_json(
        &self,
        cluster: &str,
        group: &str,
        patch: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "instance-groups", group];
        self.submit(Call::new(Method::PATCH, &path).body(patch).mutation(opts)).await
    }

    /// Scales an instance group to `count` (zero allowed): [`Client::update_instance_group`]
    /// with only the count.
    pub async fn scale_instance_group(
        &self,
        cluster: &str,
        group: &str,
        count: u32,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let patch = InstanceGroupPatch { count: Some(count), ..Default::default() };
        self.update_instance_group(cluster, group, &patch, opts).await
    }

    /// `DELETE /api/clusters/{cluster}/instance-groups/{group}`: delete a group (its nodes are
    /// terminated; the last group cannot be deleted).
    pub async fn delete_instance_group(
        &self,
        cluster: &str,
        group: &str,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "instance-groups", group];
        self.submit(Call::new(Method::DELETE, &path).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/nodes` (every page): every node with its instance group, type, status and AZ.
    pub async fn list_nodes(&self, cluster: &str) -> Result<Vec<ClusterNode>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters", cluster, "nodes"])).await
    }

    /// `GET /api/clusters/{cluster}/nodes/{node}`: one node in detail (status and message, launch
    /// time, placement, private address, capacity and interface type, lifecycle script, AMI).
    pub async fn get_node(&self, cluster: &str, node: &str) -> Result<ClusterNodeDetail, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "nodes", node])).await
    }

    /// `GET /api/clusters/{cluster}/capacity`: GPU and Neuron capacity (total, allocated,
    /// free, unavailable) per cluster and instance group, and every node with its health and
    /// the workloads on it.
    pub async fn capacity(&self, cluster: &str) -> Result<ClusterCapacity, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "capacity"])).await
    }

    /// `GET /api/clusters/{cluster}/metrics?node=|job=&namespace=&since=&step=`: GPU
    /// utilization and memory per GPU of a node, or of a training job (the mean over its GPUs)
    /// with its throughput and loss, over the window.
    pub async fn metrics(&self, cluster: &str, q: &MetricsQuery) -> Result<MetricsView, Error> {
        let path = ["api", "clusters", cluster, "metrics"];
        let call = Call::new(Method::GET, &path)
            .query("node", q.node.as_deref())
            .query("job", q.job.as_deref())
            .query("namespace", q.namespace.as_deref())
            .query("since", q.since)
            .query("step", q.step);
        self.call(call).await
    }

    /// `GET /api/clusters/{cluster}/events`: one page of the HyperPod cluster's events, newest
    /// first; pass the page's `next_cursor` as `cursor` for the next one.
    pub async fn cluster_events(&self, cluster: &str, q: &ClusterEventQuery) -> Result<ClusterEventPage, Error> {
        let path = ["api", "clusters", cluster, "events"];
        let call = Call::new(Method::GET, &path)
            .query("instance_group", q.instance_group.as_deref())
            .query("node_id", q.node_id.as_deref())
            .query("resource_type", q.resource_type.map(|r| r.as_snake()))
            .query("after", q.after.map(|t| t.to_rfc3339()))
            .query("before", q.before.map(|t| t.to_rfc3339()))
            .query("limit", q.limit)
            .query("cursor", q.cursor.as_deref());
        self.call(call).await
    }

    /// `POST /api/clusters/{cluster}/nodes/{reboot|replace|delete}`: one batch operation on
    /// `node_ids`. Replace and delete lose the nodes' local volumes: without
    /// `acknowledge_local_data_loss` the server answers `422` on that field.
    pub async fn node_action(
        &self,
        cluster: &str,
        action: NodeAction,
        node_ids: &[String],
        acknowledge_local_data_loss: bool,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let mut body = serde_json::json!({ "node_ids": node_ids });
        if acknowledge_local_data_loss {
            body["acknowledge_local_data_loss"] = Value::Bool(true);
        }
        self.node_action_json(cluster, action, &body, opts).await
    }

    /// [`Client::node_action`] with a JSON body as given (`{node_ids, acknowledge_local_data_loss}`).
    pub async fn node_action_json(
        &self,
        cluster: &str,
        action: NodeAction,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "nodes", node_action_name(action)];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `POST /api/clusters/{cluster}/health-checks`: deep health checks on the given instance
    /// groups (whole, or named nodes); the operation ends with each node's result.
    pub async fn start_health_check(
        &self,
        cluster: &str,
        groups: &[instantstart_core::workflow::health_checks::HealthCheckGroup],
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.start_health_check_json(cluster, &serde_json::json!({ "instance_groups": groups }), opts).await
    }

    /// [`Client::start_health_check`] with a JSON body as given (`{instance_groups: [...]}`).
    pub async fn start_health_check_json(
        &self,
        cluster: &str,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "health-checks"];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `POST /api/clusters/{cluster}/software-update`: moves instance groups (all when none is
    /// named) to a HyperPod AMI release or an AMI, rolling in batches. Every group already on
    /// that software is [`Submitted::NoChange`] and starts nothing.
    pub async fn update_software(
        &self,
        cluster: &str,
        groups: &[instantstart_core::provider::SoftwareUpdateGroup],
        deployment: Option<&instantstart_core::provider::SoftwareUpdateDeployment>,
        image_id: Option<&str>,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let mut body = serde_json::json!({ "instance_groups": groups });
        if let Some(d) = deployment {
            body["deployment"] = to_value(d)?;
        }
        if let Some(id) = image_id {
            body["image_id"] = Value::from(id);
        }
        self.update_software_json(cluster, &body, opts).await
    }

    /// [`Client::update_software`] with a JSON body as given
    /// (`{instance_groups?, deployment?, image_id?}`).
    pub async fn update_software_json(
        &self,
        cluster: &str,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "software-update"];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/features`: the managed features as they really are.
    pub async fn features(&self, cluster: &str) -> Result<Features, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "features"])).await
    }

    /// `PATCH /api/clusters/{cluster}/features`: send only the fields set in `patch` (explicit
    /// diff); a patch matching the real state is [`Submitted::NoChange`] and starts nothing.
    pub async fn set_features(
        &self,
        cluster: &str,
        patch: &FeaturesPatch,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.set_features_json(cluster, &explicit(to_value(patch)?), opts).await
    }

    /// [`Client::set_features`] with a JSON patch as given.
    pub async fn set_features_json(
        &self,
        cluster: &str,
        patch: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "features"];
        self.submit(Call::new(Method::PATCH, &path).body(patch).mutation(opts)).await
    }

    // ----- task governance -----

    /// `GET /api/clusters/{cluster}/governance`: task governance as it really is (the spec
    /// [`Client::set_governance`] takes, with the Kueue names jobs use).
    pub async fn governance(&self, cluster: &str) -> Result<GovernanceView, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "governance"])).await
    }

    /// `PUT /api/clusters/{cluster}/governance`: the whole desired task governance; a spec
    /// matching the real state is [`Submitted::NoChange`] and starts nothing.
    pub async fn set_governance(
        &self,
        cluster: &str,
        spec: &GovernanceSpec,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        self.set_governance_json(cluster, &to_value(spec)?, opts).await
    }

    /// [`Client::set_governance`] with a JSON spec as given (the server names a bad field).
    pub async fn set_governance_json(
        &self,
        cluster: &str,
        spec: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "governance"];
        self.submit(Call::new(Method::PUT, &path).body(spec).mutation(opts)).await
    }

    // ----- operations and audit -----

    /// `GET /api/operations`, newest first: the first page of `q.limit` (server default 100);
    /// [`Client::operations_page`] reads further, [`Client::all_operations`] reads them all.
    pub async fn list_operations(&self, q: &OperationQuery) -> Result<Vec<Operation>, Error> {
        let call = Call::new(Method::GET, &["api", "operations"])
            .query("target", q.target.as_deref())
            .query("status", q.status.map(OperationStatus::as_str))
            .query("archived", q.archived.then_some("true"))
            .query("limit", q.limit);
        self.call(call).await
    }

    /// `GET /api/operations/{id}`: every step with phase, attempts, timings and error.
    pub async fn get_operation(&self, id: &str) -> Result<Operation, Error> {
        self.call(Call::new(Method::GET, &["api", "operations", id])).await
    }

    /// `POST /api/operations/{id}/steps/{step}/retry`: retry one failed step.
    pub async fn retry_step(&self, id: &str, step: &str) -> Result<Operation, Error> {
        self.call(Call::new(Method::POST, &["api", "operations", id, "steps", step, "retry"])).await
    }

    /// `POST /api/operations/{id}/cancel`: stop a running operation between provider calls.
    pub async fn cancel_operation(&self, id: &str) -> Result<Operation, Error> {
        self.call(Call::new(Method::POST, &["api", "operations", id, "cancel"])).await
    }

    /// `GET /api/audit`: who did what, newest first.
    pub async fn audit(&self, target: Option<&str>, limit: Option<u32>) -> Result<Vec<AuditEntry>, Error> {
        self.call(Call::new(Method::GET, &["api", "audit"]).query("target", target).query("limit", limit)).await
    }

    /// Follows an operation to a terminal status (see [`follow`]).
    pub fn follow(&self, operation_id: &str, opts: FollowOptions) -> Follower {
        Follower::new(self.clone(), operation_id.to_string(), opts)
    }

    /// Waits until the operation reaches a terminal status and returns it.
    pub async fn wait(&self, operation_id: &str) -> Result<Operation, Error> {
        let mut follower = self.follow(operation_id, FollowOptions::default());
        let mut last = None;
        while let Some(update) = follower.next().await {
            last = Some(update?);
        }
        match last {
            Some(op) => Ok(op),
            None => self.get_operation(operation_id).await,
        }
    }

    // ----- simulated cloud -----

    /// `GET /api/sim/stats`: per-API call counters of the simulated cloud.
    pub async fn sim_stats(&self) -> Result<BTreeMap<String, u64>, Error> {
        self.call(Call::new(Method::GET, &["api", "sim", "stats"])).await
    }

    /// `GET /api/sim/faults` (JSON: the settings' type is the simulator's).
    pub async fn sim_faults(&self) -> Result<Value, Error> {
        self.call(Call::new(Method::GET, &["api", "sim", "faults"])).await
    }

    /// `PUT /api/sim/faults`: replace the fault injection settings; returns them.
    pub async fn set_sim_faults(&self, faults: &Value) -> Result<Value, Error> {
        self.call(Call::new(Method::PUT, &["api", "sim", "faults"]).body(faults)).await
    }
}

fn to_value(v: &impl Serialize) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::Decode { url: "(request)".into(), message: e.to_string() })
}

/// A patch with its unset (`null`) fields removed, at every level: the explicit-diff wire shape
/// carries only what the user changed.
fn explicit(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, explicit(v))).collect())
        }
        other => other,
    }
}

fn typed<T: DeserializeOwned>(url: &Url, value: Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|e| Error::Decode { url: url.to_string(), message: e.to_string() })
}

#[cfg(feature = "tls")]
mod tls {
    //! rustls with the ring provider and the platform's certificate verifier.
    use std::sync::Arc;

    pub(crate) fn client_config() -> rustls::ClientConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone()).expect("platform verifier");
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_a_path_prefix_and_encode_segments() {
        let c = Client::new("http://h:1/prefix/", None, Face::Cli).unwrap();
        assert_eq!(c.url(&["api", "clusters", "a b"], &[]).as_str(), "http://h:1/prefix/api/clusters/a%20b");
        let c = Client::new("http://h:1", None, Face::Cli).unwrap();
        let u = c.url(&["api", "operations", "op-1", "steps", "addon:cert-manager", "retry"], &[]);
        assert_eq!(u.as_str(), "http://h:1/api/operations/op-1/steps/addon:cert-manager/retry");
        let u = c.url(&["api", "operations"], &[("target", "cluster/demo".into())]);
        assert_eq!(u.as_str(), "http://h:1/api/operations?target=cluster%2Fdemo");
        assert!(matches!(Client::new("ftp://h", None, Face::Cli), Err(Error::InvalidUrl { .. })));
        assert!(matches!(Client::new("nonsense", None, Face::Cli), Err(Error::InvalidUrl { .. })));
        assert!(fresh_idempotency_key().starts_with("is-"));
        assert_ne!(fresh_idempotency_key(), fresh_idempotency_key());
    }

    /// Review #15, data-driven: (URL, sent with a token, accepted). A token never goes in
    /// cleartext off the machine; without one (the health check), any host is fine.
    #[test]
    fn a_token_is_not_sent_in_cleartext_to_another_host() {
        let cases = [
            ("http://127.0.0.1:3099", true, true),
            ("http://127.8.0.1:3099", true, true),
            ("http://localhost:3099", true, true),
            ("http://[::1]:3099", true, true),
            ("http://10.0.0.5:3099", true, false),
            ("http://instantstart.example.com", true, false),
            ("http://instantstart.example.com", false, true),
        ];
        for (url, with_token, ok) in cases {
            let token = with_token.then(|| "ist_x".to_string());
            let got = Client::new(url, token, Face::Cli);
            assert_eq!(got.is_ok(), ok, "{url} token={with_token}: {:?}", got.err());
            if let Err(Error::InvalidUrl { message, .. }) = got {
                assert!(message.contains(INSECURE_HTTP_ENV) && message.contains("https://"), "{message}");
            }
        }
    }

    /// A fake server: reads answer canned core values; mutations answer a dry run (with
    /// `?dry_run=true`) or "already in this state", echoing what they received.
    async fn fake() -> Client {
        use axum::body::Bytes;
        use axum::http::{Method as M, Uri};
        use axum::response::IntoResponse;
        async fn handle(method: M, uri: Uri, body: Bytes) -> axum::response::Response {
            let path = uri.path().to_string();
            let query = uri.query().unwrap_or_default().to_string();
            let body: Value = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).unwrap() };
            let echo = serde_json::json!({ "method": method.as_str(), "path": path, "query": query, "body": body });
            let v = match (method, path.as_str()) {
                (M::GET, "/api/clusters/demo/features") => serde_json::json!({
                    "training_operator": true, "inference_operator": false,
                    "tiered_checkpointing": { "memory_percent": 30 }, "managed_autoscaling": false,
                    "autoscaling_scope": "HyperPod instance groups only"
                }),
                (M::GET, "/api/clusters/demo/nodes") => serde_json::json!([{
                    "instance_id": "i-1", "instance_group": "workers", "instance_type": "ml.g5.2xlarge",
                    "status": "Running", "availability_zone": "us-east-1a"
                }]),
                (M::GET, "/api/clusters/demo/instance-groups") => serde_json::json!([{
                    "name": "workers", "instance_type": "ml.g5.2xlarge", "current_count": 2, "target_count": 2,
                    "status": "InService", "capacity": { "type": "spot" }, "interface_mode": "standard",
                    "subnet_ids": ["subnet-1"]
                }]),
                _ if query.contains("dry_run=true") => serde_json::json!({
                    "dry_run": true, "target": "cluster/demo", "request": echo, "steps": [],
                    "plan": { "target": "demo", "changes": [{ "field": "count", "from": 2, "to": 3 }] },
                    "checks": [{ "check": "quota", "field": "patch.count", "status": "fail", "detail": "d" }]
                }),
                _ => serde_json::json!({ "no_change": true, "message": "demo: already in this state", "echo": echo }),
            };
            axum::Json(v).into_response()
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(handle)).await.unwrap() });
        Client::new(&url, Some("t".into()), Face::Cli).unwrap()
    }

    fn echoed(s: Submitted) -> Value {
        match s {
            Submitted::NoChange(n) => {
                assert_eq!(n.message, "demo: already in this state");
                n.raw["echo"].clone()
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn day2_calls_send_explicit_diffs_to_their_endpoints() {
        let c = fake().await;
        let opts = MutationOptions::default();
        // Reads decode into the core types.
        let f = c.features("demo").await.unwrap();
        assert!(f.features.training_operator && !f.features.managed_autoscaling);
        assert_eq!(f.features.tiered_checkpointing.map(|t| t.memory_percent), Some(30));
        assert_eq!(f.autoscaling_scope, "HyperPod instance groups only");
        assert_eq!(c.list_nodes("demo").await.unwrap()[0].instance_id, "i-1");
        let groups = c.list_instance_groups("demo").await.unwrap();
        assert_eq!(groups[0].capacity, instantstart_core::spec::CapacitySpec::Spot);

        // Patches carry only the fields that were set.
        let e = echoed(c.scale_instance_group("demo", "workers", 0, &opts).await.unwrap());
        assert_eq!(
            (e["method"].as_str(), e["path"].as_str()),
            (Some("PATCH"), Some("/api/clusters/demo/instance-groups/workers"))
        );
        assert_eq!(e["body"], serde_json::json!({ "count": 0 }));
        let patch = FeaturesPatch {
            tiered_checkpointing: Some(instantstart_core::diff::TieredCheckpointingPatch {
                enabled: false,
                memory_percent: None,
            }),
            ..Default::default()
        };
        let e = echoed(c.set_features("demo", &patch, &opts).await.unwrap());
        assert_eq!(e["path"], "/api/clusters/demo/features");
        assert_eq!(e["body"], serde_json::json!({ "tiered_checkpointing": { "enabled": false } }));

        // Node actions name the action in the path; the acknowledgement is sent only when given.
        let ids = vec!["i-1".to_string()];
        let e = echoed(c.node_action("demo", NodeAction::Reboot, &ids, false, &opts).await.unwrap());
        assert_eq!((e["method"].as_str(), e["path"].as_str()), (Some("POST"), Some("/api/clusters/demo/nodes/reboot")));
        assert_eq!(e["body"], serde_json::json!({ "node_ids": ["i-1"] }));
        let e = echoed(c.node_action("demo", NodeAction::Replace, &ids, true, &opts).await.unwrap());
        assert_eq!(e["path"], "/api/clusters/demo/nodes/replace");
        assert_eq!(e["body"]["acknowledge_local_data_loss"], true);
        let e = echoed(c.delete_instance_group("demo", "spot", &opts).await.unwrap());
        assert_eq!((e["method"].as_str(), e["body"].is_null()), (Some("DELETE"), true));

        // A dry run is the plan with its explicit diff and preflight checks.
        let group: InstanceGroupSpec = serde_json::from_value(serde_json::json!({
            "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b"
        }))
        .unwrap();
        let dry = MutationOptions { dry_run: true, idempotency_key: None };
        let Submitted::DryRun(plan) = c.add_instance_group("demo", &group, &dry).await.unwrap() else { panic!() };
        assert_eq!(plan.request["path"], "/api/clusters/demo/instance-groups");
        assert_eq!(plan.request["body"]["name"], "spot");
        assert_eq!(plan.diff.as_ref().unwrap()["changes"][0]["field"], "count");
        assert!(plan.blocked(), "a failing check blocks");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_connection_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = Client::new(&format!("http://127.0.0.1:{port}"), Some("t".into()), Face::Cli).unwrap();
        let e = c.context().await.unwrap_err();
        assert!(e.is_connection(), "{e:?}");
        assert!(!format!("{c:?}").contains("\"t\""), "the token is redacted");
    }
}
