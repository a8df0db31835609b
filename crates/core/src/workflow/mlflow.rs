//! `create_tracking_server` and `delete_tracking_server`: a SageMaker managed MLflow tracking
//! server for training history, and its removal (a server bills while it exists).
//!
//! Create steps: `role` (an IAM role SageMaker assumes to write artifacts, `<name>-mlflow-role`,
//! trusted by `sagemaker.amazonaws.com`, allowed only on the artifact store's bucket; skipped
//! when the request brings `role_arn`) → `tracking_server` (CreateMlflowTrackingServer, then
//! polled until `Created`; AWS takes about 20 minutes), and beside them `writer_role`: the role
//! training pods assume through EKS Pod Identity to report to the server
//! (`<name>-mlflow-writer`, trusted by `pods.eks.amazonaws.com`, allowed `sagemaker-mlflow:*` on
//! this server only and the artifact store's prefix; a job with `mlflow` gets a service account
//! associated with it, see `workflow::workloads`). All are adopted when they already exist with
//! our tags, and stop in `needs_attention` when a same-named one is not ours.
//!
//! With `cluster`, the server belongs to that cluster (ownership tag, region) and its artifacts
//! default to `s3://<cluster bucket>/mlflow/<name>` — the bucket the training pods mount. A
//! cluster whose delete is running takes no new server (409): the delete removes the servers it
//! found before it was recorded.
//! Without it, `region` and `artifact_store_uri` are required (the server fills `region` with its
//! default region).
//!
//! Delete steps: `tracking_server` (DeleteMlflowTrackingServer, then polled through `Deleting`
//! until the server is gone; `DeleteFailed` fails the step with SageMaker's reason) → `role`
//! (the `<name>-mlflow-role` InstantStart created, removed once the server no longer uses it) and
//! `writer_role` (the `<name>-mlflow-writer` of ours, once the server is gone).
//! Before anything is recorded the assessment reads the server: an unknown one is a not-found
//! error, one without our ownership tags is refused (422, field `name`) — InstantStart deletes
//! only what it created. It also decides the `role` step and records what it found in the
//! request ([`FoundTrackingServer`]): the role is planned only when the server runs with that
//! role and the role carries our tags for the server's owner, so a server created with a
//! caller-supplied `role_arn` keeps its role. A resumed or retried step observes first: a server
//! already `Deleting` or gone is not deleted again, and a same-named server that lost our tags
//! stops the step in `needs_attention`. Delete-cluster removes the servers of its cluster with
//! the same assessment (`found_for_delete`) and executors (`mlflow:<server>`,
//! `mlflow_role:<server>`).

use super::steps::{EnsureRole, RemoveRole};
use super::{cluster_target, decode};
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names;
use crate::operation::{OperationKind, OperationStatus, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::Store;
use crate::validate::{Findings, ValidationError};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Expected duration of CreateMlflowTrackingServer → Created, at real speed.
pub const CREATE_SECS: u64 = 1200;
/// Expected duration of DeleteMlflowTrackingServer → gone, at real speed.
pub const DELETE_SECS: u64 = 300;

/// `POST /api/mlflow/servers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTrackingServerRequest {
    /// Tracking server name (1-256 letters, digits, hyphens).
    pub name: String,
    /// AWS region; the cluster's region with `cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The InstantStart cluster the server serves: ownership, region and the default artifact store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `s3://bucket/prefix` for artifacts; `s3://<cluster bucket>/mlflow/<name>` with `cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_store_uri: Option<String>,
    /// `Small` (default), `Medium` or `Large`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<TrackingServerSize>,
    /// An existing role SageMaker assumes; InstantStart creates `<name>-mlflow-role` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    /// MLflow version, e.g. `3.0`; the service default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlflow_version: Option<String>,
}

/// Target string of a tracking server (one running mutation per server).
pub fn tracking_server_target(name: &str) -> String {
    format!("mlflow/{name}")
}

