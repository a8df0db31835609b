//! Fault injection: throttling, transient server errors and per-API failure modes.
//!
//! Every simulated call is named like the real API it stands for. The primary names (the ones
//! [`SimFaults::fail_apis`] matches, one per provider trait method) are:
//!
//! | trait method | API name |
//! | --- | --- |
//! | `caller_identity` | `sts:GetCallerIdentity` |
//! | `availability_zones` | `ec2:DescribeAvailabilityZones` |
//! | `instance_type_offerings` | `ec2:DescribeInstanceTypeOfferings` |
//! | `hyperpod_instance_quota` / `hyperpod_instance_quotas` | `servicequotas:GetServiceQuota` / `servicequotas:ListServiceQuotas` |
//! | `find_vpc`, `describe_network` | `ec2:DescribeVpcs` |
//! | `create_network` | `ec2:CreateVpc` |
//! | `create_subnet` / `delete_subnet` | `ec2:CreateSubnet` / `ec2:DeleteSubnet` |
//! | `delete_network` | `ec2:DeleteVpc` |
//! | `describe_eks_cluster` / `list_eks_clusters` | `eks:DescribeCluster` / `eks:ListClusters` |
//! | `create_eks_cluster` / `delete_eks_cluster` | `eks:CreateCluster` / `eks:DeleteCluster` |
//! | `describe_addon` / `create_addon` / `delete_addon` | `eks:DescribeAddon` / `eks:CreateAddon` / `eks:DeleteAddon` |
//! | `get_role` / `create_role` / `delete_role` | `iam:GetRole` / `iam:CreateRole` / `iam:DeleteRole` |
//! | `ensure_role_policies` | `iam:UpdateAssumeRolePolicy` |
//! | `describe_training_plan` / `list_training_plans` | `sagemaker:DescribeTrainingPlan` / `sagemaker:ListTrainingPlans` |
//! | `search_training_plan_offerings` | `sagemaker:SearchTrainingPlanOfferings` |
//! | `describe_hyperpod_cluster` / `list_hyperpod_clusters` | `sagemaker:DescribeCluster` / `sagemaker:ListClusters` |
//! | `create_hyperpod_cluster` / `delete_hyperpod_cluster` | `sagemaker:CreateCluster` / `sagemaker:DeleteCluster` |
//! | `list_cluster_nodes` | `sagemaker:ListClusterNodes` |
//! | `describe_bucket` / `create_bucket` / `delete_bucket` | `s3:HeadBucket` / `s3:CreateBucket` / `s3:DeleteBucket` |
//! | `apply` / `get` / `list` / `delete` / `logs` | `k8s:Apply` / `k8s:Get` / `k8s:List` / `k8s:Delete` / `k8s:Logs` |
//! | `node_metrics` / `job_metrics` | `k8s:Metrics` |
//!
//! `k8s:ProcessFault` is not a call but a fault name: with `fail_once` one training process of a
//! running HyperPodPyTorchJob fails (the message is the reason), with `fail` every running one
//! keeps failing each time it runs again. [`SimFaults::process_faults`] aims faults at one job
//! by name. The HyperPod training operator's answer (restart in place, restart the job, fail it
//! when the restart budget is spent) is simulated by the Kubernetes side.
//!
//! Composite calls also count the sub-calls the real implementation makes (for example
//! `create_network` counts one `ec2:CreateSubnet` per subnet, `ec2:CreateNatGateway`, …), but
//! faults apply to the primary name only.
//!
//! A call rejected by an injected fault (throttling, 5xx, [`FaultMode::Fail`],
//! [`FaultMode::FailOnce`]) does nothing and is counted in `SimCloud::injected_faults`, not in
//! `SimCloud::stats`; a [`FaultMode::LostResponse`] call acts and is counted in both.

use instantstart_core::provider::ProviderErrorKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Faults to inject. The default injects none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimFaults {
    /// Probability (0–1) that any call is throttled (`Throttled`, "Rate exceeded") before it acts.
    pub throttle_rate: f64,
    /// Probability (0–1) that any call fails with a transient 5xx (`Transient`) before it acts.
    pub error_rate: f64,
    /// Failure modes by primary API name (e.g. `eks:CreateCluster`). On `k8s:ProcessFault`,
    /// `fail_once` makes one process of a running HyperPodPyTorchJob fail (the message is the
    /// reason) and `fail` keeps failing every running one each time it runs again.
    pub fail_apis: BTreeMap<String, FaultMode>,
    /// Process faults to inject into running HyperPodPyTorchJobs; each is removed once it has
    /// hit its `count` times.
    pub process_faults: Vec<ProcessFault>,
}

fn default_process_fault_reason() -> String {
    "RuntimeError: NCCL communicator was aborted (simulated process fault)".to_string()
}

fn one() -> u32 {
    1
}

/// A training process of a running HyperPodPyTorchJob fails: the HyperPod training operator
/// restarts the processes in place (or the whole job, or fails it) as its restart budget says.
/// The fault waits until a matching job is running (pods running, not restarting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessFault {
    /// Name of the job; any running HyperPodPyTorchJob when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Namespace of the job; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// What the process died of (shown in the job's log and status).
    #[serde(default = "default_process_fault_reason")]
    pub reason: String,
    /// How many faults, one each time the job is running again (default 1).
    #[serde(default = "one")]
    pub count: u32,
}

impl ProcessFault {
    /// One fault on job `job`.
    pub fn on(job: impl Into<String>) -> Self {
        ProcessFault { job: Some(job.into()), namespace: None, reason: default_process_fault_reason(), count: 1 }
    }
}

