//! `instantstart model download|ls|rm`: copy a Hugging Face repository into the shared bucket
//! with a cluster Job (the token comes from a Kubernetes Secret, never from the command line),
//! list those downloads, and delete one (its Job and pods; the downloaded files stay in the
//! bucket). The Job name printed is the real one.

use super::target::{ClusterOpt, api_enum, parse_secret_ref, typed, views};
use super::workload::delete_workload;
use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Table, s};
use clap::{Args, Subcommand};
use instantstart_recipes::common::SecretKeyRef;
use instantstart_recipes::download::{HfRepoType, ModelDownloadParams};
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Download a Hugging Face model (or dataset) into the shared bucket as a cluster Job.
    Download(Box<DownloadArgs>),
    /// List model downloads with their phase.
    #[command(visible_alias = "list")]
    Ls {
        #[command(flatten)]
        cluster: ClusterOpt,
    },
    /// Delete a download: its Job and pods (a running download stops). The files already
    /// downloaded stay in the shared bucket.
    #[command(visible_alias = "delete")]
    Rm {
        /// Download name (the Job name, as `model ls` shows it).
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
        #[command(flatten)]
        mutation: MutationArgs,
    },
}

#[derive(Args, Debug)]
pub struct DownloadArgs {
    /// Repository id, e.g. Qwen/Qwen3-0.6B.
    #[arg(required_unless_present = "file")]
    pub repo_id: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterOpt,
    /// Namespace of the Job (where the shared claim and the token Secret live).
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Repository type: model or dataset.
    #[arg(long, value_name = "TYPE", value_parser = api_enum::<HfRepoType>, default_value = "model")]
    pub repo_type: HfRepoType,
    /// Branch, tag or commit [default: the default branch].
    #[arg(long)]
    pub revision: Option<String>,
    /// Path inside the bucket (or the volume) [default: models/<repo_id> or datasets/<repo_id>].
    #[arg(long)]
    pub destination: Option<String>,
    /// Download into this FSx for Lustre volume of the cluster instead of the shared bucket.
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
    /// Hugging Face token for gated or private repositories, as SECRET/KEY of a Kubernetes Secret.
    #[arg(long, value_name = "SECRET/KEY", value_parser = parse_secret_ref)]
    pub hf_token_secret: Option<SecretKeyRef>,
    /// Read the request (JSON or YAML, the API's ModelDownloadParams) from a file, `-` for stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with = "repo_id")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

impl DownloadArgs {
    fn body(&self) -> anyhow::Result<Value> {
        if let Some(path) = &self.file {
            return output::read_document(path);
        }
        let mut v = json!({
            "namespace": self.namespace,
            "repo_id": self.repo_id.clone().unwrap_or_default(),
            "repo_type": self.repo_type,
        });
        if let Some(r) = &self.revision {
            v["revision"] = json!(r);
        }
        if let Some(d) = &self.destination {
            v["destination"] = json!(d);
        }
        if let Some(vol) = &self.volume {
            v["volume"] = json!(vol);
        }
        if let Some(t) = &self.hf_token_secret {
            v["hf_token"] = serde_json::to_value(t)?;
        }
        typed::<ModelDownloadParams>(v, "download")
    }
}

pub async fn run(g: &Globals, cmd: ModelCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        ModelCommand::Download(args) => {
            let body = args.body()?;
            let cluster = args.cluster.resolve(&client).await?;
            let submitted = client.download_model(&cluster, &body, &args.mutation.options()).await?;
            if let Some(w) = submitted.raw().get("workload").filter(|_| g.output == output::Output::Table) {
                eprintln!("Download job: {}/{}", s(w, "namespace"), s(w, "name"));
            }
            mutation::finish(g, &client, submitted, args.mutation.wait).await
        }
        ModelCommand::Ls { cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let downloads = views(client.list_downloads(&cluster).await?)?;
            output::emit(g.output, &downloads, || {
                let mut t = Table::new(&["NAME", "REPO", "DESTINATION", "PHASE", "STARTED", "MESSAGE"]);
                for d in &downloads {
                    t.row(vec![
                        s(d, "name"),
                        s(d, "repo_id"),
                        s(d, "destination"),
                        s(d, "phase"),
                        s(d, "started_at"),
                        s(d, "message"),
                    ]);
                }
                t.render_or(&format!(
                    "No model downloads on {cluster}. Start one with: instantstart model download REPO_ID"
                ))
            })?;
            Ok(Exit::Ok)
        }
        ModelCommand::Rm { name, cluster, yes, mutation: m } => {
            let cluster = cluster.resolve(&client).await?;
            let question = format!(
                "Delete download {name} on {cluster} (its Job and pods; the downloaded files stay in the bucket)?"
            );
            delete_workload(g, &client, "download", &name, &question, yes, &m, |opts| {
                let (client, cluster, name) = (&client, &cluster, &name);
                async move { client.delete_download(cluster, name, &opts).await }
            })
            .await
        }
    }
}
