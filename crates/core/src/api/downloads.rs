//! Model downloads: their view type (re-exported from [`crate::workload`]), the reads that
//! build it from the download Jobs InstantStart created, and the delete-by-name rule.
//!
//! A download is a `batch/v1` Job labelled `app.kubernetes.io/component=model-download`; its
//! annotations carry the model id and destination ([`crate::labels::ANNOTATION_MODEL_ID`],
//! [`crate::labels::ANNOTATION_DESTINATION`]), its status the phase.
//!
//! # Guarantees
//!
//! - A caller confined to namespaces sees only the downloads in them ([`list_downloads_as`]).
//! - A delete names the namespace the download runs in, and a replayed delete of a download
//!   that is gone returns its operation ([`delete`]).

use super::error::ReadError;
use super::workloads::{Caller, DeleteTarget, Submitted};
use crate::engine::{Engine, EngineError};
use crate::kube_access::KubeAccess;
use crate::labels::{ANNOTATION_DESTINATION, ANNOTATION_MODEL_ID, LABEL_COMPONENT, managed};
use crate::operation::OperationKind;
use crate::provider::*;
use crate::store::Store;
use crate::workload::read::{condition_text, is_true, list_or_empty, ours, str_at, time_at, u32_at};
use crate::workload::{DownloadPhase, WorkloadKind, WorkloadRequest};
use chrono::{DateTime, Utc};

pub use crate::workload::DownloadSummary;

/// A download Job as the read model shows it.
pub fn download_summary(job: &KubeObject) -> Option<DownloadSummary> {
    let o = &job.0;
    let annotation =
        |k: &str| str_at(o, &format!("/metadata/annotations/{}", k.replace('/', "~1"))).map(str::to_string);
    let (phase, message) = if is_true(o, "Failed") {
        (DownloadPhase::Failed, condition_text(o, "Failed"))
    } else if is_true(o, "Complete") {
        (DownloadPhase::Succeeded, None)
    } else if u32_at(o, "/status/active").unwrap_or(0) > 0 {
        (DownloadPhase::Running, None)
    } else {
        (DownloadPhase::Pending, None)
    };
    Some(DownloadSummary {
        name: str_at(o, "/metadata/name")?.to_string(),
        namespace: str_at(o, "/metadata/namespace").unwrap_or("default").to_string(),
        repo_id: annotation(ANNOTATION_MODEL_ID).unwrap_or_default(),
        destination: annotation(ANNOTATION_DESTINATION).unwrap_or_default(),
        phase,
        started_at: str_at(o, "/status/startTime").map(str::to_string),
        completed_at: str_at(o, "/status/completionTime").map(str::to_string),
        message,
    })
}

/// The model downloads of a cluster (download Jobs InstantStart created), newest first.
pub async fn list_downloads(kube: &dyn KubeApi, target: &KubeTarget) -> Result<Vec<DownloadSummary>, ProviderError> {
    let mut labels = managed();
    labels.push((LABEL_COMPONENT.to_string(), "model-download".to_string()));
    let jobs = list_or_empty(kube, target, &ours(None, labels, ("batch/v1", "Job"))).await?;
    let mut out: Vec<(Option<DateTime<Utc>>, DownloadSummary)> = jobs
        .iter()
        .filter_map(|j| Some((time_at(&j.0, "/metadata/creationTimestamp"), download_summary(j)?)))
        .collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    Ok(out.into_iter().map(|(_, d)| d).collect())
}

/// [`list_downloads`] as `access` may see it: the list is read with the control plane's
/// identity, so only downloads in the access's namespaces are kept.
pub async fn list_downloads_as(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    access: &KubeAccess,
) -> Result<Vec<DownloadSummary>, ProviderError> {
    let mut all = list_downloads(kube, target).await?;
    all.retain(|d| access.sees(&d.namespace));
    Ok(all)
}

/// Finds model download `name` (its Job, in whichever namespace it runs).
pub async fn find_download(kube: &dyn KubeApi, target: &KubeTarget, name: &str) -> Result<DownloadSummary, ReadError> {
    if let Err(rule) = crate::names::dns1123_label(name) {
        return Err(ReadError::Validation(crate::validate::ValidationError::invalid("name", rule)));
    }
    list_downloads(kube, target)
        .await?
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| ReadError::Missing(format!("download {name}")))
}

/// Submits model download `params` to `cluster` (or answers its dry run): the `download_model`
/// workflow validates the body (every finding, relative to it) and runs the preflight.
pub async fn submit(
    engine: &Engine,
    cluster: &str,
    params: serde_json::Value,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    let request = serde_json::to_value(WorkloadRequest::new(cluster, WorkloadKind::ModelDownload, params))
        .map_err(|e| EngineError::InvalidState(e.to_string()))?;
    super::workloads::submit(engine, OperationKind::DownloadModel, request, caller, dry, key).await
}

/// Deletes model download `name` of `cluster` (its Job, in whichever namespace it runs); see
/// [`super::workloads::delete`] for a download that is gone.
#[allow(clippy::too_many_arguments)]
pub async fn delete(
    engine: &Engine,
    store: &dyn Store,
    kube: &dyn KubeApi,
    target: &KubeTarget,
    cluster: &str,
    name: &str,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, ReadError> {
    let found = find_download(kube, target, name).await.map(|d| d.namespace);
    let what =
        DeleteTarget { kind: OperationKind::DeleteDownload, workload: WorkloadKind::ModelDownload, cluster, name };
    super::workloads::delete(engine, store, what, found, caller, dry, key).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cond(t: &str, reason: &str) -> Value {
        json!({ "type": t, "status": "True", "reason": reason, "message": format!("{t} message") })
    }

    #[test]
    fn downloads_read_their_annotations_and_job_status() {
        let job = |status: Value| {
            KubeObject(json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": "download-x", "namespace": "default",
                              "annotations": { "instantstart.io/model-id": "Qwen/Qwen3-0.6B", "instantstart.io/destination": "models/Qwen/Qwen3-0.6B" } },
                "status": status,
            }))
        };
        let d = download_summary(&job(json!({ "active": 1, "startTime": "2026-01-01T00:00:00Z" }))).unwrap();
        assert_eq!(
            (d.phase, d.repo_id.as_str(), d.destination.as_str()),
            (DownloadPhase::Running, "Qwen/Qwen3-0.6B", "models/Qwen/Qwen3-0.6B")
        );
        assert_eq!(d.started_at.as_deref(), Some("2026-01-01T00:00:00Z"));
        let d = download_summary(&job(json!({ "conditions": [cond("Failed", "BackoffLimitExceeded")] }))).unwrap();
        assert_eq!(d.phase, DownloadPhase::Failed);
        assert_eq!(d.message.as_deref(), Some("BackoffLimitExceeded: Failed message"));
        let d = download_summary(&job(
            json!({ "conditions": [cond("Complete", "")], "completionTime": "2026-01-01T00:10:00Z" }),
        ))
        .unwrap();
        assert_eq!((d.phase, d.completed_at.as_deref()), (DownloadPhase::Succeeded, Some("2026-01-01T00:10:00Z")));
    }
}