/// Name of the IAM role created for tracking server `name` (IAM allows 64 characters).
pub fn role_name(name: &str) -> String {
    let suffix = "-mlflow-role";
    let keep = 64 - suffix.len();
    format!("{}{suffix}", &name[..name.len().min(keep)].trim_end_matches('-'))
}

/// Name of the IAM role training pods assume (EKS Pod Identity) to report to tracking server
/// `name` (IAM allows 64 characters).
pub fn writer_role_name(name: &str) -> String {
    let suffix = "-mlflow-writer";
    let keep = 64 - suffix.len();
    format!("{}{suffix}", &name[..name.len().min(keep)].trim_end_matches('-'))
}

/// The region and name of a SageMaker managed MLflow tracking-server ARN
/// (`arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>`).
pub fn tracking_server_of_arn(arn: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let name = parts.get(5)?.strip_prefix("mlflow-tracking-server/")?;
    (parts.len() == 6 && parts[2] == "sagemaker" && !name.is_empty()).then_some((parts[3], name))
}

/// The writer role's trust (EKS Pod Identity) and its only permissions: MLflow's API on this
/// tracking server (`sagemaker-mlflow:*`, what the `sagemaker-mlflow` plugin signs its calls
/// for) and the server's artifact prefix, where the MLflow client writes artifacts itself.
pub fn writer_role_policies(region: &str, server: &str, artifact_store_uri: &str) -> (Value, Value) {
    let bucket = bucket_of(artifact_store_uri);
    let objects = artifact_objects(artifact_store_uri);
    let access = json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Effect": "Allow", "Action": "sagemaker-mlflow:*",
              "Resource": format!("arn:aws:sagemaker:{region}:*:mlflow-tracking-server/{server}") },
            { "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": objects,
              "Condition": super::steps::own_account_buckets() },
            { "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": format!("arn:aws:s3:::{bucket}"),
              "Condition": super::steps::own_account_buckets() }
        ]
    });
    (super::steps::pod_identity_trust_policy(), access)
}

fn owner(req: &CreateTrackingServerRequest) -> String {
    req.cluster.clone().unwrap_or_else(|| req.name.clone())
}

/// The object ARNs under an artifact store URI (`s3://bucket/prefix` → `…:::bucket/prefix/*`).
fn artifact_objects(artifact_store_uri: &str) -> String {
    let bucket = bucket_of(artifact_store_uri);
    let prefix = artifact_store_uri.trim_start_matches("s3://").trim_start_matches(bucket).trim_matches('/');
    if prefix.is_empty() { format!("arn:aws:s3:::{bucket}/*") } else { format!("arn:aws:s3:::{bucket}/{prefix}/*") }
}

fn bucket_of(uri: &str) -> &str {
    uri.trim_start_matches("s3://").split('/').next().unwrap_or_default()
}

/// The role's trust (SageMaker) and its only permissions: the artifact store's prefix (objects)
/// and listing its bucket, in the role's own account only.
pub fn role_policies(artifact_store_uri: &str) -> (Value, Value) {
    let bucket = bucket_of(artifact_store_uri);
    let objects = artifact_objects(artifact_store_uri);
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{ "Effect": "Allow", "Principal": { "Service": "sagemaker.amazonaws.com" }, "Action": "sts:AssumeRole" }]
    });
    let access = json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], "Resource": objects,
              "Condition": super::steps::own_account_buckets() },
            { "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": format!("arn:aws:s3:::{bucket}"),
              "Condition": super::steps::own_account_buckets() }
        ]
    });
    (trust, access)
}

/// The create-tracking-server workflow.
pub struct CreateTrackingServerWorkflow {
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
    /// The management environment's shared bucket (`--shared-bucket`), which the roles we
    /// create may use besides the `is-` buckets.
    shared_bucket: Option<String>,
}

