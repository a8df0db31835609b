//! Name rules of AWS and Kubernetes, checked before anything is sent to a provider.
//!
//! Each checker returns `Err(rule)` with the rule as a sentence fragment, ready to become a
//! [`crate::Finding`]. The InstantStart cluster name is stricter than any single AWS rule because
//! every resource the pipeline creates derives its name from it (see [`DerivedNames`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Maximum length of an InstantStart cluster name, chosen so that every derived name fits
/// (IAM role names are at most 64 characters; see [`DerivedNames`]).
pub const CLUSTER_NAME_MAX: usize = 40;
/// Prefix of the buckets InstantStart names (the per-cluster default bucket); the deployment
/// template's IAM policy grants bucket actions on `arn:aws:s3:::is-*`.
pub const CLUSTER_BUCKET_PREFIX: &str = "is-";

/// InstantStart cluster name: 1–40 characters, lowercase letters, digits and hyphens, starting
/// with a letter and ending with a letter or digit.
pub fn cluster_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > CLUSTER_NAME_MAX {
        return Err(format!("must be 1-{CLUSTER_NAME_MAX} characters long"));
    }
    if !name.chars().all(|c| is_lower_alnum(c) || c == '-') {
        return Err("may contain only lowercase letters, digits and hyphens".into());
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err("must start with a lowercase letter".into());
    }
    if name.ends_with('-') {
        return Err("must end with a letter or digit".into());
    }
    Ok(())
}

/// EKS cluster name (for imports): 1–100 characters, `^[0-9A-Za-z][A-Za-z0-9_-]*$`.
pub fn eks_cluster_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 100 {
        return Err("must be 1-100 characters long".into());
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err("must start with a letter or digit".into());
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err("may contain only letters, digits, hyphens and underscores".into());
    }
    Ok(())
}

/// HyperPod cluster and instance group names: `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`.
pub fn hyperpod_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err("must be 1-63 characters long".into());
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err("may contain only letters, digits and hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("must start and end with a letter or digit".into());
    }
    Ok(())
}

/// Kubernetes DNS-1123 label (namespaces, service names, job names): at most 63 characters,
/// lowercase alphanumerics and '-', starting and ending with an alphanumeric.
pub fn dns1123_label(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err("must be 1-63 characters long (DNS-1123 label)".into());
    }
    if !name.chars().all(|c| is_lower_alnum(c) || c == '-') {
        return Err("may contain only lowercase letters, digits and '-' (DNS-1123 label)".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("must start and end with a lowercase letter or digit (DNS-1123 label)".into());
    }
    Ok(())
}

/// Kubernetes DNS-1123 subdomain (Secret, PersistentVolume and ServiceAccount names): at most
/// 253 characters, dot-separated DNS-1123 labels.
pub fn dns1123_subdomain(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 253 {
        return Err("must be 1-253 characters long (DNS-1123 subdomain)".into());
    }
    if name.split('.').any(|part| dns1123_label(part).is_err()) {
        return Err("must be lowercase letters, digits, '-' and '.', each dot-separated part starting and ending \
                    with a letter or digit (DNS-1123 subdomain)"
            .into());
    }
    Ok(())
}

/// S3 general purpose bucket name rules.
pub fn s3_bucket_name(name: &str) -> Result<(), String> {
    if name.len() < 3 || name.len() > 63 {
        return Err("must be 3-63 characters long".into());
    }
    if !name.chars().all(|c| is_lower_alnum(c) || c == '-' || c == '.') {
        return Err("may contain only lowercase letters, digits, dots and hyphens".into());
    }
    if !name.starts_with(is_lower_alnum) || !name.ends_with(is_lower_alnum) {
        return Err("must start and end with a lowercase letter or digit".into());
    }
    if name.contains("..") {
        return Err("must not contain two adjacent dots".into());
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("must not be formatted as an IP address".into());
    }
    for prefix in ["xn--", "sthree-", "amzn-s3-demo-"] {
        if name.starts_with(prefix) {
            return Err(format!("must not start with the reserved prefix '{prefix}'"));
        }
    }
    for suffix in ["-s3alias", "--ol-s3", "--x-s3", "--table-s3", ".mrap"] {
        if name.ends_with(suffix) {
            return Err(format!("must not end with the reserved suffix '{suffix}'"));
        }
    }
    Ok(())
}

