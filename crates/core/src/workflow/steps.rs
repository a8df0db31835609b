//! Step executors and helpers shared by several workflows: ensuring or removing an EKS add-on,
//! an IAM role (a role step completes an adopted role's policies before it is done) or an EKS
//! Pod Identity association, placing instance groups into (planned) /20 compute subnets,
//! reading a cluster's context, reading a bucket the user named before it is adopted.

use crate::engine::{Observation, Progress, StepContext, StepError, StepExecutor};
use crate::names::DerivedNames;
use crate::operation::ResourceRef;
use crate::provider::*;
use crate::spec::{CapacitySpec, InstanceGroupSpec};
use crate::subnet::{ExistingComputeSubnet, Placement, SubnetPlanner, place_instance_group};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where an add-on lives and who owns what we create.
#[derive(Clone)]
pub struct AddonTarget {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub eks_cluster: String,
    /// InstantStart cluster name, for ownership tags.
    pub cluster: String,
}

/// Ensures an EKS add-on is installed and active. An add-on is a singleton per cluster: one
/// already installed satisfies the step whoever installed it, provided it is not older than
/// the add-on's [`addon_minimum_version`] (the step fails naming both versions otherwise).
///
/// # Guarantees
/// - An add-on of ours (ownership tags) that failed (`CREATE_FAILED`; the provider model folds
///   `DELETE_FAILED` and `UPDATE_FAILED` into the same `Failed`) fails the attempt with its
///   health issues; the next attempt (a step retry) deletes it and, once it is gone, creates it
///   again ([`Progress::Resubmit`]): EKS does not retry a failed create, and an add-on cannot
///   be created while one of the same name exists. Terraform's `aws_eks_addon` replaces a
///   failed add-on the same way. Someone else's failed add-on is never deleted (`Foreign`).
/// - An add-on being deleted is waited for, then created.
/// - One `CreateAddon` per attempt: the first attempt sends the step's token, a later attempt
///   its own ([`addon_create_token`]) — a replaced add-on's token is not reused — so a crash
///   mid-call, retried within the attempt, returns the same add-on.
pub struct EnsureAddon {
    pub target: AddonTarget,
    pub addon: String,
}

/// `ResourceRef::kind` of an add-on being deleted before it is created (again).
pub const ADDON_REPLACEMENT: &str = "eks-addon-replacement";

/// The `clientRequestToken` of an attempt's `CreateAddon`: the step's token on the first
/// attempt, `<token>-<attempt>` after (both persisted before the call).
pub fn addon_create_token(cx: &StepContext<'_>) -> String {
    if cx.attempt <= 1 { cx.idempotency_token.to_string() } else { format!("{}-{}", cx.idempotency_token, cx.attempt) }
}

impl EnsureAddon {
    fn replacement(name: &str) -> ResourceRef {
        ResourceRef { kind: ADDON_REPLACEMENT.into(), id: name.to_string(), arn: None }
    }

    /// The `observe` of an add-on create (shared by steps that create it with their own values).
    pub async fn observe_addon(&self) -> Result<Observation, StepError> {
        let t = &self.target;
        Ok(match t.aws.describe_addon(&t.region, &t.eks_cluster, &self.addon).await? {
            None => Observation::Absent,
            Some(a) if matches!(a.state, ResourceState::Deleting) => Observation::Exists(Self::replacement(&a.name)),
            Some(a) if matches!(a.state, ResourceState::Failed { .. }) && !is_owned(&a.tags, &t.cluster) => {
                Observation::Foreign {
                    reason: format!(
                        "add-on {} failed ({}) and is not tagged as InstantStart's for cluster {}; it is left alone: \
                         delete it (eks:DeleteAddon), then retry this step",
                        a.name,
                        failure(&a),
                        t.cluster
                    ),
                }
            }
            // Ours and failed: the submit replaces it.
            Some(a) if matches!(a.state, ResourceState::Failed { .. }) => Observation::Absent,
            Some(a) => Observation::Exists(ResourceRef { kind: "eks-addon".into(), id: a.name, arn: None }),
        })
    }

