//! Generic durable workflows for workloads inside a cluster: apply a rendered workload (training
//! job, model download, inference endpoint) and delete one.
//!
//! **Apply** ([`WorkloadWorkflow`]): `prepare` validates the request, renders it through the
//! [`WorkloadRenderer`] and stores the rendered objects in the operation's request
//! ([`StoredWorkload`]); every later step works from that record, so a retried or resumed
//! operation applies exactly what was recorded and never renders again. `assess` (read-only)
//! checks that the cluster's EKS control plane is active, reads the facts the renderer needs
//! (instance groups, managed features — never taken from the client) and whether the workload
//! already exists; the request is then rendered once more with those facts before recording.
//! Steps: `apply:<Kind>/<name>` per object, in order, then `ready`, which polls the
//! [`ReadyRule`]s through [`KubeApi::get`].
//!
//! Every apply observes first: an object already carrying this operation's annotation is
//! adopted; one without InstantStart's labels, or belonging to another workload, stops the
//! step in `needs_attention`.
//!
//! An **update** ([`ApplyMode::Update`]) converges the workload to the new rendering: `assess`
//! lists the workload's live objects and records in [`WorkloadRequest::remove`] those the
//! rendering no longer has (e.g. the ScaledObject of autoscaling that was removed) — only
//! top-level objects (no owner references) that carry InstantStart's labels, the workload's
//! instance label and an operation annotation, so what an operator made is never touched. Each
//! gets a `remove:<Kind>/<name>` step before the first apply (observe: already gone is done),
//! which deletes it and waits until it is gone.
//!
//! **Delete** ([`DeleteWorkloadWorkflow`]): one `delete:<Kind>` step per type the workload may
//! consist of ([`WorkloadRenderer::owned_types`], reverse apply order), each deleting what
//! carries `app.kubernetes.io/managed-by=instantstart` and `app.kubernetes.io/instance=<name>`
//! and waiting until it is gone, then `gone`, which waits for the workload's pods. A workload
//! with nothing of InstantStart's but a foreign job or endpoint of that name is refused with
//! 422 at assessment, before anything is recorded.

use super::decode;
use super::steps::{AddonTarget, EnsurePodIdentity, PodIdentityTarget, RemovePodIdentity};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::instance_types::{SpecsFact, ec2_name};
use crate::kube_access::KubeAccess;
use crate::names;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::preflight::{CheckStatus, PreflightCheck};
use crate::provider::*;
use crate::store::{ClusterRecord, Store};
use crate::validate::{Findings, ValidationError};
use crate::workload::{
    ANNOTATION_OPERATION, FileSystemFacts, GroupFacts, LABEL_INSTANCE, Readiness, RenderedWorkload, SharedStorageFacts,
    TypeRef, WorkloadContext, WorkloadKind, WorkloadPodIdentity, WorkloadRenderer, WorkloadRequest,
    mlflow_service_account, workload_target,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// The request as recorded: what was asked, and what it rendered to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredWorkload {
    pub request: WorkloadRequest,
    pub rendered: RenderedWorkload,
}

/// How an apply operation treats a workload that already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// The workload must not exist yet (409 otherwise): submit a job, deploy an endpoint.
    Create,
    /// The workload must exist (404 otherwise): update an endpoint.
    Update,
    /// Either: the name derives from the content (a model download), so applying the same
    /// request again finds the same objects and reports their state.
    Converge,
}

/// The workload kind and mode of an apply operation kind.
pub fn apply_kind(kind: OperationKind) -> Option<(WorkloadKind, ApplyMode)> {
    Some(match kind {
        OperationKind::SubmitJob => (WorkloadKind::TrainingJob, ApplyMode::Create),
        OperationKind::DownloadModel => (WorkloadKind::ModelDownload, ApplyMode::Converge),
        OperationKind::DeployEndpoint => (WorkloadKind::Endpoint, ApplyMode::Create),
        OperationKind::UpdateEndpoint => (WorkloadKind::Endpoint, ApplyMode::Update),
        _ => return None,
    })
}

/// The workload kind of a delete operation kind.
pub fn delete_kind(kind: OperationKind) -> Option<WorkloadKind> {
    Some(match kind {
        OperationKind::DeleteJob => WorkloadKind::TrainingJob,
        OperationKind::DeleteDownload => WorkloadKind::ModelDownload,
        OperationKind::DeleteEndpoint => WorkloadKind::Endpoint,
        _ => return None,
    })
}

/// Step key of a workload's EKS Pod Identity association ([`RenderedWorkload::pod_identity`]),
/// in the apply (before the first object) and in the delete of a training job (after its pods).
pub const POD_IDENTITY_STEP: &str = "pod_identity";

/// Step key of applying `object`.
pub fn apply_step_key(object: &ObjectRef) -> String {
    format!("apply:{}/{}", object.kind, object.name)
}

/// Step key of removing `object` in an update (it is no longer rendered).
pub fn remove_step_key(object: &ObjectRef) -> String {
    format!("remove:{}/{}", object.kind, object.name)
}

/// Whether two references name the same object (the API version may differ between versions
/// of a type).
fn same_object(a: &ObjectRef, b: &ObjectRef) -> bool {
    a.kind == b.kind && a.name == b.name && a.namespace == b.namespace
}

/// The cluster's Kubernetes, reached as the identity the operation acts as (recorded in its
/// request, so a resumed operation impersonates the same identity).
fn kube_target(rec: &ClusterRecord, acting_as: Option<&KubeAccess>) -> KubeTarget {
    KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone()).acting_as(acting_as.and_then(|a| a.identity.clone()))
}

/// Refuses a namespace outside the caller's access (`403`, before anything is recorded). An
/// operation without a recorded access (recorded by an older version) is the control plane's,
/// which is allowed no system namespace.
fn check_access(acting_as: Option<&KubeAccess>, namespace: &str) -> Result<(), EngineError> {
    match acting_as {
        Some(a) => a.check_namespace(namespace),
        None => KubeAccess::control_plane("").check_namespace(namespace),
    }
    .map_err(EngineError::Forbidden)
}

