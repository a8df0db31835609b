//! `EksApi`: EKS control planes (Creating → Active in ~10 minutes, `clientRequestToken`
//! idempotency, deletion refused while a HyperPod cluster uses them), their add-ons and their
//! EKS Pod Identity associations.
//!
//! # Pod Identity
//!
//! One association per service account (EKS user guide `pod-id-association`: "You can
//! associate one IAM role to a Kubernetes service account"; a second create is
//! `ResourceInUseException`, a repeat with the same `clientRequestToken` returns the first).
//! Credentials reach a pod only when the Pod Identity agent add-on runs (`pod-id-agent-setup`:
//! the agent is required) and the association's role exists and trusts
//! `pods.eks.amazonaws.com` (`pod-id-role`) — [`pod_identity_problem`]. Without that, the
//! HyperPod training operator add-on shows `DEGRADED` with a health issue naming the missing
//! identity (`sagemaker-eks-operator-troubleshooting`: "not authorized … DescribeClusterNode"
//! when the Pod Identity IAM setup is missing); the role must also hold
//! `AmazonSageMakerHyperPodTrainingOperatorAccess`.
//!
//! HyperPod observability (`amazon-sagemaker-hyperpod-observability`) is refused without the
//! Prometheus workspace in its configuration values (its schema requires `ampWorkspace`), and is
//! `DEGRADED` with a health issue while its collector
//! (`hyperpod-observability/hyperpod-observability-operator-otel-collector`) has no Pod Identity or
//! the workspace is not `ACTIVE` (SageMaker developer guide,
//! `hyperpod-observability-addon-troubleshooting`).

mod api;

use crate::base::Cx;
use crate::base::{Lifecycle, Phase, rkey};
use crate::catalog::{addon_default_version, addon_version_offered, check_region, self_managed_vpc_cni};
use crate::timings;
use crate::world::KubeWorld;
use crate::world::{AccessEntryRec, AddonRec, EksRec, PodIdentityRec, World};
use instantstart_core::names;
use instantstart_core::provider::{
    AccessEntry, AccessPolicy, AddonConfiguration, CLUSTER_ADMIN_POLICY, CONFIG_MAP_ONLY, CreateEksAddon,
    CreateEksCluster, CreatePodIdentityAssociation, EksAddon, EksApi, EksCluster, EnsureAccessEntry,
    PodIdentityAssociation, ProviderError, ProviderErrorKind, Result, Tags,
};
use instantstart_core::spec::{SUPPORTED_KUBERNETES_VERSIONS, TRAINING_OPERATOR_KUBERNETES_VERSIONS};
use instantstart_core::workflow::features::{
    TRAINING_OPERATOR_ADDON, TRAINING_OPERATOR_NAMESPACE, TRAINING_OPERATOR_POLICY, TRAINING_OPERATOR_SERVICE_ACCOUNT,
};
use instantstart_core::workflow::observability::{
    METRIC_FAMILIES, OBSERVABILITY_ADDON, OBSERVABILITY_NAMESPACE, OBSERVABILITY_SERVICE_ACCOUNT,
};
use std::collections::BTreeMap;

/// The VPC CNI version running in `c`: the `vpc-cni` add-on's when one is installed (and not
/// being deleted), else the self-managed one EKS installed with the cluster.
pub(crate) fn vpc_cni_version(c: &EksRec) -> String {
    match c.addons.get("vpc-cni") {
        Some(a) if !a.life.is_deleting() => a.version.clone(),
        _ => self_managed_vpc_cni(&c.version).to_string(),
    }
}

fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

pub(crate) fn eks_view(c: &EksRec, now: f64) -> EksCluster {
    // The endpoint and OIDC issuer exist once the control plane came up.
    let up = c.life.failure.is_none() && c.life.age(now) >= c.life.ready_after;
    EksCluster {
        name: c.name.clone(),
        arn: c.arn.clone(),
        region: c.region.clone(),
        version: c.version.clone(),
        endpoint: up.then(|| format!("https://{}.gr7.{}.eks.amazonaws.com", c.uid, c.region)),
        // Simulated clusters are served over plain HTTP on loopback (see `kube::apiserver`).
        certificate_authority: None,
        oidc_issuer: up.then(|| format!("https://oidc.eks.{}.amazonaws.com/id/{}", c.region, c.uid)),
        vpc_id: c.vpc_id.clone(),
        subnet_ids: c.subnet_ids.clone(),
        security_group_id: Some(c.security_group_id.clone()),
        state: c.life.state(now),
        tags: c.tags.clone(),
        authentication_mode: Some(c.authentication_mode.clone()),
        public_access_cidrs: if c.public_access_cidrs.is_empty() {
            vec!["0.0.0.0/0".into()]
        } else {
            c.public_access_cidrs.clone()
        },
    }
}