/// AWS region code such as `us-east-1` or `us-gov-west-1`.
pub fn region(name: &str) -> Result<(), String> {
    let parts: Vec<&str> = name.split('-').collect();
    let ok = (3..=4).contains(&parts.len())
        && parts[0].len() == 2
        && parts[0].chars().all(|c| c.is_ascii_lowercase())
        && parts[1..parts.len() - 1].iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        && parts.last().is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    if ok { Ok(()) } else { Err("must be an AWS region code such as us-east-1".into()) }
}

/// MLflow run id: 1-64 letters and digits (MLflow's run ids are 32 hex digits; the rule is
/// what a path segment may carry to the tracking server, checked before it is asked).
pub fn mlflow_run_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric());
    if ok { Ok(()) } else { Err("must be an MLflow run id (1-64 letters and digits)".into()) }
}

/// Availability Zone name in `region`, e.g. `us-east-1a` (or a zone id such as `use1-az1`).
pub fn availability_zone(az: &str, region_code: &str) -> Result<(), String> {
    let suffix = az.strip_prefix(region_code);
    let ok =
        suffix.is_some_and(|s| !s.is_empty() && s.len() <= 3 && s.chars().all(|c| c.is_ascii_lowercase() || c == '-'));
    if ok { Ok(()) } else { Err(format!("must be an Availability Zone of region {region_code}, e.g. {region_code}a")) }
}

/// HyperPod instance type such as `ml.p5.48xlarge`.
pub fn instance_type(name: &str) -> Result<(), String> {
    let parts: Vec<&str> = name.split('.').collect();
    let ok = parts.len() == 3
        && parts[0] == "ml"
        && parts[1..]
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    if ok { Ok(()) } else { Err("must be a SageMaker instance type such as ml.p5.48xlarge".into()) }
}

/// SageMaker training plan ARN: `arn:<partition>:sagemaker:<region>:<account>:training-plan/<name>`.
pub fn training_plan_arn(arn: &str) -> Result<(), String> {
    let rule = || "must be a training plan ARN: arn:aws:sagemaker:<region>:<account>:training-plan/<name>".to_string();
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    if parts.len() != 6 || parts[0] != "arn" || !parts[1].starts_with("aws") || parts[2] != "sagemaker" {
        return Err(rule());
    }
    if region(parts[3]).is_err() || parts[4].len() != 12 || !parts[4].chars().all(|c| c.is_ascii_digit()) {
        return Err(rule());
    }
    match parts[5].strip_prefix("training-plan/") {
        Some(name) if hyperpod_name(name).is_ok() => Ok(()),
        _ => Err(rule()),
    }
}

/// `s3://bucket/prefix` URI.
pub fn s3_uri(uri: &str) -> Result<(), String> {
    let rule = || "must be an S3 URI such as s3://bucket/prefix".to_string();
    let rest = uri.strip_prefix("s3://").ok_or_else(rule)?;
    let bucket = rest.split('/').next().unwrap_or_default();
    s3_bucket_name(bucket).map_err(|_| rule())
}

/// Every provider-side name derived from one InstantStart cluster name. Deterministic, so a
/// retried or resumed step always looks for (and creates) the same resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DerivedNames {
    pub vpc: String,
    pub eks_cluster: String,
    pub eks_cluster_role: String,
    pub hyperpod_cluster: String,
    pub hyperpod_execution_role: String,
    pub security_group: String,
}

impl DerivedNames {
    pub fn for_cluster(cluster: &str) -> Self {
        DerivedNames {
            vpc: format!("{cluster}-vpc"),
            eks_cluster: cluster.to_string(),
            eks_cluster_role: format!("{cluster}-eks-cluster-role"),
            hyperpod_cluster: format!("{cluster}-hp"),
            hyperpod_execution_role: format!("{cluster}-hyperpod-exec-role"),
            security_group: format!("{cluster}-efa-sg"),
        }
    }

    /// Name of the compute subnet in `az`.
    pub fn compute_subnet(cluster: &str, az: &str) -> String {
        format!("{cluster}-compute-{az}")
    }