impl CreateTrackingServerWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        CreateTrackingServerWorkflow { aws, store, shared_bucket: None }
    }

    /// See [`CreateTrackingServerWorkflow::shared_bucket`].
    pub fn with_shared_bucket(mut self, bucket: Option<String>) -> Self {
        self.shared_bucket = bucket;
        self
    }

    /// Validates and fills the defaults (region, artifact store, size).
    fn canonical(&self, request: &Value) -> Result<CreateTrackingServerRequest, EngineError> {
        let mut req: CreateTrackingServerRequest = decode(request)?;
        let mut f = Findings::new();
        if let Err(e) = tracking_server_name(&req.name) {
            f.push("name", e);
        }
        if let Some(uri) = &req.artifact_store_uri {
            match names::s3_uri(uri) {
                Err(e) => f.push("artifact_store_uri", e),
                // The role we create carries the deployment's permissions boundary, which reaches
                // only InstantStart's buckets (template, RoleBoundary statement OwnBuckets); a
                // role of the user's own (`role_arn`) may use any bucket it is allowed.
                Ok(()) if req.role_arn.is_none() => {
                    let bucket = bucket_of(uri);
                    let ours = bucket.starts_with(names::CLUSTER_BUCKET_PREFIX)
                        || self.shared_bucket.as_deref() == Some(bucket);
                    if !ours {
                        let shared = match &self.shared_bucket {
                            Some(b) => format!(" or the shared bucket {b}"),
                            None => String::new(),
                        };
                        f.push_unprocessable(
                            "artifact_store_uri",
                            format!(
                                "the bucket must start with '{}'{shared}: the role InstantStart creates for the tracking \
                                 server reaches only those (the deployment's permissions boundary); give role_arn to use \
                                 a role of your own with another bucket",
                                names::CLUSTER_BUCKET_PREFIX
                            ),
                        );
                    }
                }
                Ok(()) => {}
            }
        }
        if let Some(role) = &req.role_arn {
            let ok = role.starts_with("arn:aws") && role.contains(":iam::") && role.contains(":role/");
            if !ok {
                f.push("role_arn", "must be an IAM role ARN such as arn:aws:iam::123456789012:role/my-mlflow-role");
            }
        }
        if let Some(v) = &req.mlflow_version {
            let ok = !v.is_empty() && v.len() <= 16 && v.chars().all(|c| c.is_ascii_digit() || c == '.');
            if !ok {
                f.push("mlflow_version", "must be a version such as 3.0");
            }
        }
        match &req.cluster {
            Some(cluster) => {
                let rec =
                    self.store.get_cluster(cluster)?.ok_or_else(|| EngineError::UnknownCluster(cluster.clone()))?;
                // Its delete found the cluster's servers before it was recorded: a server created
                // now would outlive the cluster.
                let deletes =
                    self.store.latest_operations(&[cluster_target(cluster)], &[OperationKind::DeleteCluster])?;
                if deletes.values().any(|op| op.status == OperationStatus::Running) {
                    return Err(EngineError::InvalidState(format!(
                        "cluster {cluster} is being deleted with its tracking servers; a new one would outlive it"
                    )));
                }
                if let Some(r) = &req.region
                    && r != &rec.region
                {
                    f.push("region", format!("cluster {cluster} is in {}; omit region or use it", rec.region));
                }
                req.region = Some(rec.region.clone());
                if req.artifact_store_uri.is_none() {
                    match &rec.bucket {
                        Some(b) => req.artifact_store_uri = Some(format!("s3://{b}/mlflow/{}", req.name)),
                        None => f.push_unprocessable(
                            "artifact_store_uri",
                            format!("cluster {cluster} has no shared bucket; give an s3:// artifact store"),
                        ),
                    }
                }
            }
            None => {
                match &req.region {
                    None => f.push("region", "required when no cluster is given"),
                    Some(r) => {
                        if let Err(e) = names::region(r) {
                            f.push("region", e);
                        }
                    }
                }
                if req.artifact_store_uri.is_none() {
                    f.push("artifact_store_uri", "required when no cluster is given (s3://bucket/prefix)");
                }
            }
        }
        f.finish()?;
        req.size = Some(req.size.unwrap_or_default());
        Ok(req)
    }
}

