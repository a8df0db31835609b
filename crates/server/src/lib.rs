//! `instantstart-server`: the one backend behind the web UI, the CLI and the MCP tools.
//!
//! It translates HTTP into calls on the core's operation engine and providers and nothing
//! more: validation lives in `instantstart-core`, so every face gets the same rules. The API
//! is described by an OpenAPI 3.1 document generated from the route table ([`openapi`]).

pub mod archive;
pub mod auth;
pub mod backup;
pub mod conditional;
pub mod error;
pub mod host;
pub mod kube_wiring;
pub mod limits;
pub mod log_hub;
pub mod metrics;
pub mod read_cache;
pub mod routes;
pub mod serve;
pub mod ui;
pub mod ws_slots;

use aide::openapi::OpenApi;
use auth::Auth;
use instantstart_core::engine::{Engine, EngineConfig};
use instantstart_core::provider::{AwsCloud, HelmReleases, KubeApi};
use instantstart_core::store::Store;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Which cloud the server drives (the context's view names it too).
pub use instantstart_core::api::context::ProviderKind;

/// Everything a handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<AppInner>);

pub struct AppInner {
    pub engine: Engine,
    pub store: Arc<dyn Store>,
    pub aws: Arc<dyn AwsCloud>,
    pub kube: Arc<dyn KubeApi>,
    /// Where GPU and training metrics over time come from (`core::api::metrics`): the simulated
    /// telemetry, or on AWS per cluster its AMP workspace or its DCGM exporters
    /// (`instantstart_core::metrics_choice::ClusterMetrics`).
    pub metrics_source: Arc<dyn instantstart_core::provider::MetricsSource>,
    /// The simulated cloud, when it is the provider (fault injection and call counters).
    pub sim: Option<instantstart_sim::SimCloud>,
    pub sim_speed: Option<f64>,
    pub auth: Auth,
    pub metrics: metrics::Metrics,
    pub provider: ProviderKind,
    pub default_region: String,
    openapi: OnceLock<Arc<String>>,
    /// Base URL of the simulated clusters' Kubernetes API (`<url>/clusters/<region>/<eks>`),
    /// when the sim serves it.
    pub sim_kube_api: Option<String>,
    /// Shared upstream log follows of the job-log WebSockets.
    pub log_hub: Arc<log_hub::LogHub>,
    /// Live reads of clusters shared by concurrent readers for a moment (`core::api::live`).
    pub live_clusters: instantstart_core::api::clusters::LiveClusters,
    /// Responses of the hottest reads while the store is unchanged ([`read_cache`]).
    pub read_cache: read_cache::ReadCache,
    /// Whether reads are tagged and revalidated ([`conditional`]; on unless measuring).
    pub conditional: conditional::Switch,
    /// Which namespaces tokens' workloads may use ([`ServerOptions::unbound_tokens_any_namespace`],
    /// [`ServerOptions::admin_system_namespaces`]).
    pub namespace_policy: instantstart_core::kube_access::NamespacePolicy,
    /// [`ServerOptions::eks_public_access_cidrs`].
    pub eks_public_access_cidrs: Vec<ipnet::Ipv4Net>,
    /// The `Host` names answered besides loopback and addresses ([`HttpOptions::allowed_hosts`]).
    pub allowed_hosts: Arc<host::AllowedHosts>,
    /// [`HttpOptions::public_metrics`].
    pub public_metrics: bool,
    /// Open WebSockets per principal ([`ws_slots`]).
    pub ws_slots: Arc<ws_slots::WsSlots>,
}

/// How the simulated cloud's Kubernetes is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SimKube {
    /// Serve the simulated clusters' Kubernetes API on loopback and use the kube-rs adapter
    /// (the same code as with real EKS); `kubectl` can inspect it.
    #[default]
    ApiServer,
    /// Call the simulated world directly.
    InProcess,
}

impl Deref for AppState {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.0
    }
}

