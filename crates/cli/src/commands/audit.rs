//! `instantstart audit`: the audit log, newest first.

use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table, when};
use clap::Args;
use instantstart_client::PageArgs;

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only entries about this target, e.g. cluster/demo.
    #[arg(long, conflicts_with = "cluster")]
    pub target: Option<String>,
    /// Only entries about this cluster (target cluster/NAME).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Page size: at most this many, newest first (1-500) [default: 100].
    #[arg(long)]
    pub limit: Option<u32>,
    /// Start after this position: the cursor printed under the previous page.
    #[arg(long)]
    pub cursor: Option<String>,
}

pub async fn run(g: &Globals, args: AuditArgs) -> anyhow::Result<Exit> {
    let target = args.target.or(args.cluster.map(|c| format!("cluster/{c}")));
    let page = g.client()?.audit_page(target.as_deref(), &PageArgs { limit: args.limit, cursor: args.cursor }).await?;
    let entries = page.items;
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
    output::more(page.next.as_deref());
    Ok(Exit::Ok)
}
