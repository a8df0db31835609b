//! Simulated Amazon FSx for Lustre: file systems a cluster's pods mount.
//!
//! - CreateFileSystem checks what FSx checks up front (docs/aws-preconditions.md): the Lustre
//!   rules of [`lustre_rules`] (storage capacity steps and per-unit throughput of the
//!   deployment type), a subnet that exists in the region, and security groups of the
//!   subnet's VPC that let Lustre's traffic (TCP 988, 1018-1023) in between members — in the
//!   simulated account only the cluster security group `create_network` made, which allows all
//!   traffic among its members. The same `ClientRequestToken` returns the file system it
//!   created (FSx's idempotent create), whatever else the request says.
//! - CreateFileSystem refuses a file system that would exceed the deployment type's FSx quotas
//!   ([`LustreQuota`]: storage GiB and number of file systems, counting every file system of
//!   the region but those `DELETING`) with `ServiceLimitExceeded` (FSx API reference,
//!   `CreateFileSystem`, Errors: "An error indicating that a particular service limit was
//!   exceeded"); [`crate::SimCloud::set_lustre_quota`] raises or lowers them. Service Quotas
//!   answers the quota in force (`GetServiceQuota`).
//! - A file system is `CREATING` for [`timings::FSX_CREATE`], then `AVAILABLE`; the "resource
//!   fails" fault makes it `FAILED` half-way. DeleteFileSystem makes it `DELETING` for
//!   [`timings::FSX_DELETE`], then it is gone; a `CREATING` one cannot be deleted yet.
//! - Pods mounting a claim bound to an `fsx.csi.aws.com` volume start only while the
//!   `aws-fsx-csi-driver` add-on is active and the file system named by the volume handle is
//!   `AVAILABLE` ([`mount_problem`]).

mod api;

use crate::base::Lifecycle;
use crate::timings;
use crate::world::{FileSystemRec, World};
use instantstart_core::provider::{
    CreateLustreFileSystem, FsxApi, LustreFileSystem, LustreQuota, ProviderError, ProviderErrorKind, Quota, Result,
    lustre_rules,
};

fn view(r: &FileSystemRec, now: f64) -> LustreFileSystem {
    let (lifecycle, failure) = r.lifecycle(now).unwrap_or(("DELETING", None));
    LustreFileSystem {
        id: r.id.clone(),
        region: r.region.clone(),
        lifecycle: lifecycle.to_string(),
        deployment_type: r.deployment_type.as_str().to_string(),
        storage_capacity_gib: r.storage_capacity_gib,
        per_unit_storage_throughput: r.per_unit_storage_throughput,
        vpc_id: Some(r.vpc_id.clone()),
        subnet_ids: vec![r.subnet_id.clone()],
        dns_name: Some(format!("{}.fsx.{}.amazonaws.com", r.id, r.region)),
        mount_name: (lifecycle != "CREATING").then(|| r.mount_name.clone()),
        failure,
        tags: r.tags.clone(),
    }
}

fn invalid(api: &str, message: String) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

