//! The observability managed feature: HyperPod's observability EKS add-on
//! (`amazon-sagemaker-hyperpod-observability`) writing the cluster's metrics to an Amazon
//! Managed Service for Prometheus (AMP) workspace of its own, with the identity AWS documents.
//!
//! What ON creates, prerequisites first (the steps of [`on_steps`]):
//! 1. the EKS Pod Identity agent add-on (`addon:eks-pod-identity-agent`, shared with the
//!    training operator): the add-on's collector gets its credentials through Pod Identity;
//! 2. the AMP workspace `instantstart-<cluster>` ([`EnsurePrometheusWorkspace`]), tagged with
//!    our ownership tags and polled until `ACTIVE`;
//! 3. the collector's IAM role `<cluster>-hp-observability-role` ([`observability_role`]):
//!    trusted by `pods.eks.amazonaws.com` for this EKS cluster only (`aws:SourceArn`,
//!    `aws:SourceAccount`), allowed `aps:RemoteWrite` on that one workspace and the CloudWatch
//!    Logs actions on `/aws/sagemaker/Clusters/*` ([`observability_policy`]);
//! 4. the Pod Identity association of `hyperpod-observability/hyperpod-observability-operator-otel-collector`
//!    to the role;
//! 5. the add-on with its configuration values naming the workspace ([`observability_addon_values`]),
//!    checked against the schema EKS publishes for the version before the create.
//!
//! Sources: the SageMaker developer guide's observability add-on pages —
//! <https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-setup.html>
//! (setup: AMP workspace, Pod Identity) and
//! <https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html>
//! ("Verify Pod Identity association": namespace `hyperpod-observability`, service account
//! `hyperpod-observability-operator-otel-collector`, the role's `aps:RemoteWrite` and CloudWatch
//! Logs permissions and its `pods.eks.amazonaws.com` trust with `aws:SourceArn`/`aws:SourceAccount`);
//! the configuration values' shape (`ampWorkspace.prometheusEndpoint`, `ampWorkspace.arn`,
//! `metricsProvider.<family>.level`/`scrapeInterval`) follows the reference Terraform module
//! `awslabs/awsome-distributed-training` (`1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/observability/eks_addon.tf`,
//! commit 0edaf1526bc47185ce5f827100416f99bd7b69e1).
//!
//! Decisions:
//! - **Grafana is not created.** Amazon Managed Grafana needs IAM Identity Center (or SAML) set up
//!   for the account and is billed per active user; the add-on works without it (the workspace
//!   is queryable by any Grafana with SigV4, and `amgWorkspace` can be added to the add-on later).
//!   The reference module only creates one in the regions that offer it, behind a flag.
//! - **OFF keeps the workspace.** It holds the cluster's metric history (AMP keeps samples 150
//!   days by default); OFF stops the collection (add-on, association, role, in that order) and
//!   turning the feature on again writes to the same workspace, found by its tags. Deleting the
//!   cluster deletes the workspace (`workflow::delete_cluster`), after the EKS control plane (the
//!   add-on writes to it until then).
//!
//! # Guarantees
//! - One workspace per cluster across crashes: `observe` lists the workspaces by alias and
//!   adopts the one carrying our ownership tags for the cluster (an alias is not unique in AMP;
//!   a same-alias workspace without our tags is never adopted, changed or deleted), and `submit`
//!   sends a `clientToken` persisted before the call, so a server killed between CreateWorkspace
//!   and the record of its id finds that workspace on resume instead of creating a second.
//! - An owned workspace in `CREATION_FAILED` fails the attempt; the retry deletes it and creates
//!   a new one with the attempt's own token.
//! - Delete-cluster's `prometheus_workspace` step is finished only when AMP no longer lists a
//!   workspace of ours: a `DELETING` one is waited for, so "deleted" means gone.

use super::steps::{AddonTarget, EnsureAddon, PodIdentityTarget, addon_create_token, pod_identity_trust_policy};
use crate::addon_schema;
use crate::engine::{Observation, Progress, StepContext, StepError, StepExecutor};
use crate::operation::{ResourceRef, StepSpec};
use crate::provider::*;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// EKS add-on of HyperPod observability.
pub const OBSERVABILITY_ADDON: &str = "amazon-sagemaker-hyperpod-observability";
/// Namespace and service account of the add-on's OpenTelemetry collector (its Pod Identity).
pub const OBSERVABILITY_NAMESPACE: &str = "hyperpod-observability";
pub const OBSERVABILITY_SERVICE_ACCOUNT: &str = "hyperpod-observability-operator-otel-collector";
/// Step keys.
pub const PROMETHEUS_STEP: &str = "prometheus_workspace";
pub const OBSERVABILITY_ROLE_STEP: &str = "observability_role";
pub const OBSERVABILITY_IDENTITY_STEP: &str = "observability_identity";
pub const REMOVE_OBSERVABILITY_IDENTITY_STEP: &str = "remove_observability_identity";
pub const REMOVE_OBSERVABILITY_ROLE_STEP: &str = "remove_observability_role";
const POD_IDENTITY_AGENT: &str = "addon:eks-pod-identity-agent";

