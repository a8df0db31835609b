//! Static facts of the simulated cloud: regions and their Availability Zones, which HyperPod
//! instance types each AZ offers, default HyperPod quotas, and default EKS add-on versions.
//! The `IdentityApi` and `QuotaApi` implementations that expose them are [`crate::identity`] and
//! [`crate::quota`].

use crate::ec2_specs::instance_type_info;
use instantstart_core::instance_types::{InstanceTypeInfo, is_cluster_instance_type};
use instantstart_core::names;
use instantstart_core::provider::{AvailabilityZone, ProviderError, ProviderErrorKind, Result};

/// The IAM role the simulated control plane runs as.
pub(crate) const CONTROL_PLANE_ROLE: &str = "InstantStartSimulated";

/// AZ letters of a region; unknown regions get `a`, `b`, `c`.
fn zone_letters(region: &str) -> &'static str {
    match region {
        "us-east-1" => "abcdef",
        "us-west-2" => "abcd",
        "eu-west-1" | "us-east-2" | "eu-central-1" | "ap-northeast-1" | "ap-southeast-2" => "abc",
        _ => "abc",
    }
}

/// Short region code used in zone ids, e.g. `use1` for `us-east-1`.
fn region_code(region: &str) -> String {
    let parts: Vec<&str> = region.split('-').collect();
    let mut out = String::new();
    if let Some(first) = parts.first() {
        out.push_str(first);
    }
    for p in parts.iter().skip(1) {
        if p.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(p);
        } else if let Some(c) = p.chars().next() {
            out.push(c);
        }
    }
    out
}

pub(crate) fn check_region(api: &str, region: &str) -> Result<()> {
    names::region(region).map_err(|rule| {
        ProviderError::new(api, ProviderErrorKind::InvalidRequest, format!("invalid region {region:?}: {rule}"))
    })
}

/// The Availability Zones of `region`.
pub(crate) fn availability_zones(region: &str) -> Vec<AvailabilityZone> {
    let code = region_code(region);
    zone_letters(region)
        .chars()
        .enumerate()
        .map(|(i, l)| AvailabilityZone { name: format!("{region}{l}"), zone_id: format!("{code}-az{}", i + 1) })
        .collect()
}

/// Index of `az` among the zones of `region`, if it is one.
pub(crate) fn zone_index(region: &str, az: &str) -> Option<usize> {
    let suffix = az.strip_prefix(region)?;
    let mut chars = suffix.chars();
    let letter = chars.next()?;
    if chars.next().is_some() {
        return None;
    }
    zone_letters(region).chars().position(|l| l == letter)
}

/// Whether HyperPod offers `instance_type` in `az`. The newest accelerators (H100, H200,
/// B200, B300, Trainium2, and types EC2 does not describe) are only in every other zone (`b`,
/// `d`, `f`); eight-GPU types with four or more EFA interfaces and Trn1 are missing from zone
/// `c`; everything else is everywhere.
pub(crate) fn offered(region: &str, az: &str, instance_type: &str) -> bool {
    let Some(idx) = zone_index(region, az) else { return false };
    if !is_cluster_instance_type(instance_type) {
        return false;
    }
    match tier(instance_type_info(instance_type)) {
        Tier::HighEnd => idx % 2 == 1,
        Tier::Large => idx != 2,
        Tier::Common => true,
    }
}

enum Tier {
    HighEnd,
    Large,
    Common,
}

/// Newest accelerator kinds: scarce, zero quota until raised.
const HIGH_END: &[&str] = &["nvidia-h100", "nvidia-h200", "nvidia-b200", "nvidia-b300", "aws-trainium2"];

fn tier(info: Option<&InstanceTypeInfo>) -> Tier {
    let Some(info) = info else { return Tier::HighEnd };
    if HIGH_END.contains(&info.accelerator.as_str()) {
        Tier::HighEnd
    } else if (info.accelerators >= 8 && info.efa_interfaces >= 4) || info.name.starts_with("ml.trn1") {
        Tier::Large
    } else {
        Tier::Common
    }
}

/// Default HyperPod "for cluster usage" quota of a new account: generous for CPU and small GPU
/// types, small for large GPU types, zero for the newest accelerators until raised.
pub(crate) fn default_quota(instance_type: &str) -> u32 {
    let info = instance_type_info(instance_type);
    let accelerators = info.map_or(0, |i| i.accelerators);
    match tier(info) {
        Tier::HighEnd => 0,
        Tier::Large => 2,
        Tier::Common if accelerators == 0 => 20,
        Tier::Common if accelerators <= 1 => 10,
        Tier::Common if accelerators <= 4 => 4,
        Tier::Common => 2,
    }
}

/// Quota name as Service Quotas shows it.
pub(crate) fn quota_name(instance_type: &str) -> String {
    format!("{instance_type} for cluster usage")
}