/// The rules of a rendering that depend on who submits it, checked before anything is
/// recorded:
/// - a system namespace ([`crate::names::is_system_namespace`]) is a `400` naming the
///   request's namespace field unless the caller's access allows it explicitly;
/// - a namespace outside the caller's access is a `403`;
/// - a service account a pod names must be one the caller's access lets it name (`403`), unless
///   the rendering itself creates it (a router's account, a job's MLflow identity).
fn check_submission(
    acting_as: Option<&KubeAccess>,
    kind: WorkloadKind,
    rendered: &RenderedWorkload,
) -> Result<(), EngineError> {
    check_system_namespace(acting_as, kind, &rendered.namespace)?;
    check_access(acting_as, &rendered.namespace)?;
    if let Some(access) = acting_as {
        let own: Vec<String> = rendered
            .objects
            .iter()
            .filter_map(KubeObject::object_ref)
            .filter(|r| r.kind == "ServiceAccount")
            .map(|r| r.name)
            .collect();
        for object in &rendered.objects {
            for sa in service_accounts_named(&object.0) {
                if !own.contains(&sa) {
                    access.check_service_account(&sa).map_err(EngineError::Forbidden)?;
                }
            }
        }
    }
    Ok(())
}

/// A system namespace is a `400` on the request's namespace field unless the caller's access
/// allows it explicitly.
fn check_system_namespace(
    acting_as: Option<&KubeAccess>,
    kind: WorkloadKind,
    namespace: &str,
) -> Result<(), EngineError> {
    let allowed = acting_as.is_some_and(|a| a.system_namespaces.iter().any(|n| n == namespace));
    if names::is_system_namespace(namespace) && !allowed {
        return Err(ValidationError::invalid(
            kind.namespace_field(),
            format!(
                "{namespace} is a system namespace (Kubernetes' own or an operator's); workloads run in other \
                 namespaces, e.g. default (an admin may allow one explicitly: a token binding's system_namespaces, \
                 or the server's --admin-system-namespaces)"
            ),
        )
        .into());
    }
    Ok(())
}

/// Every `serviceAccountName` in `body` (pod specs and pod templates at any depth).
fn service_accounts_named(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(sa)) = m.get("serviceAccountName")
                    && !out.contains(sa)
                {
                    out.push(sa.clone());
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

fn describe(r: &ObjectRef) -> String {
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{}", r.kind, r.name),
        None => format!("{} {}", r.kind, r.name),
    }
}

fn to_value<T: Serialize>(v: &T) -> Result<Value, EngineError> {
    serde_json::to_value(v).map_err(|e| EngineError::InvalidState(e.to_string()))
}

/// A `get` where an unknown type (CRD not installed) counts as absent.
async fn get_object(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    r: &ObjectRef,
) -> Result<Option<KubeObject>, ProviderError> {
    match read(|| kube.get(target, r)).await {
        Ok(o) => Ok(o),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A `list` where an unknown type (CRD not installed) counts as empty.
async fn list_objects(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    params: &ListParams,
) -> Result<Vec<KubeObject>, ProviderError> {
    match read(|| kube.list(target, params)).await {
        Ok(o) => Ok(o),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e),
    }
}

/// Labels selecting the objects of workload `name`.
pub fn workload_labels(name: &str) -> Vec<(String, String)> {
    vec![(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()), (LABEL_INSTANCE.to_string(), name.to_string())]
}

/// The registered cluster named by a request ([`crate::api::clusters::resolve`]: 404 when
/// unknown).
fn cluster_record(store: &dyn Store, cluster: &str) -> Result<ClusterRecord, EngineError> {
    Ok(crate::api::clusters::resolve(store, cluster)?.record)
}

/// The shared storage InstantStart set up with the cluster (claim, mount path, bucket); `None`
/// for clusters it did not create.
pub fn storage_facts(rec: &ClusterRecord) -> Option<SharedStorageFacts> {
    let req = rec.request.as_ref()?;
    let claim = super::create_cluster::STORAGE_CLAIM;
    Some(SharedStorageFacts {
        bucket: rec.bucket.clone(),
        namespace: "default".into(),
        claim: claim.into(),
        volume: format!("{claim}-pv"),
        mount_path: req.storage.as_ref().map(|s| s.mount_path.clone()).unwrap_or_else(|| "/s3".into()),
    })
}

/// The cluster's EKS control plane must be active (409 otherwise).
async fn require_active(aws: &dyn AwsCloud, rec: &ClusterRecord) -> Result<(), EngineError> {
    match read(|| aws.describe_eks_cluster(&rec.region, &rec.eks_cluster)).await? {
        Some(eks) if eks.state.is_active() => Ok(()),
        Some(eks) => Err(EngineError::InvalidState(format!(
            "cluster {}: EKS control plane {} is {}, not active",
            rec.name,
            eks.name,
            super::steps::state_word(&eks.state)
        ))),
        None => Err(EngineError::InvalidState(format!(
            "cluster {}: EKS control plane {} does not exist in {}",
            rec.name, rec.eks_cluster, rec.region
        ))),
    }
}

/// Checks a renderer's output: every object complete, in the workload's namespace (when
/// namespaced), labelled as ours and as the workload's, and step keys unique.
fn check_rendered(r: &RenderedWorkload) -> Result<Vec<ObjectRef>, EngineError> {
    let bad = |why: String| EngineError::InvalidState(format!("rendered workload {}: {why}", r.name));
    if r.objects.is_empty() {
        return Err(bad("no objects".into()));
    }
    let mut refs: Vec<ObjectRef> = Vec::new();
    for o in &r.objects {
        let oref = o.object_ref().ok_or_else(|| bad("an object lacks apiVersion, kind or name".into()))?;
        if oref.namespace.as_deref().is_some_and(|ns| ns != r.namespace) {
            return Err(bad(format!("{} is outside namespace {}", describe(&oref), r.namespace)));
        }
        if o.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) {
            return Err(bad(format!("{} lacks the {LABEL_MANAGED_BY} label", describe(&oref))));
        }
        if refs.iter().any(|x| apply_step_key(x) == apply_step_key(&oref)) {
            return Err(bad(format!("two objects would share step {}", apply_step_key(&oref))));
        }
        refs.push(oref);
    }
    if !r.objects.iter().any(|o| o.label(LABEL_INSTANCE) == Some(r.name.as_str())) {
        return Err(bad(format!("no object carries {LABEL_INSTANCE}={}", r.name)));
    }
    Ok(refs)
}

