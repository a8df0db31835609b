//! `instantstart storage ls [PREFIX]`: the cluster's shared S3 bucket — how pods mount it
//! (the static PV/PVC of the Mountpoint S3 CSI driver) and what it holds, one level at a time —
//! and its FSx for Lustre volumes; `instantstart storage fsx create|delete`: an FSx for Lustre
//! volume (file system, CSI driver add-on, static PV and claim `fsx-NAME`; `--attach fs-…`
//! attaches an existing file system instead) as an operation (a delete asks for the volume's
//! name unless `--yes`).

use super::target::{ClusterOpt, bytes, views};
use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs, finish};
use crate::output::{self, Table, s};
use clap::Subcommand;
use serde_json::{Value, json};
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
    /// FSx for Lustre volumes of the cluster, mounted by claim fsx-NAME at /fsx/NAME.
    #[command(subcommand)]
    Fsx(FsxCommand),
}

#[derive(Subcommand, Debug)]
pub enum FsxCommand {
    /// Create an FSx for Lustre file system in the HyperPod nodes' subnet, the FSx CSI driver
    /// add-on, and the static volume and claim fsx-NAME (about 10 minutes on AWS).
    Create {
        /// The volume's name on the cluster (a DNS label of 1-40 characters).
        name: String,
        /// SCRATCH_2 or PERSISTENT_2 [default: SCRATCH_2].
        #[arg(long)]
        deployment_type: Option<String>,
        /// Storage capacity in GiB: 1200, 2400 or a multiple of 2400 [default: 1200].
        #[arg(long)]
        storage_capacity_gib: Option<u32>,
        /// MB/s per TiB, PERSISTENT_2 only: 125, 250, 500 or 1000.
        #[arg(long)]
        per_unit_storage_throughput: Option<u32>,
        /// Attach this existing file system (fs-…, AVAILABLE, in the cluster's VPC) instead of
        /// creating one; it is released, never deleted, with the volume or the cluster.
        #[arg(long, value_name = "FILE_SYSTEM_ID", conflicts_with_all = ["deployment_type", "storage_capacity_gib", "per_unit_storage_throughput", "link_bucket"])]
        attach: Option<String>,
        /// Link the new file system to this prefix of the cluster's shared bucket (e.g.
        /// datasets/; "" for the whole bucket): an FSx data repository association.
        #[arg(long, value_name = "PREFIX")]
        link_bucket: Option<String>,
        /// The file system's directory linked to the bucket prefix [default: /].
        #[arg(long, value_name = "PATH", requires = "link_bucket")]
        link_path: Option<String>,
        /// Bucket changes imported automatically: NEW,CHANGED,DELETED or none [default: all three].
        #[arg(long, value_name = "EVENTS", value_delimiter = ',', requires = "link_bucket")]
        auto_import: Option<Vec<String>>,
        /// File system changes exported automatically: NEW,CHANGED,DELETED or none [default: all three].
        #[arg(long, value_name = "EVENTS", value_delimiter = ',', requires = "link_bucket")]
        auto_export: Option<Vec<String>>,
        #[command(flatten)]
        cluster: ClusterOpt,
        #[command(flatten)]
        mutation: MutationArgs,
    },
    /// Delete an FSx volume: its claim and volume, then the file system with its data (an
    /// attached file system is only released: it stays).
    #[command(visible_alias = "rm")]
    Delete {
        /// The volume's name on the cluster.
        name: String,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
        #[command(flatten)]
        cluster: ClusterOpt,
        #[command(flatten)]
        mutation: MutationArgs,
    },
}

/// The link flags of `storage fsx create`.
#[derive(Debug, Default)]
struct LinkFlags {
    bucket_prefix: Option<String>,
    path: Option<String>,
    import: Option<Vec<String>>,
    export: Option<Vec<String>>,
}

fn events(v: Vec<String>) -> Value {
    let picked: Vec<String> = v.into_iter().filter(|e| !e.eq_ignore_ascii_case("none") && !e.is_empty()).collect();
    json!(picked)
}