/// The collector's Pod Identity role.
pub fn observability_role(cluster: &str) -> String {
    format!("{cluster}-hp-observability-role")
}

/// The collector's service account bound to its role.
pub fn observability_identity(target: AddonTarget) -> PodIdentityTarget {
    let role = observability_role(&target.cluster);
    PodIdentityTarget {
        target,
        namespace: OBSERVABILITY_NAMESPACE.into(),
        service_account: OBSERVABILITY_SERVICE_ACCOUNT.into(),
        role,
    }
}

/// Trust of the collector's role: EKS Pod Identity for this EKS cluster of this account only,
/// as the troubleshooting page has it.
pub fn observability_trust_policy(eks_cluster_arn: &str) -> Value {
    let account = eks_cluster_arn.split(':').nth(4).unwrap_or_default();
    let mut t = pod_identity_trust_policy();
    t["Statement"][0]["Condition"] =
        json!({ "StringEquals": { "aws:SourceArn": eks_cluster_arn, "aws:SourceAccount": account } });
    t
}

/// Permissions of the collector's role: remote write to the cluster's workspace only, and the
/// CloudWatch Logs actions AWS lists on HyperPod's log groups of the workspace's region and account.
pub fn observability_policy(workspace_arn: &str) -> Value {
    // arn:aws:aps:<region>:<account>:workspace/<id>
    let parts: Vec<&str> = workspace_arn.split(':').collect();
    let (partition, region, account) = (
        parts.get(1).copied().unwrap_or("aws"),
        parts.get(3).copied().unwrap_or("*"),
        parts.get(4).copied().unwrap_or("*"),
    );
    let logs = format!("arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/*");
    json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Sid": "PrometheusAccess", "Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": workspace_arn },
            {
                "Sid": "CloudwatchLogsAccess",
                "Effect": "Allow",
                "Action": [
                    "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
                    "logs:PutLogEvents", "logs:GetLogEvents", "logs:FilterLogEvents", "logs:GetLogRecord",
                    "logs:StartQuery", "logs:StopQuery", "logs:GetQueryResults"
                ],
                "Resource": [logs.clone(), format!("{logs}:log-stream:*")]
            }
        ]
    })
}

/// Metric families of the add-on (`metricsProvider`), each at level `BASIC` every 30 s — the
/// reference module's defaults.
pub const METRIC_FAMILIES: &[&str] = &[
    "trainingMetrics",
    "inferenceMetrics",
    "taskGovernanceMetrics",
    "scalingMetrics",
    "customMetrics",
    "nodeMetrics",
    "acceleratedComputeMetrics",
    "networkMetrics",
];

/// The add-on's configuration values: the workspace it writes to (`prometheusEndpoint` without
/// its trailing `/`, as the reference module sends it) and the metric families at `BASIC`.
pub fn observability_addon_values(workspace_arn: &str, prometheus_endpoint: &str) -> Value {
    let families: serde_json::Map<String, Value> =
        METRIC_FAMILIES.iter().map(|f| (f.to_string(), json!({ "level": "BASIC", "scrapeInterval": 30 }))).collect();
    json!({
        "ampWorkspace": { "prometheusEndpoint": prometheus_endpoint.trim_end_matches('/'), "arn": workspace_arn },
        "metricsProvider": families
    })
}

fn step(key: &str, title: String, deps: &[&str], secs: u64) -> StepSpec {
    StepSpec {
        key: key.into(),
        title,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected_secs: Some(secs),
    }
}

