//! The instance types HyperPod accepts, and the facts about them that validation uses.
//!
//! - **Which types exist** is AWS's data: [`CLUSTER_INSTANCE_TYPES`] is SageMaker's
//!   `ClusterInstanceType` enum, generated from the pinned botocore ([`generated`]); a test of
//!   the AWS crate compares it with botocore's model and regenerates it.
//! - **What a type has** ([`InstanceTypeInfo`]: vCPUs, memory, accelerators and their kind,
//!   EFA interfaces, EFA-only support) comes from the provider: EC2 `DescribeInstanceTypes`
//!   on AWS (the name without `ml.`), the simulator's table on the simulated cloud. Nothing
//!   here hard-codes a type's specs.
//!
//! # Guarantees
//!
//! - A type in [`CLUSTER_INSTANCE_TYPES`] is accepted whether or not its specs are known; the
//!   checks that need specs then report that they could not run ([`SpecsFact::Unknown`])
//!   instead of refusing the type.

pub mod generated;

pub use generated::{BOTOCORE_VERSION, CLUSTER_INSTANCE_TYPES};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether `name` is one of SageMaker's `ClusterInstanceType` values.
pub fn is_cluster_instance_type(name: &str) -> bool {
    CLUSTER_INSTANCE_TYPES.contains(&name)
}

/// The EC2 instance type behind a HyperPod one: `ml.g5.12xlarge` → `g5.12xlarge`.
pub fn ec2_name(instance_type: &str) -> &str {
    instance_type.strip_prefix("ml.").unwrap_or(instance_type)
}

/// The families whose instances carry accelerators (GPUs, Trainium, Inferentia): `p*`, `g*`,
/// `gr*`, `trn*`, `inf*`. A naming rule, used where a default must be chosen before specs are
/// read (HyperPod's `ThreadsPerCore`).
pub fn is_accelerated_family(instance_type: &str) -> bool {
    let family = ec2_name(instance_type).split('.').next().unwrap_or_default();
    let letters: String = family.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    matches!(letters.as_str(), "p" | "g" | "gr" | "trn" | "inf")
}

/// What an instance type has, as EC2 describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceTypeInfo {
    /// The HyperPod name, e.g. `ml.g5.12xlarge`.
    pub name: String,
    pub vcpus: u32,
    /// Memory in GiB (EC2's `MemoryInfo.SizeInMiB` / 1024, rounded down).
    pub memory_gib: u32,
    /// GPUs or Neuron devices per instance.
    pub accelerators: u32,
    /// `none`, `nvidia-<gpu>` (e.g. `nvidia-a10g`) or `aws-<device>` (e.g. `aws-trainium2`).
    pub accelerator: String,
    /// Most EFA interfaces an instance can have (0 = no EFA).
    pub efa_interfaces: u32,
    /// Whether a network card takes an EFA-only interface (`InterfaceTypes` has `efa-only`).
    pub efa_only_supported: bool,
}

impl InstanceTypeInfo {
    /// Whether the type has NVIDIA GPUs.
    pub fn is_nvidia(&self) -> bool {
        self.accelerator.starts_with("nvidia")
    }

    /// The accelerator kind EC2's names give: GPU `(NVIDIA, A10G)` → `nvidia-a10g`, Neuron
    /// device `Trainium2` → `aws-trainium2`.
    pub fn accelerator_kind(manufacturer: &str, name: &str) -> String {
        format!("{}-{}", manufacturer.to_ascii_lowercase(), name.to_ascii_lowercase().replace(' ', "-"))
    }
}

/// What is known about one type's specs at a point of validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SpecsFact {
    /// Not read yet (the first, offline pass of a request): spec checks are skipped; the
    /// request is checked again once the provider answered.
    #[default]
    NotRead,
    /// The provider was asked and does not know the type's specs: checks that need them say
    /// they could not run.
    Unknown,
    Known(InstanceTypeInfo),
}

impl SpecsFact {
    /// The fact about `instance_type` once a provider answered `described`: known or unknown.
    pub fn of<'a>(described: impl IntoIterator<Item = &'a InstanceTypeInfo>, instance_type: &str) -> SpecsFact {
        described.into_iter().find(|i| i.name == instance_type).cloned().map_or(SpecsFact::Unknown, SpecsFact::Known)
    }

    pub fn known(&self) -> Option<&InstanceTypeInfo> {
        match self {
            SpecsFact::Known(i) => Some(i),
            SpecsFact::NotRead | SpecsFact::Unknown => None,
        }
    }
}

/// The specs a provider answered for a region, by HyperPod name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceSpecs(BTreeMap<String, InstanceTypeInfo>);

impl InstanceSpecs {
    pub fn new(specs: impl IntoIterator<Item = InstanceTypeInfo>) -> Self {
        InstanceSpecs(specs.into_iter().map(|i| (i.name.clone(), i)).collect())
    }

    pub fn get(&self, instance_type: &str) -> Option<&InstanceTypeInfo> {
        self.0.get(instance_type)
    }

    /// [`SpecsFact::Known`] or [`SpecsFact::Unknown`]: the provider has been asked.
    pub fn fact(&self, instance_type: &str) -> SpecsFact {
        SpecsFact::of(self.get(instance_type), instance_type)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_list_has_the_types_the_review_found_refused() {
        assert!(CLUSTER_INSTANCE_TYPES.len() >= 150);
        for t in ["ml.g5.8xlarge", "ml.g6.12xlarge", "ml.p5.4xlarge", "ml.p6e-gb200.36xlarge", "ml.g5.12xlarge"] {
            assert!(is_cluster_instance_type(t), "{t}");
        }
        assert!(!is_cluster_instance_type("ml.g5.13xlarge"));
        assert!(!is_cluster_instance_type("g5.12xlarge"), "HyperPod names carry ml.");
        let mut seen = std::collections::BTreeSet::new();
        assert!(CLUSTER_INSTANCE_TYPES.iter().all(|t| seen.insert(t)), "no type listed twice");
    }

    #[test]
    fn accelerated_families_by_name() {
        for (t, accelerated) in [
            ("ml.p5.48xlarge", true),
            ("ml.p6e-gb200.36xlarge", true),
            ("ml.g5.xlarge", true),
            ("ml.gr6.4xlarge", true),
            ("ml.g6e.12xlarge", true),
            ("ml.trn1n.32xlarge", true),
            ("ml.trn2.3xlarge", true),
            ("ml.c5.large", false),
            ("ml.m7i.large", false),
            ("ml.c6g.medium", false),
            ("ml.i3en.large", false),
            ("ml.t3.medium", false),
        ] {
            assert_eq!(is_accelerated_family(t), accelerated, "{t}");
        }
    }

    #[test]
    fn accelerator_kinds_follow_ec2_names() {
        assert_eq!(InstanceTypeInfo::accelerator_kind("NVIDIA", "A10G"), "nvidia-a10g");
        assert_eq!(InstanceTypeInfo::accelerator_kind("AWS", "Trainium2"), "aws-trainium2");
    }
}
