//! `instantstart-mcp`: serves the InstantStart tools over MCP stdio. Logs go to stderr.

use anyhow::{Context, Result};
use clap::Parser;
use instantstart_client::Client;
use instantstart_client::config::{self, Config};
use instantstart_core::operation::Face;
use instantstart_mcp::InstantStartMcp;
use rmcp::ServiceExt;

/// MCP stdio server of the InstantStart control plane (tools over its REST API).
#[derive(Debug, Parser)]
#[command(name = "instantstart-mcp", version)]
struct Args {
    /// Control plane URL [default: INSTANTSTART_URL, else the CLI config's server, else
    /// http://127.0.0.1:3099]. The token comes from INSTANTSTART_TOKEN, else the CLI config.
    #[arg(long)]
    url: Option<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cfg = match config::config_path() {
        Some(path) => Config::load(&path).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "ignoring the CLI config file");
            Config::default()
        }),
        None => Config::default(),
    };
    let resolved = cfg.resolve(args.url.as_deref(), None);
    if resolved.token.is_none() {
        tracing::warn!(url = %resolved.url, "no token: set INSTANTSTART_TOKEN or run `instantstart login`");
    }
    let client = Client::new(&resolved.url, resolved.token, Face::Agent).context("control plane URL")?;
    tracing::info!(url = %resolved.url, "serving InstantStart tools on stdio");
    let service =
        InstantStartMcp::new(client).serve(rmcp::transport::stdio()).await.context("starting the MCP session")?;
    service.waiting().await.context("MCP session")?;
    Ok(())
}
