//! The AWS Load Balancer Controller, installed by create-cluster (steps `oidc_provider` →
//! `lb_controller_role` → `chart:aws-load-balancer-controller`) and removed by delete-cluster
//! (the `load_balancer` endpoints' Services first, [`RemoveLoadBalancerServices`], so the
//! controller deletes their NLBs; then the release, then the role).
//!
//! A `load_balancer` endpoint exposure is a `LoadBalancer` Service that only the controller turns
//! into an NLB. AWS documents it as a Helm chart (`aws-load-balancer-controller` from
//! `https://aws.github.io/eks-charts`, release and namespace `kube-system`) whose service account
//! assumes an IAM role with the controller's published policy through IRSA. Here:
//!
//! - the role `<cluster>-lb-controller-role` trusts only `kube-system/aws-load-balancer-controller`
//!   through the cluster's IAM OIDC provider and carries the policy published with the chart's app
//!   version (`vendor/iam/aws-load-balancer-controller-v3.5.0-iam_policy.json`, byte for byte) as
//!   its inline policy;
//! - the chart is [`AWS_LOAD_BALANCER_CONTROLLER`] with `clusterName`, `region`, `vpcId` and the
//!   service account's `eks.amazonaws.com/role-arn` annotation, computed when the step submits
//!   (the role's ARN from `lb_controller_role`, the VPC from `DescribeCluster`).
//!
//! # Guarantees
//!
//! Observe before submit as every step: the role is adopted only with our tags and completed
//! (`EnsureRole`), the release adopted when deployed at the pinned version. Imported clusters get
//! none of this; their `load_balancer` preflight names the chart and the step in its remedy.

use super::charts::EnsureChart;
use super::steps::{EnsureRole, oidc_issuer};
use crate::engine::{Observation, Progress, StepContext, StepError, StepExecutor};
use crate::operation::ResourceRef;
use crate::provider::*;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// Step creating the controller's IAM role.
pub const LB_CONTROLLER_ROLE_STEP: &str = "lb_controller_role";
/// Namespace and service account of the controller (the chart's, for release
/// `aws-load-balancer-controller` in `kube-system`).
pub const LB_CONTROLLER_NAMESPACE: &str = "kube-system";
pub const LB_CONTROLLER_SERVICE_ACCOUNT: &str = "aws-load-balancer-controller";
/// The controller's IAM policy as published for its v3.5.0 release (vendored, byte for byte).
pub const LB_CONTROLLER_POLICY_JSON: &str =
    include_str!("../../../../vendor/iam/aws-load-balancer-controller-v3.5.0-iam_policy.json");

/// IAM role of the controller: `<cluster>-lb-controller-role` (at most 59 characters).
pub fn lb_controller_role(cluster: &str) -> String {
    format!("{cluster}-lb-controller-role")
}

/// The controller's published IAM policy.
pub fn lb_controller_policy() -> Value {
    serde_json::from_str(LB_CONTROLLER_POLICY_JSON).expect("the vendored policy is JSON (tested)")
}

/// The chart values for a cluster.
pub fn lb_controller_values(eks_cluster: &str, region: &str, vpc_id: &str, role_arn: &str) -> Value {
    json!({
        "clusterName": eks_cluster,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {
            "create": true,
            "name": LB_CONTROLLER_SERVICE_ACCOUNT,
            "annotations": { super::features::ROLE_ANNOTATION: role_arn }
        }
    })
}

/// Creates (or adopts and completes) the controller's IRSA role.
pub struct LbControllerRoleStep {
    pub aws: Arc<dyn AwsCloud>,
    pub cluster: String,
    pub region: String,
    pub eks_cluster: String,
}