#[async_trait]
impl Workflow for CreateTrackingServerWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::CreateTrackingServer
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req = self.canonical(request)?;
        let region = req.region.clone().unwrap_or_default();
        let mut steps = Vec::new();
        if req.role_arn.is_none() {
            steps.push(StepSpec {
                key: "role".into(),
                title: format!("IAM role {} (SageMaker writes MLflow artifacts)", role_name(&req.name)),
                depends_on: vec![],
                expected_secs: Some(10),
            });
        }
        steps.push(StepSpec {
            key: "tracking_server".into(),
            title: format!(
                "MLflow tracking server {} ({}, {region}, artifacts in {})",
                req.name,
                req.size.unwrap_or_default().as_str(),
                req.artifact_store_uri.as_deref().unwrap_or_default()
            ),
            depends_on: if req.role_arn.is_none() { vec!["role".into()] } else { vec![] },
            expected_secs: Some(CREATE_SECS),
        });
        steps.push(StepSpec {
            key: "writer_role".into(),
            title: format!(
                "IAM role {} (training pods report to the server through EKS Pod Identity)",
                writer_role_name(&req.name)
            ),
            depends_on: vec![],
            expected_secs: Some(10),
        });
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: tracking_server_target(&req.name), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: CreateTrackingServerRequest = decode(&prepared.request)?;
        let region = req.region.clone().unwrap_or_default();
        if let Some(s) = self.aws.describe_tracking_server(&region, &req.name).await?
            && !is_owned(&s.tags, &owner(&req))
        {
            let mut f = Findings::new();
            f.push_unprocessable(
                "name",
                format!("a tracking server named {} already exists in {region} and is not InstantStart's", req.name),
            );
            f.finish()?;
        }
        Ok(Assessment::default())
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: CreateTrackingServerRequest = decode(request).ok()?;
        match key {
            "role" => {
                let (trust, access) = role_policies(req.artifact_store_uri.as_deref().unwrap_or_default());
                Some(Arc::new(EnsureRole {
                    aws: self.aws.clone(),
                    cluster: owner(&req),
                    name: role_name(&req.name),
                    trust_policy: trust,
                    managed_policies: vec![],
                    inline_policies: vec![("mlflow-artifacts".into(), access)],
                }))
            }
            "writer_role" => {
                let region = req.region.as_deref().unwrap_or_default();
                let uri = req.artifact_store_uri.as_deref().unwrap_or_default();
                let (trust, access) = writer_role_policies(region, &req.name, uri);
                Some(Arc::new(EnsureRole {
                    aws: self.aws.clone(),
                    cluster: owner(&req),
                    name: writer_role_name(&req.name),
                    trust_policy: trust,
                    managed_policies: vec![],
                    inline_policies: vec![("mlflow-writer".into(), access)],
                }))
            }
            "tracking_server" => Some(Arc::new(TrackingServerStep { aws: self.aws.clone(), req })),
            _ => None,
        }
    }
}

/// Creates the tracking server and follows it to `Created`.
struct TrackingServerStep {
    aws: Arc<dyn AwsCloud>,
    req: CreateTrackingServerRequest,
}

impl TrackingServerStep {
    fn region(&self) -> &str {
        self.req.region.as_deref().unwrap_or_default()
    }

    fn reference(s: &TrackingServer) -> ResourceRef {
        ResourceRef { kind: "mlflow-tracking-server".into(), id: s.name.clone(), arn: Some(s.arn.clone()) }
    }
}