/// Checks the objects an update removes: each of a type the workload may consist of, in its
/// namespace, not part of the rendering, and named once.
fn check_removals(
    r: &RenderedWorkload,
    rendered: &[ObjectRef],
    remove: &[ObjectRef],
    owned: &[TypeRef],
) -> Result<(), EngineError> {
    let bad = |why: String| EngineError::InvalidState(format!("update of workload {}: {why}", r.name));
    for (i, o) in remove.iter().enumerate() {
        if !owned.iter().any(|t| t.api_version == o.api_version && t.kind == o.kind) {
            return Err(bad(format!("{} is not a type the workload consists of", describe(o))));
        }
        if o.namespace.as_deref() != Some(r.namespace.as_str()) {
            return Err(bad(format!("{} is outside namespace {}", describe(o), r.namespace)));
        }
        if rendered.iter().any(|x| same_object(x, o)) {
            return Err(bad(format!("{} is still rendered; it cannot also be removed", describe(o))));
        }
        if remove[..i].iter().any(|x| remove_step_key(x) == remove_step_key(o)) {
            return Err(bad(format!("{} is named twice", describe(o))));
        }
    }
    Ok(())
}

/// Applies a rendered workload and waits until its ready rules hold.
pub struct WorkloadWorkflow {
    kind: OperationKind,
    workload: WorkloadKind,
    mode: ApplyMode,
    renderer: Arc<dyn WorkloadRenderer>,
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

impl WorkloadWorkflow {
    /// `kind` must be an apply kind ([`apply_kind`]); `None` otherwise.
    pub fn new(
        kind: OperationKind,
        renderer: Arc<dyn WorkloadRenderer>,
        aws: Arc<dyn AwsCloud>,
        kube: Arc<dyn KubeApi>,
        store: Arc<dyn Store>,
    ) -> Option<Self> {
        let (workload, mode) = apply_kind(kind)?;
        Some(WorkloadWorkflow { kind, workload, mode, renderer, aws, kube, store })
    }

    /// Reads the facts the renderer may need, from the real state: the instance groups, the
    /// managed features, and EC2's specs of `instance_types` (what the rendering named).
    async fn context(
        &self,
        rec: &ClusterRecord,
        instance_types: &[String],
        governance: bool,
    ) -> Result<WorkloadContext, EngineError> {
        let instance_specs = if instance_types.is_empty() {
            Vec::new()
        } else {
            read(|| self.aws.instance_type_specs(&rec.region))
                .await?
                .into_iter()
                .filter(|i| instance_types.contains(&i.name))
                .collect()
        };
        let mut context = WorkloadContext { instance_specs: Some(instance_specs), ..WorkloadContext::default() };
        // Without a HyperPod cluster there is no task governance: a team is refused.
        if governance {
            context.governance = Some(crate::governance::GovernanceFacts::default());
        }
        let Some(hp) = &rec.hyperpod_cluster else { return Ok(context) };
        let Some(live) = read(|| self.aws.describe_hyperpod_cluster(&rec.region, hp)).await? else {
            return Ok(context);
        };
        context.features = super::features::read_features(self.aws.as_ref(), rec, &live).await?;
        if governance {
            let state = super::governance::read_governance(self.aws.as_ref(), rec, &live.arn).await?;
            context.governance = Some(crate::governance::GovernanceFacts::of(&state));
        }
        context.instance_groups = live
            .instance_groups
            .iter()
            .map(|g| GroupFacts {
                name: g.name.clone(),
                instance_type: g.instance_type.clone(),
                capacity: g.capacity.clone(),
            })
            .collect();
        Ok(context)
    }
}

impl WorkloadWorkflow {
    /// The cluster's FSx for Lustre volumes (created: ours by tags; attached: by their volumes)
    /// with their lifecycle and whether
    /// their claim exists, read with the control plane's own identity (a fact about the
    /// cluster, not an action of the caller's).
    async fn file_system_facts(&self, rec: &ClusterRecord) -> Result<Vec<FileSystemFacts>, EngineError> {
        use super::fsx::{FSX_NAMESPACE, claim_name, cluster_volumes};
        let target = kube_target(rec, None);
        let mut facts = Vec::new();
        for fs in read(|| cluster_volumes(self.aws.as_ref(), &rec.region, &rec.name)).await? {
            let Some(name) = fs.tags.get(TAG_FSX_VOLUME).cloned() else { continue };
            if fs.state() == ResourceState::Deleting {
                continue;
            }
            let claim = ObjectRef {
                api_version: "v1".into(),
                kind: "PersistentVolumeClaim".into(),
                namespace: Some(FSX_NAMESPACE.into()),
                name: claim_name(&name),
            };
            let exists = get_object(self.kube.as_ref(), &target, &claim).await?.is_some();
            facts.push(FileSystemFacts {
                name,
                lifecycle: fs.lifecycle.clone(),
                namespace: FSX_NAMESPACE.into(),
                claim: exists.then_some(claim.name),
            });
        }
        // Attached file systems: found by their volumes (ours, labelled `attached`).
        for v in read(|| super::fsx::attached_volumes(self.kube.as_ref(), &target, &rec.name)).await? {
            let fs = read(|| self.aws.describe_lustre_file_system(&rec.region, &v.file_system_id)).await?;
            let claim = ObjectRef {
                api_version: "v1".into(),
                kind: "PersistentVolumeClaim".into(),
                namespace: Some(FSX_NAMESPACE.into()),
                name: claim_name(&v.name),
            };
            let exists = get_object(self.kube.as_ref(), &target, &claim).await?.is_some();
            facts.push(FileSystemFacts {
                name: v.name,
                lifecycle: fs.map(|f| f.lifecycle).unwrap_or_else(|| "DELETED".into()),
                namespace: FSX_NAMESPACE.into(),
                claim: exists.then_some(claim.name),
            });
        }
        Ok(facts)
    }

