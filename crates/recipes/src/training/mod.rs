//! Training jobs over the two routes of the mission, with recipes layered on top.
//!
//! * [`hyperpod`] — `HyperPodPyTorchJob` (`sagemaker.amazonaws.com/v1`) for the HyperPod
//!   training operator: process-level recovery through the HyperPod elastic agent
//!   (`hyperpodrun`), hang and slowness detection by log patterns, and an explicit, visible
//!   recovery budget. Recipes: a plain PyTorch script, LLaMA-Factory and MS-Swift.
//! * [`ray`] — KubeRay `RayJob` (`ray.io/v1`) for Ray-native workloads; recipe: VERL RL.
//!
//! Every route shares [`TrainingJob`]: the image, the instance type and node count (the GPU
//! count per node is checked against, and defaults to, the type's accelerators), EFA
//! interfaces when the type has them, the shared bucket mounted read-write at the same path as
//! everywhere else, and optional SageMaker managed MLflow wiring. Commands are argv arrays;
//! user paths are relative to the bucket and resolved under the mount.

pub mod hyperpod;
pub mod ray;

use crate::common::{
    Accelerator, ComputeResources, EnvVarSpec, LABEL_INSTANCE_TYPE, MLFLOW_ENV, MlflowTracking, accelerator_of,
    accelerator_tolerations, accelerators_per_node, check, container_resources, container_security, dns1123_subdomain,
    efa_interfaces, env_value, image_ref, known_instance_type, quantity, require_nvidia, set, shm_volume, validate_env,
};
use crate::storage::{Access, SharedMount};
use crate::volumes::{VolumeMount, check_volumes, mount_volumes};
use instantstart_core::governance::{self, PRIORITY_LABEL, QUEUE_LABEL, priority_class_name, team_queue};
use instantstart_core::instance_types::SpecsFact;
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate};
use instantstart_core::workflow::mlflow::{tracking_server_of_arn, writer_role_name};
use instantstart_core::workload::{WorkloadPodIdentity, mlflow_service_account};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Longest training job name: operators derive pod, service and StatefulSet names (and
/// label values limited to 63 characters) from it, with suffixes of their own.
pub const TRAINING_NAME_MAX: usize = 50;
/// Most nodes one job may ask for.
pub const MAX_NODES: u32 = 1024;

fn default_true() -> bool {
    true
}
fn default_shm() -> String {
    "64Gi".to_string()
}

/// What every training job needs, whichever operator runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainingJob {
    /// Job name, a DNS-1123 label of at most 50 characters.
    pub name: String,
    pub namespace: String,
    /// Training image (pinned tag or digest).
    pub image: String,
    /// HyperPod instance type of the nodes, e.g. `ml.p5.48xlarge`.
    pub instance_type: String,
    /// Number of nodes (pods, one per node).
    pub nodes: u32,
    /// GPUs per node; every GPU of the instance type when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    /// Attach every EFA interface of the instance type (when it has any).
    #[serde(default = "default_true")]
    pub efa: bool,
    #[serde(default)]
    pub storage: SharedMount,
    /// The cluster's FSx for Lustre volumes to mount beside the shared bucket, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlflow: Option<MlflowTracking>,
    /// Service account of the pods (one with an IAM identity of its own). With `mlflow` and none
    /// given, the pods run as `<name>-mlflow`, which the job's operation binds through EKS Pod
    /// Identity to the tracking server's writer role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVarSpec>,
    /// CPU and memory per pod, on top of the accelerators.
    #[serde(default)]
    pub resources: ComputeResources,
    /// Size of the memory-backed `/dev/shm`.
    #[serde(default = "default_shm")]
    pub shm_size: String,
    /// Task governance team whose queue the job waits in (`kueue.x-k8s.io/queue-name:
    /// hyperpod-ns-<team>-localqueue`); the job must run in the team's namespace
    /// `hyperpod-ns-<team>`, and the team must have a compute quota in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Priority class of the cluster's task governance (`kueue.x-k8s.io/priority-class:
    /// <priority>-priority`); only with `team`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// EC2's specs of `instance_type`, set by the renderer from the workflow's facts (never
    /// from the request).
    #[serde(skip)]
    #[schemars(skip)]
    pub specs: SpecsFact,
}

/// The accelerators and EFA interfaces each pod of a validated job gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hardware {
    pub accel: Accelerator,
    pub gpus: u32,
    pub efa: u32,
}

