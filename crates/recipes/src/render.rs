//! [`WorkloadRenderer`]: the bridge between the typed builders of this crate and the durable
//! workload workflows of `instantstart-core` (`instantstart_core::workflow::workloads`).
//!
//! A [`WorkloadRequest`] carries its parameters as JSON; the renderer decodes them into the
//! builders' parameter structs (shape errors name the field, relative to the parameters),
//! fills in what the cluster decides — the shared bucket's claim and mount path when the
//! request names no storage, the capacity type of the target instance group and the managed
//! features for the elastic-training exclusions — and returns the objects to apply with what
//! "ready" means for the operation:
//!
//! | kind | parameters | objects | ready when |
//! | --- | --- | --- | --- |
//! | `training_job` | [`TrainingJobRequest`] (`runtime`: `hyperpod` or `ray`) | `HyperPodPyTorchJob` or `RayJob` | the API server accepted the job (training itself is followed through the job's status) |
//! | `model_download` | [`ModelDownloadParams`] | the download `Job` | the Job is `Complete` (fails with the Job's `Failed` reason) |

use crate::common::{object_meta, standard_labels};
use crate::download::{ModelDownloadParams, model_download_job};
use crate::training::hyperpod::{self, HyperPodJobParams, TargetCapacity, hyperpod_pytorch_job};
use crate::training::ray::{self, RayJobParams, ray_job};
use crate::volumes::check_volume_facts;
use instantstart_core::provider::{KubeObject, ObjectRef};
use instantstart_core::spec::CapacitySpec;
use instantstart_core::validate::{Findings, ValidationError};
use instantstart_core::workflow::decode;
use instantstart_core::workload::{
    ReadyRule, RenderedWorkload, TypeRef, WorkloadContext, WorkloadKind, WorkloadRenderer as RenderWorkload,
    WorkloadRequest, specs_fact, volume_problem,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The body of a training job submission: the runtime and its parameters side by side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "runtime", rename_all = "snake_case")]
pub enum TrainingJobRequest {
    /// A `HyperPodPyTorchJob` under the HyperPod training operator.
    Hyperpod(HyperPodJobParams),
    /// A KubeRay `RayJob`.
    Ray(RayJobParams),
}

/// Renders training jobs and model downloads (and, once wired, inference endpoints).
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkloadRenderer;

impl WorkloadRenderer {
    pub fn new() -> Self {
        WorkloadRenderer
    }
}

fn object_ref(object: &Value) -> ObjectRef {
    KubeObject(object.clone()).object_ref().expect("builders set apiVersion, kind and metadata.name")
}

/// Sets `storage` of `params[at]` to the cluster's shared claim when the request names none.
/// Returns whether it did.
fn default_storage(params: &mut Value, at: Option<&str>, cx: Option<&WorkloadContext>) -> bool {
    let Some(facts) = cx.and_then(|c| c.storage.as_ref()) else { return false };
    let holder = match at {
        Some(key) => params.get_mut(key),
        None => Some(params),
    };
    let Some(map) = holder.and_then(Value::as_object_mut) else { return false };
    if map.contains_key("storage") {
        return false;
    }
    map.insert("storage".into(), json!({ "claim_name": facts.claim, "mount_path": facts.mount_path }));
    true
}

/// A workload that mounts the cluster's default claim must live in the claim's namespace.
fn check_claim_namespace(
    f: &mut Findings,
    field: &str,
    namespace: &str,
    defaulted: bool,
    cx: Option<&WorkloadContext>,
) {
    if let Some(facts) = cx.and_then(|c| c.storage.as_ref())
        && defaulted
        && namespace != facts.namespace
    {
        f.push_unprocessable(
            field,
            format!(
                "the cluster's shared bucket claim {} is in namespace {}; run there or name a claim of namespace \
                 {namespace} in storage.claim_name",
                facts.claim, facts.namespace
            ),
        );
    }
}

/// A job's team and priority against the cluster's task governance, once the workflow read it
/// (422, naming `job.team` / `job.priority` and listing the valid names).
fn check_queue(f: &mut Findings, cluster: &str, job: &crate::training::TrainingJob, cx: Option<&WorkloadContext>) {
    if let Some(facts) = cx.and_then(|c| c.governance.as_ref()) {
        instantstart_core::governance::check_job_queue(
            f,
            "job.",
            cluster,
            facts,
            job.team.as_deref(),
            job.priority.as_deref(),
        );
    }
}