impl LbControllerRoleStep {
    async fn role(&self, cx: &StepContext<'_>) -> Result<EnsureRole, StepError> {
        let issuer = oidc_issuer(self.aws.as_ref(), &self.region, &self.eks_cluster).await?;
        let oidc_arn = cx.input_str("oidc_provider", "arn")?;
        Ok(EnsureRole {
            aws: self.aws.clone(),
            cluster: self.cluster.clone(),
            name: lb_controller_role(&self.cluster),
            trust_policy: super::features::service_account_trust_policy(
                &oidc_arn,
                &issuer,
                LB_CONTROLLER_NAMESPACE,
                LB_CONTROLLER_SERVICE_ACCOUNT,
            ),
            managed_policies: vec![],
            inline_policies: vec![("aws-load-balancer-controller".into(), lb_controller_policy())],
        })
    }
}

#[async_trait]
impl StepExecutor for LbControllerRoleStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.role(cx).await?.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.role(cx).await?.submit(cx).await
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.role(cx).await?.poll(cx, r).await
    }
}

/// Installs the controller's chart with the cluster's values; observe and poll are
/// [`EnsureChart`]'s.
pub struct LbControllerChartStep {
    pub inner: EnsureChart,
    pub aws: Arc<dyn AwsCloud>,
    pub cluster: String,
}

#[async_trait]
impl StepExecutor for LbControllerChartStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.inner.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let t = &self.inner.target;
        let role_arn = match cx.input_str(LB_CONTROLLER_ROLE_STEP, "role_arn") {
            Ok(arn) => arn,
            Err(_) => {
                let name = lb_controller_role(&self.cluster);
                self.aws
                    .get_role(&name)
                    .await?
                    .ok_or_else(|| StepError::Invalid(format!("IAM role {name} not found")))?
                    .arn
            }
        };
        let eks = self
            .aws
            .describe_eks_cluster(&t.region, &t.eks_cluster)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("EKS cluster {} not found", t.eks_cluster)))?;
        let mut spec = self.inner.chart.spec_for(&t.region);
        spec.values = lb_controller_values(&t.eks_cluster, &t.region, &eks.vpc_id, &role_arn);
        self.inner.helm.install_or_upgrade(t, &spec).await?;
        Ok(ResourceRef {
            kind: "helm-release".into(),
            id: format!("{}/{}", self.inner.chart.namespace, self.inner.chart.release),
            arn: None,
        })
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.inner.poll(cx, r).await
    }
}

/// Step of delete-cluster removing the `LoadBalancer` Services before the controller goes.
pub const LB_SERVICES_STEP: &str = "load_balancer_services";

/// Deletes the cluster's `LoadBalancer` Services that InstantStart made (the Services of
/// `load_balancer` inference endpoints: label `app.kubernetes.io/managed-by: instantstart`) and
/// waits until they are gone, so the AWS Load Balancer Controller — still running: the
/// `chart:aws-load-balancer-controller` uninstall waits for this step — deletes their load
/// balancers. EKS: "If you have active services in your cluster that are associated with a load
/// balancer, you must delete those services before deleting the cluster so that the load
/// balancers are deleted properly. Otherwise, you can have orphaned resources in your VPC that
/// prevent you from being able to delete the VPC"
/// (https://docs.aws.amazon.com/eks/latest/userguide/delete-cluster.html).
///
/// Only the Services go, not the endpoints' Deployments or ScaledObjects: those hold nothing
/// outside the cluster and go with the control plane, and a Service is the one object whose
/// deletion the controller turns into the deletion of an AWS resource (it keeps the Service,
/// through its finalizer, until the load balancer is gone — hence the wait).
///
/// # Guarantees
/// - A `LoadBalancer` Service that is not InstantStart's stops the step with `needs_attention`
///   naming it (it is never deleted: the user deletes it, or the VPC could not be deleted).
/// - None left (or the cluster's API already gone) counts as done: a retry deletes nothing twice.
pub struct RemoveLoadBalancerServices {
    pub kube: Arc<dyn KubeApi>,
    pub target: KubeTarget,
}

