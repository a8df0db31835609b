//! The cluster a workload command addresses: `-c/--cluster` (or `INSTANTSTART_CLUSTER`), else
//! the active cluster (`instantstart cluster use NAME`).

use crate::exit::usage;
use clap::Args;
use instantstart_client::Client;

/// `-c/--cluster` of the workload nouns (storage, model, job, endpoint, pool).
#[derive(Args, Debug, Clone)]
pub struct ClusterOpt {
    /// Cluster [default: the active cluster].
    #[arg(short = 'c', long = "cluster", env = "INSTANTSTART_CLUSTER", hide_env_values = true, value_name = "CLUSTER")]
    pub cluster: Option<String>,
}

impl ClusterOpt {
    /// The cluster given, else the active one; a usage error (exit 2) when there is neither.
    pub async fn resolve(&self, client: &Client) -> anyhow::Result<String> {
        if let Some(c) = self.cluster.as_ref().filter(|c| !c.is_empty()) {
            return Ok(c.clone());
        }
        client.active_cluster().await?.ok_or_else(|| {
            usage("no cluster given and no active cluster: pass --cluster NAME or select one with `instantstart cluster use NAME`")
        })
    }
}

/// Parses `NAME/KEY` (a key of a Kubernetes Secret) into the recipes' secret reference.
pub fn parse_secret_ref(text: &str) -> Result<instantstart_recipes::common::SecretKeyRef, String> {
    match text.split_once('/') {
        Some((name, key)) if !name.is_empty() && !key.is_empty() => {
            Ok(instantstart_recipes::common::SecretKeyRef { name: name.into(), key: key.into() })
        }
        _ => Err("expected SECRET/KEY, e.g. hf-token/token".into()),
    }
}

/// Parses `NAME[:PATH]`: an FSx for Lustre volume of the cluster, mounted at `PATH` (else
/// `/fsx/NAME`). The server checks the name and the path (a `400` naming the field).
pub fn parse_volume(text: &str) -> Result<instantstart_recipes::volumes::VolumeMount, String> {
    let (name, path) = match text.split_once(':') {
        Some((name, path)) => (name, Some(path)),
        None => (text, None),
    };
    if name.is_empty() || path.is_some_and(str::is_empty) {
        return Err("expected NAME or NAME:PATH, e.g. scratch or scratch:/data".into());
    }
    Ok(instantstart_recipes::volumes::VolumeMount {
        name: name.into(),
        mount_path: path.map(str::to_string),
        read_only: false,
    })
}

/// Parses a snake_case value of an API enum (`-` accepted for `_`), e.g. `dataset` or `rlhf`.
pub fn api_enum<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.trim().replace('-', "_"))).map_err(|e| e.to_string())
}

/// Parses `key=value`.
pub fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// Checks a document built out of flags against the recipes type, decoded as the server decodes
/// it: a field the type does not accept is a usage error naming its path (the server validates
/// the values). The document is returned as built — only the fields the user gave — so the
/// server fills in defaults from the cluster's real state (e.g. its shared storage claim).
pub fn typed<T: serde::de::DeserializeOwned>(v: serde_json::Value, what: &str) -> anyhow::Result<serde_json::Value> {
    instantstart_core::workflow::decode::<T>(&v).map_err(|e| usage(format!("{what}: {e}")))?;
    Ok(v)
}

/// Read models as JSON values, for the table renderers (the JSON and YAML outputs serialize the
/// same values).
pub fn views<T: serde::Serialize>(items: Vec<T>) -> anyhow::Result<Vec<serde_json::Value>> {
    items.into_iter().map(|i| Ok(serde_json::to_value(i)?)).collect()
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}
