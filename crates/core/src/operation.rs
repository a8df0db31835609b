//! Operations and steps: the durable record of every mutation.
//!
//! An [`Operation`] is a DAG of [`Step`]s. Each step moves through [`StepPhase`]s:
//! `pending → submitting → submitted → polling → succeeded | failed | needs_attention`
//! (or `cancelled` when the operation is cancelled before the step finishes).
//! The phase, the idempotency token and the resource reference are persisted by the engine
//! before and right after each provider call (see [`crate::engine`]).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Operation identifier, e.g. `op-6f1c…`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct OperationId(pub String);

impl OperationId {
    pub fn generate() -> Self {
        OperationId(format!("op-{}", uuid::Uuid::new_v4().simple()))
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which face a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Face {
    Ui,
    Cli,
    Agent,
    Api,
    /// The engine itself (e.g. resuming after a restart).
    System,
}

impl Face {
    pub fn as_str(self) -> &'static str {
        match self {
            Face::Ui => "ui",
            Face::Cli => "cli",
            Face::Agent => "agent",
            Face::Api => "api",
            Face::System => "system",
        }
    }

    pub fn parse(s: &str) -> Option<Face> {
        Some(match s {
            "ui" => Face::Ui,
            "cli" => Face::Cli,
            "agent" => Face::Agent,
            "api" => Face::Api,
            "system" => Face::System,
            _ => return None,
        })
    }
}

/// Who asked: the face and the name of the credential used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Actor {
    /// The face the request says it came through (`X-InstantStart-Face`): claimed by the
    /// client, not verified (only `system` cannot be claimed; cookie sessions are `ui`). The
    /// principal is what was authenticated.
    pub face: Face,
    /// Name of the API token that authenticated the request (or `system`).
    pub principal: String,
}

impl Actor {
    pub fn system() -> Self {
        Actor { face: Face::System, principal: "system".into() }
    }
}

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    CreateCluster,
    DeleteCluster,
    ImportCluster,
    AddInstanceGroup,
    UpdateInstanceGroup,
    DeleteInstanceGroup,
    RebootNodes,
    ReplaceNodes,
    DeleteNodes,
    SetFeatures,
    SubmitJob,
    DeleteJob,
    DownloadModel,
    DeleteDownload,
    DeployEndpoint,
    UpdateEndpoint,
    DeleteEndpoint,
    AssignPoolWorker,
    CreateTrackingServer,
    DeleteTrackingServer,
    StartHealthCheck,
    // A HyperPod cluster added to an EKS-only cluster, and removed (`workflow::hyperpod_attach`).
    #[serde(rename = "add_hyperpod")]
    AddHyperPod,
    #[serde(rename = "remove_hyperpod")]
    RemoveHyperPod,
    UpdateSoftware,
    SetGovernance,
    // An FSx for Lustre file system mounted as a claim (`workflow::fsx`), and its removal.
    CreateFileSystem,
    DeleteFileSystem,
}

