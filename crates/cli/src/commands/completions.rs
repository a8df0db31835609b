//! `instantstart completions <shell>`: a completion script on stdout, e.g.
//! `instantstart completions bash > /etc/bash_completion.d/instantstart`.

use crate::Cli;
use crate::exit::Exit;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// Shell to generate the script for.
    pub shell: Shell,
}

pub fn run(args: CompletionsArgs) -> anyhow::Result<Exit> {
    clap_complete::generate(args.shell, &mut Cli::command(), "instantstart", &mut std::io::stdout());
    Ok(Exit::Ok)
}
