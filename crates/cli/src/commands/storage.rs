//! `instantstart storage ls [PREFIX]`: the cluster's shared S3 bucket — how pods mount it
//! (the static PV/PVC of the Mountpoint S3 CSI driver) and what it holds, one level at a time.

use super::target::{ClusterOpt, bytes, views};
use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table, s};
use clap::Subcommand;
use serde_json::Value;
use std::fmt::Write as _;

#[derive(Subcommand, Debug)]
pub enum StorageCommand {
    /// List the shared storage and its top-level entries, or the entries under PREFIX.
    #[command(visible_alias = "list")]
    Ls {
        /// Key prefix inside the bucket, e.g. `models/` (one level is listed).
        prefix: Option<String>,
        #[command(flatten)]
        cluster: ClusterOpt,
    },
}

fn entries_table(entries: &[Value]) -> Table {
    let mut t = Table::new(&["KEY", "KIND", "SIZE"]);
    for e in entries {
        let size = e.get("size_bytes").and_then(Value::as_u64).map(bytes).unwrap_or_else(|| "-".into());
        t.row(vec![s(e, "key"), s(e, "kind"), size]);
    }
    t
}

pub async fn run(g: &Globals, cmd: StorageCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        StorageCommand::Ls { prefix: Some(prefix), cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let listing = serde_json::to_value(client.list_storage_objects(&cluster, Some(&prefix)).await?)?;
            output::emit(g.output, &listing, || {
                let entries = listing.get("entries").and_then(Value::as_array).cloned().unwrap_or_default();
                entries_table(&entries).render_or(&format!("Nothing under {prefix} in the shared bucket of {cluster}."))
            })?;
        }
        StorageCommand::Ls { prefix: None, cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let storages = views(client.list_storage(&cluster).await?)?;
            output::emit(g.output, &storages, || {
                if storages.is_empty() {
                    return format!(
                        "No shared storage on {cluster} (it is set up by the create pipeline's storage step).\n"
                    );
                }
                let mut out = String::new();
                for st in &storages {
                    out.push_str(&output::fields(&[
                        ("Storage", s(st, "name")),
                        ("Bucket", s(st, "bucket")),
                        ("Mounted at", s(st, "mount_path")),
                        ("Claim", s(st, "claim")),
                        ("Status", s(st, "status")),
                    ]));
                    let entries = st.get("entries").and_then(Value::as_array).cloned().unwrap_or_default();
                    out.push_str(&entries_table(&entries).render_or("(the bucket is empty)"));
                    let _ = writeln!(out);
                }
                out.trim_end().to_string()
            })?;
        }
    }
    Ok(Exit::Ok)
}
