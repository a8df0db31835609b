//! `instantstart endpoint deploy|ls|get|scale|rm|chat`: inference endpoints.
//!
//! `deploy` takes the API's endpoint request from a file (`-f endpoint.yaml`: `{"route":
//! "self_managed", …}` for a vLLM/SGLang/custom Deployment with its service, router and
//! autoscaling, or `{"route": "managed", …}` for the HyperPod inference operator) or builds a
//! self-managed vLLM/SGLang Deployment from flags (`--volume NAME[:PATH]` and `--model-volume`
//! for the cluster's FSx for Lustre volumes); `--wait` follows it until it is ready.
//! `scale` sends only what changes (explicit diff; `--no-autoscaling` sends `"autoscaling":
//! null`, which removes the ScaledObject and keeps the Deployment at `--replicas` or at the
//! count it has then); `chat` sends an OpenAI chat completion through the control plane and
//! prints the answer.

use super::target::{ClusterOpt, parse_volume, views};
use super::workload::{delete_workload, finish_workload, foreign, foreign_note, push_pods, push_volumes, tagged};
use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Output, Table, s};
use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use instantstart_core::workflow::endpoints::{AutoscalingPatch, EndpointPatch};
use instantstart_recipes::inference::endpoint::decode_request;
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum EndpointCommand {
    /// Deploy an endpoint (self-managed vLLM/SGLang, or managed by the HyperPod inference operator).
    Deploy(Box<DeployArgs>),
    /// List endpoints with readiness, replicas, URL and pool.
    #[command(visible_alias = "list")]
    Ls {
        #[command(flatten)]
        cluster: ClusterOpt,
    },
    /// Show an endpoint with its pods and conditions.
    Get {
        /// Endpoint name.
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
    },
    /// Change replicas or autoscaling bounds, or remove autoscaling; only the flags given are sent.
    Scale(ScaleArgs),
    /// Delete an endpoint and everything deployed for it.
    #[command(visible_alias = "delete")]
    Rm {
        /// Endpoint name.
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
        #[command(flatten)]
        mutation: MutationArgs,
    },
    /// Send a chat completion to the endpoint's model (through the control plane) and print the answer.
    Chat(ChatArgs),
}

/// Serving engine of a self-managed endpoint built from flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    Vllm,
    Sglang,
}

const FLAGS: &str = "Self-managed endpoint (when not using -f)";