    /// The live objects of workload `r` that its rendering no longer has and an update deletes:
    /// top-level (no owner references), labelled as ours and as the workload's, and applied by
    /// an InstantStart operation — never what an operator created for it.
    async fn no_longer_rendered(
        &self,
        target: &KubeTarget,
        r: &RenderedWorkload,
    ) -> Result<Vec<ObjectRef>, EngineError> {
        let rendered: Vec<ObjectRef> = r
            .objects
            .iter()
            .filter_map(KubeObject::object_ref)
            .map(|mut o| {
                o.namespace.get_or_insert_with(|| r.namespace.clone());
                o
            })
            .collect();
        let mut out: Vec<ObjectRef> = Vec::new();
        for t in self.renderer.owned_types(self.workload) {
            let params = ListParams {
                api_version: t.api_version.clone(),
                kind: t.kind.clone(),
                namespace: Some(r.namespace.clone()),
                labels: workload_labels(&r.name),
            };
            for live in list_objects(self.kube.as_ref(), target, &params).await? {
                let Some(mut oref) = live.object_ref() else { continue };
                oref.namespace.get_or_insert_with(|| r.namespace.clone());
                let meta = live.0.get("metadata");
                let owned_by_another = meta
                    .and_then(|m| m.get("ownerReferences"))
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
                let applied_by_us =
                    meta.and_then(|m| m.get("annotations")).and_then(|a| a.get(ANNOTATION_OPERATION)).is_some();
                if live.label(LABEL_MANAGED_BY) != Some(MANAGED_BY)
                    || live.label(LABEL_INSTANCE) != Some(r.name.as_str())
                    || owned_by_another
                    || !applied_by_us
                    || rendered.iter().any(|x| same_object(x, &oref))
                    || out.iter().any(|x| same_object(x, &oref))
                {
                    continue;
                }
                // The type as the workload declares it (a list may answer in another version).
                oref.api_version = t.api_version.clone();
                out.push(oref);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Preflight: the role a workload's Pod Identity names exists (the workload does not create
    /// it: a tracking server's writer role comes with the server InstantStart created).
    async fn pod_identity_check(&self, id: &WorkloadPodIdentity) -> Result<PreflightCheck, EngineError> {
        let found = read(|| self.aws.get_role(&id.role)).await?.is_some();
        Ok(PreflightCheck {
            check: "pod_identity".into(),
            field: id.field.clone(),
            status: if found { CheckStatus::Pass } else { CheckStatus::Fail },
            detail: if found {
                format!("service account {} will assume IAM role {} ({})", id.service_account, id.role, id.purpose)
            } else {
                format!("IAM role {} does not exist, so the pods would have no credentials for {}", id.role, id.purpose)
            },
            remedy: (!found).then(|| {
                "report to a tracking server InstantStart created (it creates the server's writer role), or set \
                 job.service_account to a service account that has an identity of its own"
                    .to_string()
            }),
        })
    }

    /// The request field the preflight checks of this workload point at.
    fn check_field(&self) -> &'static str {
        match self.workload {
            WorkloadKind::TrainingJob => "runtime",
            WorkloadKind::ModelDownload => "namespace",
            WorkloadKind::Endpoint => "route",
        }
    }

    /// Preflight: the cluster serves every type the workload consists of (its operator or CRD is
    /// installed — a missing one would only fail at apply time), and HyperPod jobs have the
    /// training operator add-on (a warning: the CRD may come from elsewhere).
    async fn checks(
        &self,
        target: &KubeTarget,
        r: &RenderedWorkload,
        context: &WorkloadContext,
    ) -> Result<Vec<PreflightCheck>, EngineError> {
        let field = self.check_field();
        let mut checks = Vec::new();
        let mut seen: Vec<(String, String)> = Vec::new();
        for o in r.objects.iter().filter_map(KubeObject::object_ref) {
            let ty = (o.api_version.clone(), o.kind.clone());
            if seen.contains(&ty) {
                continue;
            }
            seen.push(ty);
            let params = ListParams {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                namespace: o.namespace.clone(),
                labels: workload_labels(&r.name),
            };
            let served = match read(|| self.kube.list(target, &params)).await {
                Ok(_) => true,
                Err(e) if e.kind == ProviderErrorKind::NotFound => false,
                Err(e) => return Err(e.into()),
            };
            // A KEDA ScaledObject is the endpoint's `autoscaling`; anything else is the workload.
            let field =
                if o.kind == "ScaledObject" && self.workload == WorkloadKind::Endpoint { "autoscaling" } else { field };
            checks.push(PreflightCheck {
                check: "api_type".into(),
                field: field.into(),
                status: if served { CheckStatus::Pass } else { CheckStatus::Fail },
                detail: if served {
                    format!("the cluster serves {} ({})", o.kind, o.api_version)
                } else {
                    format!(
                        "the cluster does not serve {} ({}): its operator or CRD is not installed",
                        o.kind, o.api_version
                    )
                },
                remedy: (!served).then(|| match o.kind.as_str() {
                    "HyperPodPyTorchJob" => {
                        "turn on the HyperPod training operator in the cluster's managed features".into()
                    }
                    "RayJob" | "RayCluster" | "RayService" => chart_remedy("KubeRay", &KUBERAY_OPERATOR),
                    "InferenceEndpointConfig" => {
                        "turn on the HyperPod inference operator in the cluster's managed features".into()
                    }
                    "ScaledObject" => chart_remedy("KEDA", &KEDA),
                    _ => format!("install the operator that provides {}", o.kind),
                }),
            });
        }
        // Pods that run as tiered checkpointing's service account need the feature on: the
        // account (and its IAM role) exist only while it is.
        let checkpointing = super::features::CHECKPOINT_SERVICE_ACCOUNT;
        if r.objects.iter().any(|o| runs_as(&o.0, checkpointing)) {
            let on = context.features.tiered_checkpointing.is_some();
            checks.push(PreflightCheck {
                check: "tiered_checkpointing".into(),
                field: "tiered_checkpointing".into(),
                status: if on { CheckStatus::Pass } else { CheckStatus::Fail },
                detail: if on {
                    format!("managed tiered checkpointing is on: the pods run as {checkpointing}")
                } else {
                    format!(
                        "managed tiered checkpointing is off in this cluster: service account {checkpointing} and its \
                         IAM role do not exist, so the pods could not be created"
                    )
                },
                remedy: (!on).then(|| "turn on tiered_checkpointing in the cluster's managed features".into()),
            });
        }
        if seen.iter().any(|(_, k)| k == "HyperPodPyTorchJob") && !context.features.training_operator {
            checks.push(PreflightCheck {
                check: "training_operator".into(),
                field: field.into(),
                status: CheckStatus::Warn,
                detail: "the HyperPod training operator add-on is not installed: process-level recovery, hang \
                         detection and the recovery budget need it"
                    .into(),
                remedy: Some("turn on training_operator in the cluster's managed features".into()),
            });
        }
        Ok(checks)
    }
}

/// A warning per instance type the rendering named whose specs EC2 does not describe: its
/// GPU count and EFA interfaces could not be checked against the request.
fn unknown_specs_checks(instance_types: &[String], context: &WorkloadContext, region: &str) -> Vec<PreflightCheck> {
    instance_types
        .iter()
        .filter(|t| context.specs_fact(t) == SpecsFact::Unknown)
        .map(|t| PreflightCheck {
            check: "instance_specs".into(),
            field: "instance_type".into(),
            status: CheckStatus::Warn,
            detail: format!(
                "EC2 does not describe {t} in {region}: the accelerators and EFA interfaces asked for could not be \
                 checked against it"
            ),
            remedy: Some(format!("check {} in the EC2 instance type documentation", ec2_name(t))),
        })
        .collect()
}

/// Whether a pod template anywhere in `object` runs as service account `name`.
fn runs_as(object: &Value, name: &str) -> bool {
    match object {
        Value::Object(m) => {
            m.get("serviceAccountName").and_then(Value::as_str) == Some(name) || m.values().any(|v| runs_as(v, name))
        }
        Value::Array(a) => a.iter().any(|v| runs_as(v, name)),
        _ => false,
    }
}

/// The remedy for a type a pinned Helm chart provides: the chart the create-cluster pipeline
/// installs (its `chart:<release>` step), which an imported cluster or a failed step lacks.
fn chart_remedy(what: &str, chart: &PinnedChart) -> String {
    format!(
        "install {what} in the cluster: Helm chart {} {} from {} as release {} in namespace {} \
         (what create-cluster's step {} installs; retry that step if it failed)",
        chart.chart,
        chart.version,
        chart.source.source().describe(),
        chart.release,
        chart.namespace,
        super::charts::chart_step_key(chart)
    )
}

#[async_trait]
impl Workflow for WorkloadWorkflow {
    fn kind(&self) -> OperationKind {
        self.kind
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: WorkloadRequest = decode(request)?;
        if req.kind != self.workload {
            return Err(ValidationError::invalid(
                "kind",
                format!("must be {} for a {} operation", self.workload.as_str(), self.kind.as_str()),
            )
            .into());
        }
        let mut req = req;
        let rec = cluster_record(self.store.as_ref(), &req.cluster)?;
        // Facts from our own registry always replace what a client sent.
        req.context.get_or_insert_with(WorkloadContext::default).storage = storage_facts(&rec);
        // The namespace the request names is judged first: a system namespace is refused for
        // what it is, not for what the rendering would then find missing there.
        let pointer = format!("/{}", self.workload.namespace_field().replace('.', "/"));
        if let Some(namespace) = req.params.pointer(&pointer).and_then(Value::as_str) {
            check_system_namespace(req.acting_as.as_ref(), self.workload, namespace)?;
        }
        let rendered = self.renderer.render(&req)?;
        check_submission(req.acting_as.as_ref(), self.workload, &rendered)?;
        let refs = check_rendered(&rendered)?;
        if self.mode != ApplyMode::Update {
            req.remove.clear();
        }
        check_removals(&rendered, &refs, &req.remove, &self.renderer.owned_types(self.workload))?;
        let mut steps: Vec<StepSpec> = Vec::new();
        let mut previous: Option<String> = None;
        // What the new rendering no longer has goes first: e.g. the ScaledObject (and so KEDA's
        // HPA) is gone before the Deployment gets a fixed replica count.
        for r in &req.remove {
            let key = remove_step_key(r);
            steps.push(StepSpec {
                key: key.clone(),
                title: format!("Delete {} (no longer part of {} {})", describe(r), self.workload.noun(), rendered.name),
                depends_on: previous.iter().cloned().collect(),
                expected_secs: Some(5),
            });
            previous = Some(key);
        }
        // The workload's pods get their EKS Pod Identity at creation: the association first.
        if let Some(id) = &rendered.pod_identity {
            steps.push(StepSpec {
                key: POD_IDENTITY_STEP.into(),
                title: format!(
                    "Associate service account {}/{} with IAM role {} (EKS Pod Identity, for {})",
                    rendered.namespace, id.service_account, id.role, id.purpose
                ),
                depends_on: previous.iter().cloned().collect(),
                expected_secs: Some(5),
            });
            previous = Some(POD_IDENTITY_STEP.into());
        }
        for r in &refs {
            let key = apply_step_key(r);
            steps.push(StepSpec {
                key: key.clone(),
                title: format!("Apply {}", describe(r)),
                depends_on: previous.iter().cloned().collect(),
                expected_secs: Some(2),
            });
            previous = Some(key);
        }
        let what: Vec<String> = rendered.ready.iter().map(|r| describe(r.object())).collect();
        steps.push(StepSpec {
            key: "ready".into(),
            title: if what.is_empty() {
                format!("{} {} applied", self.workload.noun(), rendered.name)
            } else {
                format!("Wait until ready: {}", what.join(", "))
            },
            depends_on: previous.into_iter().collect(),
            expected_secs: Some(match self.workload {
                WorkloadKind::TrainingJob => 5,
                WorkloadKind::ModelDownload => 600,
                WorkloadKind::Endpoint => 300,
            }),
        });
        let target = workload_target(&req.cluster, self.workload, &rendered.name);
        let stored = StoredWorkload { request: req, rendered };
        Ok(Prepared { target, request: to_value(&stored)?, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let stored: StoredWorkload = decode(&prepared.request)?;
        let rec = cluster_record(self.store.as_ref(), &stored.request.cluster)?;
        require_active(self.aws.as_ref(), &rec).await?;
        let target = kube_target(&rec, stored.request.acting_as.as_ref());
        let r = &stored.rendered;
        let own: Vec<ObjectRef> = r
            .objects
            .iter()
            .filter(|o| o.label(LABEL_INSTANCE) == Some(r.name.as_str()))
            .filter_map(KubeObject::object_ref)
            .collect();
        match self.mode {
            ApplyMode::Create => {
                for o in &own {
                    if get_object(self.kube.as_ref(), &target, o).await?.is_some() {
                        return Err(EngineError::InvalidState(format!(
                            "{} {} already exists in namespace {} ({}); delete it first or choose another name",
                            self.workload.noun(),
                            r.name,
                            r.namespace,
                            describe(o)
                        )));
                    }
                }
            }
            ApplyMode::Update => {
                let first =
                    own.first().ok_or_else(|| EngineError::Missing(format!("{} {}", self.workload.noun(), r.name)))?;
                if get_object(self.kube.as_ref(), &target, first).await?.is_none() {
                    return Err(EngineError::Missing(format!(
                        "{} {} in namespace {}",
                        self.workload.noun(),
                        r.name,
                        r.namespace
                    )));
                }
            }
            ApplyMode::Converge => {}
        }
        let mut context = WorkloadContext {
            storage: storage_facts(&rec),
            ..self.context(&rec, &r.instance_types, r.team.is_some()).await?
        };
        if !r.volumes.is_empty() {
            context.file_systems = Some(self.file_system_facts(&rec).await?);
        }
        let mut checks = self.checks(&target, r, &context).await?;
        checks.extend(unknown_specs_checks(&r.instance_types, &context, &rec.region));
        // A deploy's own preflight (a load_balancer exposure needs the AWS Load Balancer
        // Controller): part of the assessment like every other check, so every face gets the
        // same order (a malformed request is a 400 before any preflight's 422).
        if self.workload == WorkloadKind::Endpoint && self.mode == ApplyMode::Create {
            let params = &stored.request.params;
            checks.extend(read(|| super::endpoints::deploy_preflight(self.kube.as_ref(), &target, params)).await?);
        }
        if let Some(id) = &r.pod_identity {
            checks.push(self.pod_identity_check(id).await?);
        }
        let mut request = stored.request.clone();
        request.context = Some(context);
        request.remove = match self.mode {
            ApplyMode::Update => self.no_longer_rendered(&target, r).await?,
            ApplyMode::Create | ApplyMode::Converge => Vec::new(),
        };
        Ok(Assessment { plan: None, checks, reduced_request: Some(to_value(&request)?) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let stored: StoredWorkload = decode(request).ok()?;
        let rec = self.store.get_cluster(&stored.request.cluster).ok()??;
        let target = kube_target(&rec, stored.request.acting_as.as_ref());
        if key == "ready" {
            return Some(Arc::new(ReadyStep { kube: self.kube.clone(), target, rendered: stored.rendered }));
        }
        if key == POD_IDENTITY_STEP {
            let id = stored.rendered.pod_identity.clone()?;
            return Some(Arc::new(EnsurePodIdentity(PodIdentityTarget {
                target: AddonTarget {
                    aws: self.aws.clone(),
                    region: rec.region.clone(),
                    eks_cluster: rec.eks_cluster.clone(),
                    cluster: rec.name.clone(),
                },
                namespace: stored.rendered.namespace.clone(),
                service_account: id.service_account,
                role: id.role,
            })));
        }
        if let Some(r) = stored.request.remove.iter().find(|r| remove_step_key(r) == key) {
            return Some(Arc::new(RemoveObject {
                kube: self.kube.clone(),
                target,
                object: r.clone(),
                workload: stored.rendered.name.clone(),
            }));
        }
        let object =
            stored.rendered.objects.iter().find(|o| o.object_ref().is_some_and(|r| apply_step_key(&r) == key))?.clone();
        Some(Arc::new(ApplyObject {
            kube: self.kube.clone(),
            target,
            object,
            namespace: stored.rendered.namespace.clone(),
            workload: stored.rendered.name.clone(),
        }))
    }
}

/// Server-side applies one recorded object.
struct ApplyObject {
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    object: KubeObject,
    namespace: String,
    workload: String,
}

impl ApplyObject {
    fn object_ref(&self) -> ObjectRef {
        let mut r = self.object.object_ref().expect("checked at prepare time");
        if r.namespace.is_none() && self.object.0.pointer("/metadata/namespace").is_some() {
            r.namespace = Some(self.namespace.clone());
        }
        r
    }

    fn resource(&self) -> ResourceRef {
        let r = self.object_ref();
        let id = match &r.namespace {
            Some(ns) => format!("{ns}/{}", r.name),
            None => r.name.clone(),
        };
        ResourceRef { kind: format!("k8s:{}", r.kind), id, arn: None }
    }
}

#[async_trait]
impl StepExecutor for ApplyObject {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let r = self.object_ref();
        let Some(live) = get_object(self.kube.as_ref(), &self.target, &r).await? else {
            return Ok(Observation::Absent);
        };
        if live.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) {
            return Ok(Observation::Foreign {
                reason: format!("{} exists and is not managed by InstantStart; it is left alone", describe(&r)),
            });
        }
        let wanted = self.object.label(LABEL_INSTANCE);
        if wanted.is_some() && live.label(LABEL_INSTANCE) != wanted {
            return Ok(Observation::Foreign {
                reason: format!(
                    "{} belongs to workload {:?}, not {}",
                    describe(&r),
                    live.label(LABEL_INSTANCE).unwrap_or(""),
                    self.workload
                ),
            });
        }
        let applied_by = live.0.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_OPERATION));
        Ok(if applied_by.and_then(Value::as_str) == Some(cx.operation_id.0.as_str()) {
            Observation::Exists(self.resource())
        } else {
            Observation::Absent
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let mut object = self.object.clone();
        if let Some(meta) = object.0.get_mut("metadata").and_then(Value::as_object_mut) {
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(ANNOTATION_OPERATION.into(), json!(cx.operation_id.0));
            }
        }
        self.kube.apply(&self.target, &object).await?;
        Ok(self.resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let oref = self.object_ref();
        Ok(match get_object(self.kube.as_ref(), &self.target, &oref).await? {
            Some(live) => Progress::Done(json!({
                "object": r.id,
                "kind": oref.kind,
                "uid": live.0.pointer("/metadata/uid"),
                "generation": live.0.pointer("/metadata/generation"),
            })),
            None => Progress::Waiting { detail: format!("{}: waiting for the API server", describe(&oref)) },
        })
    }
}

/// Deletes one object an update no longer renders, and waits until it is gone.
struct RemoveObject {
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    object: ObjectRef,
    workload: String,
}

impl RemoveObject {
    fn resource(&self) -> ResourceRef {
        let id = match &self.object.namespace {
            Some(ns) => format!("{ns}/{}", self.object.name),
            None => self.object.name.clone(),
        };
        ResourceRef { kind: format!("k8s:{}", self.object.kind), id, arn: None }
    }
}

#[async_trait]
impl StepExecutor for RemoveObject {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let Some(live) = get_object(self.kube.as_ref(), &self.target, &self.object).await? else {
            // Already gone (a resumed step, or deleted by hand): nothing to do.
            return Ok(Observation::Exists(self.resource()));
        };
        if live.label(LABEL_MANAGED_BY) != Some(MANAGED_BY)
            || live.label(LABEL_INSTANCE) != Some(self.workload.as_str())
        {
            return Ok(Observation::Foreign {
                reason: format!(
                    "{} is no longer InstantStart's object of workload {}; it is left alone",
                    describe(&self.object),
                    self.workload
                ),
            });
        }
        Ok(Observation::Absent)
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        match self.kube.delete(&self.target, &self.object).await {
            Ok(_) => Ok(self.resource()),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(self.resource()),
            Err(e) => Err(e.into()),
        }
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match get_object(self.kube.as_ref(), &self.target, &self.object).await? {
            None => Progress::Done(json!({ "object": r.id, "kind": self.object.kind, "removed": true })),
            Some(_) => Progress::Waiting { detail: format!("{}: waiting until it is gone", describe(&self.object)) },
        })
    }
}

/// Polls the ready rules of a workload.
struct ReadyStep {
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    rendered: RenderedWorkload,
}

impl ReadyStep {
    fn resource(&self) -> ResourceRef {
        ResourceRef {
            kind: "workload".into(),
            id: format!("{}/{}", self.rendered.namespace, self.rendered.name),
            arn: None,
        }
    }
}

#[async_trait]
impl StepExecutor for ReadyStep {
    /// Nothing to submit: waiting is read-only.
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(Observation::Exists(self.resource()))
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        Ok(self.resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let mut waiting: Vec<String> = Vec::new();
        for rule in &self.rendered.ready {
            let live = get_object(self.kube.as_ref(), &self.target, rule.object()).await?;
            match rule.evaluate(live.as_ref()) {
                Readiness::Ready => {}
                Readiness::Waiting(d) => waiting.push(d),
                Readiness::Failed(reason) => return Ok(Progress::Failed { reason }),
            }
        }
        Ok(if waiting.is_empty() {
            Progress::Done(json!({
                "name": self.rendered.name,
                "namespace": self.rendered.namespace,
                "ready": true,
            }))
        } else {
            Progress::Waiting { detail: waiting.join("; ") }
        })
    }
}

/// Delete a workload: `{cluster, kind, name, namespace}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteWorkloadRequest {
    pub cluster: String,
    pub kind: WorkloadKind,
    pub name: String,
    pub namespace: String,
    /// Who the delete's Kubernetes calls act as (see [`WorkloadRequest::acting_as`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acting_as: Option<KubeAccess>,
}

/// Deletes every object of a workload (found by its labels) and waits until they are gone.
pub struct DeleteWorkloadWorkflow {
    kind: OperationKind,
    workload: WorkloadKind,
    renderer: Arc<dyn WorkloadRenderer>,
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

impl DeleteWorkloadWorkflow {
    /// `kind` must be a delete kind ([`delete_kind`]); `None` otherwise.
    pub fn new(
        kind: OperationKind,
        renderer: Arc<dyn WorkloadRenderer>,
        aws: Arc<dyn AwsCloud>,
        kube: Arc<dyn KubeApi>,
        store: Arc<dyn Store>,
    ) -> Option<Self> {
        let workload = delete_kind(kind)?;
        Some(DeleteWorkloadWorkflow { kind, workload, renderer, aws, kube, store })
    }