/// The capacity the job's nodes come from: the instance groups of its instance type (Spot if
/// any of them is Spot, as the job may land on any).
fn target_capacity(instance_type: &str, cx: Option<&WorkloadContext>) -> TargetCapacity {
    let Some(cx) = cx else { return TargetCapacity::default() };
    let groups: Vec<&CapacitySpec> =
        cx.instance_groups.iter().filter(|g| g.instance_type == instance_type).map(|g| &g.capacity).collect();
    let capacity = if groups.contains(&&CapacitySpec::Spot) {
        CapacitySpec::Spot
    } else {
        groups.first().map(|c| (*c).clone()).unwrap_or_default()
    };
    TargetCapacity { capacity, features: cx.features.clone() }
}

fn render_training(req: &WorkloadRequest) -> Result<RenderedWorkload, ValidationError> {
    let cx = req.context.as_ref();
    let mut params = req.params.clone();
    let Some(map) = params.as_object_mut() else {
        return Err(ValidationError::invalid("", "must be an object with runtime, job and recipe"));
    };
    let runtime = match map.remove("runtime") {
        Some(Value::String(r)) => r,
        Some(_) => return Err(ValidationError::invalid("runtime", "must be \"hyperpod\" or \"ray\"")),
        None => return Err(ValidationError::invalid("runtime", "is required: \"hyperpod\" or \"ray\"")),
    };
    let defaulted = default_storage(&mut params, Some("job"), cx);
    let mut instance_types = Vec::new();
    let (team, volumes);
    let (name, namespace, object, recipe_ready, identity) = match runtime.as_str() {
        "hyperpod" => {
            let mut p: HyperPodJobParams = decode(&params)?;
            p.job.specs = specs_fact(cx, &p.job.instance_type);
            instance_types.push(p.job.instance_type.clone());
            // Tiered checkpointing's jobs run as its account (with MLflow they are refused).
            let identity = if p.tiered_checkpointing { None } else { p.job.mlflow_identity() };
            let mut f = Findings::new();
            check_claim_namespace(&mut f, "job.namespace", &p.job.namespace, defaulted, cx);
            check_queue(&mut f, &req.cluster, &p.job, cx);
            f.at("job", |f| check_volume_facts(f, &p.job.namespace, &p.job.volumes, cx));
            let built = hyperpod_pytorch_job(&p, &target_capacity(&p.job.instance_type, cx));
            if let Err(e) = &built {
                f.extend(e.clone());
            }
            f.finish()?;
            let built = built?;
            team = p.job.team.clone();
            volumes = crate::volumes::names(&p.job.volumes);
            (built.name, p.job.namespace, built.job, hyperpod::KIND, identity)
        }
        "ray" => {
            let mut p: RayJobParams = decode(&params)?;
            p.job.specs = specs_fact(cx, &p.job.instance_type);
            instance_types.push(p.job.instance_type.clone());
            let identity = p.job.mlflow_identity();
            let mut f = Findings::new();
            check_claim_namespace(&mut f, "job.namespace", &p.job.namespace, defaulted, cx);
            check_queue(&mut f, &req.cluster, &p.job, cx);
            f.at("job", |f| check_volume_facts(f, &p.job.namespace, &p.job.volumes, cx));
            let built = ray_job(&p);
            if let Err(e) = &built {
                f.extend(e.clone());
            }
            f.finish()?;
            let built = built?;
            team = p.job.team.clone();
            volumes = crate::volumes::names(&p.job.volumes);
            (built.name, p.job.namespace, built.job, ray::KIND, identity)
        }
        other => {
            return Err(ValidationError::invalid("runtime", format!("must be \"hyperpod\" or \"ray\", not {other:?}")));
        }
    };
    debug_assert_eq!(object["kind"], recipe_ready);
    let r = object_ref(&object);
    let mut objects = Vec::new();
    if let Some(id) = &identity {
        let labels = standard_labels(&name, "service-account", "training");
        objects.push(KubeObject(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": object_meta(&id.service_account, &namespace, &labels),
        })));
    }
    objects.push(KubeObject(object));
    Ok(RenderedWorkload {
        name,
        namespace,
        objects,
        ready: vec![ReadyRule::Exists { object: r }],
        pod_identity: identity,
        instance_types,
        team,
        volumes,
    })
}