#[derive(Args, Debug)]
pub struct DeployArgs {
    #[command(flatten)]
    pub cluster: ClusterOpt,
    /// Read the endpoint request (JSON or YAML: {"route": "self_managed"|"managed", …}) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE", required_unless_present = "engine")]
    pub file: Option<PathBuf>,
    /// Serving engine.
    #[arg(long, value_enum, conflicts_with = "file", requires_all = ["name", "model", "image", "instance_type"], help_heading = FLAGS)]
    pub engine: Option<EngineKind>,
    /// Endpoint name (DNS-1123 label, at most 50 characters).
    #[arg(long, help_heading = FLAGS)]
    pub name: Option<String>,
    /// Namespace.
    #[arg(long, default_value = "default", help_heading = FLAGS)]
    pub namespace: String,
    /// Model directory inside the shared bucket (or the --model-volume), e.g. models/Qwen/Qwen3-0.6B.
    #[arg(long, help_heading = FLAGS)]
    pub model: Option<String>,
    /// Read --model from this FSx for Lustre volume of the cluster instead of the bucket (the
    /// volume is mounted, read-only, also when no --volume names it).
    #[arg(long, value_name = "NAME", help_heading = FLAGS)]
    pub model_volume: Option<String>,
    /// An FSx for Lustre volume of the cluster to mount read-only in every replica, at
    /// /fsx/NAME unless :PATH says otherwise (repeatable).
    #[arg(long = "volume", value_name = "NAME[:PATH]", value_parser = parse_volume, help_heading = FLAGS)]
    pub volumes: Vec<instantstart_recipes::volumes::VolumeMount>,
    /// Serving image (pinned tag or digest).
    #[arg(long, help_heading = FLAGS)]
    pub image: Option<String>,
    /// Instance type of the serving nodes, e.g. ml.g5.2xlarge.
    #[arg(long, help_heading = FLAGS)]
    pub instance_type: Option<String>,
    /// Replicas.
    #[arg(long, default_value_t = 1, help_heading = FLAGS)]
    pub replicas: u32,
    /// GPUs per replica [default: every GPU of the instance type].
    #[arg(long, help_heading = FLAGS)]
    pub gpus: Option<u32>,
    /// Model name clients send [default: the endpoint name].
    #[arg(long, help_heading = FLAGS)]
    pub served_model_name: Option<String>,
    /// Maximum context length.
    #[arg(long, help_heading = FLAGS)]
    pub max_model_len: Option<u32>,
    /// Start the workers in this model pool.
    #[arg(long, help_heading = FLAGS)]
    pub pool: Option<String>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

impl DeployArgs {
    fn body(&self) -> anyhow::Result<Value> {
        if let Some(path) = &self.file {
            return output::read_document(path);
        }
        let kind = match self.engine.expect("clap requires -f or --engine") {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
        };
        let mut engine = json!({ "kind": kind, "model": self.model });
        if let Some(n) = &self.served_model_name {
            engine["served_model_name"] = json!(n);
        }
        if let Some(n) = self.max_model_len {
            engine["max_model_len"] = json!(n);
        }
        let mut params = json!({
            "name": self.name, "namespace": self.namespace, "engine": engine, "image": self.image,
            "instance_type": self.instance_type, "replicas": self.replicas,
        });
        if let Some(g) = self.gpus {
            params["gpus"] = json!(g);
        }
        if let Some(p) = &self.pool {
            params["pool"] = json!(p);
        }
        let mut volumes = self.volumes.clone();
        if let Some(name) = &self.model_volume {
            if !volumes.iter().any(|v| &v.name == name) {
                volumes.push(instantstart_recipes::volumes::VolumeMount {
                    name: name.clone(),
                    mount_path: None,
                    read_only: false,
                });
            }
            params["model_volume"] = json!(name);
        }
        if !volumes.is_empty() {
            params["volumes"] = json!(volumes);
        }
        let body = tagged("route", "self_managed", params);
        // Decoded as the server decodes it, so a bad flag is refused here with its field.
        decode_request(&body).map_err(|e| usage(format!("endpoint: {e}")))?;
        Ok(body)
    }
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("change").required(true).multiple(true).args(["replicas", "min", "max", "cooldown", "no_autoscaling"])))]
pub struct ScaleArgs {
    /// Endpoint name.
    pub name: String,
    #[command(flatten)]
    pub cluster: ClusterOpt,
    /// Replicas (without autoscaling, or with --no-autoscaling).
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// Remove autoscaling: the ScaledObject is deleted and the Deployment keeps --replicas, or
    /// the replicas it has at that moment (the plan shows the count).
    #[arg(long, conflicts_with_all = ["min", "max", "cooldown"])]
    pub no_autoscaling: bool,
    /// Autoscaling: fewest replicas (0 scales to zero when idle).
    #[arg(long, value_name = "N")]
    pub min: Option<u32>,
    /// Autoscaling: most replicas.
    #[arg(long, value_name = "N")]
    pub max: Option<u32>,
    /// Autoscaling: seconds after the last activity before scaling down to --min.
    #[arg(long, value_name = "SECONDS")]
    pub cooldown: Option<u32>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

impl ScaleArgs {
    /// The explicit-diff patch (the API's `EndpointPatch`): only the flags given; unset fields
    /// are left out, and `--no-autoscaling` is `"autoscaling": null` (merge-patch removal).
    fn patch(&self) -> anyhow::Result<Value> {
        let any = self.min.is_some() || self.max.is_some() || self.cooldown.is_some();
        let autoscaling = if self.no_autoscaling {
            Some(None)
        } else {
            any.then_some(Some(AutoscalingPatch {
                min_replicas: self.min,
                max_replicas: self.max,
                cooldown_seconds: self.cooldown,
            }))
        };
        let patch = EndpointPatch { replicas: self.replicas, autoscaling };
        Ok(serde_json::to_value(patch)?)
    }
}

#[derive(Args, Debug)]
pub struct ChatArgs {
    /// Endpoint name.
    pub name: String,
    /// The user message (words are joined with spaces).
    #[arg(required_unless_present = "file", num_args = 1..)]
    pub message: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterOpt,
    /// A system message sent first.
    #[arg(long)]
    pub system: Option<String>,
    /// Most tokens to generate.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Model name to send [default: the endpoint's served model].
    #[arg(long)]
    pub model: Option<String>,
    /// Send this OpenAI chat-completions request (JSON or YAML) as is, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with_all = ["message", "system"])]
    pub file: Option<PathBuf>,
}

impl ChatArgs {
    fn request(&self) -> anyhow::Result<Value> {
        if let Some(path) = &self.file {
            return output::read_document(path);
        }
        let mut messages = vec![];
        if let Some(sys) = &self.system {
            messages.push(json!({ "role": "system", "content": sys }));
        }
        messages.push(json!({ "role": "user", "content": self.message.join(" ") }));
        let mut req = json!({ "messages": messages });
        if let Some(m) = &self.model {
            req["model"] = json!(m);
        }
        if let Some(n) = self.max_tokens {
            req["max_tokens"] = json!(n);
        }
        if let Some(t) = self.temperature {
            req["temperature"] = json!(t);
        }
        Ok(req)
    }
}

/// The answer text of a chat completion (`choices[0].message.content`).
pub fn answer(response: &Value) -> Option<&str> {
    response.pointer("/choices/0/message/content").and_then(Value::as_str)
}

fn replicas(e: &Value) -> String {
    format!("{}/{}", s(e, "replicas.ready"), s(e, "replicas.desired"))
}

pub async fn run(g: &Globals, cmd: EndpointCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        EndpointCommand::Deploy(args) => {
            let body = args.body()?;
            let cluster = args.cluster.resolve(&client).await?;
            let submitted = client.deploy_endpoint(&cluster, &body, &args.mutation.options()).await?;
            finish_workload(g, &client, submitted, args.mutation.wait).await
        }
        EndpointCommand::Ls { cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let eps = views(client.list_endpoints(&cluster).await?)?;
            output::emit(g.output, &eps, || {
                let mut t =
                    Table::new(&["NAME", "ROUTE", "ENGINE", "MODEL", "READY", "REPLICAS", "POOL", "URL", "FOREIGN"]);
                for e in &eps {
                    t.row(vec![
                        s(e, "name"),
                        s(e, "route"),
                        s(e, "engine"),
                        s(e, "model"),
                        s(e, "ready"),
                        replicas(e),
                        s(e, "pool"),
                        s(e, "url"),
                        foreign(e),
                    ]);
                }
                t.render_or(&format!(
                    "No endpoints on {cluster}. Deploy one with: instantstart endpoint deploy -f endpoint.yaml"
                ))
            })?;
            Ok(Exit::Ok)
        }
        EndpointCommand::Get { name, cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let e = serde_json::to_value(client.get_endpoint(&cluster, &name).await?)?;
            output::emit(g.output, &e, || {
                let autoscaling = match e.get("autoscaling").filter(|a| a.is_object()) {
                    Some(a) => format!(
                        "{}-{} replicas, cooldown {} s, metric {}",
                        s(a, "min"),
                        s(a, "max"),
                        s(a, "cooldown_seconds"),
                        s(a, "metric")
                    ),
                    None => "off".into(),
                };
                let mut out = output::fields(&[
                    ("Endpoint", format!("{}/{}", s(&e, "namespace"), s(&e, "name"))),
                    ("Route", s(&e, "route")),
                    ("Engine", s(&e, "engine")),
                    ("Foreign", foreign_note(&e)),
                    ("Model", s(&e, "model")),
                    ("Ready", s(&e, "ready")),
                    ("Replicas", format!("{} ready", replicas(&e))),
                    ("URL", s(&e, "url")),
                    ("Exposure", s(&e, "exposure")),
                    ("Pool", s(&e, "pool")),
                    ("Router", s(&e, "router")),
                    ("Autoscaling", autoscaling),
                    ("Created", s(&e, "created_at")),
                ]);
                push_volumes(&mut out, &e);
                push_pods(&mut out, &e);
                out
            })?;
            Ok(Exit::Ok)
        }
        EndpointCommand::Scale(args) => {
            let cluster = args.cluster.resolve(&client).await?;
            let patch = args.patch()?;
            mutation::submit_diff(g, &client, &args.mutation, |opts| {
                let (client, patch, cluster, name) = (&client, &patch, &cluster, &args.name);
                async move { client.update_endpoint(cluster, name, patch, &opts).await }
            })
            .await
        }
        EndpointCommand::Rm { name, cluster, yes, mutation: m } => {
            let cluster = cluster.resolve(&client).await?;
            let question = format!("Delete endpoint {name} on {cluster} and everything deployed for it?");
            delete_workload(g, &client, "endpoint", &name, &question, yes, &m, |opts| {
                let (client, cluster, name) = (&client, &cluster, &name);
                async move { client.delete_endpoint(cluster, name, &opts).await }
            })
            .await
        }
        EndpointCommand::Chat(args) => {
            let request = args.request()?;
            if request.get("messages").and_then(Value::as_array).is_none_or(Vec::is_empty) {
                return Err(usage("messages: the request needs at least one message"));
            }
            let cluster = args.cluster.resolve(&client).await?;
            let response = client.chat_endpoint(&cluster, &args.name, &request).await?;
            match (g.output, answer(&response)) {
                (Output::Table, Some(text)) => output::write_stdout(&format!("{}\n", text.trim_end()))?,
                _ => output::emit(g.output, &response, || serde_json::to_string_pretty(&response).unwrap_or_default())?,
            }
            Ok(Exit::Ok)
        }
    }
}