impl OperationKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [OperationKind] = &[
        OperationKind::CreateCluster,
        OperationKind::DeleteCluster,
        OperationKind::ImportCluster,
        OperationKind::AddInstanceGroup,
        OperationKind::UpdateInstanceGroup,
        OperationKind::DeleteInstanceGroup,
        OperationKind::RebootNodes,
        OperationKind::ReplaceNodes,
        OperationKind::DeleteNodes,
        OperationKind::SetFeatures,
        OperationKind::SubmitJob,
        OperationKind::DeleteJob,
        OperationKind::DownloadModel,
        OperationKind::DeleteDownload,
        OperationKind::DeployEndpoint,
        OperationKind::UpdateEndpoint,
        OperationKind::DeleteEndpoint,
        OperationKind::AssignPoolWorker,
        OperationKind::CreateTrackingServer,
        OperationKind::DeleteTrackingServer,
        OperationKind::StartHealthCheck,
        OperationKind::AddHyperPod,
        OperationKind::RemoveHyperPod,
        OperationKind::UpdateSoftware,
        OperationKind::SetGovernance,
        OperationKind::CreateFileSystem,
        OperationKind::DeleteFileSystem,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::CreateCluster => "create_cluster",
            OperationKind::DeleteCluster => "delete_cluster",
            OperationKind::ImportCluster => "import_cluster",
            OperationKind::AddInstanceGroup => "add_instance_group",
            OperationKind::UpdateInstanceGroup => "update_instance_group",
            OperationKind::DeleteInstanceGroup => "delete_instance_group",
            OperationKind::RebootNodes => "reboot_nodes",
            OperationKind::ReplaceNodes => "replace_nodes",
            OperationKind::DeleteNodes => "delete_nodes",
            OperationKind::SetFeatures => "set_features",
            OperationKind::SubmitJob => "submit_job",
            OperationKind::DeleteJob => "delete_job",
            OperationKind::DownloadModel => "download_model",
            OperationKind::DeleteDownload => "delete_download",
            OperationKind::DeployEndpoint => "deploy_endpoint",
            OperationKind::UpdateEndpoint => "update_endpoint",
            OperationKind::DeleteEndpoint => "delete_endpoint",
            OperationKind::AssignPoolWorker => "assign_pool_worker",
            OperationKind::CreateTrackingServer => "create_tracking_server",
            OperationKind::DeleteTrackingServer => "delete_tracking_server",
            OperationKind::StartHealthCheck => "start_health_check",
            OperationKind::AddHyperPod => "add_hyperpod",
            OperationKind::RemoveHyperPod => "remove_hyperpod",
            OperationKind::UpdateSoftware => "update_software",
            OperationKind::SetGovernance => "set_governance",
            OperationKind::CreateFileSystem => "create_file_system",
            OperationKind::DeleteFileSystem => "delete_file_system",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

/// Overall status of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    Running,
    Succeeded,
    Failed,
    /// A step found something it cannot decide on its own (e.g. a same-named resource that is
    /// not ours); a person or agent must look.
    NeedsAttention,
    Cancelled,
}

impl OperationStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(self, OperationStatus::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OperationStatus::Running => "running",
            OperationStatus::Succeeded => "succeeded",
            OperationStatus::Failed => "failed",
            OperationStatus::NeedsAttention => "needs_attention",
            OperationStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => OperationStatus::Running,
            "succeeded" => OperationStatus::Succeeded,
            "failed" => OperationStatus::Failed,
            "needs_attention" => OperationStatus::NeedsAttention,
            "cancelled" => OperationStatus::Cancelled,
            _ => return None,
        })
    }
}

/// Phase of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepPhase {
    Pending,
    /// About to call (or calling) the provider's mutation. A step found here after a restart
    /// observes before submitting again.
    Submitting,
    /// The provider accepted the mutation; `resource` is recorded.
    Submitted,
    Polling,
    Succeeded,
    Failed,
    NeedsAttention,
    Cancelled,
}

impl StepPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, StepPhase::Succeeded | StepPhase::Failed | StepPhase::NeedsAttention | StepPhase::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StepPhase::Pending => "pending",
            StepPhase::Submitting => "submitting",
            StepPhase::Submitted => "submitted",
            StepPhase::Polling => "polling",
            StepPhase::Succeeded => "succeeded",
            StepPhase::Failed => "failed",
            StepPhase::NeedsAttention => "needs_attention",
            StepPhase::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => StepPhase::Pending,
            "submitting" => StepPhase::Submitting,
            "submitted" => StepPhase::Submitted,
            "polling" => StepPhase::Polling,
            "succeeded" => StepPhase::Succeeded,
            "failed" => StepPhase::Failed,
            "needs_attention" => StepPhase::NeedsAttention,
            "cancelled" => StepPhase::Cancelled,
            _ => return None,
        })
    }
}

/// The provider-side resource a step created or adopted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRef {
    /// e.g. `eks-cluster`, `vpc`, `iam-role`.
    pub kind: String,
    /// Provider id or name (VPC id, cluster name, role name).
    pub id: String,
    /// ARN where the provider has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
}

