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
//! - CreateFileSystem records `FileSystemTypeVersion` (FSx's default when none is sent: 2.10,
//!   FSx API reference, `CreateFileSystem`).
//! - Data repository associations follow the FSx for Lustre user guide, "Linking your file
//!   system to an Amazon S3 bucket" (docs.aws.amazon.com/fsx/latest/LustreGuide/create-dra-linked-data-repo.html),
//!   and the API reference of `CreateDataRepositoryAssociation`: refused (`BadRequest`) on a
//!   Lustre 2.10 or `SCRATCH_1` file system ([`dra_support_rule`]), with a `FileSystemPath`
//!   not starting with `/` ([`file_system_path_rule`]), a `DataRepositoryPath` that is not
//!   `s3://` of a bucket of the region, or paths overlapping another association's
//!   ([`dra_rules`]); a ninth association is `ServiceLimitExceeded`; the file system must be
//!   `AVAILABLE` (`IncompatibleParameterError`), an unknown one is `FileSystemNotFound`. The
//!   same `ClientRequestToken` returns the association it created. An association is
//!   `CREATING` for [`timings::FSX_DRA_CREATE`], then `AVAILABLE` (the "resource fails" fault:
//!   `FAILED` with a message); DeleteDataRepositoryAssociation makes it `DELETING` for
//!   [`timings::FSX_DRA_DELETE`]. Deleting the file system deletes its associations.
//! - Pods mounting a claim bound to an `fsx.csi.aws.com` volume start only while the
//!   `aws-fsx-csi-driver` add-on is active and the file system named by the volume handle is
//!   `AVAILABLE` ([`mount_problem`]).

mod api;

