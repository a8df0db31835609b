//! `instantstart pool ls|assign`: model pools — warm GPU workers that move between endpoints
//! by a label change (no pod restart). `assign` is an operation whose plan shows the diff; a
//! worker already serving that endpoint is "already in this state".

use super::target::{ClusterOpt, views};
use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs};
use crate::output::{self, Table, s};
use clap::{ArgGroup, Args, Subcommand};
use serde_json::Value;

#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// List model pools and what each warm worker serves.
    #[command(visible_alias = "list")]
    Ls {
        #[command(flatten)]
        cluster: ClusterOpt,
    },
    /// Move a pool worker to an endpoint (--to), or release it (--release).
    Assign(AssignArgs),
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("target").required(true).args(["to", "release"])))]
pub struct AssignArgs {
    /// Pool name.
    pub pool: String,
    /// Worker pod name (see `instantstart pool ls`).
    pub pod: String,
    /// Endpoint the worker should serve.
    #[arg(long, value_name = "ENDPOINT")]
    pub to: Option<String>,
    /// Stop serving: the worker stays warm in the pool.
    #[arg(long)]
    pub release: bool,
    #[command(flatten)]
    pub cluster: ClusterOpt,
    #[command(flatten)]
    pub mutation: MutationArgs,
}

pub async fn run(g: &Globals, cmd: PoolCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        PoolCommand::Ls { cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let pools = views(client.list_pools(&cluster).await?)?;
            output::emit(g.output, &pools, || {
                let mut t = Table::new(&["POOL", "WORKER", "NODE", "SERVING"]);
                for p in &pools {
                    for w in p.get("workers").and_then(Value::as_array).into_iter().flatten() {
                        t.row(vec![s(p, "pool"), s(w, "pod"), s(w, "node"), s(w, "serving")]);
                    }
                }
                t.render_or(&format!("No pool workers on {cluster} (deploy an endpoint with --pool to start some)."))
            })?;
            Ok(Exit::Ok)
        }
        PoolCommand::Assign(args) => {
            let cluster = args.cluster.resolve(&client).await?;
            let serving = if args.release { None } else { args.to.clone() };
            mutation::submit_diff(g, &client, &args.mutation, |opts| {
                let (client, cluster, args, serving) = (&client, &cluster, &args, serving.clone());
                async move { client.assign_pool_worker(cluster, &args.pool, &args.pod, serving.as_deref(), &opts).await }
            })
            .await
        }
    }
}