/// The steps of turning observability on, prerequisites first.
pub fn on_steps(cluster: &str) -> Vec<StepSpec> {
    vec![
        step(
            POD_IDENTITY_AGENT,
            "Ensure EKS add-on eks-pod-identity-agent (observability prerequisite)".into(),
            &[],
            60,
        ),
        step(
            PROMETHEUS_STEP,
            format!("Create Amazon Managed Service for Prometheus workspace {}", prometheus_alias(cluster)),
            &[],
            60,
        ),
        step(
            OBSERVABILITY_ROLE_STEP,
            format!(
                "Create IAM role {} for the observability collector (trusted by pods.eks.amazonaws.com for this cluster, \
                 remote write to the workspace, HyperPod's CloudWatch log groups)",
                observability_role(cluster)
            ),
            &[PROMETHEUS_STEP],
            10,
        ),
        step(
            OBSERVABILITY_IDENTITY_STEP,
            format!(
                "Associate {OBSERVABILITY_NAMESPACE}/{OBSERVABILITY_SERVICE_ACCOUNT} with the role (EKS Pod Identity)"
            ),
            &[OBSERVABILITY_ROLE_STEP, POD_IDENTITY_AGENT],
            10,
        ),
        step(
            &format!("addon:{OBSERVABILITY_ADDON}"),
            format!("Install HyperPod observability ({OBSERVABILITY_ADDON}) writing to the workspace"),
            &[POD_IDENTITY_AGENT, PROMETHEUS_STEP, OBSERVABILITY_IDENTITY_STEP],
            180,
        ),
    ]
}

/// The steps of turning observability off: the add-on, its association, its role (the workspace
/// and its metric history stay).
pub fn off_steps(cluster: &str) -> Vec<StepSpec> {
    let remove = format!("remove:{OBSERVABILITY_ADDON}");
    vec![
        step(&remove, "Remove HyperPod observability (the Prometheus workspace and its metrics stay)".into(), &[], 60),
        step(
            REMOVE_OBSERVABILITY_IDENTITY_STEP,
            format!("Delete the Pod Identity association of {OBSERVABILITY_NAMESPACE}/{OBSERVABILITY_SERVICE_ACCOUNT}"),
            &[remove.as_str()],
            10,
        ),
        step(
            REMOVE_OBSERVABILITY_ROLE_STEP,
            format!("Delete IAM role {}", observability_role(cluster)),
            &[REMOVE_OBSERVABILITY_IDENTITY_STEP],
            5,
        ),
    ]
}

/// The cluster's workspaces of ours (ownership tags), not being deleted, oldest id first.
pub async fn owned_workspaces(
    aws: &dyn AwsCloud,
    region: &str,
    cluster: &str,
) -> Result<Vec<PrometheusWorkspace>, ProviderError> {
    let mut found = listed_workspaces(aws, region, cluster).await?;
    found.retain(|w| w.status != "DELETING");
    Ok(found)
}

