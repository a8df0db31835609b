//! `instantstart-server`: serve the REST API, the live stream and the web UI.

use anyhow::Context;
use clap::{Parser, Subcommand};
use instantstart_server::auth::{LOCAL_PRINCIPAL, Scope};
use instantstart_server::{AppState, ProviderKind, ServerOptions, SimKube};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `--provider`: [`ProviderKind`] (a core type, which has no clap) as a command-line choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProviderArg {
    /// The embedded simulated AWS + Kubernetes world (no AWS account needed).
    Sim,
    /// Real AWS through the standard credential chain.
    Aws,
}

impl From<ProviderArg> for ProviderKind {
    fn from(p: ProviderArg) -> Self {
        match p {
            ProviderArg::Sim => ProviderKind::Sim,
            ProviderArg::Aws => ProviderKind::Aws,
        }
    }
}

#[derive(Parser)]
#[command(name = "instantstart-server", version, about = "InstantStart control plane for SageMaker HyperPod on EKS")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3099", env = "INSTANTSTART_LISTEN")]
    listen: SocketAddr,
    /// Cloud provider: the embedded simulated cloud, or real AWS.
    #[arg(long, value_enum, default_value = "sim", env = "INSTANTSTART_PROVIDER")]
    provider: ProviderArg,
    /// Speed factor of the simulated cloud (1 = real AWS timings; 60 turns EKS's 10 minutes into 10 s).
    #[arg(long, default_value_t = 60.0, env = "INSTANTSTART_SIM_SPEED")]
    sim_speed: f64,
    /// Directory for the SQLite database, tokens and the simulated world.
    #[arg(long, default_value = ".data", env = "INSTANTSTART_DATA_DIR")]
    data_dir: PathBuf,
    /// Region used when a request names none.
    #[arg(long, default_value = "us-east-1", env = "AWS_REGION")]
    region: String,
    /// AWS named profile for `--provider aws` (default: the standard credential chain).
    #[arg(long, env = "AWS_PROFILE")]
    profile: Option<String>,
    /// Endpoint override for every AWS service with `--provider aws` (e.g. a local moto
    /// server for testing).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    aws_endpoint_url: Option<String>,
    /// How the simulated clusters' Kubernetes is reached: served on a loopback port and used
    /// through the kube-rs adapter (inspectable with kubectl), or called in-process.
    #[arg(long, value_enum, default_value = "api-server", env = "INSTANTSTART_SIM_KUBE")]
    sim_kube: SimKube,
    /// The management environment's shared S3 bucket (the deployment template sets it): the
    /// default `storage.bucket` of every cluster created in `--region`, mounted in the
    /// management instance at the pods' mount path. With the simulated cloud the bucket is
    /// created in the simulated account when missing.
    #[arg(long, env = "INSTANTSTART_SHARED_BUCKET")]
    shared_bucket: Option<String>,
    /// The store: `sqlite://<path>` or `postgres://user:password@host:port/database` (default:
    /// SQLite in `<data-dir>/instantstart.db`). Keep a password out of the command line:
    /// prefer the environment variable.
    #[arg(long, env = "INSTANTSTART_STORE_URL", hide_env_values = true)]
    store_url: Option<String>,
    /// With `--provider aws`: the ARN of the IAM managed policy every role InstantStart creates
    /// carries as its permissions boundary (the deployment template sets it), or `none`.
    /// Required with `--provider aws`.
    #[arg(long, env = "INSTANTSTART_ROLE_BOUNDARY_ARN")]
    role_boundary_arn: Option<String>,
    /// This replica's name in the leases it holds on running operations (default: the one
    /// kept in `<data-dir>/replica-id`). Replicas sharing one `--store-url` need distinct ids.
    #[arg(long, env = "INSTANTSTART_REPLICA_ID")]
    replica_id: Option<String>,
    /// How long a replica's lease on an operation lasts unless renewed (renewed every quarter
    /// of it): another replica takes a dead replica's operations over after about this long
    /// (e.g. 15s, 500ms).
    #[arg(long, default_value = "15s", value_parser = parse_lease_ttl, env = "INSTANTSTART_LEASE_TTL")]
    lease_ttl: std::time::Duration,
    /// Let tokens without a Kubernetes binding run workloads in any namespace (as the control
    /// plane's identity). By default such a token may use only the `default` namespace; bind
    /// tokens to Kubernetes identities instead (`token create --kube-user …`).
    #[arg(long, env = "INSTANTSTART_UNBOUND_TOKENS_ANY_NAMESPACE")]
    unbound_tokens_any_namespace: bool,
    /// System namespaces (comma-separated: `kube-system`, an operator's such as `monitoring`)
    /// the admin token's workloads may use. None by default: every token, the admin's too, is
    /// refused them unless explicitly allowed (minted tokens: `token create --system-namespace`).
    #[arg(long, env = "INSTANTSTART_ADMIN_SYSTEM_NAMESPACES", value_delimiter = ',')]
    admin_system_namespaces: Vec<String>,
    /// The control plane's own internet addresses (comma-separated CIDR blocks, e.g. the
    /// management instance's Elastic IP `198.51.100.7/32`; the deployment template sets it):
    /// added to the `public_access_cidrs` of every cluster created, so its EKS API admits the
    /// control plane and the blocks the request names, not every address.
    #[arg(long, env = "INSTANTSTART_EKS_PUBLIC_ACCESS_CIDRS", value_delimiter = ',')]
    eks_public_access_cidrs: Vec<ipnet::Ipv4Net>,
    /// Host names the server answers for besides `localhost` and IP addresses (comma-separated;
    /// `*.example.com` for every name under it), e.g. the name of a TLS proxy in front. A
    /// request for any other `Host` is refused: a guard against DNS rebinding.
    #[arg(long, env = "INSTANTSTART_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// Serve `/metrics` without a token, for a Prometheus scraper that cannot send one. By
    /// default `/metrics` needs a token of any scope (`Authorization: Bearer`).
    #[arg(long, env = "INSTANTSTART_PUBLIC_METRICS")]
    public_metrics: bool,
    /// Back the SQLite store up online every interval (`6h`, `30m`, `1d`; at least `1m`) into
    /// `--backup-dir`; off when absent.
    #[arg(long, env = "INSTANTSTART_BACKUP_INTERVAL", value_parser = instantstart_server::backup::parse_interval)]
    backup_interval: Option<std::time::Duration>,
    /// Where backups go (default `<data-dir>/backups`).
    #[arg(long, env = "INSTANTSTART_BACKUP_DIR")]
    backup_dir: Option<PathBuf>,
    /// How many backups to keep in `--backup-dir` (the oldest beyond go).
    #[arg(long, env = "INSTANTSTART_BACKUP_KEEP", default_value_t = instantstart_server::backup::DEFAULT_KEEP,
          value_parser = clap::value_parser!(usize))]
    backup_keep: usize,
    /// Days a finished operation stays in the operation lists before it is archived (kept,
    /// read by id and with `GET /api/operations?archived=true`; docs/store.md "Archive");
    /// 0 keeps every operation in the lists.
    #[arg(long, env = "INSTANTSTART_OPERATION_RETENTION_DAYS", default_value_t = instantstart_server::archive::DEFAULT_RETENTION_DAYS)]
    operation_retention_days: u32,
    /// Log format.
    #[arg(long, value_enum, default_value = "human")]
    log_format: LogFormat,
}