/// Errors while assembling the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Auth(#[from] auth::AuthError),
    #[error("store: {0}")]
    Store(#[from] instantstart_core::store::StoreError),
    #[error("simulated cloud: {0}")]
    Sim(String),
    #[error("engine: {0}")]
    Engine(#[from] instantstart_core::engine::EngineError),
    #[error("{0}")]
    Unsupported(String),
    /// `--provider aws` on a build without the `aws` cargo feature.
    #[error(
        "this build has no AWS provider: rebuild with `cargo run -p instantstart-server --features aws -- --provider aws` (the container image includes it)"
    )]
    AwsNotBuilt,
    /// `--role-boundary-arn` missing or malformed with `--provider aws`.
    #[error("{0}")]
    RoleBoundary(String),
    /// `--replica-id` malformed, or the data directory's replica id unreadable.
    #[error("replica id: {0}")]
    ReplicaId(String),
}

/// How to assemble a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub data_dir: PathBuf,
    pub provider: ProviderKind,
    /// Speed factor of the simulated cloud (1 = real AWS timings).
    pub sim_speed: f64,
    pub default_region: String,
    /// Overrides the admin token (`INSTANTSTART_TOKEN`).
    pub token: Option<String>,
    /// `--shared-bucket` (`INSTANTSTART_SHARED_BUCKET`): the default `storage.bucket` of
    /// clusters created in `default_region`. With the simulated cloud the bucket is seeded
    /// (tagged `instantstart:managed-by` only, like the template's) when missing.
    pub shared_bucket: Option<String>,
    /// `--unbound-tokens-any-namespace`: tokens without a Kubernetes binding may run workloads
    /// in any namespace (default: `default` only; `instantstart_core::kube_access`).
    pub unbound_tokens_any_namespace: bool,
    /// `--admin-system-namespaces`: the system namespaces (`kube-system`, an operator's) the
    /// admin token's workloads may use; none by default (`instantstart_core::kube_access`).
    pub admin_system_namespaces: Vec<String>,
    /// `--eks-public-access-cidrs`: the control plane's own internet addresses, added to every
    /// create request's `public_access_cidrs` (`spec::fill_server_public_access_cidrs`) so the
    /// EKS API it creates stays reachable to it; empty = add none.
    pub eks_public_access_cidrs: Vec<ipnet::Ipv4Net>,
    /// How the HTTP side admits requests.
    pub http: HttpOptions,
}

/// How the HTTP side admits requests (command-line options of the server).
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// `--allowed-hosts`: `Host` names answered besides `localhost` and IP addresses
    /// ([`host::AllowedHosts`]; a guard against DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// `--public-metrics`: `/metrics` answers without a token (for a scraper that cannot send
    /// one); by default it needs a token of any scope.
    pub public_metrics: bool,
}

/// How this server shares its store with other replicas (docs/store.md, "Several replicas").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaOptions {
    /// `--replica-id`: the name of this replica in the leases it holds; by default the one
    /// kept in `<data-dir>/replica-id` (created on the first start), so a restarted server
    /// takes its own operations back at once. Replicas sharing a store need distinct ids.
    pub id: Option<String>,
    /// `--lease-ttl`: how long a lease lasts unless renewed (renewed every quarter of it).
    pub lease_ttl: std::time::Duration,
    /// Whether other replicas may share the store (PostgreSQL): changes are then published to
    /// the store's change feed and other replicas' changes relayed to this server's live
    /// streams ([`Engine::start_change_relay`]). Off for SQLite, one process's store.
    pub shared_store: bool,
    /// With `--provider sim`: the PostgreSQL URL of the store, where the simulated world then
    /// lives too (table `sim_world`), so every replica on the store sees one simulated account
    /// ([`instantstart_sim::PostgresWorldStore`]). `None`: the world is kept in
    /// `<data-dir>/sim-world.json`, one process's.
    pub sim_world_url: Option<String>,
}

impl Default for ReplicaOptions {
    fn default() -> Self {
        ReplicaOptions {
            id: None,
            lease_ttl: instantstart_core::engine::DEFAULT_LEASE_TTL,
            shared_store: false,
            sim_world_url: None,
        }
    }
}

/// The file in the data directory keeping this server's replica id.
pub const REPLICA_ID_FILE: &str = "replica-id";

/// Creates the data directory (and its parents) readable by its owner only (`0700`), and
/// narrows an existing one that others could read: it holds the admin token, the SQLite
/// database and the backups.
pub fn private_data_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
            tracing::info!(dir = %dir.display(), "data directory narrowed to its owner (0700)");
        }
    }
    Ok(())
}