impl RemoveLoadBalancerServices {
    /// The cluster's `LoadBalancer` Services, split into ours and others' (`None`: the API
    /// is gone with the cluster).
    async fn services(&self) -> Result<Option<(Vec<ObjectRef>, Vec<String>)>, StepError> {
        let params = ListParams { api_version: "v1".into(), kind: "Service".into(), namespace: None, labels: vec![] };
        let all = match self.kube.list(&self.target, &params).await {
            Ok(all) => all,
            Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let (mut ours, mut others) = (Vec::new(), Vec::new());
        for s in all.iter().filter(|s| s.0.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer")) {
            let Some(r) = s.object_ref() else { continue };
            if s.label(LABEL_MANAGED_BY) == Some(MANAGED_BY) {
                ours.push(r);
            } else {
                others.push(format!("{}/{}", r.namespace.as_deref().unwrap_or("default"), r.name));
            }
        }
        Ok(Some((ours, others)))
    }

    /// The Services deleted, as `namespace/name` separated by commas (empty: none).
    fn reference(deleted: &[ObjectRef]) -> ResourceRef {
        let id: Vec<String> =
            deleted.iter().map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or("default"), r.name)).collect();
        ResourceRef { kind: "load-balancer-services".into(), id: id.join(","), arn: None }
    }
}

#[async_trait]
impl StepExecutor for RemoveLoadBalancerServices {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.services().await? {
            None => Observation::Exists(Self::reference(&[])),
            Some((_, others)) if !others.is_empty() => Observation::Foreign {
                reason: format!(
                    "LoadBalancer Services {} are not InstantStart's; delete them first (a load balancer whose Service \
                     outlives the AWS Load Balancer Controller stays in the VPC, and the VPC cannot be deleted)",
                    others.join(", ")
                ),
            },
            Some((ours, _)) if ours.is_empty() => Observation::Exists(Self::reference(&[])),
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let ours = self.services().await?.map(|(ours, _)| ours).unwrap_or_default();
        for r in &ours {
            self.kube.delete(&self.target, r).await?;
        }
        Ok(Self::reference(&ours))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.services().await? {
            Some((ours, _)) if !ours.is_empty() => Progress::Waiting {
                detail: format!(
                    "waiting for {} LoadBalancer Service(s) to be deleted with their load balancers ({})",
                    ours.len(),
                    ours.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            },
            _ => Progress::Done(json!({ "deleted": r.id.split(',').filter(|s| !s.is_empty()).collect::<Vec<_>>() })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_policy_is_the_published_one() {
        let p = lb_controller_policy();
        assert_eq!(p["Version"], "2012-10-17");
        let actions: Vec<&str> = p["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| match &s["Action"] {
                Value::String(a) => vec![a.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            })
            .collect();
        for a in ["elasticloadbalancing:CreateLoadBalancer", "ec2:CreateSecurityGroup", "iam:CreateServiceLinkedRole"] {
            assert!(actions.contains(&a), "{a}");
        }
        assert!(actions.iter().all(|a| !a.ends_with(":*")), "no service wildcards");
        // Inline role policies share 10,240 characters per role (whitespace not counted).
        assert!(p.to_string().len() < 10_240);
        // Byte for byte: crates/recipes/tests/manifests.rs checks the git blob id the README names.
        let readme = include_str!("../../../../vendor/iam/README.md");
        assert!(readme.contains(&format!("| {} |", LB_CONTROLLER_POLICY_JSON.len())), "size recorded in the README");
    }

    #[test]
    fn values_name_the_cluster_vpc_and_role() {
        let v = lb_controller_values("demo-eks", "us-east-1", "vpc-1", "arn:aws:iam::1:role/demo-lb-controller-role");
        assert_eq!(v["clusterName"], "demo-eks");
        assert_eq!(v["vpcId"], "vpc-1");
        assert_eq!(v["serviceAccount"]["name"], "aws-load-balancer-controller");
        assert_eq!(
            v["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"],
            "arn:aws:iam::1:role/demo-lb-controller-role"
        );
        assert!(lb_controller_role(&"a".repeat(40)).len() <= 64);
    }
}