/// The IAM principal the control plane runs as in the simulated account (the role behind
/// `sts:GetCallerIdentity`'s assumed-role session).
pub(crate) fn control_plane_principal(account: &str) -> String {
    format!("arn:aws:iam::{account}:role/{}", crate::catalog::CONTROL_PLANE_ROLE)
}

fn access_entry_view(e: &AccessEntryRec) -> AccessEntry {
    AccessEntry {
        principal_arn: e.principal_arn.clone(),
        kind: e.kind.clone(),
        username: Some(e.principal_arn.clone()),
        policies: e
            .policies
            .iter()
            .map(|(policy_arn, namespaces)| AccessPolicy {
                policy_arn: policy_arn.clone(),
                namespaces: namespaces.clone(),
            })
            .collect(),
        tags: e.tags.clone(),
    }
}

/// Why pods of `namespace/service_account` in EKS cluster `c` get no Pod Identity credentials,
/// or `None` when they do (agent add-on active, an association, its role existing and trusting
/// `pods.eks.amazonaws.com`, and holding `required_policy` when one is given).
pub(crate) fn pod_identity_problem(
    w: &World,
    c: &EksRec,
    namespace: &str,
    service_account: &str,
    required_policy: Option<&str>,
    now: f64,
) -> Option<String> {
    let agent = c.addons.get("eks-pod-identity-agent").is_some_and(|a| a.life.phase(now) == Phase::Active);
    if !agent {
        return Some("the EKS Pod Identity agent add-on (eks-pod-identity-agent) is not running".into());
    }
    let Some(a) = c.pod_identity.values().find(|a| a.namespace == namespace && a.service_account == service_account)
    else {
        return Some(format!("no EKS Pod Identity association for service account {namespace}/{service_account}"));
    };
    let Some(role) = w.role_by_arn(&a.role_arn) else {
        return Some(format!("the role {} of the Pod Identity association does not exist", a.role_arn));
    };
    if !role.trusts("pods.eks.amazonaws.com") {
        return Some(format!("role {} does not trust pods.eks.amazonaws.com", role.name));
    }
    if let Some(p) = required_policy
        && !role.managed_policies.iter().any(|m| m == p)
    {
        return Some(format!("role {} lacks {p}", role.name));
    }
    None
}

fn addon_view(w: &World, c: &EksRec, a: &AddonRec, now: f64) -> EksAddon {
    let state = a.life.state(now);
    let mut health_issues = Vec::new();
    // The training operator's controller calls SageMaker with its Pod Identity; without one it
    // cannot, and EKS reports the add-on DEGRADED (the adapter maps DEGRADED to Active + issues).
    if a.name == TRAINING_OPERATOR_ADDON
        && state == instantstart_core::provider::ResourceState::Active
        && let Some(problem) = pod_identity_problem(
            w,
            c,
            TRAINING_OPERATOR_NAMESPACE,
            TRAINING_OPERATOR_SERVICE_ACCOUNT,
            Some(TRAINING_OPERATOR_POLICY),
            now,
        )
    {
        health_issues.push(format!(
            "InsufficientPermissions: DEGRADED: the training operator is not authorized to perform sagemaker:DescribeClusterNode: {problem}"
        ));
    }
    // HyperPod observability's collector writes to the workspace of its configuration values
    // with its Pod Identity (hyperpod-observability-addon-troubleshooting: "Verify Pod Identity
    // association"; the health issue names credentials when the identity is missing).
    if a.name == OBSERVABILITY_ADDON && state == instantstart_core::provider::ResourceState::Active {
        if let Some(problem) =
            pod_identity_problem(w, c, OBSERVABILITY_NAMESPACE, OBSERVABILITY_SERVICE_ACCOUNT, None, now)
        {
            health_issues.push(format!(
                "InsufficientPermissions: DEGRADED: the observability collector has no AWS credentials: {problem}"
            ));
        }
        let arn = a
            .configuration_values
            .as_ref()
            .and_then(|v| v.pointer("/ampWorkspace/arn"))
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if let Some(problem) = crate::amp::workspace_problem(w, arn, now) {
            health_issues.push(format!("ConfigurationConflict: DEGRADED: remote write fails: {problem}"));
        }
    }
    EksAddon {
        name: a.name.clone(),
        version: a.version.clone(),
        state,
        tags: a.tags.clone(),
        health_issues,
        configuration_values: a.configuration_values.clone(),
    }
}

