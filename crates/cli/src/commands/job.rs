//! `instantstart job submit|ls|get|rm|logs`: training jobs on a cluster.
//!
//! `submit` takes the API's job request from a file (`-f spec.yaml`: `{"runtime": "hyperpod",
//! …HyperPodJobParams}` or `{"runtime": "ray", …RayJobParams}`) or builds it from flags per
//! recipe (`--recipe torch|llama-factory|ms-swift|verl`, `--volume NAME[:PATH]` mounting the
//! cluster's FSx for Lustre volumes); `--dry-run` prints the plan and the
//! manifests that would be applied. `get` shows the recovery budget (used / budget) of
//! HyperPod jobs; `logs -f` follows the job's log stream over WebSocket until its pods end,
//! reconnecting when the connection drops (no line printed twice; a gap is said on stderr).

use super::target::{ClusterOpt, api_enum, parse_key_value, parse_volume, typed, views};
use super::workload::{delete_workload, finish_workload, foreign, foreign_note, push_pods, push_volumes, tagged};
use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::mutation::MutationArgs;
use crate::output::{self, Output, Table, s};
use clap::{Args, Subcommand, ValueEnum};
use instantstart_client::{LogEvent, ReconnectPolicy};
use instantstart_recipes::TrainingJobRequest;
use instantstart_recipes::training::hyperpod::SwiftCommand;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum JobCommand {
    /// Submit a training job (HyperPodPyTorchJob or RayJob) from a spec file or per recipe.
    Submit(Box<SubmitArgs>),
    /// List training jobs with phase, pods and recovery budget.
    #[command(visible_alias = "list")]
    Ls {
        #[command(flatten)]
        cluster: ClusterOpt,
    },
    /// Show a job: phase, recovery budget, pods, conditions and events.
    Get {
        /// Job name.
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
    },
    /// Delete a job and its pods.
    #[command(visible_alias = "delete")]
    Rm {
        /// Job name.
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
        #[command(flatten)]
        mutation: MutationArgs,
    },
    /// Print a job's log (rank 0 unless --pod); -f follows it until the pods end.
    Logs {
        /// Job name.
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
        /// Pod to read [default: rank 0, the first pod].
        #[arg(long)]
        pod: Option<String>,
        /// Lines from the end to start with.
        #[arg(long, value_name = "N")]
        tail: Option<u32>,
        /// Follow the log (WebSocket) until the job's pods end.
        #[arg(short = 'f', long)]
        follow: bool,
    },
}

/// A training recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Recipe {
    /// A plain PyTorch script (HyperPod training operator).
    Torch,
    /// LLaMA-Factory with a YAML config (HyperPod training operator).
    LlamaFactory,
    /// MS-Swift (HyperPod training operator).
    MsSwift,
    /// VERL reinforcement learning (KubeRay RayJob).
    Verl,
}