/// `--lease-ttl`: a number with the unit `ms`, `s` or `m`, between 100 ms and 10 minutes.
fn parse_lease_ttl(raw: &str) -> Result<std::time::Duration, String> {
    let raw = raw.trim();
    let (number, unit) = raw.split_at(raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len()));
    let n: u64 = number.parse().map_err(|_| format!("{raw:?}: expected a number with ms, s or m (e.g. 15s)"))?;
    let ttl = match unit {
        "ms" => std::time::Duration::from_millis(n),
        "s" => std::time::Duration::from_secs(n),
        "m" => std::time::Duration::from_secs(n.saturating_mul(60)),
        _ => return Err(format!("{raw:?}: expected a number with ms, s or m (e.g. 15s)")),
    };
    if !(std::time::Duration::from_millis(100)..=std::time::Duration::from_secs(600)).contains(&ttl) {
        return Err(format!("{raw:?}: the lease TTL must be between 100ms and 10m"));
    }
    Ok(ttl)
}

impl Cli {
    /// Opens the store `--store-url` names (default: SQLite in the data directory).
    fn open_store(&self) -> anyhow::Result<std::sync::Arc<dyn instantstart_store::StoreBackend>> {
        instantstart_store::open_store(&self.store_url()?).context("opening the store")
    }