fn create(w: &mut World, req: &CreateLustreFileSystem, now: f64, fails: Option<&str>) -> Result<LustreFileSystem> {
    const API: &str = "fsx:CreateFileSystem";
    if let Some(r) = w.file_systems.values().find(|r| r.client_request_token == req.client_request_token) {
        return Ok(view(r, now));
    }
    if let Some((field, rule)) =
        lustre_rules(req.deployment_type, req.storage_capacity_gib, req.per_unit_storage_throughput).into_iter().next()
    {
        return Err(invalid(API, format!("BadRequest: {field}: {rule}")));
    }
    let Some(subnet) = w.subnets.get(&req.subnet_id).filter(|s| s.region == req.region) else {
        return Err(invalid(API, format!("InvalidNetworkSettings: subnet {} does not exist", req.subnet_id)));
    };
    let vpc_sg = w.vpcs.get(&subnet.vpc_id).and_then(|v| v.security_group_id.clone());
    let lustre_open =
        !req.security_group_ids.is_empty() && req.security_group_ids.iter().all(|g| Some(g) == vpc_sg.as_ref());
    if !lustre_open {
        return Err(invalid(
            API,
            format!(
                "InvalidNetworkSettings: the security groups {:?} do not permit Lustre LNET network traffic on port 988 \
                 for the file system being created",
                req.security_group_ids
            ),
        ));
    }
    for (quota, adding) in [
        (LustreQuota::storage(req.deployment_type), u64::from(req.storage_capacity_gib)),
        (LustreQuota::file_systems(req.deployment_type), 1),
    ] {
        let in_use: u64 = w
            .file_systems
            .values()
            .filter(|r| r.region == req.region && matches!(r.lifecycle(now), Some((l, _)) if l != "DELETING"))
            .map(|r| quota.usage_of(&view(r, now)))
            .sum();
        let limit = w.lustre_quota(&req.region, quota);
        if in_use + adding > u64::from(limit) {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::QuotaExceeded,
                format!(
                    "ServiceLimitExceeded: the file system would exceed the account's '{}' quota ({limit}; {in_use} in use)",
                    quota.name()
                ),
            ));
        }
    }
    let vpc_id = subnet.vpc_id.clone();
    let id = format!("fs-{}", w.hex(17, false));
    let mut life = Lifecycle::new(now, timings::FSX_CREATE);
    if let Some(reason) = fails {
        life.fail_after(timings::FSX_CREATE * timings::FAILURE_SHARE, reason);
    }
    let rec = FileSystemRec {
        id: id.clone(),
        region: req.region.clone(),
        client_request_token: req.client_request_token.clone(),
        deployment_type: req.deployment_type,
        storage_capacity_gib: req.storage_capacity_gib,
        per_unit_storage_throughput: req.per_unit_storage_throughput,
        vpc_id,
        subnet_id: req.subnet_id.clone(),
        security_group_ids: req.security_group_ids.clone(),
        mount_name: w.hex(8, false),
        tags: req.tags.clone(),
        life,
    };
    w.file_systems.insert(id, rec.clone());
    Ok(view(&rec, now))
}

fn delete(w: &mut World, region: &str, id: &str, now: f64) -> Result<()> {
    const API: &str = "fsx:DeleteFileSystem";
    let not_found = || ProviderError::not_found(API, format!("FileSystemNotFound: file system {id} does not exist"));
    let rec = w.file_systems.get_mut(id).filter(|r| r.region == region).ok_or_else(not_found)?;
    match rec.lifecycle(now).ok_or_else(not_found)?.0 {
        "DELETING" => return Ok(()),
        "CREATING" => {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::Conflict,
                format!(
                    "IncompatibleParameterError: file system {id} is CREATING; it can be deleted once it is AVAILABLE"
                ),
            ));
        }
        _ => {}
    }
    rec.life.start_deleting(now, timings::FSX_DELETE);
    Ok(())
}

/// Why a pod cannot mount the FSx volume whose handle is `id` in `region` on a cluster with
/// (`addon_active`) or without the FSx CSI driver; `None`: it mounts.
pub(crate) fn mount_problem(w: &World, region: &str, id: &str, addon_active: bool, now: f64) -> Option<String> {
    if !addon_active {
        return Some(
            "kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name fsx.csi.aws.com \
             not found in the list of registered CSI drivers"
                .into(),
        );
    }
    match w.file_systems.get(id).filter(|r| r.region == region).and_then(|r| r.lifecycle(now)) {
        Some(("AVAILABLE", _)) => None,
        Some((lifecycle, _)) => Some(format!("file system {id} is {lifecycle}; mount.lustre: Connection refused")),
        None => Some(format!("file system {id} does not exist; mount.lustre: No such file or directory")),
    }
}