    /// Starts replacing our failed add-on: `DeleteAddon`, and the reference `poll` waits on
    /// until it is gone (`None`: no failed add-on of ours, create it).
    pub async fn replace_failed(&self) -> Result<Option<ResourceRef>, StepError> {
        let t = &self.target;
        let Some(a) = t.aws.describe_addon(&t.region, &t.eks_cluster, &self.addon).await? else { return Ok(None) };
        if !matches!(a.state, ResourceState::Failed { .. }) || !is_owned(&a.tags, &t.cluster) {
            return Ok(None);
        }
        match t.aws.delete_addon(&t.region, &t.eks_cluster, &a.name).await {
            Ok(()) => {}
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(Some(Self::replacement(&a.name)))
    }

    /// The `poll` of an add-on create (shared like [`Self::observe_addon`]).
    pub async fn poll_addon(&self, r: &ResourceRef) -> Result<Progress, StepError> {
        let t = &self.target;
        let found = t.aws.describe_addon(&t.region, &t.eks_cluster, &r.id).await?;
        if r.kind == ADDON_REPLACEMENT {
            return Ok(match found {
                None => Progress::Resubmit { detail: format!("add-on {} is gone; creating it", r.id) },
                Some(a) => Progress::Waiting {
                    detail: format!("add-on {}: {} (deleted before it is created again)", a.name, state_word(&a.state)),
                },
            });
        }
        let Some(a) = found else {
            return Ok(Progress::Failed { reason: format!("add-on {} disappeared", r.id) });
        };
        if let Some(minimum) = addon_minimum_version(&a.name)
            && !addon_version_at_least(&a.version, minimum)
        {
            return Ok(Progress::Failed {
                reason: format!(
                    "add-on {} is at {}, older than {minimum}, the lowest version SageMaker HyperPod accepts; update the add-on (eks:UpdateAddon) and retry this step",
                    a.name, a.version
                ),
            });
        }
        Ok(match &a.state {
            ResourceState::Active if a.health_issues.is_empty() => {
                Progress::Done(json!({ "addon": a.name, "version": a.version }))
            }
            // DEGRADED (e.g. no nodes yet to run its pods) counts as installed; say why.
            ResourceState::Active => {
                Progress::Done(json!({ "addon": a.name, "version": a.version, "health_issues": a.health_issues }))
            }
            ResourceState::Failed { .. } => Progress::Failed {
                reason: format!(
                    "add-on {} failed: {}; retry this step to delete it and create it again",
                    a.name,
                    failure(&a)
                ),
            },
            other => Progress::Waiting { detail: format!("add-on {}: {}", a.name, state_word(other)) },
        })
    }
}

/// Why an add-on failed: its state's reason, and its health issues not already in it.
fn failure(a: &EksAddon) -> String {
    let ResourceState::Failed { reason } = &a.state else { return state_word(&a.state).to_string() };
    let mut parts = vec![reason.clone()];
    parts.extend(a.health_issues.iter().filter(|i| !reason.contains(i.as_str())).cloned());
    parts.join("; ")
}

#[async_trait]
impl StepExecutor for EnsureAddon {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.observe_addon().await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        if let Some(r) = self.replace_failed().await? {
            return Ok(r);
        }
        let t = &self.target;
        let a = t
            .aws
            .create_addon(&CreateEksAddon {
                region: t.region.clone(),
                cluster: t.eks_cluster.clone(),
                name: self.addon.clone(),
                version: None,
                client_request_token: addon_create_token(cx),
                tags: ownership_tags(&t.cluster, &cx.operation_id.0),
                configuration_values: None,
            })
            .await?;
        Ok(ResourceRef { kind: "eks-addon".into(), id: a.name, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.poll_addon(r).await
    }
}

/// Removes an EKS add-on; absent already counts as done.
pub struct RemoveAddon {
    pub target: AddonTarget,
    pub addon: String,
}

#[async_trait]
impl StepExecutor for RemoveAddon {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let t = &self.target;
        Ok(match t.aws.describe_addon(&t.region, &t.eks_cluster, &self.addon).await? {
            None => Observation::Exists(ResourceRef { kind: "eks-addon".into(), id: self.addon.clone(), arn: None }),
            Some(a) if matches!(a.state, ResourceState::Deleting) => {
                Observation::Exists(ResourceRef { kind: "eks-addon".into(), id: a.name, arn: None })
            }
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let t = &self.target;
        t.aws.delete_addon(&t.region, &t.eks_cluster, &self.addon).await?;
        Ok(ResourceRef { kind: "eks-addon".into(), id: self.addon.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let t = &self.target;
        Ok(match t.aws.describe_addon(&t.region, &t.eks_cluster, &r.id).await? {
            None => Progress::Done(json!({ "removed": r.id })),
            Some(a) => Progress::Waiting { detail: format!("add-on {}: {}", a.name, state_word(&a.state)) },
        })
    }
}

/// Removes an EKS add-on InstantStart installed (ownership tags); absent, or someone else's
/// (left alone), counts as done.
pub struct RemoveOwnedAddon {
    pub target: AddonTarget,
    pub addon: String,
}

#[async_trait]
impl StepExecutor for RemoveOwnedAddon {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let t = &self.target;
        let done = ResourceRef { kind: "eks-addon".into(), id: self.addon.clone(), arn: None };
        Ok(match t.aws.describe_addon(&t.region, &t.eks_cluster, &self.addon).await {
            Ok(Some(a)) if is_owned(&a.tags, &t.cluster) && !matches!(a.state, ResourceState::Deleting) => {
                Observation::Absent
            }
            Ok(_) => Observation::Exists(done),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Observation::Exists(done),
            Err(e) => return Err(e.into()),
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let t = &self.target;
        match t.aws.delete_addon(&t.region, &t.eks_cluster, &self.addon).await {
            Ok(()) => {}
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(ResourceRef { kind: "eks-addon".into(), id: self.addon.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let t = &self.target;
        Ok(match t.aws.describe_addon(&t.region, &t.eks_cluster, &r.id).await {
            Ok(Some(a)) if is_owned(&a.tags, &t.cluster) => {
                Progress::Waiting { detail: format!("add-on {}: {}", a.name, state_word(&a.state)) }
            }
            Ok(_) => Progress::Done(json!({ "removed": r.id })),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Progress::Done(json!({ "removed": r.id })),
            Err(e) => return Err(e.into()),
        })
    }
}

/// The OIDC issuer URL of an EKS cluster (the trust anchor of its IRSA roles).
pub async fn oidc_issuer(aws: &dyn AwsCloud, region: &str, eks_cluster: &str) -> Result<String, StepError> {
    let eks = aws
        .describe_eks_cluster(region, eks_cluster)
        .await?
        .ok_or_else(|| StepError::Invalid(format!("EKS cluster {eks_cluster} not found")))?;
    eks.oidc_issuer.ok_or_else(|| StepError::Invalid(format!("EKS cluster {} has no OIDC issuer yet", eks.name)))
}

/// Ensures the IAM OIDC provider of an EKS cluster's issuer exists (`oidc_provider` steps of the
/// create pipeline and of the managed features; outputs `arn` and `issuer`). It is shared
/// cluster infrastructure: one provider per issuer, adopted whoever registered it, never
/// deleted by a feature turned off.
pub struct OidcProviderStep {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub eks_cluster: String,
    /// InstantStart cluster name (ownership tags of a provider we register).
    pub cluster: String,
}

#[async_trait]
impl StepExecutor for OidcProviderStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let issuer = oidc_issuer(self.aws.as_ref(), &self.region, &self.eks_cluster).await?;
        Ok(match self.aws.get_oidc_provider(&issuer).await? {
            Some(p) => Observation::Exists(ResourceRef { kind: "oidc-provider".into(), id: p.url, arn: Some(p.arn) }),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let issuer = oidc_issuer(self.aws.as_ref(), &self.region, &self.eks_cluster).await?;
        let p = self.aws.create_oidc_provider(&issuer, &ownership_tags(&self.cluster, &cx.operation_id.0)).await?;
        Ok(ResourceRef { kind: "oidc-provider".into(), id: p.url, arn: Some(p.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.aws.get_oidc_provider(&r.id).await? {
            Some(p) => Progress::Done(json!({ "arn": p.arn, "issuer": p.url })),
            None => Progress::Waiting { detail: "waiting for the OIDC provider to become visible".into() },
        })
    }
}

/// One word for a state, for progress details.
pub fn state_word(state: &ResourceState) -> &'static str {
    match state {
        ResourceState::Creating => "creating",
        ResourceState::Active => "active",
        ResourceState::Updating => "updating",
        ResourceState::Deleting => "deleting",
        ResourceState::Failed { .. } => "failed",
    }
}

/// Places instance groups (every capacity path through [`place_instance_group`]) in the VPC,
/// creating the /20 compute subnets that are missing when `create` is set. Returns the subnet
/// of each group, or `None` when a subnet is still missing and `create` is not set.
///
/// Idempotent: a compute subnet is found by its deterministic name before one is planned.
pub async fn place_groups(
    aws: &dyn AwsCloud,
    region: &str,
    vpc_id: &str,
    cluster: &str,
    groups: &[InstanceGroupSpec],
    create: Option<&Tags>,
) -> Result<Option<BTreeMap<String, String>>, StepError> {
    let mut network = aws.describe_network(region, vpc_id).await?;
    let mut placements = BTreeMap::new();
    for g in groups {
        let reserved = match &g.capacity {
            CapacitySpec::TrainingPlan { arn } => match aws.describe_training_plan(region, arn).await? {
                Some(plan) => Some(plan.availability_zone),
                None => return Err(StepError::Invalid(format!("training plan {arn} not found in {region}"))),
            },
            _ => None,
        };
        let compute: Vec<ExistingComputeSubnet> = network
            .subnets
            .iter()
            .filter(|sub| {
                sub.name.as_deref() == Some(DerivedNames::compute_subnet(cluster, &sub.availability_zone).as_str())
            })
            .map(|sub| ExistingComputeSubnet {
                availability_zone: sub.availability_zone.clone(),
                subnet_id: sub.id.clone(),
            })
            .collect();
        let mut planner = SubnetPlanner::new(network.vpc.cidrs.clone(), network.subnets.iter().map(|x| x.cidr));
        let placement = place_instance_group(g, reserved.as_deref(), &compute, &mut planner)
            .map_err(|e| StepError::Invalid(format!("instance group {}: {e}", g.name)))?;
        let subnet_id = match placement {
            Placement::ExistingSubnet { subnet_id, .. } | Placement::ComputeSubnet { subnet_id, .. } => subnet_id,
            Placement::NewComputeSubnet { availability_zone, cidr } => {
                let Some(tags) = create else { return Ok(None) };
                let sub = aws
                    .create_subnet(&CreateSubnet {
                        region: region.to_string(),
                        vpc_id: vpc_id.to_string(),
                        name: DerivedNames::compute_subnet(cluster, &availability_zone),
                        cidr,
                        availability_zone,
                        tags: tags.clone(),
                    })
                    .await?;
                let id = sub.id.clone();
                network.subnets.push(sub);
                id
            }
        };
        placements.insert(g.name.clone(), subnet_id);
    }
    Ok(Some(placements))
}

/// Ensures an IAM role of ours exists with exactly the requested trust policy and holding the
/// requested managed policies and inline policies, each with its requested document (policies
/// it holds beyond those are left alone; same-named foreign roles need attention).
///
/// `observe` adopts a role carrying our ownership tags whatever it holds: a server killed
/// between `CreateRole` and the attach/put calls that follow it leaves such a role without its
/// permissions. So `poll` — which runs after the phase is persisted, both after `submit` and
/// after an adoption — brings the role to the requested policies ([`poll_role`]) before it
/// reports `Done`. A role is therefore never created twice and never reported ready without
/// its permissions.
pub struct EnsureRole {
    pub aws: Arc<dyn AwsCloud>,
    /// InstantStart cluster name (ownership).
    pub cluster: String,
    pub name: String,
    pub trust_policy: serde_json::Value,
    pub managed_policies: Vec<String>,
    pub inline_policies: Vec<(String, serde_json::Value)>,
}

impl EnsureRole {
    fn request(&self, cx: &StepContext<'_>) -> CreateIamRole {
        CreateIamRole {
            name: self.name.clone(),
            trust_policy: self.trust_policy.clone(),
            managed_policies: self.managed_policies.clone(),
            inline_policies: self.inline_policies.clone(),
            tags: ownership_tags(&self.cluster, &cx.operation_id.0),
        }
    }
}

#[async_trait]
impl StepExecutor for EnsureRole {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.aws.get_role(&self.name).await? {
            Some(r) if is_owned(&r.tags, &self.cluster) => {
                Observation::Exists(ResourceRef { kind: "iam-role".into(), id: r.name, arn: Some(r.arn) })
            }
            Some(_) => Observation::Foreign {
                reason: format!(
                    "IAM role {} exists but is not tagged as InstantStart's for cluster {}",
                    self.name, self.cluster
                ),
            },
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let r = self.aws.create_role(&self.request(cx)).await?;
        Ok(ResourceRef { kind: "iam-role".into(), id: r.name, arn: Some(r.arn) })
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let mut req = self.request(cx);
        req.name.clone_from(&r.id);
        poll_role(self.aws.as_ref(), &req).await
    }
}

/// The `poll` of a role step: waits until the role is visible, then brings it to `req`'s trust
/// policy, managed and inline policies ([`IamApi::ensure_role_policies`], idempotent) and
/// reports it done with outputs `role_name` and `role_arn`. It runs after a fresh create as
/// after an adoption, so a role adopted from an attempt interrupted between `CreateRole` and its
/// policies is completed here rather than created again.
pub async fn poll_role(aws: &dyn AwsCloud, req: &CreateIamRole) -> Result<Progress, StepError> {
    let Some(role) = aws.get_role(&req.name).await? else {
        // IAM is eventually consistent: a new role may not be visible yet.
        return Ok(Progress::Waiting { detail: "waiting for the IAM role to become visible".into() });
    };
    match aws.ensure_role_policies(req).await {
        Ok(()) => Ok(Progress::Done(json!({ "role_name": role.name, "role_arn": role.arn }))),
        // Visible to GetRole but not yet to the policy calls (eventual consistency): try again.
        Err(e) if e.kind == ProviderErrorKind::NotFound => {
            Ok(Progress::Waiting { detail: format!("waiting for IAM role {} to accept its policies", req.name) })
        }
        Err(e) => Err(e.into()),
    }
}

/// Removes an IAM role of ours; absent counts as done, a foreign one is left alone.
pub struct RemoveRole {
    pub aws: Arc<dyn AwsCloud>,
    pub cluster: String,
    pub name: String,
}

#[async_trait]
impl StepExecutor for RemoveRole {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.aws.get_role(&self.name).await? {
            None => Observation::Exists(ResourceRef { kind: "iam-role".into(), id: self.name.clone(), arn: None }),
            Some(r) if !is_owned(&r.tags, &self.cluster) => Observation::Foreign {
                reason: format!("IAM role {} is not tagged as InstantStart's; it is left alone", self.name),
            },
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.aws.delete_role(&self.name).await?;
        Ok(ResourceRef { kind: "iam-role".into(), id: self.name.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.aws.get_role(&r.id).await? {
            None => Progress::Done(json!({ "deleted": r.id })),
            Some(_) => Progress::Waiting { detail: format!("IAM role {}: deleting", r.id) },
        })
    }
}

/// The `Condition` of every bucket-scoped statement InstantStart puts on a role: the bucket
/// must belong to the role's own account (`s3:ResourceAccount` against the policy variable
/// `${aws:PrincipalAccount}`; IAM user guide `reference_policies_condition-keys` and
/// `reference_policies_variables`), so a bucket of the same name in another account is refused
/// by IAM even when a name check in our code were wrong.
pub fn own_account_buckets() -> Value {
    serde_json::json!({ "StringEquals": { "s3:ResourceAccount": "${aws:PrincipalAccount}" } })
}

/// Trust policy of a role assumed through EKS Pod Identity: the `pods.eks.amazonaws.com`
/// service principal with `sts:AssumeRole` and `sts:TagSession` (the agent tags the session
/// with the cluster, namespace and service account), as EKS documents for Pod Identity roles.
pub fn pod_identity_trust_policy() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
            "Effect": "Allow",
            "Principal": { "Service": "pods.eks.amazonaws.com" },
            "Action": ["sts:AssumeRole", "sts:TagSession"]
        }]
    })
}

/// One service account bound (or to be bound) to one role through EKS Pod Identity.
#[derive(Clone)]
pub struct PodIdentityTarget {
    pub target: AddonTarget,
    pub namespace: String,
    pub service_account: String,
    /// IAM role name (created by an earlier role step); its ARN is read when submitting.
    pub role: String,
}

impl PodIdentityTarget {
    async fn current(&self) -> Result<Option<PodIdentityAssociation>, StepError> {
        let t = &self.target;
        Ok(t.aws
            .list_pod_identity_associations(&t.region, &t.eks_cluster, &self.namespace, &self.service_account)
            .await?
            .into_iter()
            .next())
    }

    /// Like `current`, but a cluster that is gone has no associations (a retried deletion).
    async fn current_or_gone(&self) -> Result<Option<PodIdentityAssociation>, StepError> {
        match self.current().await {
            Err(StepError::Provider(e)) if e.kind == ProviderErrorKind::NotFound => Ok(None),
            other => other,
        }
    }

    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.service_account)
    }

    fn reference(a: &PodIdentityAssociation) -> ResourceRef {
        ResourceRef { kind: "pod-identity-association".into(), id: a.id.clone(), arn: Some(a.arn.clone()) }
    }
}

/// Ensures an EKS Pod Identity association of `namespace/service_account` to our role.
///
/// # Guarantees
/// - `observe` lists the associations of that service account first (EKS allows one): ours
///   (ownership tags) is adopted, someone else's is `Foreign` (never changed, never deleted).
/// - `submit` runs after the engine persisted its idempotency token and sends it as
///   `clientRequestToken`, so a retry after a crash mid-call returns the same association.
/// - Done only when the association is listed with our role's ARN.
pub struct EnsurePodIdentity(pub PodIdentityTarget);

#[async_trait]
impl StepExecutor for EnsurePodIdentity {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let p = &self.0;
        Ok(match p.current().await? {
            Some(a) if is_owned(&a.tags, &p.target.cluster) => Observation::Exists(PodIdentityTarget::reference(&a)),
            Some(a) => Observation::Foreign {
                reason: format!(
                    "service account {} already has Pod Identity association {} (role {}) that is not tagged as InstantStart's for cluster {}; it is left alone",
                    p.id(),
                    a.id,
                    a.role_arn,
                    p.target.cluster
                ),
            },
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let p = &self.0;
        let t = &p.target;
        let role = t
            .aws
            .get_role(&p.role)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("IAM role {} not found", p.role)))?;
        let a = t
            .aws
            .create_pod_identity_association(&CreatePodIdentityAssociation {
                region: t.region.clone(),
                cluster: t.eks_cluster.clone(),
                namespace: p.namespace.clone(),
                service_account: p.service_account.clone(),
                role_arn: role.arn,
                client_request_token: cx.idempotency_token.to_string(),
                tags: ownership_tags(&t.cluster, &cx.operation_id.0),
            })
            .await?;
        Ok(PodIdentityTarget::reference(&a))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let p = &self.0;
        Ok(match p.current().await? {
            Some(a) if a.id == r.id => Progress::Done(json!({
                "association_id": a.id,
                "namespace": a.namespace,
                "service_account": a.service_account,
                "role_arn": a.role_arn,
            })),
            Some(a) => Progress::Failed {
                reason: format!("service account {} is now associated by {} instead of {}", p.id(), a.id, r.id),
            },
            None => Progress::Waiting { detail: format!("waiting for Pod Identity association of {}", p.id()) },
        })
    }
}

/// Removes our EKS Pod Identity association of `namespace/service_account`; none counts as
/// done, someone else's is left alone (`Foreign`).
pub struct RemovePodIdentity(pub PodIdentityTarget);

#[async_trait]
impl StepExecutor for RemovePodIdentity {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let p = &self.0;
        Ok(match p.current_or_gone().await? {
            None => Observation::Exists(ResourceRef { kind: "pod-identity-association".into(), id: p.id(), arn: None }),
            Some(a) if !is_owned(&a.tags, &p.target.cluster) => Observation::Foreign {
                reason: format!(
                    "Pod Identity association {} of {} is not tagged as InstantStart's; it is left alone",
                    a.id,
                    p.id()
                ),
            },
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let p = &self.0;
        let t = &p.target;
        if let Some(a) = p.current_or_gone().await? {
            match t.aws.delete_pod_identity_association(&t.region, &t.eks_cluster, &a.id).await {
                Ok(()) => {}
                Err(e) if e.kind == ProviderErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(PodIdentityTarget::reference(&a));
        }
        Ok(ResourceRef { kind: "pod-identity-association".into(), id: p.id(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let p = &self.0;
        Ok(match p.current_or_gone().await? {
            Some(a) if is_owned(&a.tags, &p.target.cluster) => {
                Progress::Waiting { detail: format!("Pod Identity association {}: deleting", a.id) }
            }
            _ => Progress::Done(json!({ "removed": r.id, "service_account": p.id() })),
        })
    }
}

/// A bucket the user named, read (HeadBucket) before it is adopted: `None` when it does not
/// exist. Another account's bucket — S3 answers `403` to a request carrying this account as
/// `ExpectedBucketOwner`, which the AWS adapter sends on every call naming a bucket
/// (docs/aws-preconditions.md) — is a 422 on `field`, before anything is recorded.
pub async fn user_named_bucket(
    aws: &dyn AwsCloud,
    field: &str,
    bucket: &str,
) -> Result<Option<Bucket>, crate::engine::EngineError> {
    match crate::engine::reads::read(|| aws.describe_bucket(bucket)).await {
        Ok(b) => Ok(b),
        Err(e) if e.kind == ProviderErrorKind::AccessDenied => Err(crate::validate::ValidationError::unprocessable(
            field,
            format!(
                "S3 bucket {bucket} is not this account's (S3 refused it for the expected bucket owner: {}); name a \
                 bucket this account owns, or omit it",
                e.message
            ),
        )
        .into()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::OperationId;

    #[test]
    fn a_later_attempt_creates_an_addon_with_its_own_token() {
        let id = OperationId("op-1".into());
        let inputs = BTreeMap::new();
        let cx = |attempt| StepContext {
            operation_id: &id,
            step_key: "addon:vpc-cni",
            idempotency_token: "tok",
            attempt,
            request: &Value::Null,
            inputs: &inputs,
        };
        for (attempt, token) in [(0, "tok"), (1, "tok"), (2, "tok-2"), (3, "tok-3")] {
            assert_eq!(addon_create_token(&cx(attempt)), token, "attempt {attempt}");
        }
    }
}