fn association_view(a: &PodIdentityRec) -> PodIdentityAssociation {
    PodIdentityAssociation {
        id: a.id.clone(),
        arn: a.arn.clone(),
        namespace: a.namespace.clone(),
        service_account: a.service_account.clone(),
        role_arn: a.role_arn.clone(),
        tags: a.tags.clone(),
    }
}

fn no_cluster(api: &str, name: &str) -> ProviderError {
    ProviderError::not_found(api, format!("ResourceNotFoundException: No cluster found for name: {name}."))
}

/// Creates a cluster; `seeded` skips the role check and makes it Active at once.
/// Why EKS refuses a `publicAccessCidrs` list (rule EKS-A1): more blocks than the quota, a
/// block that does not parse, or one inside a reserved range.
fn public_access_problem(cidrs: &[String]) -> Option<String> {
    if cidrs.len() > names::MAX_PUBLIC_ACCESS_CIDRS {
        return Some(format!(
            "InvalidParameterException: publicAccessCidrs can have at most {} CIDR blocks",
            names::MAX_PUBLIC_ACCESS_CIDRS
        ));
    }
    cidrs.iter().find_map(|c| match c.parse::<ipnet::Ipv4Net>() {
        Err(_) => Some(format!("InvalidParameterException: {c} is not a valid CIDR block in publicAccessCidrs")),
        Ok(net) => names::public_access_cidr(&net)
            .err()
            .map(|_| format!("InvalidParameterException: The following CIDRs are invalid in publicAccessCidrs: [{c}]")),
    })
}