fn render_download(req: &WorkloadRequest) -> Result<RenderedWorkload, ValidationError> {
    let cx = req.context.as_ref();
    let mut params = req.params.clone();
    let defaulted = default_storage(&mut params, None, cx);
    let p: ModelDownloadParams = decode(&params)?;
    let mut f = Findings::new();
    check_claim_namespace(&mut f, "namespace", &p.namespace, defaulted, cx);
    if let Some(v) = &p.volume
        && let Some(problem) = volume_problem(cx, &p.namespace, v)
    {
        f.push_unprocessable("volume", problem);
    }
    let built = model_download_job(&p);
    if let Err(e) = &built {
        f.extend(e.clone());
    }
    f.finish()?;
    let built = built?;
    let r = object_ref(&built.job);
    Ok(RenderedWorkload {
        name: built.job_name,
        namespace: p.namespace,
        objects: vec![KubeObject(built.job)],
        ready: vec![ReadyRule::ConditionTrue {
            object: r,
            condition: "Complete".into(),
            failed_if: vec!["Failed".into()],
        }],
        pod_identity: None,
        instance_types: Vec::new(),
        team: None,
        volumes: p.volume.into_iter().collect(),
    })
}

impl RenderWorkload for WorkloadRenderer {
    fn render(&self, request: &WorkloadRequest) -> Result<RenderedWorkload, ValidationError> {
        match request.kind {
            WorkloadKind::TrainingJob => render_training(request),
            WorkloadKind::ModelDownload => render_download(request),
            WorkloadKind::Endpoint => crate::inference::endpoint::render(&request.params, request.context.as_ref()),
        }
    }

