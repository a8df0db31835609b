//! `instantstart agent install --for kiro|claude [dir]`: writes the `hypd-inst-agent`
//! configuration (agent definition, `.mcp.json`, and for Claude Code the tool permissions) and
//! the skills into a workspace. The templates are the repository's `skills/` directory,
//! embedded in the binary. Files that already exist with other contents are left alone unless
//! `--force` is given; identical files are reported as unchanged.

use crate::app::Globals;
use crate::exit::Exit;
use crate::output;
use clap::{Args, Subcommand, ValueEnum};
use include_dir::{Dir, include_dir};
use serde::Serialize;
use std::path::{Path, PathBuf};

static SKILLS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../skills");

#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    /// Write the hypd-inst-agent configuration and the skills into a directory.
    Install(InstallArgs),
}

#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Which agent client to configure.
    #[arg(long = "for", value_enum)]
    pub client: Client,
    /// Workspace directory (default: the current directory).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite files that exist with other contents.
    #[arg(long)]
    pub force: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Client {
    /// Kiro CLI: `.kiro/agents/hypd-inst-agent.json` (`kiro-cli chat --agent hypd-inst-agent`).
    Kiro,
    /// Claude Code: `.claude/agents/hypd-inst-agent.md` and `.claude/settings.json`.
    Claude,
}

/// What happened to one file.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Written,
    Unchanged,
    /// Exists with other contents and `--force` was not given.
    Kept,
}

#[derive(Debug, Serialize)]
pub struct Installed {
    pub path: String,
    pub outcome: Outcome,
}

/// (template path inside `skills/`, destination relative to the workspace) for a client.
fn files(client: Client) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = match client {
        Client::Kiro => vec![("agents/kiro/hypd-inst-agent.json".into(), ".kiro/agents/hypd-inst-agent.json".into())],
        Client::Claude => vec![
            ("agents/claude/hypd-inst-agent.md".into(), ".claude/agents/hypd-inst-agent.md".into()),
            ("agents/claude/settings.json".into(), ".claude/settings.json".into()),
        ],
    };
    out.push(("agents/mcp.json".into(), ".mcp.json".into()));
    let mut skills = Vec::new();
    collect(&SKILLS, &mut skills);
    for path in skills {
        if !path.starts_with("agents/") {
            out.push((path.clone(), Path::new("skills").join(&path)));
        }
    }
    out
}

fn collect(dir: &Dir<'_>, out: &mut Vec<String>) {
    for f in dir.files() {
        out.push(f.path().to_string_lossy().into_owned());
    }
    for d in dir.dirs() {
        collect(d, out);
    }
}

/// Installs the files; returns what happened to each.
pub fn install(client: Client, dir: &Path, force: bool) -> anyhow::Result<Vec<Installed>> {
    let mut done = Vec::new();
    for (template, dest) in files(client) {
        let contents = SKILLS
            .get_file(&template)
            .ok_or_else(|| anyhow::anyhow!("template {template} is missing from this build"))?
            .contents();
        let path = dir.join(&dest);
        let outcome = match std::fs::read(&path) {
            Ok(existing) if existing == contents => Outcome::Unchanged,
            Ok(_) if !force => Outcome::Kept,
            _ => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, contents)?;
                Outcome::Written
            }
        };
        done.push(Installed { path: dest.to_string_lossy().into_owned(), outcome });
    }
    Ok(done)
}

pub fn run(g: &Globals, cmd: AgentCommand) -> anyhow::Result<Exit> {
    let AgentCommand::Install(args) = cmd;
    let done = install(args.client, &args.dir, args.force)?;
    let kept = done.iter().filter(|d| d.outcome == Outcome::Kept).count();
    output::emit(g.output, &done, || {
        let mut t = String::new();
        for d in &done {
            let word = match d.outcome {
                Outcome::Written => "written  ",
                Outcome::Unchanged => "unchanged",
                Outcome::Kept => "KEPT     ",
            };
            t.push_str(&format!("{word} {}\n", d.path));
        }
        if kept > 0 {
            t.push_str(&format!(
                "{kept} file(s) exist with other contents and were kept; rerun with --force to overwrite them\n"
            ));
        }
        t.push_str("The MCP server reads INSTANTSTART_URL and INSTANTSTART_TOKEN (or the token saved by `instantstart login`).\n");
        t
    })?;
    Ok(if kept > 0 { Exit::Usage } else { Exit::Ok })
}