/// The create body from the flags, sent as given (the server validates every field).
fn fsx_body(
    name: String,
    deployment_type: Option<String>,
    capacity: Option<u32>,
    throughput: Option<u32>,
    attach: Option<String>,
    link: LinkFlags,
) -> Value {
    let mut body = json!({ "name": name });
    if let Some(prefix) = link.bucket_prefix {
        let mut d = json!({ "bucket_prefix": prefix });
        if let Some(p) = link.path {
            d["file_system_path"] = Value::String(p);
        }
        if let Some(e) = link.import {
            d["import"] = events(e);
        }
        if let Some(e) = link.export {
            d["export"] = events(e);
        }
        body["data_repository"] = d;
    }
    if let Some(id) = attach {
        body["file_system_id"] = Value::String(id);
    }
    if let Some(t) = deployment_type {
        body["deployment_type"] = Value::String(t);
    }
    if let Some(c) = capacity {
        body["storage_capacity_gib"] = json!(c);
    }
    if let Some(t) = throughput {
        body["per_unit_storage_throughput"] = json!(t);
    }
    body
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
    if let StorageCommand::Fsx(FsxCommand::Delete { name, yes, mutation: m, .. }) = &cmd {
        let confirmed = mutation::confirm_by_name(
            name,
            *yes,
            m.dry_run,
            &format!("deleting FSx volume {name} needs confirmation: pass --yes (or --dry-run to see the plan)"),
            &format!("Delete FSx volume {name}: its claim, volume and file system with all its data?"),
        )?;
        if !confirmed {
            return Ok(Exit::Usage);
        }
    }
    let client = g.client()?;
    match cmd {
        StorageCommand::Fsx(FsxCommand::Create {
            name,
            deployment_type,
            storage_capacity_gib,
            per_unit_storage_throughput,
            attach,
            link_bucket,
            link_path,
            auto_import,
            auto_export,
            cluster,
            mutation,
        }) => {
            let cluster = cluster.resolve(&client).await?;
            let link =
                LinkFlags { bucket_prefix: link_bucket, path: link_path, import: auto_import, export: auto_export };
            let body = fsx_body(name, deployment_type, storage_capacity_gib, per_unit_storage_throughput, attach, link);
            let submitted = client.create_file_system(&cluster, &body, &mutation.options()).await?;
            return finish(g, &client, submitted, mutation.wait).await;
        }
        StorageCommand::Fsx(FsxCommand::Delete { name, cluster, mutation, .. }) => {
            let cluster = cluster.resolve(&client).await?;
            let submitted = client.delete_file_system(&cluster, &name, &mutation.options()).await?;
            return finish(g, &client, submitted, mutation.wait).await;
        }
        StorageCommand::Ls { prefix: Some(prefix), cluster } => {
            let cluster = cluster.resolve(&client).await?;
            let listing = serde_json::to_value(client.list_all_storage_objects(&cluster, &prefix).await?)?;
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
                    if st.get("kind").and_then(Value::as_str) == Some("fsx_lustre") {
                        let fs = st.get("file_system").cloned().unwrap_or(Value::Null);
                        let throughput = fs
                            .get("per_unit_storage_throughput")
                            .and_then(Value::as_u64)
                            .map(|t| format!(", {t} MB/s/TiB"))
                            .unwrap_or_default();
                        let links: Vec<String> = st
                            .get("data_repositories")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default()
                            .iter()
                            .map(|d| {
                                let ev = |k: &str| {
                                    let list: Vec<&str> = d
                                        .get(k)
                                        .and_then(Value::as_array)
                                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                                        .unwrap_or_default();
                                    if list.is_empty() { "none".to_string() } else { list.join(",") }
                                };
                                format!(
                                    "{} -> {} (import {}; export {}; {})",
                                    s(d, "file_system_path"),
                                    s(d, "data_repository_path"),
                                    ev("import_events"),
                                    ev("export_events"),
                                    s(d, "lifecycle")
                                )
                            })
                            .collect();
                        let version = fs
                            .get("file_system_type_version")
                            .and_then(Value::as_str)
                            .map(|v| format!(", Lustre {v}"))
                            .unwrap_or_default();
                        out.push_str(&output::fields(&[
                            ("FSx volume", s(st, "name")),
                            ("File system", format!("{} ({})", s(&fs, "id"), s(&fs, "lifecycle"))),
                            ("Ownership", s(st, "ownership")),
                            (
                                "Type",
                                format!(
                                    "{}, {} GiB{throughput}{version}",
                                    s(&fs, "deployment_type"),
                                    fs.get("storage_capacity_gib").and_then(Value::as_u64).unwrap_or_default()
                                ),
                            ),
                            ("Linked", if links.is_empty() { "-".to_string() } else { links.join("; ") }),
                            ("Mounted at", s(st, "mount_path")),
                            ("Claim", s(st, "claim")),
                            ("Status", s(st, "status")),
                        ]));
                        let _ = writeln!(out);
                        continue;
                    }
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