/// Every workspace of the cluster's that AMP still lists, those being deleted included.
async fn listed_workspaces(
    aws: &dyn AwsCloud,
    region: &str,
    cluster: &str,
) -> Result<Vec<PrometheusWorkspace>, ProviderError> {
    let mut found: Vec<PrometheusWorkspace> = aws
        .list_prometheus_workspaces(region, &prometheus_alias(cluster))
        .await?
        .into_iter()
        .filter(|w| is_owned(&w.tags, cluster))
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// The cluster's usable workspace (ours, not failed), described (with its endpoint).
async fn usable_workspace(aws: &dyn AwsCloud, region: &str, cluster: &str) -> Result<PrometheusWorkspace, StepError> {
    let ws =
        owned_workspaces(aws, region, cluster).await?.into_iter().find(|w| w.status != "CREATION_FAILED").ok_or_else(
            || StepError::Invalid(format!("no Prometheus workspace {} of ours", prometheus_alias(cluster))),
        )?;
    Ok(aws.describe_prometheus_workspace(region, &ws.id).await?.unwrap_or(ws))
}

fn workspace_ref(w: &PrometheusWorkspace) -> ResourceRef {
    ResourceRef { kind: "prometheus-workspace".into(), id: w.id.clone(), arn: Some(w.arn.clone()) }
}

/// Ensures the cluster's AMP workspace (see the module's guarantees). Outputs `workspace_id`,
/// `arn` and `prometheus_endpoint`.
pub struct EnsurePrometheusWorkspace {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub cluster: String,
}

#[async_trait]
impl StepExecutor for EnsurePrometheusWorkspace {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let owned = owned_workspaces(self.aws.as_ref(), &self.region, &self.cluster).await?;
        Ok(match owned.iter().find(|w| w.status != "CREATION_FAILED") {
            Some(w) => Observation::Exists(workspace_ref(w)),
            // None, or only failed ones (the submit deletes those first).
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        for failed in owned_workspaces(self.aws.as_ref(), &self.region, &self.cluster)
            .await?
            .into_iter()
            .filter(|w| w.status == "CREATION_FAILED")
        {
            match self
                .aws
                .delete_prometheus_workspace(
                    &self.region,
                    &failed.id,
                    &amp_client_token(&format!("{}-del", cx.idempotency_token)),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if e.kind == ProviderErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Our ownership tags only: the deployment template lets the control plane set no other key.
        let tags = ownership_tags(&self.cluster, &cx.operation_id.0);
        let w = self
            .aws
            .create_prometheus_workspace(&CreatePrometheusWorkspace {
                region: self.region.clone(),
                alias: prometheus_alias(&self.cluster),
                client_token: amp_client_token(&addon_create_token(cx)),
                tags,
            })
            .await?;
        Ok(workspace_ref(&w))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(w) = self.aws.describe_prometheus_workspace(&self.region, &r.id).await? else {
            return Ok(Progress::Failed { reason: format!("Prometheus workspace {} disappeared", r.id) });
        };
        Ok(match w.state() {
            ResourceState::Active | ResourceState::Updating => Progress::Done(json!({
                "workspace_id": w.id,
                "arn": w.arn,
                "prometheus_endpoint": w.endpoint(&self.region),
            })),
            ResourceState::Failed { reason } => {
                Progress::Failed { reason: format!("{reason}; retry this step to delete it and create another") }
            }
            other => Progress::Waiting {
                detail: format!("Prometheus workspace {}: {}", w.id, super::steps::state_word(&other)),
            },
        })
    }
}

/// The collector's role: the workspace and the EKS cluster are read first (their ARNs scope
/// the policy and the trust), then it is an [`super::steps::EnsureRole`].
pub struct ObservabilityRoleStep {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub eks_cluster: String,
    pub cluster: String,
}

impl ObservabilityRoleStep {
    async fn role(&self) -> Result<super::steps::EnsureRole, StepError> {
        let ws = usable_workspace(self.aws.as_ref(), &self.region, &self.cluster).await?;
        let eks = self
            .aws
            .describe_eks_cluster(&self.region, &self.eks_cluster)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("EKS cluster {} not found", self.eks_cluster)))?;
        Ok(super::steps::EnsureRole {
            aws: self.aws.clone(),
            cluster: self.cluster.clone(),
            name: observability_role(&self.cluster),
            trust_policy: observability_trust_policy(&eks.arn),
            managed_policies: vec![],
            inline_policies: vec![("instantstart-observability".into(), observability_policy(&ws.arn))],
        })
    }
}

#[async_trait]
impl StepExecutor for ObservabilityRoleStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.role().await?.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.role().await?.submit(cx).await
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.role().await?.poll(cx, r).await
    }
}

/// Installs the add-on with the workspace in its configuration values: reads the schema of the
/// version a create would pin (`DescribeAddonConfiguration`), checks the values against it, then
/// creates that exact version. Observe and poll are [`EnsureAddon`]'s.
pub struct ObservabilityAddonStep {
    pub inner: EnsureAddon,
}

impl ObservabilityAddonStep {
    pub fn new(target: AddonTarget) -> Self {
        ObservabilityAddonStep { inner: EnsureAddon { target, addon: OBSERVABILITY_ADDON.into() } }
    }
}

#[async_trait]
impl StepExecutor for ObservabilityAddonStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.inner.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        if let Some(r) = self.inner.replace_failed().await? {
            return Ok(r);
        }
        let t = &self.inner.target;
        let ws = usable_workspace(t.aws.as_ref(), &t.region, &t.cluster).await?;
        let values = observability_addon_values(&ws.arn, &ws.endpoint(&t.region));
        let conf = t.aws.describe_addon_configuration(&t.region, &t.eks_cluster, OBSERVABILITY_ADDON, None).await?;
        addon_schema::validate(&conf.schema, &values)
            .map_err(|e| StepError::Invalid(format!("{OBSERVABILITY_ADDON} {}: {e}", conf.version)))?;
        let a = t
            .aws
            .create_addon(&CreateEksAddon {
                region: t.region.clone(),
                cluster: t.eks_cluster.clone(),
                name: OBSERVABILITY_ADDON.into(),
                version: Some(conf.version),
                client_request_token: addon_create_token(cx),
                tags: ownership_tags(&t.cluster, &cx.operation_id.0),
                configuration_values: Some(values),
            })
            .await?;
        Ok(ResourceRef { kind: "eks-addon".into(), id: a.name, arn: None })
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.inner.poll(cx, r).await
    }
}

/// Deletes the cluster's workspaces of ours (delete-cluster's `prometheus_workspace` step);
/// none counts as done, a same-alias workspace without our tags is left alone. The step is done
/// when AMP no longer lists any of ours, not when they are `DELETING`.
pub struct DeletePrometheusWorkspaces {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub cluster: String,
}

