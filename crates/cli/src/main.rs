//! `instantstart`: the command line face of InstantStart.
//!
//! A thin translation layer over the REST API (through `instantstart-client`): it parses
//! flags into the API's typed requests, prints responses as tables, JSON or YAML, and follows
//! operations with a live progress display. It holds no business rules: every request is
//! validated by the server, whose findings are printed field by field.
//!
//! Layout: one module per API noun under [`commands`], each exporting a clap subcommand type
//! and a `run` function; shared plumbing lives in [`app`] (connection settings), [`output`]
//! (formats and tables), [`mutation`] (dry run / wait / idempotency), [`progress`] (following an
//! operation) and [`exit`] (exit codes and error reports).

mod app;
mod commands;
mod exit;
mod mutation;
mod output;
mod progress;

use app::Globals;
use clap::{Parser, Subcommand};
use commands::{
    agent, audit, cluster, completions, context, endpoint, feature, governance, instance_group, job, login, metrics,
    mlflow, model, node, operation, pool, sim, storage, token,
};
use exit::Exit;

/// Exit codes, shown in `--help` and docs/cli.md.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the operation failed (or needs attention, or was cancelled); any other error
  2  usage or validation error (bad flags, HTTP 400/404/422: the findings are printed)
  3  authentication or connection error (HTTP 401/403, server unreachable)
  4  conflict (HTTP 409: another operation is changing the target, or an idempotency key was reused)
  130  interrupted while waiting (the operation keeps running on the server)

Configuration:
  --url / INSTANTSTART_URL      server (default: the last login's, else http://127.0.0.1:3099)
  --token / INSTANTSTART_TOKEN  API token (default: the token saved by `instantstart login` for that server)
  Config file: $INSTANTSTART_CONFIG, $XDG_CONFIG_HOME/instantstart/config.json or ~/.config/instantstart/config.json";

#[derive(Parser)]
#[command(
    name = "instantstart",
    version,
    about = "Command line for InstantStart, the control plane for SageMaker HyperPod on EKS",
    long_about = None,
    after_help = EXIT_CODES,
    propagate_version = true,
)]
pub struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create, import, list, inspect, select and delete clusters.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Add, scale and delete the HyperPod instance groups of a cluster.
    #[command(subcommand)]
    InstanceGroup(instance_group::InstanceGroupCommand),
    /// List nodes and reboot, replace or delete them (investigate → reboot → replace).
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Show and switch managed features: operators, tiered checkpointing, autoscaling.
    #[command(subcommand)]
    Feature(feature::FeatureCommand),
    /// Show and set task governance: teams, their GPU quotas, priority classes.
    #[command(subcommand)]
    Governance(governance::GovernanceCommand),
    /// List the cluster's shared S3 storage and browse the bucket.
    #[command(subcommand)]
    Storage(storage::StorageCommand),
    /// Download Hugging Face models into the shared bucket; list downloads.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Submit, list, inspect, delete training jobs and follow their logs.
    #[command(subcommand)]
    Job(job::JobCommand),
    /// Deploy, list, scale, delete and chat with inference endpoints.
    #[command(subcommand)]
    Endpoint(endpoint::EndpointCommand),
    /// List model pools and move warm workers between endpoints.
    #[command(subcommand)]
    Pool(pool::PoolCommand),
    /// GPU utilization, GPU memory and training throughput over time, of a node or a job.
    #[command(subcommand)]
    Metrics(metrics::MetricsCommand),
    /// Training history: MLflow tracking servers, runs and their loss/throughput curves.
    #[command(subcommand)]
    Mlflow(mlflow::MlflowCommand),
    /// Follow, inspect, retry and cancel operations.
    #[command(subcommand)]
    Operation(operation::OperationCommand),
    /// Show the provider, identity and active cluster; list zones and instance types.
    Context(context::ContextArgs),
    /// Show the audit log: who did what, when, through which face.
    Audit(audit::AuditArgs),
    /// Simulated cloud only: API call counters and fault injection.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// List, mint and revoke API tokens (admin token only).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Check an API token against the server and save it for later commands.
    Login(login::LoginArgs),
    /// Forget the saved token of a server.
    Logout,
    /// Install the hypd-inst-agent configuration and the skills into a workspace.
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
}

async fn run(cli: Cli) -> anyhow::Result<Exit> {
    let g = &cli.globals;
    match cli.command {
        Command::Cluster(cmd) => cluster::run(g, cmd).await,
        Command::InstanceGroup(cmd) => instance_group::run(g, cmd).await,
        Command::Node(cmd) => node::run(g, cmd).await,
        Command::Feature(cmd) => feature::run(g, cmd).await,
        Command::Governance(cmd) => governance::run(g, cmd).await,
        Command::Storage(cmd) => storage::run(g, cmd).await,
        Command::Model(cmd) => model::run(g, cmd).await,
        Command::Job(cmd) => job::run(g, cmd).await,
        Command::Endpoint(cmd) => endpoint::run(g, cmd).await,
        Command::Pool(cmd) => pool::run(g, cmd).await,
        Command::Metrics(cmd) => metrics::run(g, cmd).await,
        Command::Mlflow(cmd) => mlflow::run(g, cmd).await,
        Command::Operation(cmd) => operation::run(g, cmd).await,
        Command::Context(args) => context::run(g, args).await,
        Command::Audit(args) => audit::run(g, args).await,
        Command::Sim(cmd) => sim::run(g, cmd).await,
        Command::Token(cmd) => token::run(g, cmd).await,
        Command::Login(args) => login::login(g, args).await,
        Command::Logout => login::logout(g),
        Command::Agent(cmd) => agent::run(g, cmd),
        Command::Completions(args) => completions::run(args),
    }
}

/// `print!` panics when stdout is a closed pipe (`instantstart job logs | head -1`): exit
/// quietly instead, as other command line tools do. Output written through
/// [`output::write_stdout`] reports the broken pipe as an error instead, handled by
/// [`exit::report`] the same way.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> std::process::ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Failed.into();
        }
    };
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => exit::report(&e),
    };
    code.into()
}