    /// Default shared bucket when the request names none: unique per account and region
    /// (the region enters as a 4-hex-digit digest so the longest name still fits in 63).
    pub fn default_bucket(cluster: &str, account: &str, region: &str) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(region.as_bytes());
        format!("{CLUSTER_BUCKET_PREFIX}{cluster}-{account}-{:02x}{:02x}", digest[0], digest[1])
    }
}

/// Namespaces that hold the cluster's own machinery: Kubernetes' (every `kube-` name is
/// reserved for it: "Avoid creating namespaces with the prefix `kube-`, since it is reserved
/// for Kubernetes system namespaces", kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/)
/// and those of the add-ons and charts InstantStart installs. Workloads are refused there: a
/// job or endpoint in one would run with the operators' service accounts and secrets at hand.
pub const SYSTEM_NAMESPACES: &[&str] = &[
    "aws-hyperpod",
    "hyperpod-inference-system",
    "cert-manager",
    "keda",
    "kuberay-operator",
    "monitoring",
    "amazon-cloudwatch",
    "kubeflow",
    "mpi-operator",
];

/// Whether `name` is a namespace of the cluster's own machinery: it starts with `kube-` or is
/// one of [`SYSTEM_NAMESPACES`].
pub fn is_system_namespace(name: &str) -> bool {
    name.starts_with("kube-") || SYSTEM_NAMESPACES.contains(&name)
}

/// A namespace a workload (job, download, endpoint) may run in by default: a DNS-1123 label
/// that is not a system namespace ([`is_system_namespace`]). A token explicitly allowed a
/// system namespace passes [`crate::kube_access::KubeAccess::check_namespace`] instead.
pub fn workload_namespace(name: &str) -> Result<(), String> {
    dns1123_label(name)?;
    if is_system_namespace(name) {
        return Err(format!(
            "{name} is a system namespace (Kubernetes' own or an operator's); workloads run in other namespaces, e.g. default"
        ));
    }
    Ok(())
}

/// Most CIDR blocks EKS takes in a cluster's `publicAccessCidrs` (Amazon EKS service quotas,
/// "Public endpoint access CIDR ranges per cluster").
pub const MAX_PUBLIC_ACCESS_CIDRS: usize = 40;

/// IPv4 ranges reserved for special use (IANA special-purpose registry): not an address on the
/// internet, so never the source of a request to a public endpoint.
const RESERVED_V4: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