const RECIPE: &str = "Recipe (when not using -f)";
const RESILIENCE: &str = "Recovery budget (HyperPod recipes)";

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub cluster: ClusterOpt,
    /// Read the job request (JSON or YAML: {"runtime": "hyperpod"|"ray", …}) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE", required_unless_present = "recipe")]
    pub file: Option<PathBuf>,
    /// Recipe to build the request from flags.
    #[arg(long, value_enum, conflicts_with = "file", requires_all = ["name", "image", "instance_type"], help_heading = RECIPE)]
    pub recipe: Option<Recipe>,
    /// Job name (DNS-1123 label, at most 50 characters).
    #[arg(long, help_heading = RECIPE)]
    pub name: Option<String>,
    /// Namespace of the job [default: hyperpod-ns-<team> with --team, else default].
    #[arg(long, help_heading = RECIPE)]
    pub namespace: Option<String>,
    /// Task governance team whose queue the job waits in (its quota decides when it runs).
    #[arg(long, help_heading = RECIPE)]
    pub team: Option<String>,
    /// Priority class of the cluster's task governance (with --team).
    #[arg(long, requires = "team", help_heading = RECIPE)]
    pub priority: Option<String>,
    /// Training image (pinned tag or digest).
    #[arg(long, help_heading = RECIPE)]
    pub image: Option<String>,
    /// HyperPod instance type of the nodes, e.g. ml.g5.8xlarge.
    #[arg(long, help_heading = RECIPE)]
    pub instance_type: Option<String>,
    /// Number of nodes (one pod per node).
    #[arg(long, default_value_t = 1, help_heading = RECIPE)]
    pub nodes: u32,
    /// GPUs per node [default: every GPU of the instance type].
    #[arg(long, help_heading = RECIPE)]
    pub gpus_per_node: Option<u32>,
    /// Do not attach the instance type's EFA interfaces.
    #[arg(long, help_heading = RECIPE)]
    pub no_efa: bool,
    /// torch: the script, relative to the shared bucket.
    #[arg(long, help_heading = RECIPE)]
    pub script: Option<String>,
    /// llama-factory, ms-swift, verl: the config file, relative to the shared bucket.
    #[arg(long, help_heading = RECIPE)]
    pub config: Option<String>,
    /// torch, ms-swift: an argument of the script (repeatable).
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true, help_heading = RECIPE)]
    pub args: Vec<String>,
    /// llama-factory, verl: a KEY=VALUE override (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE", value_parser = parse_key_value, help_heading = RECIPE)]
    pub overrides: Vec<(String, String)>,
    /// ms-swift: the entry point (sft, pt or rlhf).
    #[arg(long, value_name = "COMMAND", value_parser = api_enum::<SwiftCommand>, help_heading = RECIPE)]
    pub swift_command: Option<SwiftCommand>,
    /// verl: Ray version of the image, e.g. 2.49.0.
    #[arg(long, help_heading = RECIPE)]
    pub ray_version: Option<String>,
    /// An FSx for Lustre volume of the cluster to mount in every pod, at /fsx/NAME unless
    /// :PATH says otherwise (repeatable; `storage ls` lists the volumes).
    #[arg(long = "volume", value_name = "NAME[:PATH]", value_parser = parse_volume, help_heading = RECIPE)]
    pub volumes: Vec<instantstart_recipes::volumes::VolumeMount>,
    /// SageMaker managed MLflow tracking server ARN to report to.
    #[arg(long, value_name = "ARN", help_heading = RECIPE)]
    pub mlflow_arn: Option<String>,
    /// MLflow experiment [default: the job name].
    #[arg(long, requires = "mlflow_arn", help_heading = RECIPE)]
    pub experiment: Option<String>,
    /// In-place process restarts per evaluation window before a full job restart.
    #[arg(long, value_name = "N", help_heading = RESILIENCE)]
    pub restarts: Option<u32>,
    /// Full job restarts allowed.
    #[arg(long, value_name = "N", help_heading = RESILIENCE)]
    pub full_restarts: Option<u32>,
    /// Retries of the whole job.
    #[arg(long, value_name = "N", help_heading = RESILIENCE)]
    pub retries: Option<u32>,
    /// Checkpoint through HyperPod's managed tiered checkpointing (the pods run as its service
    /// account; namespace default, the cluster feature on).
    #[arg(long, help_heading = RESILIENCE)]
    pub tiered_checkpointing: bool,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

fn need<'a>(v: &'a Option<String>, flag: &str, recipe: &str) -> anyhow::Result<&'a String> {
    v.as_ref().ok_or_else(|| usage(format!("--{flag} is required with --recipe {recipe}")))
}