use crate::base::Lifecycle;
use crate::timings;
use crate::world::{DataRepositoryRec, FileSystemRec, World};
use instantstart_core::provider::{
    CreateDataRepositoryAssociation, CreateLustreFileSystem, DataRepositoryAssociation, FsxApi, LustreFileSystem,
    LustreQuota, ProviderError, ProviderErrorKind, Quota, Result, dra_rules, dra_support_rule, file_system_path_rule,
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
        file_system_type_version: Some(r.file_system_type_version.clone()),
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
        file_system_type_version: req.file_system_type_version.clone(),
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

fn dra_view(r: &DataRepositoryRec, now: f64) -> DataRepositoryAssociation {
    let (lifecycle, failure) = r.lifecycle(now).unwrap_or(("DELETING", None));
    DataRepositoryAssociation {
        association_id: r.id.clone(),
        file_system_id: r.file_system_id.clone(),
        lifecycle: lifecycle.to_string(),
        file_system_path: r.file_system_path.clone(),
        data_repository_path: r.data_repository_path.clone(),
        import_events: r.import_events.clone(),
        export_events: r.export_events.clone(),
        failure,
        tags: r.tags.clone(),
    }
}

/// The associations of file system `fs` in `region` that exist at `now` (none once the file
/// system is deleting or gone: FSx deletes them with it).
fn associations(w: &World, region: &str, fs: &str, now: f64) -> Vec<DataRepositoryAssociation> {
    let fs_live = w
        .file_systems
        .get(fs)
        .filter(|r| r.region == region)
        .and_then(|r| r.lifecycle(now))
        .is_some_and(|(l, _)| l != "DELETING");
    if !fs_live {
        return vec![];
    }
    w.data_repositories
        .values()
        .filter(|d| d.file_system_id == fs && d.region == region && d.lifecycle(now).is_some())
        .map(|d| dra_view(d, now))
        .collect()
}

fn create_association(
    w: &mut World,
    req: &CreateDataRepositoryAssociation,
    now: f64,
    fails: Option<&str>,
) -> Result<DataRepositoryAssociation> {
    const API: &str = "fsx:CreateDataRepositoryAssociation";
    if let Some(d) = w.data_repositories.values().find(|d| d.client_request_token == req.client_request_token) {
        return Ok(dra_view(d, now));
    }
    let Some(fs) = w.file_systems.get(&req.file_system_id).filter(|r| r.region == req.region) else {
        return Err(ProviderError::not_found(
            API,
            format!("FileSystemNotFound: file system {} does not exist", req.file_system_id),
        ));
    };
    let Some((lifecycle, _)) = fs.lifecycle(now) else {
        return Err(ProviderError::not_found(
            API,
            format!("FileSystemNotFound: file system {} does not exist", req.file_system_id),
        ));
    };
    if lifecycle != "AVAILABLE" {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::Conflict,
            format!("IncompatibleParameterError: file system {} is {lifecycle}, not AVAILABLE", req.file_system_id),
        ));
    }
    if let Err(rule) = dra_support_rule(fs.deployment_type.as_str(), Some(&fs.file_system_type_version)) {
        return Err(invalid(API, format!("BadRequest: {rule}")));
    }
    if let Err(rule) = file_system_path_rule(&req.file_system_path) {
        return Err(invalid(API, format!("BadRequest: FileSystemPath {rule}")));
    }
    let bucket = req
        .data_repository_path
        .strip_prefix("s3://")
        .and_then(|rest| rest.split('/').next())
        .filter(|b| !b.is_empty());
    match bucket.and_then(|b| w.buckets.get(b)) {
        None => {
            return Err(invalid(
                API,
                format!(
                    "BadRequest: DataRepositoryPath {} is not s3:// of an existing bucket",
                    req.data_repository_path
                ),
            ));
        }
        Some(b) if b.region != req.region => {
            return Err(invalid(
                API,
                format!(
                    "BadRequest: the bucket of {} is in {}, not in the file system's Region {}",
                    req.data_repository_path, b.region, req.region
                ),
            ));
        }
        _ => {}
    }
    let existing = associations(w, &req.region, &req.file_system_id, now);
    if let Some((field, rule)) =
        dra_rules(&existing, &req.file_system_path, &req.data_repository_path).into_iter().next()
    {
        let kind = if rule.contains("the most FSx allows") {
            ProviderErrorKind::QuotaExceeded
        } else {
            ProviderErrorKind::InvalidRequest
        };
        let code = if kind == ProviderErrorKind::QuotaExceeded { "ServiceLimitExceeded" } else { "BadRequest" };
        return Err(ProviderError::new(API, kind, format!("{code}: {field}: {rule}")));
    }
    let id = format!("dra-{}", w.hex(17, false));
    let mut life = Lifecycle::new(now, timings::FSX_DRA_CREATE);
    if let Some(reason) = fails {
        life.fail_after(timings::FSX_DRA_CREATE * timings::FAILURE_SHARE, reason);
    }
    let rec = DataRepositoryRec {
        id: id.clone(),
        region: req.region.clone(),
        file_system_id: req.file_system_id.clone(),
        client_request_token: req.client_request_token.clone(),
        file_system_path: req.file_system_path.clone(),
        data_repository_path: req.data_repository_path.clone(),
        import_events: req.import_events.clone(),
        export_events: req.export_events.clone(),
        tags: req.tags.clone(),
        life,
    };
    w.data_repositories.insert(id, rec.clone());
    Ok(dra_view(&rec, now))
}

fn delete_association(w: &mut World, region: &str, id: &str, now: f64) -> Result<()> {
    const API: &str = "fsx:DeleteDataRepositoryAssociation";
    let not_found =
        || ProviderError::not_found(API, format!("DataRepositoryAssociationNotFound: association {id} does not exist"));
    let rec = w.data_repositories.get(id).filter(|d| d.region == region).ok_or_else(not_found)?;
    if !associations(w, region, &rec.file_system_id, now).iter().any(|d| d.association_id == id) {
        return Err(not_found());
    }
    let rec = w.data_repositories.get_mut(id).ok_or_else(not_found)?;
    match rec.lifecycle(now).ok_or_else(not_found)?.0 {
        "DELETING" => return Ok(()),
        "CREATING" => {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::Conflict,
                format!("IncompatibleParameterError: association {id} is CREATING"),
            ));
        }
        _ => {}
    }
    rec.life.start_deleting(now, timings::FSX_DRA_DELETE);
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