impl SimFaults {
    /// No faults.
    pub fn none() -> Self {
        SimFaults::default()
    }

    /// These faults plus a process fault.
    pub fn with_process_fault(mut self, fault: ProcessFault) -> Self {
        self.process_faults.push(fault);
        self
    }

    /// These faults plus `mode` for `api`.
    pub fn with(mut self, api: impl Into<String>, mode: FaultMode) -> Self {
        self.fail_apis.insert(api.into(), mode);
        self
    }
}

/// How one API misbehaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultMode {
    /// Every call fails with `kind` and `message`, without acting.
    Fail { kind: ProviderErrorKind, message: String },
    /// The next call fails with `kind` and `message` without acting; later calls succeed
    /// (the fault removes itself).
    FailOnce { kind: ProviderErrorKind, message: String },
    /// The next call acts (the mutation takes effect) but its response is lost: the caller gets
    /// a `Transient` error, as after a timeout or a crash right after the provider acted. The
    /// fault removes itself.
    LostResponse,
    /// Calls succeed, but the resource they create later ends in `Failed` with `reason` (e.g. a
    /// HyperPod `FailureMessage`, an add-on `CREATE_FAILED`, a crash-looping Deployment, a
    /// failing Job). Ignored by APIs whose resources have no lifecycle (IAM, S3, subnets).
    ResourceFails { reason: String },
}

impl FaultMode {
    /// A permanent failure of kind [`ProviderErrorKind::Failed`].
    pub fn fail(message: impl Into<String>) -> Self {
        FaultMode::Fail { kind: ProviderErrorKind::Failed, message: message.into() }
    }

    /// A one-time failure of kind `kind`.
    pub fn fail_once(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        FaultMode::FailOnce { kind, message: message.into() }
    }

    /// The created resource later fails with `reason`.
    pub fn resource_fails(reason: impl Into<String>) -> Self {
        FaultMode::ResourceFails { reason: reason.into() }
    }
}

/// What the fault layer decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Fail before acting.
    Reject(ProviderErrorKind, String),
    /// Act; fail the response with a transient error.
    LoseResponse,
    /// Act; the created resource fails later with this reason.
    ResourceFails(String),
    /// Act normally.
    Proceed,
}

impl SimFaults {
    /// Decides the fate of one call of `api`; `roll` draws uniform numbers in [0, 1).
    pub(crate) fn decide(&mut self, api: &str, mut roll: impl FnMut() -> f64) -> Verdict {
        let kube = api.starts_with("k8s:");
        if self.throttle_rate > 0.0 && roll() < self.throttle_rate {
            let message = if kube {
                "the server has received too many requests and has asked us to try again later (429)"
            } else {
                "ThrottlingException: Rate exceeded"
            };
            return Verdict::Reject(ProviderErrorKind::Throttled, message.into());
        }
        if self.error_rate > 0.0 && roll() < self.error_rate {
            let message = if kube {
                "the server is currently unable to handle the request (503, simulated)"
            } else {
                "InternalFailure: the service encountered an internal error (simulated 5xx); try again"
            };
            return Verdict::Reject(ProviderErrorKind::Transient, message.into());
        }
        match self.fail_apis.get(api) {
            None => Verdict::Proceed,
            Some(FaultMode::Fail { kind, message }) => Verdict::Reject(*kind, message.clone()),
            Some(FaultMode::ResourceFails { reason }) => Verdict::ResourceFails(reason.clone()),
            Some(FaultMode::FailOnce { .. }) | Some(FaultMode::LostResponse) => match self.fail_apis.remove(api) {
                Some(FaultMode::FailOnce { kind, message }) => Verdict::Reject(kind, message),
                _ => Verdict::LoseResponse,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_modes_remove_themselves() {
        let mut f = SimFaults::none()
            .with("a", FaultMode::fail_once(ProviderErrorKind::Conflict, "busy"))
            .with("b", FaultMode::LostResponse)
            .with("c", FaultMode::fail("broken"))
            .with("d", FaultMode::resource_fails("capacity"));
        let mut seq = Vec::new();
        for api in ["a", "a", "b", "b", "c", "c", "d", "d", "e"] {
            seq.push(f.decide(api, || 0.5));
        }
        use Verdict::*;
        assert_eq!(
            seq,
            [
                Reject(ProviderErrorKind::Conflict, "busy".into()),
                Proceed,
                LoseResponse,
                Proceed,
                Reject(ProviderErrorKind::Failed, "broken".into()),
                Reject(ProviderErrorKind::Failed, "broken".into()),
                ResourceFails("capacity".into()),
                ResourceFails("capacity".into()),
                Proceed,
            ]
        );
    }

    #[test]
    fn rates_use_the_roll() {
        let mut f = SimFaults { throttle_rate: 0.3, error_rate: 0.3, ..Default::default() };
        assert!(matches!(f.decide("x", || 0.1), Verdict::Reject(ProviderErrorKind::Throttled, _)));
        let mut rolls = [0.9, 0.2].into_iter();
        assert!(matches!(
            f.decide("x", || rolls.next().unwrap_or(1.0)),
            Verdict::Reject(ProviderErrorKind::Transient, _)
        ));
        assert_eq!(f.decide("x", || 0.99), Verdict::Proceed);
    }

    #[test]
    fn serde_shape() {
        let f = SimFaults::none().with("eks:CreateCluster", FaultMode::LostResponse);
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["fail_apis"]["eks:CreateCluster"]["mode"], "lost_response");
        let back: SimFaults = serde_json::from_value(v).unwrap();
        assert_eq!(back, f);
    }
}