/// The replica id: `explicit`, else the one in `<data_dir>/replica-id`, created (random) when
/// missing. An id is 1-128 printable ASCII characters without spaces.
pub fn replica_id(data_dir: &Path, explicit: Option<&str>) -> Result<String, ServerError> {
    let valid = |id: &str| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic());
    if let Some(id) = explicit {
        if !valid(id) {
            return Err(ServerError::ReplicaId(format!(
                "--replica-id {id:?}: use 1-128 printable ASCII characters without spaces"
            )));
        }
        return Ok(id.to_string());
    }
    let path = data_dir.join(REPLICA_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) if valid(id.trim()) => return Ok(id.trim().to_string()),
        Ok(_) => return Err(ServerError::ReplicaId(format!("{}: not a valid replica id", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ServerError::ReplicaId(format!("{}: {e}", path.display()))),
    }
    let id = format!("replica-{}", instantstart_core::operation::OperationId::generate().0.trim_start_matches("op-"));
    std::fs::write(&path, format!("{id}\n")).map_err(|e| ServerError::ReplicaId(format!("{}: {e}", path.display())))?;
    Ok(id)
}

/// A ready server: state plus the admin token if it was created now (print it once).
pub struct Assembled {
    pub state: AppState,
    pub new_admin_token: Option<String>,
}

/// How `--provider aws` reaches AWS (profile, endpoint override); see [`AppState::assemble_with_aws`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsOptions {
    /// Default region; `None` = the standard chain (`AWS_REGION`, profile, IMDS).
    pub region: Option<String>,
    /// Named profile of `~/.aws/config` / `~/.aws/credentials`.
    pub profile: Option<String>,
    /// Endpoint override for every service (e.g. a local moto server).
    pub endpoint_url: Option<String>,
    /// `--role-boundary-arn` (`INSTANTSTART_ROLE_BOUNDARY_ARN`) as given: the ARN of the
    /// permissions boundary every IAM role InstantStart creates carries, or `none` for no
    /// boundary. `--provider aws` refuses to start without it ([`role_boundary`]).
    pub role_boundary_arn: Option<String>,
}

/// Word that turns the permissions boundary off explicitly (`--role-boundary-arn none`).
pub const NO_ROLE_BOUNDARY: &str = "none";

/// The permissions boundary `--provider aws` gives every IAM role it creates, from the raw
/// `--role-boundary-arn`: the ARN of an IAM managed policy, or `None` when the operator said
/// `none`.
///
/// # Guarantees
///
/// Missing → [`ServerError::RoleBoundary`] telling where the value comes from: a real-AWS
/// server never creates roles without a boundary by accident. Anything but `none` or an IAM
/// policy ARN (`arn:<partition>:iam::<12-digit account>:policy/…`) is refused the same way.
pub fn role_boundary(raw: Option<&str>) -> Result<Option<String>, ServerError> {
    let Some(raw) = raw.map(str::trim) else {
        return Err(ServerError::RoleBoundary(
            "--provider aws needs --role-boundary-arn (INSTANTSTART_ROLE_BOUNDARY_ARN): the ARN of the permissions \
             boundary every IAM role InstantStart creates carries (the deployment template's RoleBoundary output), \
             or `none` to create roles without one"
                .into(),
        ));
    };
    if raw.eq_ignore_ascii_case(NO_ROLE_BOUNDARY) {
        return Ok(None);
    }
    let parts: Vec<&str> = raw.splitn(6, ':').collect();
    let valid = parts.len() == 6
        && parts[0] == "arn"
        && !parts[1].is_empty()
        && parts[2] == "iam"
        && parts[3].is_empty()
        && parts[4].len() == 12
        && parts[4].bytes().all(|b| b.is_ascii_digit())
        && parts[5].strip_prefix("policy/").is_some_and(|n| !n.is_empty());
    if !valid {
        return Err(ServerError::RoleBoundary(format!(
            "--role-boundary-arn {raw:?} is not an IAM policy ARN (arn:<partition>:iam::<account>:policy/<name>) or `none`"
        )));
    }
    Ok(Some(raw.to_string()))
}

#[cfg(feature = "aws")]
impl AwsOptions {
    fn into_provider_options(self, role_boundary_arn: Option<String>) -> instantstart_aws::AwsOptions {
        instantstart_aws::AwsOptions {
            region: self.region,
            profile: self.profile,
            endpoint_url: self.endpoint_url,
            role_boundary_arn,
        }
    }
}

