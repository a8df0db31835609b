//! Preflight: checks that must pass before a cluster or instance group is created — service
//! quotas, training-plan reservations, instance type offerings per AZ, free address space for a
//! /20 — each explaining what to request and where — and the FSx for Lustre quotas of a new
//! file system ([`check_lustre_quotas`]). Runs before anything is recorded (and in dry runs), so
//! a request fails early with a remedy instead of late with a provider error.

use crate::engine::reads::read;
use crate::instance_types::{InstanceSpecs, SpecsFact, ec2_name};
use crate::provider::{AwsCloud, LustreDeploymentType, LustreQuota, ProviderError, Quota, ResourceState};
use crate::spec::{CapacitySpec, InstanceGroupSpec, InterfaceMode};
use crate::subnet::{COMPUTE_SUBNET_PREFIX, SubnetPlanner};
use crate::validate::{Finding, ValidationError, ValidationKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Pass,
    /// Could not be verified (e.g. the quota is not reported); not blocking.
    Warn,
    /// Blocking: the request would fail at the provider.
    Fail,
}

/// One preflight check with its explanation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PreflightCheck {
    /// What was checked, e.g. `quota`, `offering`, `training_plan`, `address_space`.
    pub check: String,
    /// The request field the check is about.
    pub field: String,
    pub status: CheckStatus,
    pub detail: String,
    /// What to do when the check fails: what to request and where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
}

impl PreflightCheck {
    fn new(check: &str, field: &str, status: CheckStatus, detail: String, remedy: Option<String>) -> Self {
        PreflightCheck { check: check.into(), field: field.into(), status, detail, remedy }
    }
}

/// Turns failed checks into a 422 validation error (field + rule with the remedy).
pub fn blocking(checks: &[PreflightCheck]) -> Result<(), ValidationError> {
    let findings: Vec<Finding> = checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .map(|c| Finding {
            field: c.field.clone(),
            rule: match &c.remedy {
                Some(r) => format!("{} — {r}", c.detail),
                None => c.detail.clone(),
            },
        })
        .collect();
    if findings.is_empty() { Ok(()) } else { Err(ValidationError { kind: ValidationKind::Unprocessable, findings }) }
}

/// A group to check, with the field path it came from.
pub struct GroupToCheck<'a> {
    pub field: String,
    pub group: &'a InstanceGroupSpec,
}