impl TrainingJob {
    /// Environment variable names the shared pod template sets itself.
    pub(crate) const RESERVED_ENV: &'static [&'static str] = &["FI_PROVIDER"];

    /// Validates the common fields, with `extra_reserved` env names set by the route.
    pub(crate) fn validate_common(&self, f: &mut Findings, extra_reserved: &[&str]) {
        check(f, "name", names::dns1123_label(&self.name));
        if self.name.len() > TRAINING_NAME_MAX {
            f.push("name", format!("must be at most {TRAINING_NAME_MAX} characters (operators append suffixes)"));
        }
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        governance::check_job_queue_shape(f, "", self.team.as_deref(), self.priority.as_deref(), &self.namespace);
        check(f, "image", image_ref(&self.image));
        self.validate_hardware(f);
        if self.nodes == 0 {
            f.push("nodes", "must be at least 1");
        } else if self.nodes > MAX_NODES {
            f.push("nodes", format!("must be at most {MAX_NODES}"));
        }
        f.at("storage", |f| self.storage.validate(f));
        check_volumes(f, &self.volumes, &[&self.storage.mount_path, "/dev/shm"]);
        if let Some(m) = &self.mlflow {
            f.at("mlflow", |f| m.validate(f));
        }
        if let Some(sa) = &self.service_account {
            check(f, "service_account", dns1123_subdomain(sa));
        }
        let mut reserved: Vec<&str> = Self::RESERVED_ENV.to_vec();
        reserved.extend_from_slice(MLFLOW_ENV);
        reserved.extend_from_slice(extra_reserved);
        validate_env(f, &self.env, &reserved);
        f.at("resources", |f| self.resources.validate(f));
        check(f, "shm_size", quantity(&self.shm_size));
    }

    fn validate_hardware(&self, f: &mut Findings) -> Option<Hardware> {
        let specs = known_instance_type(f, "instance_type", &self.instance_type, &self.specs)?;
        if !require_nvidia(f, "instance_type", &specs, "training") {
            return None;
        }
        let accel = accelerator_of(&specs.info)?;
        let gpus = accelerators_per_node(f, "gpus_per_node", &specs, self.gpus_per_node, 1);
        let efa = efa_interfaces(f, "efa", &specs, self.efa);
        Some(Hardware { accel, gpus, efa })
    }

    /// Hardware of a job whose validation passed.
    pub(crate) fn hardware(&self) -> Hardware {
        self.validate_hardware(&mut Findings::new()).expect("hardware of a validated job")
    }

    /// The EKS Pod Identity a job reporting to MLflow needs: with `mlflow` and no
    /// `service_account` of its own, the pods run as `<name>-mlflow` (set here), which the
    /// job's operation binds to the tracking server's writer role. `None` otherwise, or for an
    /// ARN that is not a tracking server's (validation names it).
    pub(crate) fn mlflow_identity(&mut self) -> Option<WorkloadPodIdentity> {
        if self.service_account.is_some() {
            return None;
        }
        let (_, server) = tracking_server_of_arn(&self.mlflow.as_ref()?.tracking_server_arn)?;
        let identity = WorkloadPodIdentity {
            service_account: mlflow_service_account(&self.name),
            role: writer_role_name(server),
            purpose: format!("MLflow tracking server {server}"),
            field: "job.mlflow".into(),
        };
        self.service_account = Some(identity.service_account.clone());
        Some(identity)
    }

    /// The Kueue labels of the job object (not of its pods: Kueue admits the job as a whole):
    /// its team's queue and its priority class.
    pub(crate) fn queue_labels(&self, manifest: &mut Value) {
        let Some(labels) = manifest.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) else { return };
        if let Some(team) = &self.team {
            labels.insert(QUEUE_LABEL.into(), json!(team_queue(team)));
        }
        if let Some(p) = &self.priority {
            labels.insert(PRIORITY_LABEL.into(), json!(priority_class_name(p)));
        }
    }

    /// Environment every training container gets: EFA, MLflow, then the user's variables.
    pub(crate) fn base_env(&self, hw: Hardware) -> Vec<Value> {
        let mut env = Vec::new();
        if hw.efa > 0 {
            env.push(env_value("FI_PROVIDER", "efa"));
        }
        if let Some(m) = &self.mlflow {
            env.extend(m.env(&self.name));
        }
        env.extend(self.env.iter().map(EnvVarSpec::to_env));
        env
    }

    /// A pod template running `command` in one container on this job's nodes: accelerators
    /// and EFA as requests = limits, `/dev/shm`, the instance-type node selector, and the
    /// shared bucket mounted read-write.
    pub(crate) fn pod_template(
        &self,
        container: &str,
        command: Vec<String>,
        env: Vec<Value>,
        ports: Value,
        labels: &BTreeMap<String, String>,
    ) -> Value {
        let hw = self.hardware();
        let (shm, shm_mount) = shm_volume(&self.shm_size);
        let mut c = json!({
            "name": container,
            "image": self.image,
            "env": env,
            "resources": container_resources(Some((hw.accel, hw.gpus)), hw.efa, &self.resources),
            "securityContext": container_security(),
            "volumeMounts": [shm_mount],
        });
        if !command.is_empty() {
            set(&mut c, "command", json!(command));
        }
        if ports.as_array().is_some_and(|p| !p.is_empty()) {
            set(&mut c, "ports", ports);
        }
        let mut spec = json!({
            "containers": [c],
            "volumes": [shm],
            "nodeSelector": { LABEL_INSTANCE_TYPE: self.instance_type },
            "tolerations": accelerator_tolerations(Some(hw.accel)),
        });
        if let Some(sa) = &self.service_account {
            set(&mut spec, "serviceAccountName", json!(sa));
        }
        self.storage
            .mount_into(&mut spec, Access::ReadWrite)
            .expect("a freshly built pod spec has no shared volume yet");
        mount_volumes(&mut spec, &self.volumes, Access::ReadWrite)
            .expect("volume names and mount paths were validated distinct");
        json!({ "metadata": { "labels": labels }, "spec": spec })
    }
}