fn create_cluster(w: &mut World, req: &CreateEksCluster, cx: &Cx, seeded: bool) -> Result<EksCluster> {
    const API: &str = "eks:CreateCluster";
    check_region(API, &req.region)?;
    if let Err(rule) = names::eks_cluster_name(&req.name) {
        return Err(invalid(API, format!("InvalidParameterException: cluster name {:?} {rule}", req.name)));
    }
    if let Some(existing) = w.eks.get(&rkey(&req.region, &req.name)) {
        if existing.client_request_token == req.client_request_token {
            // Like EKS: a repeat with the same token describes the cluster it created.
            return Ok(eks_view(existing, cx.now));
        }
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::AlreadyExists,
            format!("ResourceInUseException: Cluster already exists with name: {}", req.name),
        ));
    }
    public_access_problem(&req.public_access_cidrs).map_or(Ok(()), |m| Err(invalid(API, m)))?;
    if !SUPPORTED_KUBERNETES_VERSIONS.contains(&req.version.as_str()) {
        return Err(invalid(
            API,
            format!(
                "InvalidParameterException: unsupported Kubernetes version {}; supported: {}",
                req.version,
                SUPPORTED_KUBERNETES_VERSIONS.join(", ")
            ),
        ));
    }
    if !seeded {
        // EKS assumes the cluster role with its own account and the cluster's ARN as the
        // condition context, so a role whose trust policy limits `aws:SourceAccount` /
        // `aws:SourceArn` to another account or cluster cannot be assumed ("Cross-service
        // confused deputy prevention in Amazon EKS", EKS user guide).
        let cluster_arn = format!("arn:aws:eks:{}:{}:cluster/{}", req.region, w.account, req.name);
        let context = [("aws:SourceAccount", w.account.as_str()), ("aws:SourceArn", cluster_arn.as_str())];
        match w.role_by_arn(&req.role_arn) {
            Some(r) if r.assumable_by("eks.amazonaws.com", &context) => {}
            _ => {
                return Err(invalid(
                    API,
                    format!(
                        "InvalidParameterException: Role with arn: {} could not be assumed because it does not exist or the trusted entity is not correct",
                        req.role_arn
                    ),
                ));
            }
        }
    }
    let mut vpc_id: Option<String> = None;
    let mut zones: Vec<&str> = Vec::new();
    for id in &req.subnet_ids {
        let Some(s) = w.subnets.get(id).filter(|s| s.region == req.region) else {
            return Err(invalid(API, format!("InvalidParameterException: The subnet ID '{id}' does not exist")));
        };
        match &vpc_id {
            Some(v) if *v != s.vpc_id => {
                return Err(invalid(API, "InvalidParameterException: Subnets must all belong to the same VPC"));
            }
            _ => vpc_id = Some(s.vpc_id.clone()),
        }
        if !zones.contains(&s.availability_zone.as_str()) {
            zones.push(&s.availability_zone);
        }
    }
    if zones.len() < 2 {
        return Err(invalid(API, "InvalidParameterException: Subnets specified must be in at least two different AZs"));
    }
    let vpc_id = vpc_id.unwrap_or_default();
    if w.vpcs.get(&vpc_id).is_none_or(|v| v.life.is_deleting()) {
        return Err(invalid(API, format!("InvalidParameterException: VPC {vpc_id} is not available")));
    }
    let mut life = Lifecycle::new(cx.now, if seeded { 0.0 } else { timings::EKS_CREATE });
    if let Some(reason) = &cx.resource_fails {
        life.fail_after(timings::EKS_CREATE * timings::FAILURE_SHARE, reason.clone());
    }
    let arn = format!("arn:aws:eks:{}:{}:cluster/{}", req.region, w.account, req.name);
    let rec = EksRec {
        name: req.name.clone(),
        region: req.region.clone(),
        arn: arn.clone(),
        version: req.version.clone(),
        role_arn: req.role_arn.clone(),
        vpc_id,
        subnet_ids: req.subnet_ids.clone(),
        client_request_token: req.client_request_token.clone(),
        tags: req.tags.clone(),
        public_access_cidrs: req.public_access_cidrs.clone(),
        uid: w.hex(32, true),
        security_group_id: w.id("sg"),
        life,
        addons: BTreeMap::new(),
        pod_identity: BTreeMap::new(),
        authentication_mode: "API_AND_CONFIG_MAP".into(),
        access_entries: BTreeMap::new(),
        access_checked: true,
    };
    let mut rec = rec;
    // `bootstrapClusterCreatorAdminPermissions`: the creator gets a cluster-admin entry. A
    // seeded cluster was created by someone else, who holds that entry.
    let creator = if seeded {
        format!("arn:aws:iam::{}:role/{}-admin", w.account, req.name)
    } else {
        control_plane_principal(&w.account)
    };
    rec.access_entries.insert(
        creator.clone(),
        AccessEntryRec {
            principal_arn: creator,
            kind: "STANDARD".into(),
            client_request_token: String::new(),
            policies: vec![(CLUSTER_ADMIN_POLICY.to_string(), Vec::new())],
            tags: Tags::new(),
        },
    );
    let view = eks_view(&rec, cx.now);
    let key = rkey(&req.region, &req.name);
    let uid = w.hex(32, false);
    w.kube.insert(key.clone(), KubeWorld::new(&req.region, &req.name, &arn, &uid, cx.now));
    w.eks.insert(key, rec);
    Ok(view)
}

