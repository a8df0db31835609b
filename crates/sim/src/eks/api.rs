//! `EksApi` for [`SimCloud`] (and its EKS seeding helpers): each call goes through the cloud's
//! pipeline, then the rules of [`crate::eks`].

use super::*;
use crate::cloud::{SimCloud, SimError};
use async_trait::async_trait;

#[async_trait]
impl EksApi for SimCloud {
    async fn describe_eks_cluster(&self, region: &str, name: &str) -> Result<Option<EksCluster>> {
        self.read("eks:DescribeCluster", |w, cx| Ok(w.eks.get(&rkey(region, name)).map(|c| eks_view(c, cx.now))))
    }

    async fn list_eks_clusters(&self, region: &str) -> Result<Vec<String>> {
        self.read("eks:ListClusters", |w, _| {
            Ok(w.eks.values().filter(|c| c.region == region).map(|c| c.name.clone()).collect())
        })
    }

    async fn create_eks_cluster(&self, req: &CreateEksCluster) -> Result<EksCluster> {
        self.write("eks:CreateCluster", |w, cx| create_cluster(w, req, cx, false))
    }

    async fn delete_eks_cluster(&self, region: &str, name: &str) -> Result<()> {
        const API: &str = "eks:DeleteCluster";
        self.write(API, |w, cx| {
            let Some(c) = w.eks.get(&rkey(region, name)) else {
                return Err(ProviderError::not_found(API, format!("ResourceNotFoundException: No cluster found for name: {name}.")));
            };
            match c.life.phase(cx.now) {
                Phase::Deleting | Phase::Gone => return Ok(()),
                Phase::Creating => {
                    return Err(ProviderError::new(
                        API,
                        ProviderErrorKind::Conflict,
                        format!("ResourceInUseException: Cluster {name} is CREATING; it can be deleted once creation has finished"),
                    ));
                }
                Phase::Active | Phase::Failed(_) => {}
            }
            let users: Vec<&str> = w
                .hyperpod
                .values()
                .filter(|h| h.eks_arn == c.arn && h.life.exists(cx.now))
                .map(|h| h.name.as_str())
                .collect();
            if !users.is_empty() {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::Conflict,
                    format!("ResourceInUseException: Cluster {name} is the orchestrator of SageMaker HyperPod cluster(s) {}; delete them first", users.join(", ")),
                ));
            }
            let addons = c.addons.len() as u64;
            if let Some(c) = w.eks.get_mut(&rkey(region, name)) {
                c.life.start_deleting(cx.now, timings::EKS_DELETE);
                for a in c.addons.values_mut() {
                    a.life.start_deleting(cx.now, timings::EKS_DELETE);
                }
            }
            w.count_n("eks:DeleteAddon", addons);
            Ok(())
        })
    }

    async fn describe_addon(&self, region: &str, cluster: &str, addon: &str) -> Result<Option<EksAddon>> {
        self.read("eks:DescribeAddon", |w, cx| {
            Ok(w.eks.get(&rkey(region, cluster)).and_then(|c| c.addons.get(addon).map(|a| addon_view(w, c, a, cx.now))))
        })
    }

    async fn create_addon(&self, req: &CreateEksAddon) -> Result<EksAddon> {
        const API: &str = "eks:CreateAddon";
        self.write(API, |w, cx| {
            let Some(c) = w.eks.get_mut(&rkey(&req.region, &req.cluster)) else {
                return Err(ProviderError::not_found(
                    API,
                    format!("ResourceNotFoundException: No cluster found for name: {}.", req.cluster),
                ));
            };
            if let Some(a) = c.addons.get(&req.name) {
                if a.client_request_token == req.client_request_token {
                    let (c, a) = (c.clone(), a.clone());
                    return Ok(addon_view(w, &c, &a, cx.now));
                }
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("ResourceInUseException: Addon {} already exists on cluster {}", req.name, req.cluster),
                ));
            }
            match c.life.phase(cx.now) {
                Phase::Active => {}
                other => {
                    let state = match other {
                        Phase::Creating => "CREATING",
                        Phase::Failed(_) => "FAILED",
                        _ => "DELETING",
                    };
                    return Err(invalid(
                        API,
                        format!(
                            "InvalidRequestException: Cluster {} is {state}; add-ons can be created once it is ACTIVE",
                            req.cluster
                        ),
                    ));
                }
            }
            if let Some(v) = &req.version
                && !addon_version_offered(&req.name, v)
            {
                return Err(invalid(
                    API,
                    format!(
                        "InvalidParameterException: Addon version specified is not supported: {} {v} for Kubernetes {}",
                        req.name, c.version
                    ),
                ));
            }
            // The HyperPod training operator add-on exists only for the Kubernetes versions
            // it supports (SageMaker developer guide, `sagemaker-eks-operator`, "Supported
            // versions"): DescribeAddonVersions offers nothing else.
            if req.name == TRAINING_OPERATOR_ADDON
                && !TRAINING_OPERATOR_KUBERNETES_VERSIONS.contains(&c.version.as_str())
            {
                return Err(invalid(
                    API,
                    format!(
                        "InvalidParameterException: Addon {} is not supported for Kubernetes {} (supported: {})",
                        req.name,
                        c.version,
                        TRAINING_OPERATOR_KUBERNETES_VERSIONS.join(", ")
                    ),
                ));
            }
            // EKS validates `configurationValues` against the version's schema at the API
            // (https://docs.aws.amazon.com/eks/latest/userguide/eks-add-ons.html "Configuration
            // values": "InvalidParameterException ... ConfigurationValue provided in request is not
            // supported"); an add-on whose schema requires values refuses a create without them.
            let schema = addon_schema(&req.name);
            let values = req.configuration_values.clone().unwrap_or_else(|| serde_json::json!({}));
            if let Err(e) = instantstart_core::addon_schema::validate(&schema, &values) {
                return Err(invalid(
                    API,
                    format!(
                        "InvalidParameterException: ConfigurationValue provided in request is not supported: Json schema validation failed with error: {}",
                        e.violations.iter().map(|v| format!("{} {}", if v.path.is_empty() { "$" } else { &v.path }, v.rule)).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            let mut life = Lifecycle::new(cx.now, timings::ADDON_CREATE);
            if let Some(reason) = &cx.resource_fails {
                life.fail_after(timings::ADDON_CREATE * timings::FAILURE_SHARE, format!("CREATE_FAILED: {reason}"));
            }
            if let Some(reason) = chart_refusal(&req.name, &values) {
                // What the schema cannot say, the add-on's chart refuses when EKS installs it: the
                // add-on goes CREATE_FAILED with the Helm error as its health issue.
                life.fail_after(timings::ADDON_CREATE * timings::FAILURE_SHARE, format!("CREATE_FAILED: {reason}"));
            }
            let rec = AddonRec {
                name: req.name.clone(),
                version: req.version.clone().unwrap_or_else(|| addon_default_version(&req.name, &c.version)),
                client_request_token: req.client_request_token.clone(),
                tags: req.tags.clone(),
                life,
                configuration_values: req.configuration_values.clone(),
            };
            c.addons.insert(req.name.clone(), rec);
            let c = w.eks.get(&rkey(&req.region, &req.cluster)).expect("just updated");
            Ok(addon_view(w, c, &c.addons[&req.name], cx.now))
        })
    }

    async fn describe_addon_configuration(
        &self,
        region: &str,
        cluster: &str,
        addon: &str,
        version: Option<&str>,
    ) -> Result<AddonConfiguration> {
        const API: &str = "eks:DescribeAddonConfiguration";
        self.read(API, |w, _| {
            let version = match version {
                Some(v) => v.to_string(),
                None => {
                    let Some(c) = w.eks.get(&rkey(region, cluster)) else {
                        return Err(ProviderError::not_found(
                            API,
                            format!("ResourceNotFoundException: No cluster found for name: {cluster}."),
                        ));
                    };
                    addon_default_version(addon, &c.version)
                }
            };
            Ok(AddonConfiguration { addon: addon.into(), version, schema: addon_schema(addon) })
        })
    }

    async fn delete_addon(&self, region: &str, cluster: &str, addon: &str) -> Result<()> {
        const API: &str = "eks:DeleteAddon";
        self.write(API, |w, cx| match w.eks.get_mut(&rkey(region, cluster)).and_then(|c| c.addons.get_mut(addon)) {
            Some(a) => {
                a.life.start_deleting(cx.now, timings::ADDON_DELETE);
                Ok(())
            }
            None => Err(ProviderError::not_found(
                API,
                format!("ResourceNotFoundException: No addon {addon} found on cluster {cluster}"),
            )),
        })
    }

    async fn list_pod_identity_associations(
        &self,
        region: &str,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<PodIdentityAssociation>> {
        const API: &str = "eks:ListPodIdentityAssociations";
        self.read(API, |w, _| {
            let c = w.eks.get(&rkey(region, cluster)).ok_or_else(|| no_cluster(API, cluster))?;
            // One page: filtered by namespace and service account there is at most one.
            let found: Vec<PodIdentityAssociation> = c
                .pod_identity
                .values()
                .filter(|a| a.namespace == namespace && a.service_account == service_account)
                .map(association_view)
                .collect();
            // The adapter also describes each listed association (role and tags); the simulator
            // answers with the full association at once.
            Ok(found)
        })
    }

    async fn create_pod_identity_association(
        &self,
        req: &CreatePodIdentityAssociation,
    ) -> Result<PodIdentityAssociation> {
        const API: &str = "eks:CreatePodIdentityAssociation";
        self.write(API, |w, cx| {
            let account = w.account.clone();
            let id = format!("a-{}", w.hex(17, false));
            let c = w.eks.get_mut(&rkey(&req.region, &req.cluster)).ok_or_else(|| no_cluster(API, &req.cluster))?;
            if c.life.phase(cx.now) != Phase::Active {
                return Err(invalid(
                    API,
                    format!("InvalidRequestException: Cluster {} is not ACTIVE", req.cluster),
                ));
            }
            if !req.role_arn.starts_with("arn:aws:iam::") || !req.role_arn.contains(":role/") {
                return Err(invalid(API, format!("InvalidParameterException: roleArn {} is not an IAM role ARN", req.role_arn)));
            }
            if let Some(existing) = c
                .pod_identity
                .values()
                .find(|a| a.namespace == req.namespace && a.service_account == req.service_account)
            {
                if existing.client_request_token == req.client_request_token {
                    return Ok(association_view(existing));
                }
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!(
                        "ResourceInUseException: Association already exists: {} for namespace {} and service account {}",
                        existing.id, req.namespace, req.service_account
                    ),
                ));
            }
            let rec = PodIdentityRec {
                arn: format!("arn:aws:eks:{}:{account}:podidentityassociation/{}/{id}", req.region, req.cluster),
                id: id.clone(),
                namespace: req.namespace.clone(),
                service_account: req.service_account.clone(),
                role_arn: req.role_arn.clone(),
                client_request_token: req.client_request_token.clone(),
                tags: req.tags.clone(),
            };
            let view = association_view(&rec);
            c.pod_identity.insert(id, rec);
            Ok(view)
        })
    }

    async fn delete_pod_identity_association(&self, region: &str, cluster: &str, association_id: &str) -> Result<()> {
        const API: &str = "eks:DeletePodIdentityAssociation";
        self.write(API, |w, _| {
            let c = w.eks.get_mut(&rkey(region, cluster)).ok_or_else(|| no_cluster(API, cluster))?;
            match c.pod_identity.remove(association_id) {
                Some(_) => Ok(()),
                None => Err(ProviderError::not_found(
                    API,
                    format!("ResourceNotFoundException: No association {association_id} found on cluster {cluster}"),
                )),
            }
        })
    }

    async fn describe_access_entry(
        &self,
        region: &str,
        cluster: &str,
        principal_arn: &str,
    ) -> Result<Option<AccessEntry>> {
        const API: &str = "eks:DescribeAccessEntry";
        self.read(API, |w, _| {
            let c = w.eks.get(&rkey(region, cluster)).ok_or_else(|| {
                ProviderError::not_found(
                    API,
                    format!("ResourceNotFoundException: No cluster found for name: {cluster}."),
                )
            })?;
            Ok(c.access_entries.get(principal_arn).map(access_entry_view))
        })
    }

    async fn ensure_access_entry(&self, req: &EnsureAccessEntry) -> Result<AccessEntry> {
        const API: &str = "eks:CreateAccessEntry";
        self.write(API, |w, _| {
            let c = w.eks.get_mut(&rkey(&req.region, &req.cluster)).ok_or_else(|| {
                ProviderError::not_found(API, format!("ResourceNotFoundException: No cluster found for name: {}.", req.cluster))
            })?;
            // EKS user guide `setting-up-access-entries`: access entries need the API or
            // API_AND_CONFIG_MAP authentication mode.
            if c.authentication_mode == CONFIG_MAP_ONLY {
                return Err(invalid(
                    API,
                    "InvalidRequestException: The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.",
                ));
            }
            let owner = req.tags.get(instantstart_core::provider::TAG_CLUSTER).cloned().unwrap_or_default();
            // The control plane's role (deployment template, statement EksImportAccessEntry) may
            // create access entries only on clusters whose owner tagged them
            // `instantstart:import=allowed` (`aws:ResourceTag`; IAM user guide
            // `access_tags`, EKS `security-iam-service-with-iam` tag-based authorization).
            use instantstart_core::provider::{IMPORT_ALLOWED, TAG_IMPORT};
            if !c.access_entries.contains_key(&req.principal_arn)
                && c.tags.get(TAG_IMPORT).map(String::as_str) != Some(IMPORT_ALLOWED)
            {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AccessDenied,
                    format!(
                        "AccessDeniedException: User: {} is not authorized to perform: eks:CreateAccessEntry on resource: {} \
                         because no identity-based policy allows the eks:CreateAccessEntry action (the cluster lacks the tag {TAG_IMPORT}={IMPORT_ALLOWED})",
                        req.principal_arn, c.arn
                    ),
                ));
            }
            match c.access_entries.get_mut(&req.principal_arn) {
                Some(e) if e.client_request_token == req.client_request_token
                    || instantstart_core::provider::is_owned(&e.tags, &owner) => {
                    // AssociateAccessPolicy is idempotent and updates the scope.
                    for p in &req.policies {
                        e.policies.retain(|(arn, _)| arn != &p.policy_arn);
                        e.policies.push((p.policy_arn.clone(), p.namespaces.clone()));
                    }
                    Ok(access_entry_view(e))
                }
                Some(_) => Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!(
                        "ResourceInUseException: The specified access entry resource is already in use on this cluster; it is not tagged as InstantStart's for cluster {owner}"
                    ),
                )),
                None => {
                    let e = AccessEntryRec {
                        principal_arn: req.principal_arn.clone(),
                        kind: req.kind.clone(),
                        client_request_token: req.client_request_token.clone(),
                        policies: req.policies.iter().map(|p| (p.policy_arn.clone(), p.namespaces.clone())).collect(),
                        tags: req.tags.clone(),
                    };
                    let view = access_entry_view(&e);
                    c.access_entries.insert(req.principal_arn.clone(), e);
                    Ok(view)
                }
            }
        })
    }

    async fn delete_access_entry(&self, region: &str, cluster: &str, principal_arn: &str) -> Result<()> {
        const API: &str = "eks:DeleteAccessEntry";
        self.write(API, |w, _| {
            let c = w.eks.get_mut(&rkey(region, cluster)).ok_or_else(|| {
                ProviderError::not_found(
                    API,
                    format!("ResourceNotFoundException: No cluster found for name: {cluster}."),
                )
            })?;
            c.access_entries.remove(principal_arn).map(|_| ()).ok_or_else(|| {
                ProviderError::not_found(
                    API,
                    format!(
                        "ResourceNotFoundException: The specified principalArn could not be found: {principal_arn}"
                    ),
                )
            })
        })
    }
}