    fn owned_types(&self, kind: WorkloadKind) -> Vec<TypeRef> {
        match kind {
            WorkloadKind::TrainingJob => vec![
                TypeRef::new("v1", "ServiceAccount"),
                TypeRef::new(hyperpod::API_VERSION, hyperpod::KIND),
                TypeRef::new(ray::API_VERSION, ray::KIND),
            ],
            WorkloadKind::ModelDownload => vec![TypeRef::new("batch/v1", "Job")],
            WorkloadKind::Endpoint => crate::inference::endpoint::owned_types(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::spec::ManagedFeatures;
    use instantstart_core::workload::{GroupFacts, SharedStorageFacts, WorkloadPodIdentity};

    fn cx(capacity: CapacitySpec) -> WorkloadContext {
        WorkloadContext {
            instance_groups: vec![GroupFacts {
                name: "workers".into(),
                instance_type: "ml.g5.12xlarge".into(),
                capacity,
            }],
            features: ManagedFeatures::default(),
            storage: Some(SharedStorageFacts {
                bucket: Some("demo-bucket".into()),
                namespace: "default".into(),
                claim: "s3-shared".into(),
                volume: "s3-shared-pv".into(),
                mount_path: "/data".into(),
            }),
            ..crate::common::described()
        }
    }

    fn hyperpod_params() -> Value {
        json!({
            "runtime": "hyperpod",
            "job": { "name": "llama", "namespace": "default", "image": "pytorch/pytorch:2.5.1", "instance_type": "ml.g5.12xlarge", "nodes": 2 },
            "recipe": { "kind": "torch", "script": "scripts/train.py" }
        })
    }

    fn request(kind: WorkloadKind, params: Value, context: Option<WorkloadContext>) -> WorkloadRequest {
        WorkloadRequest { context, ..WorkloadRequest::new("demo", kind, params) }
    }

    /// The specs a job renders with come from the workflow's facts: none read yet renders what
    /// was asked (the workflow renders again with them), EC2's specs give every GPU of the type,
    /// and a type EC2 does not describe needs its counts given (findings name the fields).
    #[test]
    fn a_job_renders_with_ec2s_specs_or_asks_for_what_they_would_give() {
        let job = |instance_type: &str, extra: Value| {
            let mut p = hyperpod_params();
            p["job"]["instance_type"] = json!(instance_type);
            for (k, v) in extra.as_object().unwrap() {
                p["job"][k] = v.clone();
            }
            p
        };
        let gpus = |r: &RenderedWorkload| {
            r.objects[0]
                .0
                .pointer("/spec/replicaSpecs/0/template/spec/containers/0/resources/limits/nvidia.com~1gpu")
                .cloned()
        };
        let described = cx(CapacitySpec::OnDemand);
        let r = WorkloadRenderer
            .render(&request(WorkloadKind::TrainingJob, job("ml.g5.12xlarge", json!({})), Some(described.clone())))
            .unwrap();
        assert_eq!(gpus(&r), Some(json!("4")));
        assert_eq!(r.instance_types, ["ml.g5.12xlarge"]);
        // Not read yet: no finding, whatever the counts.
        let unread = WorkloadContext { instance_specs: None, ..described.clone() };
        assert!(
            WorkloadRenderer
                .render(&request(
                    WorkloadKind::TrainingJob,
                    job("ml.g5.12xlarge", json!({"gpus_per_node": 9})),
                    Some(unread)
                ))
                .is_ok()
        );
        // Described: 9 GPUs on a 4-GPU type is refused.
        let err = WorkloadRenderer
            .render(&request(
                WorkloadKind::TrainingJob,
                job("ml.g5.12xlarge", json!({"gpus_per_node": 9})),
                Some(described.clone()),
            ))
            .unwrap_err();
        assert_eq!(err.findings[0].field, "job.gpus_per_node");
        // EC2 does not describe p6e-gb200: the counts must be given, EFA cannot be counted.
        let fields = |extra: Value| -> Vec<String> {
            match WorkloadRenderer.render(&request(
                WorkloadKind::TrainingJob,
                job("ml.p6e-gb200.36xlarge", extra),
                Some(described.clone()),
            )) {
                Ok(_) => Vec::new(),
                Err(e) => e.findings.into_iter().map(|f| f.field).collect(),
            }
        };
        assert_eq!(fields(json!({})), ["job.gpus_per_node", "job.efa"]);
        assert_eq!(fields(json!({"gpus_per_node": 4, "efa": false})), Vec::<String>::new());
        let r = WorkloadRenderer
            .render(&request(
                WorkloadKind::TrainingJob,
                job("ml.p6e-gb200.36xlarge", json!({"gpus_per_node": 4, "efa": false})),
                Some(described),
            ))
            .unwrap();
        assert_eq!(gpus(&r), Some(json!("4")));
        // Not a ClusterInstanceType at all.
        let err = WorkloadRenderer
            .render(&request(WorkloadKind::TrainingJob, job("ml.g5.13xlarge", json!({})), None))
            .unwrap_err();
        assert_eq!(err.findings[0].field, "job.instance_type");
    }

    /// A job that reports to MLflow and names no service account runs as `<job>-mlflow`, which
    /// the operation binds to the tracking server's writer role; one that names its own, or
    /// uses tiered checkpointing's, gets none (and tiered checkpointing with MLflow is refused).
    #[test]
    fn an_mlflow_job_gets_its_own_service_account_and_identity() {
        const ARN: &str = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team";
        let mut p = hyperpod_params();
        p["job"]["mlflow"] = json!({ "tracking_server_arn": ARN });
        let r =
            WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p, Some(cx(CapacitySpec::OnDemand)))).unwrap();
        assert_eq!(
            r.pod_identity,
            Some(WorkloadPodIdentity {
                service_account: "llama-mlflow".into(),
                role: "team-mlflow-writer".into(),
                purpose: "MLflow tracking server team".into(),
                field: "job.mlflow".into(),
            })
        );
        let kinds: Vec<&str> = r.objects.iter().map(|o| o.0["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ServiceAccount", "HyperPodPyTorchJob"]);
        assert_eq!(r.objects[0].0["metadata"]["name"], "llama-mlflow");
        assert_eq!(r.objects[0].label("app.kubernetes.io/instance"), Some("llama"));
        assert_eq!(
            r.objects[1].0.pointer("/spec/replicaSpecs/0/template/spec/serviceAccountName"),
            Some(&json!("llama-mlflow"))
        );

        let mut own = hyperpod_params();
        own["job"]["mlflow"] = json!({ "tracking_server_arn": ARN });
        own["job"]["service_account"] = json!("trainer");
        let r = WorkloadRenderer
            .render(&request(WorkloadKind::TrainingJob, own, Some(cx(CapacitySpec::OnDemand))))
            .unwrap();
        assert_eq!((r.pod_identity, r.objects.len()), (None, 1));

        let mut ckpt = hyperpod_params();
        ckpt["job"]["mlflow"] = json!({ "tracking_server_arn": ARN });
        ckpt["tiered_checkpointing"] = json!(true);
        let e = WorkloadRenderer
            .render(&request(WorkloadKind::TrainingJob, ckpt, Some(cx(CapacitySpec::OnDemand))))
            .unwrap_err();
        assert!(e.findings.iter().any(|f| f.field == "job.mlflow"), "{e:?}");
    }

    fn fields(e: ValidationError) -> Vec<String> {
        e.findings.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn a_hyperpod_job_mounts_the_clusters_claim_and_is_ready_when_accepted() {
        let r = WorkloadRenderer
            .render(&request(WorkloadKind::TrainingJob, hyperpod_params(), Some(cx(CapacitySpec::OnDemand))))
            .unwrap();
        assert_eq!((r.name.as_str(), r.namespace.as_str()), ("llama", "default"));
        assert_eq!(r.objects.len(), 1);
        let job = &r.objects[0].0;
        assert_eq!(job["kind"], "HyperPodPyTorchJob");
        let pod = &job["spec"]["replicaSpecs"][0]["template"]["spec"];
        let claim =
            pod["volumes"].as_array().unwrap().iter().find_map(|v| v.pointer("/persistentVolumeClaim/claimName"));
        assert_eq!(claim, Some(&json!("s3-shared")));
        assert!(pod["containers"][0]["command"].as_array().unwrap().contains(&json!("/data/scripts/train.py")));
        assert_eq!(r.ready, vec![ReadyRule::Exists { object: r.objects[0].object_ref().unwrap() }]);
    }

    #[test]
    fn elastic_training_on_spot_is_refused_with_the_field() {
        let mut p = hyperpod_params();
        p["resilience"] = json!({ "elastic": { "min_replicas": 1, "max_replicas": 2 } });
        let e = WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p.clone(), Some(cx(CapacitySpec::Spot))));
        let e = e.unwrap_err();
        assert!(fields(e.clone()).iter().any(|f| f.starts_with("resilience.elastic")), "{e}");
        assert!(
            WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p, Some(cx(CapacitySpec::OnDemand)))).is_ok()
        );
    }

    #[test]
    fn bad_parameters_name_their_fields() {
        let e = WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, json!({"job": {}}), None)).unwrap_err();
        assert_eq!(fields(e), ["runtime"]);
        let mut p = hyperpod_params();
        p["job"]["name"] = json!("Not_A_Name");
        p["job"]["nodes"] = json!(0);
        let e = WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p, None)).unwrap_err();
        let f = fields(e);
        assert!(f.contains(&"job.name".to_string()) && f.contains(&"job.nodes".to_string()), "{f:?}");
        let mut p = hyperpod_params();
        p["job"]["unknown"] = json!(1);
        let e = WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p, None)).unwrap_err();
        assert_eq!(fields(e), ["job.unknown"]);
        // The default claim lives in `default`: another namespace must name its own claim.
        let mut p = hyperpod_params();
        p["job"]["namespace"] = json!("team-a");
        let e = WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p, Some(cx(CapacitySpec::OnDemand))));
        assert_eq!(fields(e.unwrap_err()), ["job.namespace"]);
    }

    #[test]
    fn a_ray_job_renders_a_rayjob() {
        let p = json!({
            "runtime": "ray",
            "ray_version": "2.49.0",
            "job": { "name": "grpo", "namespace": "default", "image": "verlai/verl:v0.5", "instance_type": "ml.g5.12xlarge", "nodes": 2 },
            "recipe": { "kind": "verl", "overrides": { "data.train_files": "data/gsm8k/train.parquet" } }
        });
        let r =
            WorkloadRenderer.render(&request(WorkloadKind::TrainingJob, p, Some(cx(CapacitySpec::OnDemand)))).unwrap();
        assert_eq!(r.objects[0].0["kind"], "RayJob");
        assert_eq!(r.objects[0].label("app.kubernetes.io/instance"), Some("grpo"));
    }

    #[test]
    fn a_download_waits_for_completion() {
        let p = json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B" });
        let r = WorkloadRenderer
            .render(&request(WorkloadKind::ModelDownload, p, Some(cx(CapacitySpec::OnDemand))))
            .unwrap();
        assert!(r.name.starts_with("download-qwen-qwen3-0-6b-"), "{}", r.name);
        let job = &r.objects[0].0;
        assert_eq!(job["kind"], "Job");
        let env = job["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
        assert!(env.contains(&json!({"name": "DESTINATION", "value": "/data/models/Qwen/Qwen3-0.6B"})), "{env:?}");
        assert!(
            matches!(&r.ready[..], [ReadyRule::ConditionTrue { condition, failed_if, .. }] if condition == "Complete" && failed_if == &["Failed"])
        );
        let e = WorkloadRenderer.render(&request(WorkloadKind::ModelDownload, json!({"namespace": "default"}), None));
        assert_eq!(fields(e.unwrap_err()), ["repo_id"]);
    }

    #[test]
    fn training_and_downloads_own_their_types() {
        let kinds: Vec<String> =
            WorkloadRenderer.owned_types(WorkloadKind::TrainingJob).into_iter().map(|t| t.kind).collect();
        assert_eq!(kinds, ["ServiceAccount", "HyperPodPyTorchJob", "RayJob"], "the service account of an MLflow job");
        assert_eq!(WorkloadRenderer.owned_types(WorkloadKind::ModelDownload), [TypeRef::new("batch/v1", "Job")]);
    }
}