/// A block that may reach an EKS cluster's public API endpoint (`publicAccessCidrs`): "The
/// block cannot include reserved addresses" (EKS user guide `config-cluster-endpoint`), so a
/// block inside a private, loopback, link-local, shared, multicast or reserved range is
/// refused; `0.0.0.0/0` (every address, EKS's default) is taken as it is.
pub fn public_access_cidr(cidr: &ipnet::Ipv4Net) -> Result<(), String> {
    if cidr.prefix_len() == 0 {
        return Ok(());
    }
    match RESERVED_V4
        .iter()
        .map(|r| r.parse::<ipnet::Ipv4Net>().expect("valid reserved range"))
        .find(|r| r.contains(cidr))
    {
        Some(r) => Err(format!(
            "{cidr} is inside the reserved range {r}; the public endpoint is reached from internet addresses (a private range reaches the cluster through its VPC, not this list)"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlflow_run_ids_are_short_alphanumerics() {
        for ok in ["a", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", &"x".repeat(64)] {
            assert!(mlflow_run_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", &"x".repeat(65), "run-1", "../x", "a b", "é"] {
            assert!(mlflow_run_id(bad).is_err(), "{bad}");
        }
    }

    /// Data-driven: (checker, input, expected ok).
    #[test]
    fn name_rules() {
        type Check = fn(&str) -> Result<(), String>;
        let cases: &[(&str, Check, &str, bool)] = &[
            ("cluster", cluster_name, "demo", true),
            ("cluster", cluster_name, "demo-1", true),
            ("cluster", cluster_name, "", false),
            ("cluster", cluster_name, "Demo", false),
            ("cluster", cluster_name, "1demo", false),
            ("cluster", cluster_name, "demo-", false),
            ("cluster", cluster_name, "a_b", false),
            ("cluster", cluster_name, &"a".repeat(41), false),
            ("eks", eks_cluster_name, "My_Cluster-1", true),
            ("eks", eks_cluster_name, "-x", false),
            ("hyperpod", hyperpod_name, "Worker-Group-1", true),
            ("hyperpod", hyperpod_name, "group_1", false),
            ("hyperpod", hyperpod_name, "-g", false),
            ("label", dns1123_label, "llama-3", true),
            ("label", dns1123_label, "Llama", false),
            ("bucket", s3_bucket_name, "my-data.bucket", true),
            ("bucket", s3_bucket_name, "ab", false),
            ("bucket", s3_bucket_name, "My-Bucket", false),
            ("bucket", s3_bucket_name, "a..b", false),
            ("bucket", s3_bucket_name, "192.168.1.1", false),
            ("bucket", s3_bucket_name, "xn--abc", false),
            ("bucket", s3_bucket_name, "abc-s3alias", false),
            ("region", region, "us-east-1", true),
            ("region", region, "us-gov-west-1", true),
            ("region", region, "useast1", false),
            ("region", region, "US-east-1", false),
            ("itype", instance_type, "ml.p5.48xlarge", true),
            ("itype", instance_type, "p5.48xlarge", false),
            ("plan", training_plan_arn, "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p1", true),
            ("plan", training_plan_arn, "arn:aws:sagemaker:us-east-1:1234:training-plan/p1", false),
            ("plan", training_plan_arn, "arn:aws:ec2:us-east-1:123456789012:training-plan/p1", false),
            ("s3uri", s3_uri, "s3://bucket/scripts/", true),
            ("s3uri", s3_uri, "https://bucket", false),
        ];
        for (what, check, input, ok) in cases {
            assert_eq!(check(input).is_ok(), *ok, "{what} {input:?}: {:?}", check(input));
        }
    }

    #[test]
    fn zones_belong_to_their_region() {
        assert!(availability_zone("us-east-1a", "us-east-1").is_ok());
        assert!(availability_zone("us-west-2a", "us-east-1").is_err());
        assert!(availability_zone("us-east-1", "us-east-1").is_err());
    }

    #[test]
    fn derived_names_of_the_longest_cluster_name_are_valid() {
        let name = "a".repeat(CLUSTER_NAME_MAX);
        let d = DerivedNames::for_cluster(&name);
        assert!(d.eks_cluster_role.len() <= 64 && d.hyperpod_execution_role.len() <= 64);
        assert!(hyperpod_name(&d.hyperpod_cluster).is_ok());
        assert!(eks_cluster_name(&d.eks_cluster).is_ok());
        assert!(s3_bucket_name(&DerivedNames::default_bucket(&name, "123456789012", "ap-southeast-2")).is_ok());
    }

    #[test]
    fn workload_namespaces_exclude_system_ones() {
        let cases: &[(&str, bool)] = &[
            ("default", true),
            ("team-a", true),
            ("kube-system", false),
            ("kube-public", false),
            ("kube-node-lease", false),
            ("kube-anything", false),
            ("aws-hyperpod", false),
            ("keda", false),
            ("monitoring", false),
            ("kubeflow", false),
            ("Team", false),
            ("", false),
        ];
        for (ns, ok) in cases {
            assert_eq!(workload_namespace(ns).is_ok(), *ok, "{ns}: {:?}", workload_namespace(ns));
        }
        assert!(workload_namespace("kube-system").unwrap_err().contains("system namespace"));
    }

    /// Data-driven: (block, accepted as a public endpoint source).
    #[test]
    fn public_access_cidr_rules() {
        let cases: &[(&str, bool)] = &[
            ("0.0.0.0/0", true),
            ("203.0.113.5/32", true),
            ("52.94.0.0/16", true),
            ("8.0.0.0/7", true),
            ("10.0.0.0/8", false),
            ("10.1.2.3/32", false),
            ("172.20.0.0/16", false),
            ("192.168.1.0/24", false),
            ("127.0.0.1/32", false),
            ("169.254.169.254/32", false),
            ("100.64.0.0/16", false),
            ("224.0.0.1/32", false),
            ("0.0.0.0/8", false),
        ];
        for (cidr, ok) in cases {
            let net: ipnet::Ipv4Net = cidr.parse().unwrap();
            assert_eq!(public_access_cidr(&net).is_ok(), *ok, "{cidr}: {:?}", public_access_cidr(&net));
        }
    }
}