#[async_trait]
impl StepExecutor for TrackingServerStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.aws.describe_tracking_server(self.region(), &self.req.name).await? {
            Some(s) if is_owned(&s.tags, &owner(&self.req)) => Observation::Exists(Self::reference(&s)),
            Some(_) => Observation::Foreign {
                reason: format!(
                    "tracking server {} exists but is not tagged as InstantStart's for {}",
                    self.req.name,
                    owner(&self.req)
                ),
            },
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let role_arn = match &self.req.role_arn {
            Some(r) => r.clone(),
            None => cx.input_str("role", "role_arn")?,
        };
        let s = self
            .aws
            .create_tracking_server(&CreateTrackingServer {
                region: self.region().to_string(),
                name: self.req.name.clone(),
                artifact_store_uri: self.req.artifact_store_uri.clone().unwrap_or_default(),
                size: self.req.size.unwrap_or_default(),
                role_arn,
                mlflow_version: self.req.mlflow_version.clone(),
                tags: ownership_tags(&owner(&self.req), &cx.operation_id.0),
            })
            .await?;
        Ok(Self::reference(&s))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(s) = self.aws.describe_tracking_server(self.region(), &r.id).await? else {
            return Ok(Progress::Waiting { detail: format!("tracking server {}: not visible yet", r.id) });
        };
        Ok(match s.state() {
            ResourceState::Active => {
                Progress::Done(json!({ "name": s.name, "arn": s.arn, "url": s.url, "status": s.status }))
            }
            ResourceState::Failed { reason } => Progress::Failed { reason },
            _ => Progress::Waiting { detail: format!("tracking server {}: {}", s.name, s.status) },
        })
    }
}

/// `DELETE /api/mlflow/servers/{name}`: the server, then the IAM role InstantStart created for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteTrackingServerRequest {
    /// Tracking server name.
    pub name: String,
    /// AWS region of the server.
    pub region: String,
    /// What the assessment found in AWS before the operation was recorded; whatever a caller
    /// sends here is replaced by the real state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<FoundTrackingServer>,
}

/// A tracking server of ours, as found before its deletion was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FoundTrackingServer {
    /// Its `instantstart:cluster` tag: the cluster it serves, or its own name without one.
    pub owner: String,
    pub arn: String,
    /// The role InstantStart created for it (`<name>-mlflow-role`), deleted after the server;
    /// `None` when the server runs with a role InstantStart did not create for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The `<name>-mlflow-writer` role of ours (tagged for the owner), deleted after the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_role: Option<String>,
}

/// The owner (`instantstart:cluster`) of a resource carrying our ownership tags.
pub(crate) fn owner_of(tags: &Tags) -> Option<&str> {
    (tags.get(TAG_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY))
        .then(|| tags.get(TAG_CLUSTER).map(String::as_str))
        .flatten()
        .filter(|o| !o.is_empty())
}

/// Whether the IAM role ARN `arn` (`arn:aws:iam::<account>:role/<path/>name`) names `role`.
fn arn_names_role(arn: &str, role: &str) -> bool {
    arn.split_once(":role/").is_some_and(|(_, path)| path.rsplit('/').next() == Some(role))
}

/// What deleting `server` (ours, tagged for `owner`) removes, read from the real state: the
/// server and — only when it runs with `<name>-mlflow-role` and that role carries our tags for
/// `owner` — the role. Shared by delete-tracking-server and delete-cluster's assessments.
pub(crate) async fn found_for_delete(
    aws: &dyn AwsCloud,
    server: TrackingServer,
    owner: String,
) -> Result<FoundTrackingServer, ProviderError> {
    let ours = role_name(&server.name);
    let runs_with_ours = server.role_arn.as_deref().is_some_and(|arn| arn_names_role(arn, &ours));
    let role = match runs_with_ours {
        true => aws.get_role(&ours).await?.filter(|r| is_owned(&r.tags, &owner)).map(|r| r.name),
        false => None,
    };
    let writer_role =
        aws.get_role(&writer_role_name(&server.name)).await?.filter(|r| is_owned(&r.tags, &owner)).map(|r| r.name);
    Ok(FoundTrackingServer { owner, arn: server.arn, role, writer_role })
}