/// One step of an operation, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// Unique within the operation, e.g. `eks_cluster` or `compute_subnet:us-east-1a`.
    pub key: String,
    pub title: String,
    pub depends_on: Vec<String>,
    pub phase: StepPhase,
    /// Submit attempts so far (a retry increments it).
    pub attempts: u32,
    /// Idempotency token, fixed when the step is created and reused on every attempt.
    pub idempotency_token: String,
    pub resource: Option<ResourceRef>,
    /// Outputs handed to dependent steps (ids, ARNs).
    pub outputs: serde_json::Value,
    /// Latest progress message while polling.
    pub detail: Option<String>,
    pub error: Option<String>,
    /// Expected duration in seconds at the provider's real speed, if known.
    pub expected_secs: Option<u64>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// An operation, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Operation {
    pub id: OperationId,
    pub kind: OperationKind,
    /// The resource the operation mutates, e.g. `cluster/demo`. One running mutation per target.
    pub target: String,
    pub status: OperationStatus,
    pub actor: Actor,
    /// The validated request, as JSON.
    pub request: serde_json::Value,
    pub idempotency_key: Option<String>,
    /// SHA-256 of the canonical request, to tell a replay from a different request.
    pub request_hash: String,
    pub steps: Vec<Step>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Operation {
    pub fn step(&self, key: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.key == key)
    }
}

/// Blueprint of a step when an operation is created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepSpec {
    pub key: String,
    pub title: String,
    pub depends_on: Vec<String>,
    pub expected_secs: Option<u64>,
}

/// An operation to insert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NewOperation {
    pub id: OperationId,
    pub kind: OperationKind,
    pub target: String,
    pub actor: Actor,
    pub request: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub request_hash: String,
    pub steps: Vec<StepSpec>,
}

/// A change of one step, persisted as one transaction.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct StepUpdate {
    pub phase: Option<StepPhase>,
    pub attempts: Option<u32>,
    pub resource: Option<ResourceRef>,
    pub outputs: Option<serde_json::Value>,
    /// `Some(None)` clears the detail.
    pub detail: Option<Option<String>>,
    pub error: Option<Option<String>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<Option<DateTime<Utc>>>,
}

/// Append-only audit record: who did what, when, with which diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    pub actor: Actor,
    /// e.g. `operation.create`, `step.retry`, `operation.cancel`.
    pub action: String,
    pub target: String,
    pub operation_id: Option<OperationId>,
    /// The request or diff, as JSON.
    pub detail: serde_json::Value,
}

/// Canonical hash of a request: SHA-256 of its JSON with object keys sorted.
pub fn request_hash(kind: OperationKind, target: &str, request: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    fn canonical(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&map[k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(request, &mut text);
    let mut h = Sha256::new();
    h.update(kind.as_str().as_bytes());
    h.update([0]);
    h.update(target.as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_through_their_strings() {
        for p in [
            StepPhase::Pending,
            StepPhase::Submitting,
            StepPhase::Submitted,
            StepPhase::Polling,
            StepPhase::Succeeded,
            StepPhase::Failed,
            StepPhase::NeedsAttention,
            StepPhase::Cancelled,
        ] {
            assert_eq!(StepPhase::parse(p.as_str()), Some(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        for s in [
            OperationStatus::Running,
            OperationStatus::Succeeded,
            OperationStatus::Failed,
            OperationStatus::NeedsAttention,
            OperationStatus::Cancelled,
        ] {
            assert_eq!(OperationStatus::parse(s.as_str()), Some(s));
        }
        for &k in OperationKind::ALL {
            assert_eq!(OperationKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }

    #[test]
    fn request_hash_ignores_key_order() {
        let a = serde_json::json!({"a": 1, "b": 2});
        let b: serde_json::Value = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(
            request_hash(OperationKind::CreateCluster, "t", &a),
            request_hash(OperationKind::CreateCluster, "t", &b)
        );
        assert_ne!(
            request_hash(OperationKind::CreateCluster, "t", &a),
            request_hash(OperationKind::DeleteCluster, "t", &a)
        );
    }
}