    fn types(&self) -> Vec<TypeRef> {
        let mut t = self.renderer.owned_types(self.workload);
        t.reverse();
        t
    }
}

fn delete_step_key(t: &TypeRef) -> String {
    format!("delete:{}", t.kind)
}

#[async_trait]
impl Workflow for DeleteWorkloadWorkflow {
    fn kind(&self) -> OperationKind {
        self.kind
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: DeleteWorkloadRequest = decode(request)?;
        let mut f = Findings::new();
        if req.kind != self.workload {
            f.push("kind", format!("must be {} for a {} operation", self.workload.as_str(), self.kind.as_str()));
        }
        if let Err(rule) = names::dns1123_label(&req.name) {
            f.push("name", rule);
        }
        if let Err(rule) = names::dns1123_label(&req.namespace) {
            f.push("namespace", rule);
        }
        f.finish()?;
        check_access(req.acting_as.as_ref(), &req.namespace)?;
        cluster_record(self.store.as_ref(), &req.cluster)?;
        let mut steps = Vec::new();
        let mut previous: Option<String> = None;
        for t in self.types() {
            let key = delete_step_key(&t);
            steps.push(StepSpec {
                key: key.clone(),
                title: format!(
                    "Delete the {} objects of {} {}/{}",
                    t.kind,
                    self.workload.noun(),
                    req.namespace,
                    req.name
                ),
                depends_on: previous.iter().cloned().collect(),
                expected_secs: Some(5),
            });
            previous = Some(key);
        }
        steps.push(StepSpec {
            key: "gone".into(),
            title: format!("Wait until the pods of {} {}/{} are gone", self.workload.noun(), req.namespace, req.name),
            depends_on: previous.into_iter().collect(),
            expected_secs: Some(30),
        });
        // A training job that reported to MLflow ran as `<job>-mlflow` with its own association
        // (absent counts as done: most jobs have none).
        if self.workload == WorkloadKind::TrainingJob {
            steps.push(StepSpec {
                key: POD_IDENTITY_STEP.into(),
                title: format!(
                    "Delete the EKS Pod Identity association of {}/{} (if the job reported to MLflow)",
                    req.namespace,
                    mlflow_service_account(&req.name)
                ),
                depends_on: vec!["gone".into()],
                expected_secs: Some(5),
            });
        }
        Ok(Prepared {
            target: workload_target(&req.cluster, self.workload, &req.name),
            request: to_value(&req)?,
            steps,
        })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: DeleteWorkloadRequest = decode(&prepared.request)?;
        let rec = cluster_record(self.store.as_ref(), &req.cluster)?;
        let target = kube_target(&rec, req.acting_as.as_ref());
        for t in self.types() {
            let params = ListParams {
                api_version: t.api_version.clone(),
                kind: t.kind.clone(),
                namespace: Some(req.namespace.clone()),
                labels: workload_labels(&req.name),
            };
            if !list_objects(self.kube.as_ref(), &target, &params).await?.is_empty() {
                return Ok(Assessment::default());
            }
        }
        // Nothing of InstantStart's: a foreign workload of that name is refused, not missing.
        let what = format!("{} {} in namespace {}", self.workload.noun(), req.name, req.namespace);
        let foreign = match self.workload {
            WorkloadKind::TrainingJob => {
                match crate::workload::read::find_job(self.kube.as_ref(), &target, &req.name, Some(&req.namespace))
                    .await
                {
                    Ok(job) => !crate::workload::is_ours(&job),
                    Err(crate::workload::read::ReadError::Provider(e)) => return Err(e.into()),
                    Err(_) => false,
                }
            }
            WorkloadKind::Endpoint => {
                super::endpoints::is_foreign_endpoint(self.kube.as_ref(), &target, &req.namespace, &req.name).await?
            }
            WorkloadKind::ModelDownload => false,
        };
        if foreign {
            return Err(crate::workload::foreign_refusal(self.workload.noun(), &what).into());
        }
        Err(EngineError::Missing(format!("{} {} in namespace {}", self.workload.noun(), req.name, req.namespace)))
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: DeleteWorkloadRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        if key == POD_IDENTITY_STEP {
            return Some(Arc::new(RemovePodIdentity(PodIdentityTarget {
                target: AddonTarget {
                    aws: self.aws.clone(),
                    region: rec.region.clone(),
                    eks_cluster: rec.eks_cluster.clone(),
                    cluster: rec.name.clone(),
                },
                namespace: req.namespace.clone(),
                service_account: mlflow_service_account(&req.name),
                role: String::new(),
            })));
        }
        let target = kube_target(&rec, req.acting_as.as_ref());
        let ty = if key == "gone" {
            TypeRef::new("v1", "Pod")
        } else {
            self.types().into_iter().find(|t| delete_step_key(t) == key)?
        };
        Some(Arc::new(DeleteObjects {
            kube: self.kube.clone(),
            target,
            params: ListParams {
                api_version: ty.api_version,
                kind: ty.kind,
                namespace: Some(req.namespace.clone()),
                labels: workload_labels(&req.name),
            },
            delete: key != "gone",
        }))
    }
}

/// Deletes (or, for pods, only waits for) the objects of one type selected by the workload's
/// labels — only what carries InstantStart's label is ever selected.
struct DeleteObjects {
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    params: ListParams,
    delete: bool,
}

impl DeleteObjects {
    fn resource(&self) -> ResourceRef {
        let instance = self.params.labels.iter().find(|(k, _)| k == LABEL_INSTANCE).map_or("", |(_, v)| v.as_str());
        ResourceRef {
            kind: format!("k8s:{}", self.params.kind),
            id: format!("{}/{instance}", self.params.namespace.as_deref().unwrap_or("")),
            arn: None,
        }
    }

    async fn live(&self) -> Result<Vec<ObjectRef>, StepError> {
        Ok(list_objects(self.kube.as_ref(), &self.target, &self.params)
            .await?
            .iter()
            .filter(|o| o.label(LABEL_MANAGED_BY) == Some(MANAGED_BY))
            .filter_map(KubeObject::object_ref)
            .collect())
    }
}

#[async_trait]
impl StepExecutor for DeleteObjects {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(if !self.delete || self.live().await?.is_empty() {
            Observation::Exists(self.resource())
        } else {
            Observation::Absent
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        for r in self.live().await? {
            self.kube.delete(&self.target, &r).await?;
        }
        Ok(self.resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let left = self.live().await?;
        Ok(if left.is_empty() {
            Progress::Done(json!({ "kind": self.params.kind, "workload": r.id, "remaining": 0 }))
        } else {
            let names: Vec<&str> = left.iter().take(5).map(|o| o.name.as_str()).collect();
            Progress::Waiting {
                detail: format!("{} {}(s) still terminating: {}", left.len(), self.params.kind, names.join(", ")),
            }
        })
    }
}