/// The delete's steps: `tracking_server`, then `role` when the assessment found our role.
pub fn plan_delete(request: &Value) -> Result<Prepared, EngineError> {
    let req: DeleteTrackingServerRequest = decode(request)?;
    let mut f = Findings::new();
    if let Err(e) = tracking_server_name(&req.name) {
        f.push("name", e);
    }
    if let Err(e) = names::region(&req.region) {
        f.push("region", e);
    }
    if let Some(role) = req.found.as_ref().and_then(|found| found.role.as_ref())
        && role != &role_name(&req.name)
    {
        f.push("found.role", format!("only {}, the role InstantStart creates for the server", role_name(&req.name)));
    }
    if let Some(role) = req.found.as_ref().and_then(|found| found.writer_role.as_ref())
        && role != &writer_role_name(&req.name)
    {
        f.push(
            "found.writer_role",
            format!("only {}, the role InstantStart creates for the server's writers", writer_role_name(&req.name)),
        );
    }
    f.finish()?;
    let mut steps = vec![StepSpec {
        key: "tracking_server".into(),
        title: format!("Delete MLflow tracking server {} ({})", req.name, req.region),
        depends_on: vec![],
        expected_secs: Some(DELETE_SECS),
    }];
    if let Some(role) = req.found.as_ref().and_then(|found| found.role.as_ref()) {
        steps.push(StepSpec {
            key: "role".into(),
            title: format!("Delete IAM role {role} (InstantStart created it for the server)"),
            depends_on: vec!["tracking_server".into()],
            expected_secs: Some(5),
        });
    }
    if let Some(role) = req.found.as_ref().and_then(|found| found.writer_role.as_ref()) {
        steps.push(StepSpec {
            key: "writer_role".into(),
            title: format!("Delete IAM role {role} (the server's training pods reported through it)"),
            depends_on: vec!["tracking_server".into()],
            expected_secs: Some(5),
        });
    }
    let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
    Ok(Prepared { target: tracking_server_target(&req.name), request: canonical, steps })
}

/// The delete-tracking-server workflow.
pub struct DeleteTrackingServerWorkflow {
    aws: Arc<dyn AwsCloud>,
}

impl DeleteTrackingServerWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>) -> Self {
        DeleteTrackingServerWorkflow { aws }
    }
}

#[async_trait]
impl Workflow for DeleteTrackingServerWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::DeleteTrackingServer
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        plan_delete(request)
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: DeleteTrackingServerRequest = decode(&prepared.request)?;
        let Some(server) = self.aws.describe_tracking_server(&req.region, &req.name).await? else {
            return Err(EngineError::Missing(format!("tracking server {} in {}", req.name, req.region)));
        };
        let Some(owner) = owner_of(&server.tags).map(str::to_string) else {
            return Err(ValidationError::unprocessable(
                "name",
                format!(
                    "tracking server {} in {} was not created by InstantStart (no ownership tags); it is left alone",
                    req.name, req.region
                ),
            )
            .into());
        };
        req.found = Some(found_for_delete(self.aws.as_ref(), server, owner).await?);
        let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: None, checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: DeleteTrackingServerRequest = decode(request).ok()?;
        match key {
            "tracking_server" => Some(Arc::new(DeleteTrackingServerStep { aws: self.aws.clone(), req })),
            "role" => {
                let found = req.found?;
                Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: found.owner, name: found.role? }))
            }
            "writer_role" => {
                let found = req.found?;
                Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: found.owner, name: found.writer_role? }))
            }
            _ => None,
        }
    }
}

/// Deletes the tracking server and follows it until it is gone (also delete-cluster's
/// `mlflow:<server>` steps).
pub(crate) struct DeleteTrackingServerStep {
    aws: Arc<dyn AwsCloud>,
    req: DeleteTrackingServerRequest,
}

impl DeleteTrackingServerStep {
    /// The step deleting server `name` in `region`, ours for `found.owner`.
    pub(crate) fn new(aws: Arc<dyn AwsCloud>, name: String, region: String, found: FoundTrackingServer) -> Self {
        DeleteTrackingServerStep { aws, req: DeleteTrackingServerRequest { name, region, found: Some(found) } }
    }

    fn reference(&self) -> ResourceRef {
        ResourceRef {
            kind: "mlflow-tracking-server".into(),
            id: self.req.name.clone(),
            arn: self.req.found.as_ref().map(|f| f.arn.clone()),
        }
    }