/// Checks instance groups about to be created (or scaled to `group.count`) in `region`.
/// `in_use` is the number of instances per type the account already runs in HyperPod clusters
/// that this request does not replace.
pub async fn check_groups(
    aws: &dyn AwsCloud,
    region: &str,
    groups: &[GroupToCheck<'_>],
    in_use: &BTreeMap<String, u32>,
) -> Result<Vec<PreflightCheck>, ProviderError> {
    let mut checks = Vec::new();
    let offerings = read(|| aws.instance_type_offerings(region)).await?;
    let specs = InstanceSpecs::new(read(|| aws.instance_type_specs(region)).await?);
    let mut wanted: BTreeMap<&str, (u32, Vec<&str>)> = BTreeMap::new();
    for g in groups {
        let spec = g.group;
        checks.extend(spec_checks(&g.field, spec, &specs.fact(&spec.instance_type), region));
        let offered: Vec<&str> = offerings
            .iter()
            .filter(|o| o.instance_type == spec.instance_type)
            .map(|o| o.availability_zone.as_str())
            .collect();
        let field = format!("{}.availability_zone", g.field);
        if offered.contains(&spec.availability_zone.as_str()) {
            checks.push(PreflightCheck::new(
                "offering",
                &field,
                CheckStatus::Pass,
                format!("{} is offered in {}", spec.instance_type, spec.availability_zone),
                None,
            ));
        } else {
            let where_ = if offered.is_empty() {
                format!("anywhere in {region}")
            } else {
                format!("only in {}", offered.join(", "))
            };
            checks.push(PreflightCheck::new(
                "offering",
                &field,
                CheckStatus::Fail,
                format!("{} is not offered in {} (offered {where_})", spec.instance_type, spec.availability_zone),
                Some("choose an offered Availability Zone or another instance type".into()),
            ));
        }
        let entry = wanted.entry(spec.instance_type.as_str()).or_default();
        entry.0 += spec.count;
        entry.1.push(g.field.as_str());
        if let CapacitySpec::TrainingPlan { arn } = &spec.capacity {
            let field = format!("{}.capacity.arn", g.field);
            match read(|| aws.describe_training_plan(region, arn)).await? {
                None => checks.push(PreflightCheck::new(
                    "training_plan",
                    &field,
                    CheckStatus::Fail,
                    format!("training plan {arn} was not found in {region}"),
                    Some("create or purchase a training plan in SageMaker → Training plans, in this region".into()),
                )),
                Some(plan) => {
                    let mut problems = Vec::new();
                    if !matches!(plan.status.as_str(), "Active" | "Scheduled") {
                        problems.push(format!("its status is {}", plan.status));
                    }
                    if plan.availability_zone != spec.availability_zone {
                        problems.push(format!(
                            "it reserves capacity in {}, not {}",
                            plan.availability_zone, spec.availability_zone
                        ));
                    }
                    if plan.instance_type != spec.instance_type {
                        problems.push(format!("it reserves {}, not {}", plan.instance_type, spec.instance_type));
                    }
                    if spec.count > plan.instance_count {
                        problems.push(format!(
                            "it reserves {} instances, the group asks for {}",
                            plan.instance_count, spec.count
                        ));
                    }
                    if problems.is_empty() {
                        checks.push(PreflightCheck::new(
                            "training_plan",
                            &field,
                            CheckStatus::Pass,
                            format!(
                                "training plan reserves {}×{} in {}",
                                plan.instance_count, plan.instance_type, plan.availability_zone
                            ),
                            None,
                        ));
                    } else {
                        checks.push(PreflightCheck::new(
                            "training_plan",
                            &field,
                            CheckStatus::Fail,
                            format!("training plan {arn} cannot serve this group: {}", problems.join("; ")),
                            Some(format!(
                                "use the plan's AZ ({}) and instance type, or extend/purchase a plan that matches",
                                plan.availability_zone
                            )),
                        ));
                    }
                }
            }
        }
    }
    for (instance_type, (count, fields)) in wanted {
        let field = format!("{}.count", fields[0]);
        let need = count + in_use.get(instance_type).copied().unwrap_or(0);
        match read(|| aws.hyperpod_instance_quota(region, instance_type)).await? {
            Some(q) if q.value >= need => checks.push(PreflightCheck::new(
                "quota",
                &field,
                CheckStatus::Pass,
                format!("quota '{}' is {} (need {need})", q.name, q.value),
                None,
            )),
            Some(q) => checks.push(PreflightCheck::new(
                "quota",
                &field,
                CheckStatus::Fail,
                format!("quota '{}' is {} in {region}, this needs {need}", q.name, q.value),
                Some(format!(
                    "request an increase of '{}' (code {}) to at least {need} in Service Quotas → Amazon SageMaker, region {region}",
                    q.name, q.code
                )),
            )),
            None => checks.push(PreflightCheck::new(
                "quota",
                &field,
                CheckStatus::Warn,
                format!("the HyperPod cluster-usage quota of {instance_type} could not be read"),
                Some(format!("check 'Service Quotas → Amazon SageMaker → {instance_type} for cluster usage' in {region}")),
            )),
        }
    }
    Ok(checks)
}

/// Checks the FSx for Lustre quotas a new file system of `deployment_type` with
/// `storage_capacity_gib` counts against in `region` (storage on field `storage_capacity_gib`,
/// the number of file systems on `deployment_type`), given what the region's file systems
/// already use: every Lustre file system DescribeFileSystems returns but those `DELETING`.
pub async fn check_lustre_quotas(
    aws: &dyn AwsCloud,
    region: &str,
    deployment_type: LustreDeploymentType,
    storage_capacity_gib: u32,
) -> Result<Vec<PreflightCheck>, ProviderError> {
    let existing: Vec<_> = read(|| aws.list_lustre_file_systems(region))
        .await?
        .into_iter()
        .filter(|fs| fs.state() != ResourceState::Deleting)
        .collect();
    let mut checks = Vec::new();
    for (quota, field, adding) in [
        (LustreQuota::storage(deployment_type), "storage_capacity_gib", u64::from(storage_capacity_gib)),
        (LustreQuota::file_systems(deployment_type), "deployment_type", 1),
    ] {
        let in_use: u64 = existing.iter().map(|fs| quota.usage_of(fs)).sum();
        let value = read(|| aws.lustre_quota(region, quota)).await?;
        checks.push(lustre_quota_check(quota, field, value.as_ref(), in_use, adding, region));
    }
    Ok(checks)
}

/// One FSx for Lustre quota check: `in_use` + `adding` against the quota's `value` (`None`:
/// not readable, a warning).
pub fn lustre_quota_check(
    quota: LustreQuota,
    field: &str,
    value: Option<&Quota>,
    in_use: u64,
    adding: u64,
    region: &str,
) -> PreflightCheck {
    let unit = if quota.is_storage() { " GiB" } else { " file systems" };
    let need = in_use + adding;
    match value {
        Some(q) if u64::from(q.value) >= need => PreflightCheck::new(
            "quota",
            field,
            CheckStatus::Pass,
            format!("quota '{}' is {}{unit} in {region}; {in_use} in use + {adding} = {need}", q.name, q.value),
            None,
        ),
        Some(q) => PreflightCheck::new(
            "quota",
            field,
            CheckStatus::Fail,
            format!(
                "quota '{}' is {}{unit} in {region}; {in_use} are in use, this needs {adding} more ({need})",
                q.name, q.value
            ),
            Some(format!(
                "request an increase of '{}' (code {}) to at least {need} in Service Quotas → Amazon FSx, region {region}, or delete file systems you no longer need",
                q.name, q.code
            )),
        ),
        None => PreflightCheck::new(
            "quota",
            field,
            CheckStatus::Warn,
            format!("the FSx quota '{}' could not be read; {in_use}{unit} are in use", quota.name()),
            Some(format!("check 'Service Quotas → Amazon FSx → {}' in {region}", quota.name())),
        ),
    }
}

/// The checks of one group that need its instance type's specs (EFA-only interfaces,
/// connectivity checks, deep health checks): each a `Fail` when the specs say HyperPod would
/// refuse it, a `Pass` when they allow it. Unknown specs give one `Warn` per check that could
/// not run (the type is still accepted); specs not read yet give nothing.
pub fn spec_checks(field: &str, g: &InstanceGroupSpec, fact: &SpecsFact, region: &str) -> Vec<PreflightCheck> {
    let mut wanted: Vec<(&str, String, &str)> = Vec::new();
    if g.interface_mode == InterfaceMode::EfaOnly {
        wanted.push(("efa_only", format!("{field}.interface_mode"), "EFA-only interfaces"));
    }
    if g.deep_health_checks.connectivity {
        wanted.push(("efa", format!("{field}.deep_health_checks.connectivity"), "connectivity checks (they need EFA)"));
    }
    if g.deep_health_checks.stress || g.deep_health_checks.connectivity {
        wanted.push((
            "accelerated",
            format!("{field}.deep_health_checks"),
            "deep health checks (accelerated types only)",
        ));
    }
    let t = &g.instance_type;
    let info = match fact {
        SpecsFact::NotRead => return Vec::new(),
        SpecsFact::Unknown => {
            return wanted
                .into_iter()
                .map(|(_, field, what)| {
                    PreflightCheck::new(
                        "instance_specs",
                        &field,
                        CheckStatus::Warn,
                        format!(
                            "EC2 does not describe {t} in {region}: whether it supports {what} could not be checked"
                        ),
                        Some(format!("check {} in the EC2 instance type documentation", ec2_name(t))),
                    )
                })
                .collect();
        }
        SpecsFact::Known(info) => info,
    };
    wanted
        .into_iter()
        .map(|(need, field, what)| {
            let (ok, detail) = match need {
                "efa_only" => {
                    (info.efa_only_supported, format!("{t} {} EFA-only interfaces", supports(info.efa_only_supported)))
                }
                "efa" => (info.efa_interfaces > 0, format!("{t} has {} EFA interface(s)", info.efa_interfaces)),
                _ => (
                    info.accelerators > 0,
                    format!("{t} has {} accelerator(s) ({})", info.accelerators, info.accelerator),
                ),
            };
            if ok {
                PreflightCheck::new("instance_specs", &field, CheckStatus::Pass, detail, None)
            } else {
                PreflightCheck::new(
                    "instance_specs",
                    &field,
                    CheckStatus::Fail,
                    format!("{what} are not supported: {detail}"),
                    Some("choose an instance type that supports them, or turn them off".into()),
                )
            }
        })
        .collect()
}

fn supports(yes: bool) -> &'static str {
    if yes { "supports" } else { "does not support" }
}

