//! `instantstart login|logout`: check a token against `GET /api/session` and keep it in the
//! config file (mode 0600), bound to the server URL it was checked against.

use crate::app::Globals;
use crate::exit::{Exit, usage};
use crate::output;
use clap::Args;
use instantstart_client::Client;
use instantstart_client::config::Config;
use serde_json::json;
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct LoginArgs {
    /// Read the token from stdin even when it is a terminal (no prompt).
    #[arg(long)]
    pub token_stdin: bool,
}

fn read_token(g: &Globals, args: &LoginArgs) -> anyhow::Result<String> {
    if let Some(t) = g.token.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(t.to_string());
    }
    let token = if std::io::stdin().is_terminal() && !args.token_stdin {
        rpassword::prompt_password("API token (from the server's <data-dir>/token): ")?
    } else {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        line
    };
    let token = token.trim().to_string();
    if token.is_empty() {
        return Err(usage("no token given: pass --token, set INSTANTSTART_TOKEN, or type it at the prompt"));
    }
    Ok(token)
}

pub async fn login(g: &Globals, args: LoginArgs) -> anyhow::Result<Exit> {
    let path = g.config_path()?;
    let mut config = Config::load(&path)?;
    // The server: --url / INSTANTSTART_URL, else the current default (not the saved token).
    let url = config.resolve(g.url.as_deref(), None).url;
    let token = read_token(g, &args)?;
    let session = Client::new(&url, Some(token.clone()), g.face)?.session().await?;
    config.set_server(&url, token, Some(session.name.clone()));
    config.save(&path)?;
    let result = json!({ "url": url, "name": session.name, "scope": session.scope, "config": path });
    output::emit(g.output, &result, || {
        format!(
            "Logged in to {url} as {} (scope {}). Token saved in {} (mode 0600).",
            session.name,
            session.scope.as_str(),
            path.display()
        )
    })?;
    Ok(Exit::Ok)
}

pub fn logout(g: &Globals) -> anyhow::Result<Exit> {
    let path = g.config_path()?;
    let mut config = Config::load(&path)?;
    let url = config.resolve(g.url.as_deref(), None).url;
    let removed = config.remove_server(&url);
    if removed {
        config.save(&path)?;
    }
    let result = json!({ "url": url, "removed": removed });
    output::emit(g.output, &result, || {
        if removed { format!("Forgot the token for {url}.") } else { format!("No saved token for {url}.") }
    })?;
    Ok(Exit::Ok)
}