    /// Ours: tagged for the owner the assessment found (any owner of ours without one).
    fn is_ours(&self, tags: &Tags) -> bool {
        match &self.req.found {
            Some(found) => is_owned(tags, &found.owner),
            None => owner_of(tags).is_some(),
        }
    }
}

#[async_trait]
impl StepExecutor for DeleteTrackingServerStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.aws.describe_tracking_server(&self.req.region, &self.req.name).await? {
            None => Observation::Exists(self.reference()),
            Some(s) if !self.is_ours(&s.tags) => Observation::Foreign {
                reason: format!(
                    "tracking server {} is not tagged as InstantStart's{}; it is left alone",
                    self.req.name,
                    self.req.found.as_ref().map(|f| format!(" for {}", f.owner)).unwrap_or_default()
                ),
            },
            Some(s) if s.state() == ResourceState::Deleting => Observation::Exists(self.reference()),
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        match self.aws.delete_tracking_server(&self.req.region, &self.req.name).await {
            // Gone between the observation and the call: the deletion is done.
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            other => other?,
        }
        Ok(self.reference())
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(s) = self.aws.describe_tracking_server(&self.req.region, &r.id).await? else {
            return Ok(Progress::Done(json!({ "deleted": r.id, "arn": r.arn })));
        };
        Ok(match s.status.as_str() {
            "Deleting" => Progress::Waiting { detail: format!("tracking server {}: Deleting", s.name) },
            "DeleteFailed" => Progress::Failed {
                reason: format!(
                    "tracking server {}: DeleteFailed: {}",
                    s.name,
                    s.failure_reason.as_deref().unwrap_or("SageMaker gave no reason")
                ),
            },
            other => Progress::Waiting {
                detail: format!("tracking server {}: {other}, waiting for the deletion to start", s.name),
            },
        })
    }
}

/// Validation errors of the read routes' query parameters, named by field.
pub fn run_query(experiment: Option<String>, max: Option<u32>) -> Result<RunQuery, ValidationError> {
    let mut f = Findings::new();
    let max_results = max.unwrap_or(100);
    if max_results == 0 || max_results > MAX_RUNS {
        f.push("max", format!("must be 1-{MAX_RUNS}"));
    }
    if let Some(e) = &experiment
        && (e.is_empty() || e.len() > 256 || e.chars().any(char::is_control))
    {
        f.push("experiment", "must be 1-256 characters without control characters");
    }
    f.finish()?;
    Ok(RunQuery { experiment, max_results })
}