#[async_trait]
impl StepExecutor for DeletePrometheusWorkspaces {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        // Done only once AMP no longer lists any of them: one still DELETING is waited for.
        let listed = listed_workspaces(self.aws.as_ref(), &self.region, &self.cluster).await?;
        Ok(if listed.is_empty() {
            Observation::Exists(ResourceRef {
                kind: "prometheus-workspace".into(),
                id: prometheus_alias(&self.cluster),
                arn: None,
            })
        } else {
            Observation::Absent
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        for w in owned_workspaces(self.aws.as_ref(), &self.region, &self.cluster).await? {
            match self
                .aws
                .delete_prometheus_workspace(&self.region, &w.id, &amp_client_token(cx.idempotency_token))
                .await
            {
                Ok(()) => {}
                Err(e) if e.kind == ProviderErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(ResourceRef { kind: "prometheus-workspace".into(), id: prometheus_alias(&self.cluster), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        // A workspace is gone when AMP no longer lists it, not when it is DELETING: the delete
        // is finished only then (the cluster's metrics are deleted with it).
        let left = listed_workspaces(self.aws.as_ref(), &self.region, &self.cluster).await?;
        Ok(match left.iter().find(|w| w.status != "DELETING").or(left.first()) {
            None => Progress::Done(json!({ "deleted": r.id })),
            // A workspace still CREATING cannot be deleted yet: its deletion is resubmitted.
            Some(w) if w.status == "CREATING" => {
                Progress::Resubmit { detail: format!("Prometheus workspace {} is still being created", w.id) }
            }
            Some(w) => {
                Progress::Waiting { detail: format!("Prometheus workspace {}: {}", w.id, w.status.to_lowercase()) }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_is_scoped_to_the_cluster_and_its_workspace() {
        let t = observability_trust_policy("arn:aws:eks:us-east-1:111122223333:cluster/demo-eks");
        assert_eq!(t["Statement"][0]["Principal"]["Service"], "pods.eks.amazonaws.com");
        assert_eq!(t["Statement"][0]["Action"], json!(["sts:AssumeRole", "sts:TagSession"]));
        let cond = &t["Statement"][0]["Condition"]["StringEquals"];
        assert_eq!(cond["aws:SourceArn"], "arn:aws:eks:us-east-1:111122223333:cluster/demo-eks");
        assert_eq!(cond["aws:SourceAccount"], "111122223333");
        let ws = "arn:aws:aps:us-east-1:111122223333:workspace/ws-1";
        let p = observability_policy(ws);
        assert_eq!(p["Statement"][0]["Action"], "aps:RemoteWrite");
        assert_eq!(p["Statement"][0]["Resource"], ws, "remote write to this workspace only");
        assert_eq!(
            p["Statement"][1]["Resource"][0],
            "arn:aws:logs:us-east-1:111122223333:log-group:/aws/sagemaker/Clusters/*"
        );
    }

    #[test]
    fn the_addon_values_name_the_workspace() {
        let v = observability_addon_values(
            "arn:aws:aps:us-east-1:1:workspace/ws-1",
            "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/",
        );
        assert_eq!(
            v["ampWorkspace"]["prometheusEndpoint"],
            "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1"
        );
        assert_eq!(v["ampWorkspace"]["arn"], "arn:aws:aps:us-east-1:1:workspace/ws-1");
        assert_eq!(v["metricsProvider"].as_object().unwrap().len(), METRIC_FAMILIES.len());
        assert_eq!(
            v["metricsProvider"]["acceleratedComputeMetrics"],
            json!({ "level": "BASIC", "scrapeInterval": 30 })
        );
    }

    #[test]
    fn on_and_off_are_the_same_chain_reversed_and_the_workspace_stays() {
        let on: Vec<String> =
            on_steps("demo").iter().map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", "))).collect();
        assert_eq!(
            on,
            [
                "addon:eks-pod-identity-agent <- []",
                "prometheus_workspace <- []",
                "observability_role <- [prometheus_workspace]",
                "observability_identity <- [observability_role, addon:eks-pod-identity-agent]",
                "addon:amazon-sagemaker-hyperpod-observability <- [addon:eks-pod-identity-agent, prometheus_workspace, observability_identity]",
            ]
        );
        let off: Vec<String> = off_steps("demo").iter().map(|s| s.key.clone()).collect();
        assert_eq!(
            off,
            [
                "remove:amazon-sagemaker-hyperpod-observability",
                "remove_observability_identity",
                "remove_observability_role"
            ]
        );
        assert!(!off.iter().any(|k| k.contains("prometheus")), "OFF keeps the workspace");
    }
}