/// Whether this build carries the real AWS provider (cargo feature `aws`).
pub const AWS_PROVIDER_BUILT: bool = cfg!(feature = "aws");

impl AppState {
    /// Opens the store and the provider in `data_dir`, builds the engine, and resumes every
    /// operation that was running when the previous process stopped. With `--provider aws`
    /// the standard credential chain is used in `opts.default_region`.
    pub fn assemble(opts: &ServerOptions) -> Result<Assembled, ServerError> {
        Self::assemble_with_aws(opts, AwsOptions { region: Some(opts.default_region.clone()), ..Default::default() })
    }

    /// [`AppState::assemble`] with explicit AWS settings (`--profile`, `--aws-endpoint-url`);
    /// they matter only for `--provider aws`.
    pub fn assemble_with_aws(opts: &ServerOptions, aws_opts: AwsOptions) -> Result<Assembled, ServerError> {
        Self::assemble_full(opts, aws_opts, SimKube::ApiServer)
    }

    /// [`AppState::assemble_with_aws`] choosing how the simulated cloud's Kubernetes is reached,
    /// on the default store (SQLite, `<data-dir>/instantstart.db`).
    pub fn assemble_full(
        opts: &ServerOptions,
        aws_opts: AwsOptions,
        sim_kube: SimKube,
    ) -> Result<Assembled, ServerError> {
        private_data_dir(&opts.data_dir).map_err(|e| ServerError::Sim(format!("{}: {e}", opts.data_dir.display())))?;
        let store = instantstart_store::open_store(&default_store_url(&opts.data_dir))?;
        Self::assemble_on(opts, aws_opts, sim_kube, store)
    }

    /// [`AppState::assemble_full`] on `store` (`--store-url`: SQLite or PostgreSQL), as the
    /// replica named in the data directory ([`ReplicaOptions::default`]).
    pub fn assemble_on(
        opts: &ServerOptions,
        aws_opts: AwsOptions,
        sim_kube: SimKube,
        backend: Arc<dyn instantstart_store::StoreBackend>,
    ) -> Result<Assembled, ServerError> {
        Self::assemble_replica(opts, aws_opts, sim_kube, backend, &ReplicaOptions::default())
    }

