//! `create_tracking_server`: a SageMaker managed MLflow tracking server for training history.
//!
//! Steps: `role` (an IAM role SageMaker assumes to write artifacts, `<name>-mlflow-role`,
//! trusted by `sagemaker.amazonaws.com`, allowed only on the artifact store's bucket; skipped
//! when the request brings `role_arn`) → `tracking_server` (CreateMlflowTrackingServer, then
//! polled until `Created`; AWS takes about 20 minutes). Both are adopted when they already exist
//! with our tags, and stop in `needs_attention` when a same-named one is not ours.
//!
//! With `cluster`, the server belongs to that cluster (ownership tag, region) and its artifacts
//! default to `s3://<cluster bucket>/mlflow/<name>` — the bucket the training pods mount.
//! Without it, `region` and `artifact_store_uri` are required (the server fills `region` with its
//! default region).

use super::decode;
use super::steps::EnsureRole;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
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

fn owner(req: &CreateTrackingServerRequest) -> String {
    req.cluster.clone().unwrap_or_else(|| req.name.clone())
}

fn bucket_of(uri: &str) -> &str {
    uri.trim_start_matches("s3://").split('/').next().unwrap_or_default()
}

/// The role's trust (SageMaker) and its only permissions (the artifact store's bucket).
pub fn role_policies(artifact_store_uri: &str) -> (Value, Value) {
    let bucket = bucket_of(artifact_store_uri);
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{ "Effect": "Allow", "Principal": { "Service": "sagemaker.amazonaws.com" }, "Action": "sts:AssumeRole" }]
    });
    let access = json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], "Resource": format!("arn:aws:s3:::{bucket}/*") },
            { "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": format!("arn:aws:s3:::{bucket}") }
        ]
    });
    (trust, access)
}

/// The create-tracking-server workflow.
pub struct CreateTrackingServerWorkflow {
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl CreateTrackingServerWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        CreateTrackingServerWorkflow { aws, store }
    }

    /// Validates and fills the defaults (region, artifact store, size).
    fn canonical(&self, request: &Value) -> Result<CreateTrackingServerRequest, EngineError> {
        let mut req: CreateTrackingServerRequest = decode(request)?;
        let mut f = Findings::new();
        if let Err(e) = tracking_server_name(&req.name) {
            f.push("name", e);
        }
        if let Some(uri) = &req.artifact_store_uri
            && let Err(e) = names::s3_uri(uri)
        {
            f.push("artifact_store_uri", e);
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
    fn the_role_may_touch_only_the_artifact_bucket() {
        let (trust, access) = role_policies("s3://demo-bucket/mlflow/team");
        assert_eq!(trust["Statement"][0]["Principal"]["Service"], "sagemaker.amazonaws.com");
        assert_eq!(access["Statement"][0]["Resource"], "arn:aws:s3:::demo-bucket/*");
        assert_eq!(access["Statement"][1]["Resource"], "arn:aws:s3:::demo-bucket");
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