impl SimCloud {
    /// The configuration values add-on `addon` of an EKS cluster was created with (`None`: the
    /// add-on does not exist or was created without values). Not an API call: for tests.
    pub fn addon_configuration_values(&self, region: &str, cluster: &str, addon: &str) -> Option<serde_json::Value> {
        self.lock().world.eks.get(&rkey(region, cluster))?.addons.get(addon)?.configuration_values.clone()
    }

    /// Sets an EKS cluster's authentication mode (`API`, `API_AND_CONFIG_MAP`, `CONFIG_MAP`),
    /// as `UpdateClusterConfig --access-config` would. Not counted: for tests.
    pub fn set_eks_authentication_mode(&self, region: &str, cluster: &str, mode: &str) -> Result<(), SimError> {
        self.admin(|w, _| {
            let c = w
                .eks
                .get_mut(&rkey(region, cluster))
                .ok_or_else(|| ProviderError::not_found("eks:UpdateClusterConfig", format!("no cluster {cluster}")))?;
            c.authentication_mode = mode.to_string();
            Ok(())
        })
    }

    /// Tags an EKS cluster as its owner would (`TagResource` with the owner's credentials, not
    /// the control plane's). Not counted: for tests.
    pub fn tag_eks_cluster(&self, region: &str, cluster: &str, key: &str, value: &str) -> Result<(), SimError> {
        self.admin(|w, _| {
            let c = w
                .eks
                .get_mut(&rkey(region, cluster))
                .ok_or_else(|| ProviderError::not_found("eks:TagResource", format!("no cluster {cluster}")))?;
            c.tags.insert(key.to_string(), value.to_string());
            Ok(())
        })
    }

    /// Adds an Active EKS cluster as if created earlier outside InstantStart (for import),
    /// without counting calls. The subnets must exist (see [`SimCloud::seed_network`]). Its
    /// creator (`<name>-admin`) holds its only access entry: the control plane's Kubernetes
    /// calls are refused (401) until the import adds one.
    pub fn seed_eks_cluster(
        &self,
        region: &str,
        name: &str,
        version: &str,
        subnet_ids: Vec<String>,
        tags: Tags,
    ) -> Result<EksCluster, SimError> {
        self.admin(|w, now| {
            let req = CreateEksCluster {
                region: region.into(),
                name: name.into(),
                version: version.into(),
                role_arn: format!("arn:aws:iam::{}:role/{name}-cluster-role", w.account),
                subnet_ids,
                client_request_token: format!("seeded-{name}"),
                tags,
                public_access_cidrs: vec![],
            };
            Ok(create_cluster(w, &req, &Cx { now, resource_fails: None }, true)?)
        })
    }
}