/// The configuration schema the simulated EKS publishes for `addon` (every version alike).
///
/// `amazon-sagemaker-hyperpod-inference`: written from the add-on's chart,
/// `aws/sagemaker-hyperpod-cli` `helm_chart/HyperPodHelmChart/charts/inference-operator`
/// (`values.yaml` and `templates/_validateRequiredValues.tpl`, snapshot of 2026-06-22), and the
/// values AWS's own installs pass (`migration/helm_to_addon.sh`; awsome-distributed-training
/// `modules/hyperpod_inference_operator/main.tf`): `executionRoleArn` and
/// `tlsCertificateS3Bucket` are required (the template fails without them; region and EKS
/// cluster name are filled in by the add-on), the keys are the chart's, unknown keys refused.
/// The real schema is not published outside the API; this is our reading of it. Other add-ons:
/// any object.
pub(crate) fn addon_schema(addon: &str) -> serde_json::Value {
    use serde_json::json;
    let role = json!({ "type": "string", "pattern": "^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$" });
    match addon {
        "amazon-sagemaker-hyperpod-inference" => json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "required": ["executionRoleArn", "tlsCertificateS3Bucket"],
            "properties": {
                "executionRoleArn": role,
                "tlsCertificateS3Bucket": { "type": "string", "minLength": 3 },
                "hyperpodClusterArn": { "type": "string", "pattern": "^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:cluster/.+$" },
                "jumpstartGatedModelDownloadRoleArn": role,
                "enableCustomServiceAccounts": { "type": "boolean" },
                "alb": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "enabled": { "type": "boolean" },
                        "serviceAccount": {
                            "type": "object",
                            "additionalProperties": false,
                            "properties": { "create": { "type": "boolean" }, "roleArn": role }
                        }
                    }
                },
                "keda": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "enabled": { "type": "boolean" },
                        "auth": { "type": "object" }
                    }
                },
                "tolerations": { "type": "array", "items": { "type": "object" } },
                "nodeSelector": { "type": "object", "additionalProperties": { "type": "string" } },
                "affinity": { "type": "object" }
            }
        }),
        // The observability add-on needs the workspace it writes to (hyperpod-observability-addon-setup);
        // the shape follows the reference module (awsome-distributed-training, observability/eks_addon.tf).
        OBSERVABILITY_ADDON => {
            let family = json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "level": { "type": "string", "enum": ["BASIC", "ADVANCED"] },
                    "scrapeInterval": { "type": "integer", "minimum": 1 }
                }
            });
            let families: serde_json::Map<String, serde_json::Value> =
                METRIC_FAMILIES.iter().map(|f| (f.to_string(), family.clone())).collect();
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "additionalProperties": false,
                "required": ["ampWorkspace"],
                "properties": {
                    "ampWorkspace": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["prometheusEndpoint", "arn"],
                        "properties": {
                            "prometheusEndpoint": { "type": "string", "pattern": "^https://aps-workspaces\\.[a-z0-9-]+\\.amazonaws\\.com/workspaces/ws-[0-9a-f-]+/?$" },
                            "arn": { "type": "string", "pattern": "^arn:aws[a-z-]*:aps:[a-z0-9-]+:[0-9]{12}:workspace/ws-[0-9a-f-]+$" }
                        }
                    },
                    "amgWorkspace": {
                        "type": "object",
                        "properties": { "arn": { "type": "string" }, "workspaceName": { "type": "string" } }
                    },
                    "metricsProvider": { "type": "object", "additionalProperties": false, "properties": families },
                    "logging": { "type": "object", "properties": { "enabled": { "type": "boolean" } } }
                }
            })
        }
        _ => json!({ "$schema": "http://json-schema.org/draft-07/schema#", "type": "object" }),
    }
}

/// What an add-on's chart refuses at install time (the add-on then goes CREATE_FAILED), for
/// values its schema accepts. The inference add-on's chart (`_validateRequiredValues.tpl`, with
/// `isAddOn: true`): "executionRoleArn must have a role name with prefix
/// 'SageMakerHyperPodInference'"; "A valid role for the KEDA operator must be set" when its
/// KEDA is on without `keda.auth.aws.irsa.roleArn`; the ALB controller likewise without
/// `alb.serviceAccount.roleArn` when it creates its service account.
pub(crate) fn chart_refusal(addon: &str, values: &serde_json::Value) -> Option<String> {
    if addon != "amazon-sagemaker-hyperpod-inference" {
        return None;
    }
    let role = values["executionRoleArn"].as_str().unwrap_or_default();
    if !role.rsplit('/').next().unwrap_or_default().starts_with("SageMakerHyperPodInference") {
        return Some(
            "ConfigurationConflict: executionRoleArn must have a role name with prefix 'SageMakerHyperPodInference'"
                .into(),
        );
    }
    let on = |key: &str| values[key]["enabled"].as_bool().unwrap_or(true);
    if on("keda") && values.pointer("/keda/auth/aws/irsa/roleArn").and_then(|v| v.as_str()).is_none_or(str::is_empty) {
        return Some(
            "ConfigurationConflict: A valid role for the KEDA operator must be set (keda.auth.aws.irsa.roleArn)".into(),
        );
    }
    let creates_sa = values.pointer("/alb/serviceAccount/create").and_then(|v| v.as_bool()).unwrap_or(false);
    if on("alb")
        && creates_sa
        && values.pointer("/alb/serviceAccount/roleArn").and_then(|v| v.as_str()).is_none_or(str::is_empty)
    {
        return Some("ConfigurationConflict: A valid role for the AWS Load Balancer Controller must be set (alb.serviceAccount.roleArn)".into());
    }
    None
}
