//! `instantstart audit`: the audit log, newest first.

use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table, when};
use clap::Args;

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only entries about this target, e.g. cluster/demo.
    #[arg(long, conflicts_with = "cluster")]
    pub target: Option<String>,
    /// Only entries about this cluster (target cluster/NAME).
    #[arg(long)]
    pub cluster: Option<String>,
    /// At most this many (1-1000) [default: 100].
    #[arg(long)]
    pub limit: Option<u32>,
}

pub async fn run(g: &Globals, args: AuditArgs) -> anyhow::Result<Exit> {
    let target = args.target.or(args.cluster.map(|c| format!("cluster/{c}")));
    let entries = g.client()?.audit(target.as_deref(), args.limit).await?;
    output::emit(g.output, &entries, || {
        let mut t = Table::new(&["AT", "ACTOR", "ACTION", "TARGET", "OPERATION"]);
        for e in &entries {
            t.row(vec![
                when(&e.at),
                format!("{}/{}", e.actor.face.as_str(), e.actor.principal),
                e.action.clone(),
                e.target.clone(),
                e.operation_id.as_ref().map(|o| o.0.clone()).unwrap_or_else(|| "-".into()),
            ]);
        }
        t.render_or("No audit entries.")
    })?;
    Ok(Exit::Ok)
}