impl SubmitArgs {
    /// The API request: the file as is, or the recipe's typed parameters with `runtime`.
    pub fn body(&self) -> anyhow::Result<Value> {
        if let Some(path) = &self.file {
            return output::read_document(path);
        }
        let recipe = self.recipe.expect("clap requires -f or --recipe");
        let namespace = match (&self.namespace, &self.team) {
            (Some(ns), _) => ns.clone(),
            (None, Some(team)) => instantstart_core::governance::team_namespace(team),
            (None, None) => "default".to_string(),
        };
        let mut job = json!({
            "name": self.name, "namespace": namespace, "image": self.image,
            "instance_type": self.instance_type, "nodes": self.nodes, "efa": !self.no_efa,
        });
        if let Some(t) = &self.team {
            job["team"] = json!(t);
        }
        if let Some(p) = &self.priority {
            job["priority"] = json!(p);
        }
        if let Some(g) = self.gpus_per_node {
            job["gpus_per_node"] = json!(g);
        }
        if !self.volumes.is_empty() {
            job["volumes"] = json!(self.volumes);
        }
        if let Some(arn) = &self.mlflow_arn {
            job["mlflow"] = json!({ "tracking_server_arn": arn });
            if let Some(e) = &self.experiment {
                job["mlflow"]["experiment"] = json!(e);
            }
        }
        let overrides: Map<String, Value> = self.overrides.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let (runtime, params) = match recipe {
            Recipe::Torch => {
                let script = need(&self.script, "script", "torch")?;
                let r = json!({ "kind": "torch", "script": script, "args": self.args });
                ("hyperpod", self.hyperpod(job, r))
            }
            Recipe::LlamaFactory => {
                let config = need(&self.config, "config", "llama-factory")?;
                let r = json!({ "kind": "llama_factory", "config": config, "overrides": overrides });
                ("hyperpod", self.hyperpod(job, r))
            }
            Recipe::MsSwift => {
                let mut r = json!({ "kind": "ms_swift", "args": self.args });
                if let Some(c) = &self.config {
                    r["config"] = json!(c);
                }
                if let Some(c) = self.swift_command {
                    r["command"] = json!(c);
                }
                ("hyperpod", self.hyperpod(job, r))
            }
            Recipe::Verl => {
                let ray_version = need(&self.ray_version, "ray-version", "verl")?;
                let mut r = json!({ "kind": "verl", "overrides": overrides });
                if let Some(c) = &self.config {
                    r["config"] = json!(c);
                }
                ("ray", json!({ "job": job, "recipe": r, "ray_version": ray_version }))
            }
        };
        typed::<TrainingJobRequest>(tagged("runtime", runtime, params), "job")
    }

    fn hyperpod(&self, job: Value, recipe: Value) -> Value {
        let mut v = json!({ "job": job, "recipe": recipe });
        let mut budget = Map::new();
        if let Some(n) = self.restarts {
            budget.insert("restarts_before_full_job_restart".into(), json!(n));
        }
        if let Some(n) = self.full_restarts {
            budget.insert("max_full_job_restarts".into(), json!(n));
        }
        if !budget.is_empty() || self.retries.is_some() {
            v["resilience"] = json!({ "restart_policy": budget });
            if let Some(n) = self.retries {
                v["resilience"]["job_max_retry_count"] = json!(n);
            }
        }
        if self.tiered_checkpointing {
            v["tiered_checkpointing"] = json!(true);
        }
        v
    }
}

/// The admission column: `admitted (research/training)`, `-` when the job names no queue.
pub fn admission(v: &Value) -> String {
    match v.get("admission").filter(|a| a.is_object()) {
        Some(a) => {
            let who = [s(a, "team"), s(a, "priority")].into_iter().filter(|x| x != "-").collect::<Vec<_>>().join("/");
            if who.is_empty() { s(a, "state") } else { format!("{} ({who})", s(a, "state")) }
        }
        None => "-".into(),
    }
}

/// The admission of a job in words: state, team and priority, Kueue's reason and message.
fn admission_detail(v: &Value) -> String {
    let Some(a) = v.get("admission").filter(|a| a.is_object()) else { return "- (names no team queue)".into() };
    let mut out = format!("{}, queue {}", admission(v), s(a, "queue"));
    if a.get("team_borrowed").is_some_and(|b| b.as_u64().unwrap_or(0) > 0) {
        out.push_str(&format!("; the team borrows {} accelerators", s(a, "team_borrowed")));
    }
    if let Some(m) = a.get("message").and_then(Value::as_str) {
        out.push_str(&format!("\n  {}: {m}", s(a, "reason")));
    }
    out
}

