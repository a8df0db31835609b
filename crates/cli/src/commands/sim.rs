//! `instantstart sim stats|faults get|faults set`: the simulated cloud's call counters and
//! fault injection (the server exposes them only when its provider is `sim`).

use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::output::{self, Table};
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// Per-API call counters (e.g. eks:CreateCluster).
    Stats,
    /// Fault injection settings.
    #[command(subcommand)]
    Faults(FaultsCommand),
}

#[derive(Subcommand, Debug)]
pub enum FaultsCommand {
    /// Show the fault injection settings.
    Get,
    /// Replace the fault injection settings, e.g.
    /// '{"fail_apis":{"sagemaker:CreateCluster":{"mode":"fail","kind":"failed","message":"boom"}}}'.
    Set {
        /// Settings as JSON or YAML.
        #[arg(required_unless_present_any = ["file", "clear"])]
        faults: Option<String>,
        /// Read the settings from a file (`-` for stdin).
        #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with = "faults")]
        file: Option<PathBuf>,
        /// Remove every fault.
        #[arg(long, conflicts_with_all = ["faults", "file"])]
        clear: bool,
    },
}

pub async fn run(g: &Globals, cmd: SimCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        SimCommand::Stats => {
            let stats = client.sim_stats().await?;
            output::emit(g.output, &stats, || {
                let mut t = Table::new(&["API", "CALLS"]);
                for (api, n) in &stats {
                    t.row(vec![api.clone(), n.to_string()]);
                }
                t.render_or("No calls yet.")
            })?;
        }
        SimCommand::Faults(FaultsCommand::Get) => {
            let faults = client.sim_faults().await?;
            output::emit(g.output, &faults, || serde_norway::to_string(&faults).unwrap_or_default())?;
        }
        SimCommand::Faults(FaultsCommand::Set { faults, file, clear }) => {
            let body = match (faults, file, clear) {
                (_, _, true) => json!({}),
                (Some(text), _, _) => output::parse_document(&text, "faults")?,
                (None, Some(path), _) => output::read_document(&path)?,
                (None, None, false) => return Err(usage("give the faults, -f FILE or --clear")),
            };
            let faults = client.set_sim_faults(&body).await?;
            output::emit(g.output, &faults, || serde_norway::to_string(&faults).unwrap_or_default())?;
        }
    }
    Ok(Exit::Ok)
}