/// Checks a user-named lifecycle script (`field` = `…lifecycle_script`): the execution role
/// must be able to read it — its bucket is `sagemaker-*` (the managed
/// `AmazonSageMakerClusterInstanceRolePolicy`) or the cluster's own bucket (`cluster_bucket`,
/// our inline policy) — and the object must exist (HeadObject). A script that fails either
/// makes every instance of the group fail at boot.
pub async fn check_lifecycle_script(
    aws: &dyn AwsCloud,
    field: &str,
    script: &crate::spec::LifecycleScript,
    cluster_bucket: Option<&str>,
) -> Result<PreflightCheck, ProviderError> {
    use crate::lifecycle::{readable_by_execution_role, script_object};
    use crate::provider::ProviderErrorKind;
    let Some((bucket, key)) = script_object(script) else {
        return Ok(PreflightCheck::new(
            "lifecycle_script",
            field,
            CheckStatus::Fail,
            format!("{} is not an S3 URI", script.source_s3_uri),
            Some("use s3://<bucket>/<prefix>".into()),
        ));
    };
    let ours = cluster_bucket.map(|b| format!(" or the cluster's bucket {b}")).unwrap_or_default();
    if !readable_by_execution_role(&bucket, cluster_bucket) {
        return Ok(PreflightCheck::new(
            "lifecycle_script",
            field,
            CheckStatus::Fail,
            format!(
                "the HyperPod execution role cannot read s3://{bucket}/{key}: it reads only buckets named sagemaker-*{ours}"
            ),
            Some(format!(
                "copy the script to a bucket named sagemaker-…{ours}, or leave lifecycle_script out to use InstantStart's script"
            )),
        ));
    }
    match read(|| aws.head_object(&bucket, &key)).await {
        Ok(Some(h)) => Ok(PreflightCheck::new(
            "lifecycle_script",
            field,
            CheckStatus::Pass,
            format!("s3://{bucket}/{key} exists ({} bytes) and the execution role can read it", h.size_bytes),
            None,
        )),
        Ok(None) => Ok(missing_script(field, &bucket, &key, "does not exist")),
        Err(e) if e.kind == ProviderErrorKind::NotFound => {
            Ok(missing_script(field, &bucket, &key, &format!("cannot be found: bucket {bucket} does not exist")))
        }
        Err(e) if e.kind == ProviderErrorKind::AccessDenied => Ok(PreflightCheck::new(
            "lifecycle_script",
            field,
            CheckStatus::Fail,
            format!("s3://{bucket}/{key} cannot be read by the control plane: {}", e.message),
            Some("grant the control plane s3:GetObject on the script, or name a script in the cluster's bucket".into()),
        )),
        Err(e) => Err(e),
    }
}

