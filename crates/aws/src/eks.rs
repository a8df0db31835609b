//! `EksApi` on EKS: control planes and add-ons.
//!
//! # CreateCluster
//!
//! The control plane gets the cluster role, the private subnets, both endpoint accesses
//! (public for the control plane container, private for the HyperPod nodes), the access-entry
//! API (`API_AND_CONFIG_MAP`, creator gets admin; HyperPod needs access entries), all five
//! control-plane log types, the ownership tags and the engine's persisted
//! `clientRequestToken`. If the VPC has our EFA security group (created with the network), it
//! is attached to the control plane too, so HyperPod nodes in that group reach the API server.
//! `ResourceInUseException` is adopted only when the existing cluster carries our tags.
//!
//! # Add-ons
//!
//! A create without a version pins the default version for the cluster's Kubernetes version
//! from `DescribeAddonVersions` (falling back to the newest compatible one), so what was
//! installed is recorded exactly. `DEGRADED` counts as installed (`Active`): an add-on whose
//! pods cannot be scheduled yet (no nodes before the HyperPod cluster exists) is degraded, not
//! failed. `CREATE_FAILED`/`DELETE_FAILED`/`UPDATE_FAILED` are `Failed` with EKS's health
//! issues as the reason. [`AwsProvider::update_addon`] moves an add-on to a (pinned or
//! resolved default) version, keeping configuration changes (`PRESERVE`). Configuration values
//! are sent as `configurationValues` (the JSON document as a string);
//! `DescribeAddonConfiguration` returns the version's schema (a JSON string, parsed) so the
//! workflow can check values before the create.
//!
//! # Pod Identity associations
//!
//! `CreatePodIdentityAssociation` sends cluster, namespace, service account, role ARN, the
//! engine's persisted `clientRequestToken` and our tags. `ResourceInUseException` (the service
//! account already has one) is adopted only when the existing association carries our tags.
//! Listing filters by namespace and service account (EKS allows one association per service
//! account, so one page suffices) and describes each hit for its role and tags.
//!
//! # Access entries
//!
//! `EksApi::ensure_access_entry` creates an EKS access entry for an IAM principal (with our
//! tags) and associates the given access policies at cluster or namespace scope; an existing
//! entry is adopted only when it carries our tags (HyperPod creates the entries of its
//! execution roles itself; ours is the control plane's own access to an imported cluster).

use crate::AwsProvider;
use crate::error::{invalid, malformed, sdk_error};
use crate::tags;
use async_trait::async_trait;
use aws_sdk_eks::Client as Eks;
use aws_sdk_eks::types::{
    AddonStatus, AuthenticationMode, ClusterStatus, CreateAccessConfigRequest, LogSetup, LogType, Logging,
    ResolveConflicts, VpcConfigRequest,
};
use instantstart_core::provider::{
    AccessEntry, AccessPolicy, AddonConfiguration, CreateEksAddon, CreateEksCluster, CreatePodIdentityAssociation,
    EksAddon, EksApi, EksCluster, EnsureAccessEntry, PodIdentityAssociation, ProviderError, ProviderErrorKind,
    ResourceState, Result, TAG_CLUSTER, addon_minimum_version, addon_version_at_least, is_owned,
};
use serde_json::Value;

/// Maps an EKS cluster status (with health issues for the failure reason).
pub fn cluster_state(status: Option<&ClusterStatus>, issues: &[String]) -> ResourceState {
    match status {
        Some(ClusterStatus::Active) => ResourceState::Active,
        Some(ClusterStatus::Creating | ClusterStatus::Pending) | None => ResourceState::Creating,
        Some(ClusterStatus::Updating) => ResourceState::Updating,
        Some(ClusterStatus::Deleting) => ResourceState::Deleting,
        Some(ClusterStatus::Failed) => ResourceState::Failed { reason: reason(issues, "EKS cluster FAILED") },
        Some(other) => ResourceState::Failed { reason: format!("unknown EKS cluster status {}", other.as_str()) },
    }
}