/// `used/budget` of a recovery budget, `-` when the job has none.
pub fn recovery(v: &Value) -> String {
    match v.get("recovery").filter(|r| r.is_object()) {
        Some(r) => format!("{}/{} used", s(r, "used"), s(r, "budget")),
        None => "-".into(),
    }
}

pub async fn run(g: &Globals, cmd: JobCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        JobCommand::Submit(args) => {
            let body = args.body()?;
            let cluster = args.cluster.resolve(&client).await?;
            let submitted = client.submit_job(&cluster, &body, &args.mutation.options()).await?;
            finish_workload(g, &client, submitted, args.mutation.wait).await
        }
        JobCommand::Ls { cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let jobs = views(client.list_jobs(&cluster).await?)?;
            output::emit(g.output, &jobs, || {
                let mut t = Table::new(&[
                    "NAME",
                    "RUNTIME",
                    "RECIPE",
                    "PHASE",
                    "ADMISSION",
                    "PODS",
                    "RECOVERY",
                    "CREATED",
                    "FOREIGN",
                ]);
                for j in &jobs {
                    t.row(vec![
                        s(j, "name"),
                        s(j, "runtime"),
                        s(j, "recipe"),
                        s(j, "phase"),
                        admission(j),
                        format!("{}/{} running", s(j, "pods.running"), s(j, "replicas")),
                        recovery(j),
                        s(j, "created_at"),
                        foreign(j),
                    ]);
                }
                t.render_or(&format!(
                    "No training jobs on {cluster}. Submit one with: instantstart job submit -f job.yaml"
                ))
            })?;
            Ok(Exit::Ok)
        }
        JobCommand::Get { name, cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let job = serde_json::to_value(client.get_job(&cluster, &name).await?)?;
            output::emit(g.output, &job, || render_job(&job))?;
            Ok(Exit::Ok)
        }
        JobCommand::Rm { name, cluster, yes, mutation: m } => {
            let cluster = cluster.resolve(&client).await?;
            let question = format!("Delete training job {name} on {cluster} and its pods?");
            delete_workload(g, &client, "job", &name, &question, yes, &m, |opts| {
                let (client, cluster, name) = (&client, &cluster, &name);
                async move { client.delete_job(cluster, name, &opts).await }
            })
            .await
        }
        JobCommand::Logs { name, cluster, pod, tail, follow } => {
            let cluster = cluster.resolve(&client).await?;
            if !follow {
                let logs = client.job_logs(&cluster, &name, pod.as_deref(), tail).await?;
                output::emit(g.output, &logs, || logs.lines.iter().map(|l| format!("{l}\n")).collect())?;
                return Ok(Exit::Ok);
            }
            follow_logs(g, &client, &cluster, &name, pod.as_deref(), tail).await
        }
    }
}