    /// [`AppState::assemble_on`] with explicit replica settings (`--replica-id`, `--lease-ttl`).
    pub fn assemble_replica(
        opts: &ServerOptions,
        aws_opts: AwsOptions,
        sim_kube: SimKube,
        backend: Arc<dyn instantstart_store::StoreBackend>,
        replica: &ReplicaOptions,
    ) -> Result<Assembled, ServerError> {
        private_data_dir(&opts.data_dir).map_err(|e| ServerError::Sim(format!("{}: {e}", opts.data_dir.display())))?;
        let replica_id = replica_id(&opts.data_dir, replica.id.as_deref())?;
        let store: Arc<dyn Store> = backend.clone();
        let (auth, new_admin_token) = if replica.shared_store {
            Auth::load_or_init_shared(&opts.data_dir, opts.token.clone(), backend)?
        } else {
            Auth::load_or_init(&opts.data_dir, opts.token.clone(), backend)?
        };
        let mut kube_api_url = None;
        let helm: Arc<dyn HelmReleases>;
        let metrics_source: Arc<dyn instantstart_core::provider::MetricsSource>;
        let (aws, kube, sim, config): (Arc<dyn AwsCloud>, Arc<dyn KubeApi>, _, _) = match opts.provider {
            ProviderKind::Sim => {
                let sim = open_sim(&opts.data_dir, opts.sim_speed, replica.sim_world_url.as_deref())?;
                if let Some(bucket) = &opts.shared_bucket {
                    // The template's bucket exists before the server starts; so does the sim's.
                    let mut tags = instantstart_core::provider::Tags::new();
                    tags.insert(
                        instantstart_core::provider::TAG_MANAGED_BY.into(),
                        instantstart_core::provider::MANAGED_BY.into(),
                    );
                    sim.seed_bucket_if_missing(&instantstart_core::provider::CreateBucket {
                        region: opts.default_region.clone(),
                        name: bucket.clone(),
                        tags,
                    })
                    .map_err(|e| ServerError::Sim(format!("shared bucket {bucket}: {e}")))?;
                }
                let in_runtime = tokio::runtime::Handle::try_current().is_ok();
                let kube: Arc<dyn KubeApi> = match sim_kube {
                    SimKube::ApiServer if in_runtime => {
                        let (adapter, url) = kube_wiring::sim_api_adapter(&sim)
                            .map_err(|e| ServerError::Sim(format!("serving the simulated Kubernetes API: {e}")))?;
                        kube_api_url = Some(url);
                        adapter
                    }
                    _ => Arc::new(sim.clone()),
                };
                helm = Arc::new(sim.clone());
                metrics_source = Arc::new(sim.clone());
                (Arc::new(sim.clone()), kube, Some(sim), EngineConfig::scaled(opts.sim_speed))
            }
            #[cfg(feature = "aws")]
            ProviderKind::Aws => {
                // The AWS SDK and kube-rs share rustls: pick the process-wide provider once.
                instantstart_aws::install_crypto_provider();
                let boundary = role_boundary(aws_opts.role_boundary_arn.as_deref())?;
                if boundary.is_none() {
                    tracing::warn!(
                        "--role-boundary-arn none: IAM roles are created without a permissions boundary (see docs/security.md)"
                    );
                }
                // Credentials are resolved on the first call, so a misconfiguration shows up
                // as that call's error (and in the operation that made it).
                let aws = Arc::new(instantstart_aws::AwsProvider::lazy(aws_opts.into_provider_options(boundary)));
                let kube = kube_wiring::eks_adapter(aws.clone());
                helm = kube_wiring::eks_helm(aws.clone());
                // GPU metrics from the cluster's AMP workspace when its observability add-on
                // writes to one, else from its DCGM exporters through the pod proxy.
                let dcgm = instantstart_k8s::DcgmSource::new(kube.clone());
                if tokio::runtime::Handle::try_current().is_ok() {
                    dcgm.spawn_sampler();
                }
                metrics_source = Arc::new(instantstart_core::metrics_choice::ClusterMetrics::new(
                    aws.clone(),
                    aws.clone(),
                    kube.clone(),
                    dcgm,
                ));
                (aws, kube, None, EngineConfig::default())
            }
            #[cfg(not(feature = "aws"))]
            ProviderKind::Aws => {
                let _ = aws_opts;
                return Err(ServerError::AwsNotBuilt);
            }
        };
        let workflow_config = instantstart_core::workflow::WorkflowConfig {
            shared_bucket: opts.shared_bucket.as_ref().map(|name| {
                instantstart_core::workflow::create_cluster::SharedBucket {
                    name: name.clone(),
                    region: opts.default_region.clone(),
                }
            }),
        };
        let workflows = instantstart_core::workflow::all_with_config(
            aws.clone(),
            kube.clone(),
            Some(helm),
            store.clone(),
            Some(Arc::new(instantstart_recipes::WorkloadRenderer::new())),
            &workflow_config,
        );
        let config = instantstart_core::engine::EngineConfig { lease_ttl: replica.lease_ttl, ..config };
        tracing::info!(replica = %replica_id, lease_ttl = ?replica.lease_ttl, "replica");
        let engine = Engine::with_replica(store.clone(), workflows, config, replica_id);
        if replica.shared_store && tokio::runtime::Handle::try_current().is_ok() {
            engine.start_change_relay()?;
        }
        let state = AppState(Arc::new(AppInner {
            engine,
            store,
            aws,
            kube,
            metrics_source,
            sim,
            sim_speed: (opts.provider == ProviderKind::Sim).then_some(opts.sim_speed),
            auth,
            metrics: metrics::Metrics::default(),
            provider: opts.provider,
            default_region: opts.default_region.clone(),
            namespace_policy: instantstart_core::kube_access::NamespacePolicy {
                unbound_any_namespace: opts.unbound_tokens_any_namespace,
                admin_system_namespaces: opts.admin_system_namespaces.clone(),
            },
            eks_public_access_cidrs: opts.eks_public_access_cidrs.clone(),
            allowed_hosts: Arc::new(
                host::AllowedHosts::new(&opts.http.allowed_hosts)
                    .map_err(|rule| ServerError::Unsupported(format!("--allowed-hosts: {rule}")))?,
            ),
            public_metrics: opts.http.public_metrics,
            openapi: OnceLock::new(),
            sim_kube_api: kube_api_url,
            log_hub: Arc::default(),
            live_clusters: instantstart_core::api::live::LiveReads::new(instantstart_core::api::live::LIVE_READ_TTL),
            read_cache: read_cache::ReadCache::from_env(),
            conditional: conditional::Switch::from_env(),
            ws_slots: ws_slots::WsSlots::new(ws_slots::MAX_WS_PER_PRINCIPAL),
        }));
        Ok(Assembled { state, new_admin_token })
    }