    /// The store `--store-url` names (default: SQLite in the data directory, created).
    fn store_url(&self) -> anyhow::Result<instantstart_store::StoreUrl> {
        Ok(match &self.store_url {
            Some(u) => instantstart_store::StoreUrl::parse(u).context("--store-url")?,
            None => {
                instantstart_server::private_data_dir(&self.data_dir)
                    .with_context(|| format!("creating {}", self.data_dir.display()))?;
                instantstart_server::default_store_url(&self.data_dir)
            }
        })
    }

    /// `--backup-dir`, else `<data-dir>/backups`.
    fn backup_dir(&self) -> PathBuf {
        self.backup_dir.clone().unwrap_or_else(|| instantstart_server::backup::default_dir(&self.data_dir))
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Back the SQLite store up now (online: works while the server runs) into `--to`, keeping
    /// the newest `--backup-keep`. A PostgreSQL store is refused: use pg_dump or RDS snapshots.
    Backup {
        /// Directory for the backup (default: `--backup-dir`, else `<data-dir>/backups`).
        #[arg(long)]
        to: Option<PathBuf>,
    },
}

/// Token management on the server's own store (`--data-dir`); works while the server runs.
#[derive(Subcommand)]
enum TokenCommand {
    /// List tokens (never their secrets).
    List,
    /// Mint a token; it is printed once, only its hash is stored.
    Create {
        /// Name recorded in the audit log (1-64 letters, digits, '-' and '_').
        #[arg(long)]
        name: String,
        /// read (GET requests and streams), workloads (read, and submit or delete jobs, downloads
        /// and endpoints) or operate (everything).
        #[arg(long, default_value = "read")]
        scope: Scope,
        /// When the token stops working (RFC 3339, e.g. 2027-01-31T00:00:00Z).
        #[arg(long)]
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
        /// Bind the token to this Kubernetes user: its workload calls impersonate it, so the
        /// cluster's RBAC decides (needs at least one --namespace).
        #[arg(long, requires = "namespace")]
        kube_user: Option<String>,
        /// A Kubernetes group of the bound user (repeat for several).
        #[arg(long = "kube-group", requires = "kube_user")]
        kube_groups: Vec<String>,
        /// A namespace the bound token's workloads may use (repeat for several).
        #[arg(long = "namespace", requires = "kube_user")]
        namespace: Vec<String>,
        /// A system namespace (`kube-system`, an operator's) the bound token's workloads may use
        /// as well (repeat for several); none unless listed.
        #[arg(long = "system-namespace", requires = "kube_user")]
        system_namespace: Vec<String>,
        /// A service account the bound token's workloads may name (repeat for several); without
        /// it any of the namespace's.
        #[arg(long = "service-account", requires = "kube_user")]
        service_account: Vec<String>,
        /// The cluster the binding is for (default `*`: every cluster).
        #[arg(long, default_value = "*", requires = "kube_user")]
        cluster: String,
    },
    /// Revoke a token: it and every browser session minted from it stop working at once.
    Revoke {
        /// The token's name.
        name: String,
    },
}

/// Runs `instantstart-server token …` on the store in `data_dir`.
fn token_command(cli: &Cli, command: &TokenCommand) -> anyhow::Result<()> {
    use instantstart_core::operation::{Actor, Face};
    let backend = cli.open_store()?;
    let store: &dyn instantstart_core::credentials::CredentialStore = backend.as_ref();
    let actor = Actor { face: Face::Cli, principal: LOCAL_PRINCIPAL.into() };
    match command {
        TokenCommand::List => {
            let tokens = instantstart_server::auth::list_tokens(store)?;
            if tokens.is_empty() {
                eprintln!("no tokens besides the admin token");
            }
            for t in tokens {
                let bindings: Vec<String> = t.kube_bindings.iter().map(|b| b.summary()).collect();
                println!(
                    "{}\t{}\texpires {}\t{}\tcreated {} by {}\t{}",
                    t.name,
                    t.scope,
                    t.expires_at.map(|e| e.to_rfc3339()).unwrap_or_else(|| "never".into()),
                    if t.active { "active" } else { "expired" },
                    t.created_at.to_rfc3339(),
                    t.created_by,
                    if bindings.is_empty() { "unbound".to_string() } else { bindings.join("; ") }
                );
            }
        }
        TokenCommand::Create {
            name,
            scope,
            expires_at,
            kube_user,
            kube_groups,
            namespace,
            system_namespace,
            service_account,
            cluster,
        } => {
            let kube_bindings = kube_user
                .iter()
                .map(|user| instantstart_core::kube_access::KubeBinding {
                    cluster: cluster.clone(),
                    user: user.clone(),
                    groups: kube_groups.clone(),
                    namespaces: namespace.clone(),
                    system_namespaces: system_namespace.clone(),
                    service_accounts: service_account.clone(),
                })
                .collect();
            let req = instantstart_server::auth::CreateTokenRequest {
                name: name.clone(),
                scope: *scope,
                expires_at: *expires_at,
                kube_bindings,
            };
            let minted = instantstart_server::auth::mint_token(store, &req, &actor).context("creating the token")?;
            println!("{}", minted.token);
            eprintln!("token {name:?} (scope {scope}) created; it is shown only once");
        }
        TokenCommand::Revoke { name } => {
            instantstart_server::auth::revoke_token(store, name, &actor).context("revoking the token")?;
            eprintln!("token {name:?} revoked; it and its browser sessions no longer work");
        }
    }
    Ok(())
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,instantstart=info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // One rustls crypto provider for the AWS SDK and the Kubernetes client (aws-lc-rs).
    instantstart_k8s::install_crypto_provider();
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Token { command }) => return token_command(&cli, command),
        Some(Command::Backup { to }) => {
            let dir = to.clone().unwrap_or_else(|| cli.backup_dir());
            let b = instantstart_server::backup::backup_now(&cli.store_url()?, &dir, cli.backup_keep)?;
            println!("{}", b.path.display());
            eprintln!("store backed up ({} bytes); {} older backup(s) removed", b.bytes, b.pruned.len());
            return Ok(());
        }
        None => {}
    }
    init_logs(cli.log_format);
    if !(cli.sim_speed.is_finite() && cli.sim_speed >= 1.0) {
        anyhow::bail!("--sim-speed must be a number >= 1");
    }
    let opts = ServerOptions {
        data_dir: cli.data_dir.clone(),
        provider: cli.provider.into(),
        sim_speed: cli.sim_speed,
        default_region: cli.region.clone(),
        token: std::env::var("INSTANTSTART_TOKEN").ok(),
        shared_bucket: cli.shared_bucket.clone().filter(|b| !b.is_empty()),
        unbound_tokens_any_namespace: cli.unbound_tokens_any_namespace,
        admin_system_namespaces: cli.admin_system_namespaces.clone(),
        eks_public_access_cidrs: cli.eks_public_access_cidrs.clone(),
        http: instantstart_server::HttpOptions {
            allowed_hosts: cli.allowed_hosts.clone(),
            public_metrics: cli.public_metrics,
        },
    };
    for ns in &opts.admin_system_namespaces {
        instantstart_core::kube_access::system_namespace(ns)
            .map_err(|rule| anyhow::anyhow!("--admin-system-namespaces: {rule}"))?;
    }
    for cidr in &opts.eks_public_access_cidrs {
        instantstart_core::names::public_access_cidr(cidr)
            .map_err(|rule| anyhow::anyhow!("--eks-public-access-cidrs: {rule}"))?;
    }
    let aws_opts = instantstart_server::AwsOptions {
        region: Some(cli.region.clone()),
        profile: cli.profile.clone(),
        endpoint_url: cli.aws_endpoint_url.clone(),
        role_boundary_arn: cli.role_boundary_arn.clone().filter(|b| !b.is_empty()),
    };
    let store_url = cli.store_url()?;
    let shared_store = matches!(store_url, instantstart_store::StoreUrl::Postgres(_));
    // With the simulated cloud, replicas on one database share one simulated account.
    let sim_world_url = match store_url {
        instantstart_store::StoreUrl::Postgres(url) if cli.provider == ProviderArg::Sim => Some(url),
        _ => None,
    };
    let replica = instantstart_server::ReplicaOptions {
        id: cli.replica_id.clone(),
        lease_ttl: cli.lease_ttl,
        shared_store,
        sim_world_url,
    };
    let assembled = AppState::assemble_replica(&opts, aws_opts, cli.sim_kube, cli.open_store()?, &replica)
        .context("starting the server")?;
    let state = assembled.state;
    let listener =
        tokio::net::TcpListener::bind(cli.listen).await.with_context(|| format!("binding {}", cli.listen))?;
    let addr = listener.local_addr()?;
    if cli.provider == ProviderArg::Sim {
        eprintln!(
            "\n  InstantStart is running on the SIMULATED cloud (speed {}x): no AWS account is used.\n  {}\n",
            cli.sim_speed,
            if instantstart_server::AWS_PROVIDER_BUILT {
                "Use --provider aws for real AWS."
            } else {
                "For real AWS: cargo run -p instantstart-server --features aws -- --provider aws"
            }
        );
        if let Some(url) = &state.sim_kube_api {
            eprintln!(
                "  Simulated clusters' Kubernetes API: {url}/clusters/<region>/<eks-cluster>\n  e.g. kubectl --server {url}/clusters/us-east-1/<name> get nodes\n"
            );
        }
    } else {
        eprintln!(
            "\n  InstantStart is running on REAL AWS in {} (profile: {}{}).\n",
            cli.region,
            cli.profile.as_deref().unwrap_or("standard credential chain"),
            cli.aws_endpoint_url.as_deref().map(|u| format!(", endpoint {u}")).unwrap_or_default()
        );
    }
    eprintln!("  UI and API: http://{addr}/");
    if !addr.ip().is_loopback() {
        // Review #15: plain HTTP beyond this machine carries tokens and cookies in cleartext.
        tracing::warn!(%addr, "listening beyond loopback over plain HTTP");
        eprintln!(
            "  NOTE: listening on {addr} over plain HTTP. Keep the port on loopback (docker -p 127.0.0.1:3099:3099, as the\n  deployment template does) or put a TLS proxy in front (it should send X-Forwarded-Proto: https).\n"
        );
    }
    // The secret goes to a terminal only (the quick start), never into collected logs.
    let token_file = cli.data_dir.join("token");
    match &assembled.new_admin_token {
        Some(token) if std::io::IsTerminal::is_terminal(&std::io::stderr()) => eprintln!(
            "  API token (created now, saved in {}): {token}\n  Paste it in the UI login, or send 'Authorization: Bearer <token>'.\n",
            token_file.display()
        ),
        Some(_) => {
            eprintln!("  API token: created now and saved in {} (not printed: not a terminal)\n", token_file.display())
        }
        None if shared_store && !token_file.exists() => {
            eprintln!(
                "  API token: the admin token recorded in the shared store (INSTANTSTART_TOKEN of the replica that set it)\n"
            )
        }
        None => eprintln!("  API token: in {} (or INSTANTSTART_TOKEN)\n", token_file.display()),
    }
    let app = instantstart_server::app(state.clone());
    let _backups = match cli.backup_interval {
        Some(every) => {
            let url = cli.store_url()?;
            if url.backend() != "sqlite" {
                anyhow::bail!("--backup-interval: {}", instantstart_store::BackupError::Postgres);
            }
            tracing::info!(every = ?every, dir = %cli.backup_dir().display(), keep = cli.backup_keep, "scheduled store backups");
            let to = cli.shared_bucket.clone().filter(|b| !b.is_empty()).map(|bucket| {
                let s3: std::sync::Arc<dyn instantstart_core::provider::S3Api> = state.aws.clone();
                instantstart_server::backup::Upload { s3, bucket }
            });
            Some(instantstart_server::backup::spawn_schedule(url, cli.backup_dir(), every, cli.backup_keep, to))
        }
        None => None,
    };
    let _archive = (cli.operation_retention_days > 0).then(|| {
        let days = std::time::Duration::from_secs(u64::from(cli.operation_retention_days) * 86_400);
        instantstart_server::archive::spawn_retention(state.store.clone(), days)
    });
    let resumed = state.resume().context("resuming operations")?;
    if resumed > 0 {
        tracing::info!(resumed, "resumed operations left running by the previous process");
    }
    tracing::info!(%addr, provider = ?cli.provider, "listening");
    instantstart_server::serve(listener, app, shutdown_signal()).await;
    // In-flight operations keep their persisted phases and resume on the next start.
    state.engine.abort_all();
    tracing::info!("stopped");
    Ok(())
}