/// Prints log lines as they arrive (one JSON object per line with `-o json|yaml`) until the
/// stream's end message; the reason goes to stderr.
async fn follow_logs(
    g: &Globals,
    client: &instantstart_client::Client,
    cluster: &str,
    job: &str,
    pod: Option<&str>,
    tail: Option<u32>,
) -> anyhow::Result<Exit> {
    // A dropped connection (a server restart, a network blip) is reopened for up to two minutes
    // without printing a line twice; stderr says when it happened and whether lines may be missing.
    let mut stream = client.follow_job_logs_resuming(cluster, job, pod, tail, ReconnectPolicy::default()).await?;
    loop {
        let event = tokio::select! {
            e = stream.next() => e,
            _ = tokio::signal::ctrl_c() => return Err(crate::exit::Interrupted.into()),
        };
        let Some(event) = event else { return Ok(Exit::Ok) };
        let event = event?;
        match (&event, g.output) {
            (LogEvent::Line { line, .. }, Output::Table) => output::write_stdout(&format!("{line}\n"))?,
            (LogEvent::End { reason, .. }, Output::Table) => {
                eprintln!("-- end of log{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default());
            }
            (LogEvent::Skipped { skipped, unit }, Output::Table) => {
                eprintln!(
                    "-- the server skipped {skipped} {} of lines (this reader fell behind)",
                    unit.as_deref().unwrap_or("frames")
                );
            }
            (LogEvent::Reconnected { gap, .. }, Output::Table) => eprintln!(
                "-- reconnected to the log stream{}",
                if *gap { "; lines written while disconnected may be missing" } else { "" }
            ),
            (e, _) => output::write_stdout(&format!("{}\n", serde_json::to_string(e)?))?,
        }
    }
}

fn render_job(job: &Value) -> String {
    let mut out = output::fields(&[
        ("Job", format!("{}/{}", s(job, "namespace"), s(job, "name"))),
        ("Runtime", s(job, "runtime")),
        ("Recipe", s(job, "recipe")),
        ("Phase", s(job, "phase")),
        ("Admission", admission_detail(job)),
        (
            "Pods",
            format!(
                "{} nodes: {} running, {} pending, {} succeeded, {} failed",
                s(job, "replicas"),
                s(job, "pods.running"),
                s(job, "pods.pending"),
                s(job, "pods.succeeded"),
                s(job, "pods.failed")
            ),
        ),
        (
            "Recovery budget",
            match job.get("recovery").filter(|r| r.is_object()) {
                Some(r) => format!("{} of {} used, {} left", s(r, "used"), s(r, "budget"), s(r, "remaining")),
                None => "- (not a HyperPod job)".into(),
            },
        ),
        ("MLflow", s(job, "mlflow_tracking_arn")),
        ("Created", s(job, "created_at")),
        ("Message", s(job, "message")),
        ("Foreign", foreign_note(job)),
    ]);
    push_volumes(&mut out, job);
    push_pods(&mut out, job);
    if let Some(conds) = job.get("conditions").and_then(Value::as_array).filter(|c| !c.is_empty()) {
        let mut t = Table::new(&["CONDITION", "STATUS", "REASON", "MESSAGE"]);
        for c in conds {
            t.row(vec![s(c, "type"), s(c, "status"), s(c, "reason"), s(c, "message")]);
        }
        out.push('\n');
        out.push_str(&t.render_or(""));
    }
    if let Some(events) = job.get("events").and_then(Value::as_array).filter(|e| !e.is_empty()) {
        let mut t = Table::new(&["TYPE", "REASON", "OBJECT", "MESSAGE"]);
        for e in events.iter().rev().take(10).rev() {
            t.row(vec![s(e, "type"), s(e, "reason"), s(e, "object"), s(e, "message")]);
        }
        out.push('\n');
        out.push_str(&t.render_or(""));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admission_column_names_state_team_and_priority() {
        let cases = [
            (json!({}), "-"),
            (json!({ "admission": { "state": "queued", "queue": "q" } }), "queued"),
            (
                json!({ "admission": { "state": "admitted", "team": "research", "priority": "training" } }),
                "admitted (research/training)",
            ),
            (json!({ "admission": { "state": "preempted", "team": "prod" } }), "preempted (prod)"),
        ];
        for (job, want) in cases {
            assert_eq!(admission(&job), want, "{job}");
        }
        let detail = admission_detail(&json!({ "admission": {
            "state": "preempted", "team": "research", "queue": "hyperpod-ns-research-localqueue", "team_borrowed": 2,
            "reason": "InClusterQueue", "message": "Preempted to accommodate a higher priority workload" } }));
        assert!(detail.contains("queue hyperpod-ns-research-localqueue; the team borrows 2"), "{detail}");
        assert!(detail.contains("InClusterQueue: Preempted to accommodate"), "{detail}");
    }
}