/// Metric keys of `?keys=a,b` ([`DEFAULT_METRIC_KEYS`] when absent), validated.
pub fn metric_keys(keys: Option<&str>) -> Result<Vec<String>, ValidationError> {
    let keys: Vec<String> = match keys {
        None => DEFAULT_METRIC_KEYS.iter().map(|k| k.to_string()).collect(),
        Some(s) => s.split(',').map(|k| k.trim().to_string()).filter(|k| !k.is_empty()).collect(),
    };
    let mut f = Findings::new();
    if keys.is_empty() || keys.len() > 20 {
        f.push("keys", "must name 1-20 metric keys separated by commas");
    }
    for (i, k) in keys.iter().enumerate() {
        let ok = k.len() <= 250 && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-./ :".contains(c));
        if !ok {
            f.push(&format!("keys[{i}]"), "must be up to 250 letters, digits and _ - . / : or spaces");
        }
    }
    f.finish()?;
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_fit_iam() {
        assert_eq!(role_name("team"), "team-mlflow-role");
        let long = role_name(&"a".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(long.ends_with("-mlflow-role"));
    }

    #[test]
    fn the_role_may_touch_only_the_artifact_prefix_of_its_own_accounts_bucket() {
        let (trust, access) = role_policies("s3://demo-bucket/mlflow/team");
        assert_eq!(trust["Statement"][0]["Principal"]["Service"], "sagemaker.amazonaws.com");
        assert_eq!(access["Statement"][0]["Resource"], "arn:aws:s3:::demo-bucket/mlflow/team/*");
        assert_eq!(access["Statement"][1]["Resource"], "arn:aws:s3:::demo-bucket");
        let (_, root) = role_policies("s3://demo-bucket");
        assert_eq!(root["Statement"][0]["Resource"], "arn:aws:s3:::demo-bucket/*");
        for (_, policy) in
            [role_policies("s3://demo-bucket/x"), writer_role_policies("us-east-1", "team", "s3://demo-bucket/x")]
        {
            for stmt in policy["Statement"].as_array().unwrap() {
                let s3 = stmt["Action"].to_string().contains("s3:");
                assert_eq!(
                    s3,
                    stmt["Condition"]["StringEquals"]["s3:ResourceAccount"] == "${aws:PrincipalAccount}",
                    "{stmt}"
                );
            }
        }
    }

    #[test]
    fn the_delete_plans_the_role_only_when_the_assessment_found_ours() {
        let keys = |p: &Prepared| p.steps.iter().map(|s| s.key.clone()).collect::<Vec<_>>();
        let bare = plan_delete(&json!({ "name": "team", "region": "us-east-1" })).unwrap();
        assert_eq!((bare.target.as_str(), keys(&bare)), ("mlflow/team", vec!["tracking_server".to_string()]));
        let arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team";
        let found = json!({ "owner": "demo", "arn": arn, "role": "team-mlflow-role" });
        let full = plan_delete(&json!({ "name": "team", "region": "us-east-1", "found": found })).unwrap();
        assert_eq!(keys(&full), ["tracking_server", "role"]);
        assert_eq!(full.steps[1].depends_on, ["tracking_server"], "the role outlives the server");
        let theirs = json!({ "owner": "demo", "arn": arn });
        let kept = plan_delete(&json!({ "name": "team", "region": "us-east-1", "found": theirs })).unwrap();
        assert_eq!(keys(&kept), ["tracking_server"], "a caller-supplied role is kept");

        let bad = json!({ "name": "-x", "region": "mars", "found": { "owner": "demo", "arn": arn, "role": "admin" } });
        let e = match plan_delete(&bad).unwrap_err() {
            EngineError::Validation(v) => v,
            other => panic!("{other:?}"),
        };
        let fields: Vec<&str> = e.findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["name", "region", "found.role"]);
        let unknown = plan_delete(&json!({ "name": "team", "region": "us-east-1", "force": true })).unwrap_err();
        assert!(matches!(unknown, EngineError::Validation(_)), "{unknown:?}");
    }

    #[test]
    fn ownership_and_role_arns_are_read_exactly() {
        assert_eq!(owner_of(&ownership_tags("demo", "op-1")), Some("demo"));
        let mut foreign = ownership_tags("demo", "op-1");
        foreign.insert(TAG_MANAGED_BY.into(), "someone-else".into());
        assert_eq!(owner_of(&foreign), None);
        assert_eq!(owner_of(&Tags::new()), None);
        assert!(arn_names_role("arn:aws:iam::123456789012:role/team-mlflow-role", "team-mlflow-role"));
        assert!(arn_names_role("arn:aws:iam::123456789012:role/path/team-mlflow-role", "team-mlflow-role"));
        assert!(!arn_names_role("arn:aws:iam::123456789012:role/my-team-mlflow-role", "team-mlflow-role"));
        assert!(!arn_names_role("team-mlflow-role", "team-mlflow-role"));
    }

    #[test]
    fn query_parameters_are_validated_by_field() {
        assert_eq!(run_query(None, None).unwrap().max_results, 100);
        let e = run_query(Some(String::new()), Some(0)).unwrap_err();
        let fields: Vec<&str> = e.findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["max", "experiment"]);
        assert_eq!(metric_keys(None).unwrap(), ["loss", "throughput"]);
        assert_eq!(metric_keys(Some("loss, lr")).unwrap(), ["loss", "lr"]);
        assert_eq!(metric_keys(Some("ok,bad\u{7}")).unwrap_err().findings[0].field, "keys[1]");
        assert_eq!(metric_keys(Some(",")).unwrap_err().findings[0].field, "keys");
    }
}