/// Maps an EKS add-on status.
pub fn addon_state(status: Option<&AddonStatus>, issues: &[String]) -> ResourceState {
    match status {
        Some(AddonStatus::Active | AddonStatus::Degraded) => ResourceState::Active,
        Some(AddonStatus::Creating) | None => ResourceState::Creating,
        Some(AddonStatus::Updating) => ResourceState::Updating,
        Some(AddonStatus::Deleting) => ResourceState::Deleting,
        Some(s @ (AddonStatus::CreateFailed | AddonStatus::DeleteFailed | AddonStatus::UpdateFailed)) => {
            ResourceState::Failed { reason: reason(issues, s.as_str()) }
        }
        Some(other) => ResourceState::Failed { reason: format!("unknown add-on status {}", other.as_str()) },
    }
}

fn reason(issues: &[String], fallback: &str) -> String {
    if issues.is_empty() { fallback.to_string() } else { issues.join("; ") }
}

fn cluster_view(region: &str, c: &aws_sdk_eks::types::Cluster) -> Result<EksCluster> {
    const API: &str = "eks:DescribeCluster";
    let issues: Vec<String> = c
        .health()
        .map(|h| {
            h.issues()
                .iter()
                .map(|i| {
                    format!("{}: {}", i.code().map(|c| c.as_str()).unwrap_or("Issue"), i.message().unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    let vpc = c.resources_vpc_config();
    Ok(EksCluster {
        name: c.name().ok_or_else(|| malformed(API, "cluster without name"))?.to_string(),
        arn: c.arn().ok_or_else(|| malformed(API, "cluster without arn"))?.to_string(),
        region: region.to_string(),
        version: c.version().unwrap_or_default().to_string(),
        endpoint: c.endpoint().map(str::to_string),
        certificate_authority: c.certificate_authority().and_then(|ca| ca.data()).map(str::to_string),
        oidc_issuer: c.identity().and_then(|i| i.oidc()).and_then(|o| o.issuer()).map(str::to_string),
        vpc_id: vpc.and_then(|v| v.vpc_id()).unwrap_or_default().to_string(),
        subnet_ids: vpc.map(|v| v.subnet_ids().to_vec()).unwrap_or_default(),
        security_group_id: vpc.and_then(|v| v.cluster_security_group_id()).map(str::to_string),
        authentication_mode: c.access_config().and_then(|a| a.authentication_mode()).map(|m| m.as_str().to_string()),
        public_access_cidrs: vpc.map(|v| v.public_access_cidrs().to_vec()).unwrap_or_default(),
        state: cluster_state(c.status(), &issues),
        tags: tags::from_eks(c.tags()),
    })
}

fn addon_view(a: &aws_sdk_eks::types::Addon) -> EksAddon {
    let issues: Vec<String> = a
        .health()
        .map(|h| {
            h.issues()
                .iter()
                .map(|i| {
                    format!("{}: {}", i.code().map(|c| c.as_str()).unwrap_or("Issue"), i.message().unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    if a.status() == Some(&AddonStatus::Degraded) {
        tracing::info!(addon = a.addon_name().unwrap_or_default(), issues = ?issues, "EKS add-on is DEGRADED");
    }
    EksAddon {
        name: a.addon_name().unwrap_or_default().to_string(),
        version: a.addon_version().unwrap_or_default().to_string(),
        state: addon_state(a.status(), &issues),
        tags: tags::from_eks(a.tags()),
        health_issues: issues,
        configuration_values: a.configuration_values().and_then(|v| serde_json::from_str(v).ok()),
    }
}

fn association_view(api: &str, a: &aws_sdk_eks::types::PodIdentityAssociation) -> Result<PodIdentityAssociation> {
    Ok(PodIdentityAssociation {
        id: a.association_id().ok_or_else(|| malformed(api, "association without associationId"))?.to_string(),
        arn: a.association_arn().unwrap_or_default().to_string(),
        namespace: a.namespace().unwrap_or_default().to_string(),
        service_account: a.service_account().unwrap_or_default().to_string(),
        role_arn: a.role_arn().unwrap_or_default().to_string(),
        tags: tags::from_eks(a.tags()),
    })
}

async fn list_associations(
    eks: &Eks,
    cluster: &str,
    namespace: &str,
    service_account: &str,
) -> Result<Vec<PodIdentityAssociation>> {
    const LIST: &str = "eks:ListPodIdentityAssociations";
    const DESCRIBE: &str = "eks:DescribePodIdentityAssociation";
    let out = eks
        .list_pod_identity_associations()
        .cluster_name(cluster)
        .namespace(namespace)
        .service_account(service_account)
        .send()
        .await
        .map_err(|e| sdk_error(LIST, e))?;
    let mut found = Vec::new();
    for summary in out.associations() {
        let Some(id) = summary.association_id() else { continue };
        match eks
            .describe_pod_identity_association()
            .cluster_name(cluster)
            .association_id(id)
            .send()
            .await
            .map_err(|e| sdk_error(DESCRIBE, e))
        {
            Ok(d) => {
                if let Some(a) = d.association() {
                    found.push(association_view(DESCRIBE, a)?);
                }
            }
            // Deleted between the list and the describe.
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

async fn describe_cluster(eks: &Eks, region: &str, name: &str) -> Result<Option<EksCluster>> {
    const API: &str = "eks:DescribeCluster";
    match eks.describe_cluster().name(name).send().await.map_err(|e| sdk_error(API, e)) {
        Ok(out) => out.cluster().map(|c| cluster_view(region, c)).transpose(),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

async fn describe_addon(eks: &Eks, cluster: &str, addon: &str) -> Result<Option<EksAddon>> {
    const API: &str = "eks:DescribeAddon";
    match eks.describe_addon().cluster_name(cluster).addon_name(addon).send().await.map_err(|e| sdk_error(API, e)) {
        Ok(out) => Ok(out.addon().map(addon_view)),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The version of `addon` to pin for Kubernetes `k8s_version`: the one EKS marks as default
/// for that version, else the first (newest) compatible one — in both cases only versions of
/// at least the add-on's [`addon_minimum_version`] (the VPC CNI: 1.18.3, which HyperPod
/// requires).
pub async fn resolve_addon_version(eks: &Eks, addon: &str, k8s_version: &str) -> Result<String> {
    const API: &str = "eks:DescribeAddonVersions";
    let infos = eks
        .describe_addon_versions()
        .addon_name(addon)
        .kubernetes_version(k8s_version)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error(API, e))?;
    pick_addon_version(&infos, addon, k8s_version).ok_or_else(|| {
        let at_least = addon_minimum_version(addon).map(|m| format!(" at least {m}")).unwrap_or_default();
        invalid(API, format!("EKS offers no version{at_least} of add-on {addon} for Kubernetes {k8s_version}"))
    })
}

/// See [`resolve_addon_version`].
pub fn pick_addon_version(infos: &[aws_sdk_eks::types::AddonInfo], addon: &str, k8s_version: &str) -> Option<String> {
    let versions: Vec<&aws_sdk_eks::types::AddonVersionInfo> =
        infos.iter().filter(|i| i.addon_name() == Some(addon)).flat_map(|i| i.addon_versions()).collect();
    let minimum = addon_minimum_version(addon);
    let compatible = |v: &&&aws_sdk_eks::types::AddonVersionInfo, default_only: bool| {
        minimum.is_none_or(|m| v.addon_version().is_some_and(|x| addon_version_at_least(x, m)))
            && v.compatibilities()
                .iter()
                .any(|c| c.cluster_version() == Some(k8s_version) && (!default_only || c.default_version()))
    };
    versions
        .iter()
        .find(|v| compatible(v, true))
        .or_else(|| versions.iter().find(|v| compatible(v, false)))
        .and_then(|v| v.addon_version().map(str::to_string))
}

/// Our EFA security group in the VPC of `subnet_ids`, if the network step created one.
async fn efa_security_group(
    p: &AwsProvider,
    region: &str,
    subnet_ids: &[String],
    cluster: &str,
) -> Result<Option<String>> {
    let ec2 = &p.region(region).await?.ec2;
    let Some(first) = subnet_ids.first() else { return Ok(None) };
    let out = ec2.describe_subnets().subnet_ids(first).send().await.map_err(|e| sdk_error("ec2:DescribeSubnets", e))?;
    let Some(vpc) = out.subnets().first().and_then(|s| s.vpc_id()) else { return Ok(None) };
    let groups = ec2
        .describe_security_groups()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(vpc).build())
        .send()
        .await
        .map_err(|e| sdk_error("ec2:DescribeSecurityGroups", e))?;
    Ok(groups
        .security_groups()
        .iter()
        .find(|g| {
            let t = tags::from_ec2(g.tags());
            t.get(crate::network::TAG_ROLE).map(String::as_str) == Some("efa-sg") && is_owned(&t, cluster)
        })
        .and_then(|g| g.group_id().map(str::to_string)))
}

fn all_logs() -> Logging {
    Logging::builder()
        .cluster_logging(
            LogSetup::builder()
                .types(LogType::Api)
                .types(LogType::Audit)
                .types(LogType::Authenticator)
                .types(LogType::ControllerManager)
                .types(LogType::Scheduler)
                .enabled(true)
                .build(),
        )
        .build()
}

#[async_trait]
impl EksApi for AwsProvider {
    async fn describe_eks_cluster(&self, region: &str, name: &str) -> Result<Option<EksCluster>> {
        let c = self.region(region).await?;
        let mut cluster = describe_cluster(&c.eks, region, name).await?;
        // EKS reports the VPC; an implementation that omits it (moto) gets it from a subnet.
        if let Some(cl) = cluster.as_mut().filter(|cl| cl.vpc_id.is_empty())
            && let Some(subnet) = cl.subnet_ids.first()
        {
            let out = c
                .ec2
                .describe_subnets()
                .subnet_ids(subnet)
                .send()
                .await
                .map_err(|e| sdk_error("ec2:DescribeSubnets", e))?;
            cl.vpc_id = out.subnets().first().and_then(|s| s.vpc_id()).unwrap_or_default().to_string();
        }
        Ok(cluster)
    }

    async fn list_eks_clusters(&self, region: &str) -> Result<Vec<String>> {
        const API: &str = "eks:ListClusters";
        let c = self.region(region).await?;
        c.eks.list_clusters().into_paginator().items().send().try_collect().await.map_err(|e| sdk_error(API, e))
    }

    async fn create_eks_cluster(&self, req: &CreateEksCluster) -> Result<EksCluster> {
        const API: &str = "eks:CreateCluster";
        let c = self.region(&req.region).await?;
        let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
        let sg = efa_security_group(self, &req.region, &req.subnet_ids, &cluster).await?;
        let result = c
            .eks
            .create_cluster()
            .name(&req.name)
            .version(&req.version)
            .role_arn(&req.role_arn)
            .resources_vpc_config(
                VpcConfigRequest::builder()
                    .set_subnet_ids(Some(req.subnet_ids.clone()))
                    .set_security_group_ids(sg.map(|g| vec![g]))
                    .endpoint_public_access(true)
                    .endpoint_private_access(true)
                    .set_public_access_cidrs(Some(req.public_access_cidrs.clone()).filter(|c| !c.is_empty()))
                    .build(),
            )
            .access_config(
                CreateAccessConfigRequest::builder()
                    .authentication_mode(AuthenticationMode::ApiAndConfigMap)
                    .bootstrap_cluster_creator_admin_permissions(true)
                    .build(),
            )
            .logging(all_logs())
            .client_request_token(&req.client_request_token)
            .set_tags(Some(tags::eks(&req.tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e));
        match result {
            Ok(out) => out
                .cluster()
                .map(|x| cluster_view(&req.region, x))
                .transpose()?
                .ok_or_else(|| malformed(API, "no cluster")),
            Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
                match describe_cluster(&c.eks, &req.region, &req.name).await? {
                    Some(existing) if is_owned(&existing.tags, &cluster) => Ok(existing),
                    _ => Err(ProviderError::new(
                        API,
                        ProviderErrorKind::AlreadyExists,
                        format!("{}; it is not tagged as InstantStart's for cluster {cluster}", e.message),
                    )),
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn delete_eks_cluster(&self, region: &str, name: &str) -> Result<()> {
        const API: &str = "eks:DeleteCluster";
        let c = self.region(region).await?;
        match c.eks.delete_cluster().name(name).send().await.map_err(|e| sdk_error(API, e)) {
            Ok(_) => Ok(()),
            // ResourceInUse on a delete: something still uses the cluster (node groups, a
            // HyperPod cluster), not "already exists".
            Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
                Err(ProviderError::new(API, ProviderErrorKind::Conflict, e.message))
            }
            Err(e) => Err(e),
        }
    }

    async fn describe_addon(&self, region: &str, cluster: &str, addon: &str) -> Result<Option<EksAddon>> {
        let c = self.region(region).await?;
        describe_addon(&c.eks, cluster, addon).await
    }

    async fn create_addon(&self, req: &CreateEksAddon) -> Result<EksAddon> {
        const API: &str = "eks:CreateAddon";
        let c = self.region(&req.region).await?;
        let version = match &req.version {
            Some(v) => v.clone(),
            None => {
                let k8s = describe_cluster(&c.eks, &req.region, &req.cluster)
                    .await?
                    .ok_or_else(|| {
                        ProviderError::not_found(API, format!("No cluster found for name: {}.", req.cluster))
                    })?
                    .version;
                resolve_addon_version(&c.eks, &req.name, &k8s).await?
            }
        };
        let result = c
            .eks
            .create_addon()
            .cluster_name(&req.cluster)
            .addon_name(&req.name)
            .addon_version(&version)
            .resolve_conflicts(ResolveConflicts::Overwrite)
            .client_request_token(&req.client_request_token)
            .set_tags(Some(tags::eks(&req.tags)))
            .set_configuration_values(req.configuration_values.as_ref().map(Value::to_string))
            .send()
            .await
            .map_err(|e| sdk_error(API, e));
        match result {
            Ok(out) => out.addon().map(addon_view).ok_or_else(|| malformed(API, "no addon")),
            Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
                let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
                match describe_addon(&c.eks, &req.cluster, &req.name).await? {
                    Some(a) if is_owned(&a.tags, &cluster) => Ok(a),
                    _ => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn describe_addon_configuration(
        &self,
        region: &str,
        cluster: &str,
        addon: &str,
        version: Option<&str>,
    ) -> Result<AddonConfiguration> {
        const API: &str = "eks:DescribeAddonConfiguration";
        let c = self.region(region).await?;
        let version = match version {
            Some(v) => v.to_string(),
            None => {
                let k8s = describe_cluster(&c.eks, region, cluster)
                    .await?
                    .ok_or_else(|| ProviderError::not_found(API, format!("No cluster found for name: {cluster}.")))?
                    .version;
                resolve_addon_version(&c.eks, addon, &k8s).await?
            }
        };
        let out = c
            .eks
            .describe_addon_configuration()
            .addon_name(addon)
            .addon_version(&version)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let schema = match out.configuration_schema() {
            // An add-on without configuration publishes no schema: any values would be refused,
            // which an empty `additionalProperties: false` object schema says exactly.
            None | Some("") => serde_json::json!({ "type": "object", "additionalProperties": false }),
            Some(text) => serde_json::from_str(text)
                .map_err(|e| malformed(API, &format!("configurationSchema of {addon} {version} is not JSON: {e}")))?,
        };
        Ok(AddonConfiguration { addon: addon.to_string(), version, schema })
    }

    async fn delete_addon(&self, region: &str, cluster: &str, addon: &str) -> Result<()> {
        const API: &str = "eks:DeleteAddon";
        let c = self.region(region).await?;
        c.eks
            .delete_addon()
            .cluster_name(cluster)
            .addon_name(addon)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| sdk_error(API, e))
    }

    async fn list_pod_identity_associations(
        &self,
        region: &str,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<PodIdentityAssociation>> {
        let c = self.region(region).await?;
        list_associations(&c.eks, cluster, namespace, service_account).await
    }

    async fn create_pod_identity_association(
        &self,
        req: &CreatePodIdentityAssociation,
    ) -> Result<PodIdentityAssociation> {
        const API: &str = "eks:CreatePodIdentityAssociation";
        let c = self.region(&req.region).await?;
        let result = c
            .eks
            .create_pod_identity_association()
            .cluster_name(&req.cluster)
            .namespace(&req.namespace)
            .service_account(&req.service_account)
            .role_arn(&req.role_arn)
            .client_request_token(&req.client_request_token)
            .set_tags(Some(tags::eks(&req.tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e));
        match result {
            Ok(out) => association_view(API, out.association().ok_or_else(|| malformed(API, "no association"))?),
            Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
                let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
                let existing = list_associations(&c.eks, &req.cluster, &req.namespace, &req.service_account).await?;
                match existing.into_iter().find(|a| is_owned(&a.tags, &cluster)) {
                    Some(a) => Ok(a),
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    async fn delete_pod_identity_association(&self, region: &str, cluster: &str, association_id: &str) -> Result<()> {
        const API: &str = "eks:DeletePodIdentityAssociation";
        let c = self.region(region).await?;
        c.eks
            .delete_pod_identity_association()
            .cluster_name(cluster)
            .association_id(association_id)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| sdk_error(API, e))
    }

    /// The access entry of `principal_arn` with its associated policies, if any.
    async fn describe_access_entry(
        &self,
        region: &str,
        cluster: &str,
        principal_arn: &str,
    ) -> Result<Option<AccessEntry>> {
        const API: &str = "eks:DescribeAccessEntry";
        let c = self.region(region).await?;
        let out = match c
            .eks
            .describe_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal_arn)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))
        {
            Ok(o) => o,
            Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(entry) = out.access_entry() else { return Ok(None) };
        let associated = c
            .eks
            .list_associated_access_policies()
            .cluster_name(cluster)
            .principal_arn(principal_arn)
            .into_paginator()
            .send()
            .try_collect()
            .await
            .map_err(|e| sdk_error("eks:ListAssociatedAccessPolicies", e))?;
        let policies = associated
            .iter()
            .flat_map(|page| page.associated_access_policies())
            .filter_map(|p| {
                Some(AccessPolicy {
                    policy_arn: p.policy_arn()?.to_string(),
                    namespaces: p.access_scope().map(|s| s.namespaces().to_vec()).unwrap_or_default(),
                })
            })
            .collect();
        Ok(Some(AccessEntry {
            principal_arn: entry.principal_arn().unwrap_or(principal_arn).to_string(),
            kind: entry.r#type().unwrap_or("STANDARD").to_string(),
            username: entry.username().map(str::to_string),
            policies,
            tags: tags::from_eks(entry.tags()),
        }))
    }

    /// Creates the access entry (or adopts ours) and associates every requested policy
    /// (`AssociateAccessPolicy` is idempotent and updates the scope).
    async fn ensure_access_entry(&self, req: &EnsureAccessEntry) -> Result<AccessEntry> {
        const API: &str = "eks:CreateAccessEntry";
        let c = self.region(&req.region).await?;
        let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
        let created = c
            .eks
            .create_access_entry()
            .cluster_name(&req.cluster)
            .principal_arn(&req.principal_arn)
            .r#type(&req.kind)
            .client_request_token(&req.client_request_token)
            .set_tags(Some(tags::eks(&req.tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e));
        match created {
            Ok(_) => {}
            Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
                match self.describe_access_entry(&req.region, &req.cluster, &req.principal_arn).await? {
                    Some(existing) if is_owned(&existing.tags, &cluster) => {}
                    _ => {
                        return Err(ProviderError::new(
                            API,
                            ProviderErrorKind::AlreadyExists,
                            format!("{}; it is not tagged as InstantStart's for cluster {cluster}", e.message),
                        ));
                    }
                }
            }
            Err(e) => return Err(e),
        }
        for p in &req.policies {
            c.eks
                .associate_access_policy()
                .cluster_name(&req.cluster)
                .principal_arn(&req.principal_arn)
                .policy_arn(&p.policy_arn)
                .access_scope(scope(p))
                .send()
                .await
                .map_err(|e| sdk_error("eks:AssociateAccessPolicy", e))?;
        }
        self.describe_access_entry(&req.region, &req.cluster, &req.principal_arn)
            .await?
            .ok_or_else(|| ProviderError::new(API, ProviderErrorKind::Transient, "the access entry is not visible yet"))
    }

    /// Deletes an access entry (its policy associations go with it).
    async fn delete_access_entry(&self, region: &str, cluster: &str, principal_arn: &str) -> Result<()> {
        const API: &str = "eks:DeleteAccessEntry";
        let c = self.region(region).await?;
        c.eks
            .delete_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal_arn)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| sdk_error(API, e))
    }
}

/// Where an EKS cluster's API server is and the CA that signs its certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct EksEndpointInfo {
    /// `https://<id>.<zone>.<region>.eks.amazonaws.com`.
    pub endpoint: String,
    /// `certificateAuthority.data` as EKS returns it (base64 of a PEM bundle).
    pub certificate_authority: String,
}

impl std::fmt::Debug for EksEndpointInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EksEndpointInfo").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

fn scope(p: &AccessPolicy) -> aws_sdk_eks::types::AccessScope {
    use aws_sdk_eks::types::{AccessScope, AccessScopeType};
    if p.namespaces.is_empty() {
        AccessScope::builder().r#type(AccessScopeType::Cluster).build()
    } else {
        AccessScope::builder().r#type(AccessScopeType::Namespace).set_namespaces(Some(p.namespaces.clone())).build()
    }
}

impl AwsProvider {
    /// The API endpoint and CA of an EKS cluster (for the Kubernetes adapter's connector);
    /// `None` when the cluster does not exist or has no endpoint yet (still creating).
    pub async fn eks_endpoint(&self, region: &str, name: &str) -> Result<Option<EksEndpointInfo>> {
        const API: &str = "eks:DescribeCluster";
        let c = self.region(region).await?;
        let out = match c.eks.describe_cluster().name(name).send().await.map_err(|e| sdk_error(API, e)) {
            Ok(o) => o,
            Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(cluster) = out.cluster() else { return Ok(None) };
        Ok(match (cluster.endpoint(), cluster.certificate_authority().and_then(|c| c.data())) {
            (Some(endpoint), Some(ca)) if !endpoint.is_empty() && !ca.is_empty() => {
                Some(EksEndpointInfo { endpoint: endpoint.to_string(), certificate_authority: ca.to_string() })
            }
            _ => None,
        })
    }

    /// Moves an add-on to `version` (`None` = the default for the cluster's Kubernetes
    /// version), keeping configuration changes; returns the add-on as it now reads.
    pub async fn update_addon(
        &self,
        region: &str,
        cluster: &str,
        addon: &str,
        version: Option<&str>,
        client_request_token: &str,
    ) -> Result<EksAddon> {
        const API: &str = "eks:UpdateAddon";
        let c = self.region(region).await?;
        let version = match version {
            Some(v) => v.to_string(),
            None => {
                let k8s = describe_cluster(&c.eks, region, cluster)
                    .await?
                    .ok_or_else(|| ProviderError::not_found(API, format!("No cluster found for name: {cluster}.")))?
                    .version;
                resolve_addon_version(&c.eks, addon, &k8s).await?
            }
        };
        c.eks
            .update_addon()
            .cluster_name(cluster)
            .addon_name(addon)
            .addon_version(&version)
            .resolve_conflicts(ResolveConflicts::Preserve)
            .client_request_token(client_request_token)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        describe_addon(&c.eks, cluster, addon)
            .await?
            .ok_or_else(|| ProviderError::not_found(API, format!("add-on {addon} not found on cluster {cluster}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_mapping() {
        assert_eq!(cluster_state(Some(&ClusterStatus::Creating), &[]), ResourceState::Creating);
        assert_eq!(cluster_state(Some(&ClusterStatus::Active), &[]), ResourceState::Active);
        assert_eq!(
            cluster_state(Some(&ClusterStatus::Failed), &["Ec2SubnetNotFound: subnet-1".into()]),
            ResourceState::Failed { reason: "Ec2SubnetNotFound: subnet-1".into() }
        );
        assert_eq!(addon_state(Some(&AddonStatus::Degraded), &[]), ResourceState::Active);
        assert_eq!(
            addon_state(Some(&AddonStatus::CreateFailed), &[]),
            ResourceState::Failed { reason: "CREATE_FAILED".into() }
        );
    }
}