fn missing_script(field: &str, bucket: &str, key: &str, what: &str) -> PreflightCheck {
    PreflightCheck::new(
        "lifecycle_script",
        field,
        CheckStatus::Fail,
        format!("lifecycle script s3://{bucket}/{key} {what}"),
        Some("upload the script first (source_s3_uri + on_create name the object), or leave lifecycle_script out to use InstantStart's script".into()),
    )
}

/// Whether a VPC still has room for `new_subnets` more /20 compute subnets.
pub fn check_address_space(
    field: &str,
    vpc_cidrs: Vec<ipnet::Ipv4Net>,
    existing: impl IntoIterator<Item = ipnet::Ipv4Net>,
    new_subnets: usize,
) -> PreflightCheck {
    let mut planner = SubnetPlanner::new(vpc_cidrs, existing);
    for i in 0..new_subnets {
        if let Err(e) = planner.allocate(COMPUTE_SUBNET_PREFIX, "a compute subnet") {
            return PreflightCheck::new(
                "address_space",
                field,
                CheckStatus::Fail,
                format!("room for only {i} of {new_subnets} new /20 compute subnets: {e}"),
                Some(
                    "add a secondary CIDR block to the VPC, or place the group in an existing subnet (subnet_id)"
                        .into(),
                ),
            );
        }
    }
    PreflightCheck::new(
        "address_space",
        field,
        CheckStatus::Pass,
        format!("room for {new_subnets} new /20 compute subnet(s)"),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lustre_quota_checks_add_the_request_to_what_is_in_use() {
        let q = |v: u32| Quota { name: "Lustre Scratch storage capacity".into(), code: "L-AD2FC696".into(), value: v };
        // (quota value, in use, adding, status)
        let table: &[(Option<u32>, u64, u64, CheckStatus)] = &[
            (Some(100_800), 0, 1200, CheckStatus::Pass),
            (Some(100_800), 99_600, 1200, CheckStatus::Pass),
            (Some(100_800), 99_600, 2400, CheckStatus::Fail),
            (Some(0), 0, 1200, CheckStatus::Fail),
            (None, 4800, 1200, CheckStatus::Warn),
        ];
        for (value, in_use, adding, want) in table {
            let quota = value.map(q);
            let c = lustre_quota_check(
                LustreQuota::ScratchStorage,
                "storage_capacity_gib",
                quota.as_ref(),
                *in_use,
                *adding,
                "us-east-1",
            );
            assert_eq!((c.status, c.field.as_str()), (*want, "storage_capacity_gib"), "{value:?} {in_use} {adding}");
        }
        let failed = lustre_quota_check(
            LustreQuota::ScratchStorage,
            "storage_capacity_gib",
            Some(&q(2400)),
            2400,
            1200,
            "us-east-1",
        );
        let err = blocking(&[failed]).unwrap_err();
        let rule = &err.findings[0].rule;
        assert!(rule.contains("L-AD2FC696") && rule.contains("3600") && rule.contains("Service Quotas"), "{rule}");
    }

    #[test]
    fn failed_checks_become_field_findings_with_remedies() {
        let checks = vec![
            PreflightCheck::new(
                "quota",
                "hyperpod.instance_groups[0].count",
                CheckStatus::Fail,
                "quota is 0".into(),
                Some("request 2".into()),
            ),
            PreflightCheck::new("quota", "x", CheckStatus::Warn, "unknown".into(), None),
            PreflightCheck::new("offering", "y", CheckStatus::Pass, "ok".into(), None),
        ];
        let err = blocking(&checks).unwrap_err();
        assert_eq!(err.kind, ValidationKind::Unprocessable);
        assert_eq!(
            err.findings,
            vec![Finding {
                field: "hyperpod.instance_groups[0].count".into(), rule: "quota is 0 — request 2".into()
            }]
        );
        assert!(blocking(&checks[1..]).is_ok());
    }

    #[test]
    fn address_space_counts_free_slash_20s() {
        let vpc: ipnet::Ipv4Net = "10.0.0.0/18".parse().unwrap();
        let taken: Vec<ipnet::Ipv4Net> = vec!["10.0.0.0/20".parse().unwrap(), "10.0.16.0/20".parse().unwrap()];
        assert_eq!(check_address_space("f", vec![vpc], taken.clone(), 2).status, CheckStatus::Pass);
        let c = check_address_space("f", vec![vpc], taken, 3);
        assert_eq!(c.status, CheckStatus::Fail);
        assert!(c.detail.starts_with("room for only 2 of 3"), "{}", c.detail);
    }

    fn info(name: &str, accelerators: u32, efa: u32, efa_only: bool) -> SpecsFact {
        SpecsFact::Known(crate::instance_types::InstanceTypeInfo {
            name: name.into(),
            vcpus: 48,
            memory_gib: 192,
            accelerators,
            accelerator: if accelerators > 0 { "nvidia-a10g".into() } else { "none".into() },
            efa_interfaces: efa,
            efa_only_supported: efa_only,
        })
    }

    /// Each spec check by what the specs say: the statuses per field, in order.
    #[test]
    fn spec_checks_follow_the_described_specs() {
        use crate::spec::DeepHealthChecks;
        type Case = (&'static str, InterfaceMode, DeepHealthChecks, SpecsFact, &'static [(&'static str, CheckStatus)]);
        let both = DeepHealthChecks { stress: true, connectivity: true };
        let stress = DeepHealthChecks { stress: true, connectivity: false };
        let none = DeepHealthChecks::default();
        let cases: Vec<Case> = vec![
            ("nothing asked", InterfaceMode::default(), none, info("ml.g5.2xlarge", 1, 0, false), &[]),
            (
                "efa-only on a type without it",
                InterfaceMode::EfaOnly,
                none,
                info("ml.g5.12xlarge", 4, 1, false),
                &[("g.interface_mode", CheckStatus::Fail)],
            ),
            (
                "efa-only on p5",
                InterfaceMode::EfaOnly,
                none,
                info("ml.p5.48xlarge", 8, 32, true),
                &[("g.interface_mode", CheckStatus::Pass)],
            ),
            (
                "connectivity on g5.12xlarge (one EFA interface)",
                InterfaceMode::default(),
                both,
                info("ml.g5.12xlarge", 4, 1, false),
                &[
                    ("g.deep_health_checks.connectivity", CheckStatus::Pass),
                    ("g.deep_health_checks", CheckStatus::Pass),
                ],
            ),
            (
                "connectivity without EFA",
                InterfaceMode::default(),
                both,
                info("ml.g5.2xlarge", 1, 0, false),
                &[
                    ("g.deep_health_checks.connectivity", CheckStatus::Fail),
                    ("g.deep_health_checks", CheckStatus::Pass),
                ],
            ),
            (
                "stress on a CPU type",
                InterfaceMode::default(),
                stress,
                info("ml.m5.xlarge", 0, 0, false),
                &[("g.deep_health_checks", CheckStatus::Fail)],
            ),
            (
                "unknown specs: every wanted check warns",
                InterfaceMode::EfaOnly,
                both,
                SpecsFact::Unknown,
                &[
                    ("g.interface_mode", CheckStatus::Warn),
                    ("g.deep_health_checks.connectivity", CheckStatus::Warn),
                    ("g.deep_health_checks", CheckStatus::Warn),
                ],
            ),
            ("not read yet: nothing", InterfaceMode::EfaOnly, both, SpecsFact::NotRead, &[]),
        ];
        for (name, mode, dhc, fact, want) in cases {
            let g = InstanceGroupSpec {
                instance_type: "ml.g5.12xlarge".into(),
                interface_mode: mode,
                deep_health_checks: dhc,
                ..serde_json::from_value(serde_json::json!({
                    "name": "g", "instance_type": "ml.g5.12xlarge", "count": 1, "availability_zone": "us-east-1a"
                }))
                .unwrap()
            };
            let got: Vec<(String, CheckStatus)> =
                spec_checks("g", &g, &fact, "us-east-1").into_iter().map(|c| (c.field, c.status)).collect();
            let want: Vec<(String, CheckStatus)> = want.iter().map(|(f, s)| (f.to_string(), *s)).collect();
            assert_eq!(got, want, "{name}");
        }
        let warn = spec_checks(
            "g",
            &InstanceGroupSpec {
                interface_mode: InterfaceMode::EfaOnly,
                ..serde_json::from_value(serde_json::json!({
                    "name": "g", "instance_type": "ml.g7.8xlarge", "count": 1, "availability_zone": "us-east-1a"
                }))
                .unwrap()
            },
            &SpecsFact::Unknown,
            "us-east-1",
        );
        assert!(warn[0].detail.contains("could not be checked"), "{}", warn[0].detail);
        assert!(warn[0].remedy.as_deref().unwrap().contains("g7.8xlarge"));
    }
}
