//! `instantstart token list|create|revoke`: API tokens, through REST. Only the admin token may
//! manage tokens (the server answers 403 otherwise). On the server's machine,
//! `instantstart-server token …` does the same directly on its store.

use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table, when};
use clap::Subcommand;
use instantstart_core::credentials::{CreateTokenRequest, Scope};
use instantstart_core::kube_access::KubeBinding;

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// List tokens (never their secrets).
    List,
    /// Mint a token; its secret is printed once (only its hash is kept).
    Create {
        /// Name recorded in the audit log (1-64 letters, digits, '-' and '_').
        name: String,
        /// read (GET requests and streams), workloads (read, and submit or delete jobs, downloads
        /// and endpoints) or operate (everything).
        #[arg(long, default_value = "read")]
        scope: Scope,
        /// When the token stops working (RFC 3339, e.g. 2027-01-31T00:00:00Z).
        #[arg(long)]
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
        /// Bind the token to this Kubernetes user: its workload calls impersonate it, so the
        /// cluster's RBAC decides (needs at least one --namespace).
        #[arg(long, requires = "namespace")]
        kube_user: Option<String>,
        /// A Kubernetes group of the bound user (repeat for several).
        #[arg(long = "kube-group", requires = "kube_user")]
        kube_groups: Vec<String>,
        /// A namespace the bound token's workloads may use (repeat for several).
        #[arg(long = "namespace", requires = "kube_user")]
        namespace: Vec<String>,
        /// A system namespace (`kube-system`, an operator's) the bound token's workloads may use
        /// as well (repeat for several); none unless listed.
        #[arg(long = "system-namespace", requires = "kube_user")]
        system_namespace: Vec<String>,
        /// A service account the bound token's workloads may name (repeat for several); without
        /// it any of the namespace's.
        #[arg(long = "service-account", requires = "kube_user")]
        service_account: Vec<String>,
        /// The cluster the binding is for (default `*`: every cluster).
        #[arg(long, default_value = "*", requires = "kube_user")]
        cluster: String,
    },
    /// Revoke a token: it and every browser session minted from it stop working at once.
    Revoke {
        /// The token's name.
        name: String,
    },
}

pub async fn run(g: &Globals, cmd: TokenCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    match cmd {
        TokenCommand::List => {
            let tokens = client.list_tokens().await?;
            output::emit(g.output, &tokens, || {
                let mut t = Table::new(&["NAME", "SCOPE", "EXPIRES", "STATE", "CREATED", "BY", "KUBERNETES"]);
                for k in &tokens {
                    let bindings: Vec<String> = k.kube_bindings.iter().map(|b| b.summary()).collect();
                    t.row(vec![
                        k.name.clone(),
                        k.scope.to_string(),
                        k.expires_at.as_ref().map(when).unwrap_or_else(|| "never".into()),
                        if k.active { "active" } else { "expired" }.into(),
                        when(&k.created_at),
                        k.created_by.clone(),
                        if bindings.is_empty() { "unbound".into() } else { bindings.join("; ") },
                    ]);
                }
                t.render_or("No tokens besides the admin token.")
            })?;
        }
        TokenCommand::Create {
            name,
            scope,
            expires_at,
            kube_user,
            kube_groups,
            namespace,
            system_namespace,
            service_account,
            cluster,
        } => {
            let kube_bindings = kube_user
                .into_iter()
                .map(|user| KubeBinding {
                    cluster: cluster.clone(),
                    user,
                    groups: kube_groups.clone(),
                    namespaces: namespace.clone(),
                    system_namespaces: system_namespace.clone(),
                    service_accounts: service_account.clone(),
                })
                .collect();
            let minted = client.create_token(&CreateTokenRequest { name, scope, expires_at, kube_bindings }).await?;
            output::emit(g.output, &minted, || minted.token.clone())?;
            eprintln!("token {:?} (scope {}) created; it is shown only once", minted.info.name, minted.info.scope);
        }
        TokenCommand::Revoke { name } => {
            client.revoke_token(&name).await?;
            eprintln!("token {name:?} revoked; it and its browser sessions no longer work");
        }
    }
    Ok(Exit::Ok)
}