/// Versions of the Amazon VPC CNI add-on (`vpc-cni`) the simulated EKS offers, newest first
/// (the shape of `eks:DescribeAddonVersions`; the default is [`addon_default_version`]). The
/// ones below 1.18.3 exist so a test can install a CNI HyperPod refuses.
pub(crate) const VPC_CNI_VERSIONS: &[&str] = &[
    "v1.20.4-eksbuild.2",
    "v1.20.1-eksbuild.1",
    "v1.19.6-eksbuild.7",
    "v1.18.3-eksbuild.3",
    "v1.18.2-eksbuild.1",
    "v1.16.4-eksbuild.2",
];

/// The self-managed VPC CNI EKS installs in a new cluster before any add-on is created
/// (`bootstrapSelfManagedAddons`), by Kubernetes version.
pub(crate) fn self_managed_vpc_cni(kubernetes_version: &str) -> &'static str {
    match kubernetes_version {
        "1.32" | "1.33" => "v1.19.2-eksbuild.1",
        _ => "v1.19.6-eksbuild.7",
    }
}

/// Whether the simulated EKS offers `version` of `addon` (only `vpc-cni` has a catalog; other
/// add-ons accept any pinned version).
pub(crate) fn addon_version_offered(addon: &str, version: &str) -> bool {
    addon != "vpc-cni" || VPC_CNI_VERSIONS.contains(&version)
}

/// Default version of an EKS add-on.
pub(crate) fn addon_default_version(addon: &str, kubernetes_version: &str) -> String {
    match addon {
        "eks-pod-identity-agent" => "v1.3.8-eksbuild.2".into(),
        "cert-manager" => "v1.18.2-eksbuild.1".into(),
        "aws-mountpoint-s3-csi-driver" => "v2.1.0-eksbuild.1".into(),
        "aws-fsx-csi-driver" => "v1.6.0-eksbuild.1".into(),
        "vpc-cni" => "v1.20.1-eksbuild.1".into(),
        "coredns" => "v1.12.2-eksbuild.4".into(),
        "kube-proxy" => format!("v{kubernetes_version}.0-eksbuild.2"),
        "amazon-cloudwatch-observability" => "v4.3.0-eksbuild.1".into(),
        "amazon-sagemaker-hyperpod-observability" => "v1.0.5-eksbuild.1".into(),
        _ => "v1.0.0-eksbuild.1".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::instance_types::CLUSTER_INSTANCE_TYPES;

    #[test]
    fn zones_per_region() {
        let cases = [
            ("us-east-1", 6, "use1-az1"),
            ("us-west-2", 4, "usw2-az1"),
            ("eu-west-1", 3, "euw1-az1"),
            ("ap-south-2", 3, "aps2-az1"),
        ];
        for (region, n, first_id) in cases {
            let zones = availability_zones(region);
            assert_eq!(zones.len(), n, "{region}");
            assert_eq!(zones[0].name, format!("{region}a"));
            assert_eq!(zones[0].zone_id, first_id);
            for z in &zones {
                assert!(names::availability_zone(&z.name, region).is_ok());
            }
        }
    }

    #[test]
    fn offerings_and_quotas() {
        let cases = [
            ("ml.g5.2xlarge", "us-east-1a", true, 10),
            ("ml.m5.xlarge", "us-east-1c", true, 20),
            ("ml.p5.48xlarge", "us-east-1a", false, 0),
            ("ml.p5.48xlarge", "us-east-1b", true, 0),
            ("ml.p4d.24xlarge", "us-east-1c", false, 2),
            ("ml.p4d.24xlarge", "us-east-1d", true, 2),
            ("ml.trn2.48xlarge", "eu-west-1b", true, 0),
            ("ml.g5.12xlarge", "eu-west-1c", true, 4),
            ("ml.g5.2xlarge", "us-east-1z", false, 10),
            ("ml.g5.8xlarge", "us-east-1c", true, 10),
            ("ml.p5.4xlarge", "us-east-1a", false, 0),
            ("ml.p6e-gb200.36xlarge", "us-east-1b", true, 0),
            ("ml.g5.13xlarge", "us-east-1a", false, 0),
        ];
        for (t, az, ok, quota) in cases {
            let region = &az[..az.len() - 1];
            assert_eq!(offered(region, az, t), ok, "{t} in {az}");
            assert_eq!(default_quota(t), quota, "{t}");
        }
        // Every instance type is offered somewhere in every region.
        for region in ["us-east-1", "eu-west-1", "xx-new-1"] {
            for t in CLUSTER_INSTANCE_TYPES {
                assert!(availability_zones(region).iter().any(|z| offered(region, &z.name, t)), "{t}");
            }
        }
    }
}
