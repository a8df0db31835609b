//! Global flags and the connection they describe: server URL, token, face, output format.

use crate::output::Output;
use anyhow::Context as _;
use clap::Args;
use instantstart_client::Client;
use instantstart_client::config::{self, Config, Resolved};
use instantstart_core::operation::Face;
use std::path::PathBuf;

/// Flags accepted by every command.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global options")]
pub struct Globals {
    /// Server URL [default: the last login's server, else http://127.0.0.1:3099].
    #[arg(long, global = true, env = config::URL_ENV, hide_env_values = true, value_name = "URL")]
    pub url: Option<String>,
    /// API token [default: the token saved by `instantstart login` for the server].
    #[arg(long, global = true, env = config::TOKEN_ENV, hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Output format of reads and results: table for people, json (stable) or yaml for scripts.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Face recorded in the audit log.
    #[arg(long, global = true, hide = true, env = "INSTANTSTART_FACE", value_parser = parse_face, default_value = "cli")]
    pub face: Face,
}

fn parse_face(s: &str) -> Result<Face, String> {
    match Face::parse(s) {
        Some(f @ (Face::Cli | Face::Agent | Face::Api)) => Ok(f),
        _ => Err("must be cli, agent or api".into()),
    }
}

impl Globals {
    /// Path of the config file.
    pub fn config_path(&self) -> anyhow::Result<PathBuf> {
        config::config_path().context("cannot locate the config file: set HOME, XDG_CONFIG_HOME or INSTANTSTART_CONFIG")
    }

    /// The config file's contents (empty when there is none).
    pub fn config(&self) -> anyhow::Result<Config> {
        match config::config_path() {
            Some(path) => Ok(Config::load(&path)?),
            None => Ok(Config::default()),
        }
    }

    /// Server URL and token from flags, environment and the config file.
    pub fn resolve(&self) -> anyhow::Result<Resolved> {
        Ok(self.config()?.resolve(self.url.as_deref(), self.token.as_deref()))
    }

    /// A client of the resolved server.
    pub fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::from_resolved(&self.resolve()?, self.face)?)
    }
}