    /// Resumes operations left running by a previous process (this replica's own, and those
    /// no live replica drives), then starts the sweep that takes over operations whose
    /// replica died (lease lapsed); returns how many it resumed now.
    pub fn resume(&self) -> Result<usize, ServerError> {
        let n = self.engine.resume_all()?;
        self.engine.start_lease_sweep();
        Ok(n)
    }

    pub(crate) fn set_openapi(&self, api: &OpenApi) {
        let text = serde_json::to_string_pretty(api).unwrap_or_else(|_| "{}".into());
        let _ = self.openapi.set(Arc::new(text));
    }

    pub fn openapi_json(&self) -> Arc<String> {
        self.openapi.get().cloned().unwrap_or_else(|| Arc::new("{}".into()))
    }
}

/// The simulated cloud: in `<data_dir>/sim-world.json`, or shared in the PostgreSQL database
/// at `shared_url` ([`ReplicaOptions::sim_world_url`]).
fn open_sim(data_dir: &Path, speed: f64, shared_url: Option<&str>) -> Result<instantstart_sim::SimCloud, ServerError> {
    let config = match shared_url {
        Some(url) => {
            let store = instantstart_sim::PostgresWorldStore::connect(url)
                .map_err(|e| ServerError::Sim(format!("the shared simulated world: {e}")))?;
            instantstart_sim::SimConfig::with_speed(speed).world_store(Arc::new(store))
        }
        None => instantstart_sim::SimConfig::with_speed(speed).state_file(data_dir.join("sim-world.json")),
    };
    instantstart_sim::SimCloud::new(config).map_err(|e| ServerError::Sim(e.to_string()))
}

pub use serve::{serve, serve_with};

/// The default store: SQLite in `<data_dir>/instantstart.db`.
pub fn default_store_url(data_dir: &Path) -> instantstart_store::StoreUrl {
    instantstart_store::StoreUrl::Sqlite(data_dir.join("instantstart.db"))
}

/// The complete HTTP application for `state`.
pub fn app(state: AppState) -> axum::Router {
    routes::router(state)
}

#[cfg(test)]
mod role_boundary_tests {
    use super::*;

    /// A raw `--role-boundary-arn`, and the boundary it gives or a part of the error.
    type Case = (Option<&'static str>, Result<Option<&'static str>, &'static str>);

    #[test]
    fn the_role_boundary_is_required_and_checked() {
        let arn = "arn:aws:iam::123456789012:policy/instantstart-role-boundary";
        let cases: &[Case] = &[
            (Some(arn), Ok(Some(arn))),
            (
                Some("arn:aws-cn:iam::123456789012:policy/path/b"),
                Ok(Some("arn:aws-cn:iam::123456789012:policy/path/b")),
            ),
            (Some("none"), Ok(None)),
            (Some("NONE"), Ok(None)),
            (None, Err("needs --role-boundary-arn")),
            (Some(""), Err("is not an IAM policy ARN")),
            (Some("arn:aws:iam::123456789012:role/x"), Err("is not an IAM policy ARN")),
            (Some("arn:aws:iam::aws:policy/AdministratorAccess"), Err("is not an IAM policy ARN")),
            (Some("arn:aws:iam::123456789012:policy/"), Err("is not an IAM policy ARN")),
            (Some("arn:aws:s3:::123456789012:policy/x"), Err("is not an IAM policy ARN")),
        ];
        for (raw, want) in cases {
            match (role_boundary(*raw), want) {
                (Ok(got), Ok(w)) => assert_eq!(got.as_deref(), *w, "{raw:?}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{raw:?}: {e}"),
                (got, w) => panic!("{raw:?}: got {got:?}, want {w:?}"),
            }
        }
    }
}
