//! Amazon FSx for Lustre: CreateFileSystem, DescribeFileSystems and DeleteFileSystem, the data
//! repository associations (Create-, Describe- and DeleteDataRepositoryAssociation), and the
//! Lustre quotas of Service Quotas (`GetServiceQuota`, falling back to
//! `GetAWSDefaultServiceQuota`, service code `fsx`).
//!
//! # Guarantees
//! - CreateFileSystem sends the step's `ClientRequestToken`, so a call retried after a lost
//!   response returns the file system the first call created (FSx's idempotent create).
//! - Only SSD Lustre file systems are created, with the deployment type and per-unit throughput
//!   the core validated ([`instantstart_core::provider::lustre_rules`]); the tags (ownership and
//!   the volume name) are set in the create call itself, so no file system exists untagged.
//! - DescribeFileSystems results of other file system types are left out; an unknown id is
//!   `None` (FSx answers `FileSystemNotFound`).
//! - DeleteFileSystem skips the final backup (`SkipFinalBackup`, required for persistent
//!   file systems without one; scratch file systems have none).
//! - CreateFileSystem sends `FileSystemTypeVersion` (the core's `LUSTRE_VERSION`, 2.15): the
//!   default for scratch types would be 2.10, which takes no data repository association.
//! - CreateDataRepositoryAssociation sends the step's `ClientRequestToken` and the tags in the
//!   call itself; DescribeDataRepositoryAssociations is filtered by `file-system-id` and
//!   follows every page (at most 25 a page, botocore's `LimitedMaxResults`);
//!   DeleteDataRepositoryAssociation keeps the files (`DeleteDataInFileSystem=false`) and an
//!   unknown association is `NotFound` (`DataRepositoryAssociationNotFound`).
//! - A Lustre quota is its applied value (`GetServiceQuota`); a quota without one
//!   (`NoSuchResourceException`) is AWS's default (`GetAWSDefaultServiceQuota`). Any other
//!   failure to read (access denied, throttling) is `None` with a warning: the preflight warns
//!   and FSx's own `ServiceLimitExceeded` still maps to `QuotaExceeded`.

use crate::AwsProvider;
use crate::error::sdk_error;
use async_trait::async_trait;
use aws_sdk_fsx::types::{
    AutoExportPolicy, AutoImportPolicy, CreateFileSystemLustreConfiguration, DataRepositoryAssociation as SdkDra,
    DeleteFileSystemLustreConfiguration, EventType, FileSystem, FileSystemType, Filter, FilterName,
    LustreDeploymentType as SdkDeploymentType, S3DataRepositoryConfiguration, StorageType, Tag,
};
use instantstart_core::provider::{
    CreateDataRepositoryAssociation, CreateLustreFileSystem, DataRepositoryAssociation, FSX_QUOTA_SERVICE, FsxApi,
    LustreFileSystem, LustreQuota, ProviderErrorKind, Quota, Result, S3Event, Tags,
};

/// Pages of DescribeFileSystems followed at most.
const MAX_PAGES: usize = 50;

fn tags(t: &Tags) -> Vec<Tag> {
    t.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

/// Our view of a described file system; `None` for a file system that is not Lustre.
pub(crate) fn lustre_view(region: &str, fs: &FileSystem) -> Option<LustreFileSystem> {
    if fs.file_system_type() != Some(&FileSystemType::Lustre) {
        return None;
    }
    let lustre = fs.lustre_configuration();
    Some(LustreFileSystem {
        id: fs.file_system_id()?.to_string(),
        region: region.to_string(),
        lifecycle: fs.lifecycle().map(|l| l.as_str().to_string()).unwrap_or_default(),
        deployment_type: lustre.and_then(|l| l.deployment_type()).map(|d| d.as_str().to_string()).unwrap_or_default(),
        storage_capacity_gib: fs.storage_capacity().unwrap_or_default().max(0) as u32,
        per_unit_storage_throughput: lustre.and_then(|l| l.per_unit_storage_throughput()).map(|t| t.max(0) as u32),
        vpc_id: fs.vpc_id().map(str::to_string),
        subnet_ids: fs.subnet_ids().to_vec(),
        dns_name: fs.dns_name().map(str::to_string),
        mount_name: lustre.and_then(|l| l.mount_name()).map(str::to_string),
        failure: fs.failure_details().and_then(|f| f.message()).map(str::to_string),
        file_system_type_version: fs.file_system_type_version().map(str::to_string),
        tags: fs
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect(),
    })
}

fn events(e: &[S3Event]) -> Vec<EventType> {
    e.iter().map(|e| EventType::from(e.as_str())).collect()
}

fn our_events(e: &[EventType]) -> Vec<S3Event> {
    e.iter().filter_map(|e| S3Event::parse(e.as_str())).collect()
}

/// Our view of a described data repository association.
pub(crate) fn association_view(d: &SdkDra) -> Option<DataRepositoryAssociation> {
    let s3 = d.s3();
    Some(DataRepositoryAssociation {
        association_id: d.association_id()?.to_string(),
        file_system_id: d.file_system_id().unwrap_or_default().to_string(),
        lifecycle: d.lifecycle().map(|l| l.as_str().to_string()).unwrap_or_default(),
        file_system_path: d.file_system_path().unwrap_or_default().to_string(),
        data_repository_path: d.data_repository_path().unwrap_or_default().to_string(),
        import_events: s3.and_then(|s| s.auto_import_policy()).map(|p| our_events(p.events())).unwrap_or_default(),
        export_events: s3.and_then(|s| s.auto_export_policy()).map(|p| our_events(p.events())).unwrap_or_default(),
        failure: d.failure_details().and_then(|f| f.message()).map(str::to_string),
        tags: d
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
            .collect(),
    })
}

#[async_trait]
impl FsxApi for AwsProvider {
    async fn list_lustre_file_systems(&self, region: &str) -> Result<Vec<LustreFileSystem>> {
        const API: &str = "fsx:DescribeFileSystems";
        let c = self.region(region).await?;
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = c
                .fsx
                .describe_file_systems()
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            out.extend(page.file_systems().iter().filter_map(|fs| lustre_view(region, fs)));
            match page.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn describe_lustre_file_system(&self, region: &str, id: &str) -> Result<Option<LustreFileSystem>> {
        const API: &str = "fsx:DescribeFileSystems";
        let c = self.region(region).await?;
        match c.fsx.describe_file_systems().file_system_ids(id).send().await {
            Ok(out) => Ok(out.file_systems().iter().find_map(|fs| lustre_view(region, fs))),
            Err(e) => {
                let e = sdk_error(API, e);
                if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) }
            }
        }
    }

    async fn create_lustre_file_system(&self, req: &CreateLustreFileSystem) -> Result<LustreFileSystem> {
        const API: &str = "fsx:CreateFileSystem";
        let c = self.region(&req.region).await?;
        let lustre = CreateFileSystemLustreConfiguration::builder()
            .deployment_type(SdkDeploymentType::from(req.deployment_type.as_str()))
            .set_per_unit_storage_throughput(req.per_unit_storage_throughput.map(|t| t as i32))
            .build();
        let out = c
            .fsx
            .create_file_system()
            .client_request_token(&req.client_request_token)
            .file_system_type(FileSystemType::Lustre)
            .storage_type(StorageType::Ssd)
            .storage_capacity(req.storage_capacity_gib as i32)
            .subnet_ids(&req.subnet_id)
            .set_security_group_ids(Some(req.security_group_ids.clone()))
            .file_system_type_version(&req.file_system_type_version)
            .lustre_configuration(lustre)
            .set_tags(Some(tags(&req.tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        out.file_system()
            .and_then(|fs| lustre_view(&req.region, fs))
            .ok_or_else(|| crate::error::invalid(API, "CreateFileSystem answered without a Lustre file system"))
    }

    async fn delete_lustre_file_system(&self, region: &str, id: &str, client_request_token: &str) -> Result<()> {
        const API: &str = "fsx:DeleteFileSystem";
        let c = self.region(region).await?;
        c.fsx
            .delete_file_system()
            .file_system_id(id)
            .client_request_token(client_request_token)
            .lustre_configuration(DeleteFileSystemLustreConfiguration::builder().skip_final_backup(true).build())
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }

    async fn list_data_repository_associations(
        &self,
        region: &str,
        file_system_id: &str,
    ) -> Result<Vec<DataRepositoryAssociation>> {
        const API: &str = "fsx:DescribeDataRepositoryAssociations";
        let c = self.region(region).await?;
        let filter = Filter::builder().name(FilterName::FileSystemId).values(file_system_id).build();
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = match c
                .fsx
                .describe_data_repository_associations()
                .filters(filter.clone())
                .max_results(25)
                .set_next_token(next.take())
                .send()
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    let e = sdk_error(API, e);
                    // An unknown file system has no associations.
                    if e.kind == ProviderErrorKind::NotFound {
                        return Ok(vec![]);
                    }
                    return Err(e);
                }
            };
            out.extend(page.associations().iter().filter_map(association_view));
            match page.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn create_data_repository_association(
        &self,
        req: &CreateDataRepositoryAssociation,
    ) -> Result<DataRepositoryAssociation> {
        const API: &str = "fsx:CreateDataRepositoryAssociation";
        let c = self.region(&req.region).await?;
        let s3 = S3DataRepositoryConfiguration::builder()
            .auto_import_policy(AutoImportPolicy::builder().set_events(Some(events(&req.import_events))).build())
            .auto_export_policy(AutoExportPolicy::builder().set_events(Some(events(&req.export_events))).build())
            .build();
        let out = c
            .fsx
            .create_data_repository_association()
            .client_request_token(&req.client_request_token)
            .file_system_id(&req.file_system_id)
            .file_system_path(&req.file_system_path)
            .data_repository_path(&req.data_repository_path)
            .batch_import_meta_data_on_create(req.batch_import_metadata)
            .s3(s3)
            .set_tags(Some(tags(&req.tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        out.association().and_then(association_view).ok_or_else(|| {
            crate::error::invalid(API, "CreateDataRepositoryAssociation answered without an association")
        })
    }

    async fn delete_data_repository_association(
        &self,
        region: &str,
        association_id: &str,
        client_request_token: &str,
    ) -> Result<()> {
        const API: &str = "fsx:DeleteDataRepositoryAssociation";
        let c = self.region(region).await?;
        c.fsx
            .delete_data_repository_association()
            .association_id(association_id)
            .client_request_token(client_request_token)
            .delete_data_in_file_system(false)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }

    async fn lustre_quota(&self, region: &str, quota: LustreQuota) -> Result<Option<Quota>> {
        let c = self.region(region).await?;
        let applied = c
            .quotas
            .get_service_quota()
            .service_code(FSX_QUOTA_SERVICE)
            .quota_code(quota.code())
            .send()
            .await
            .map(|o| o.quota().and_then(|q| q.value()))
            .map_err(|e| sdk_error("servicequotas:GetServiceQuota", e));
        let warn = |e: &instantstart_core::provider::ProviderError| {
            tracing::warn!(error = %e, "cannot read the FSx quota {}; the preflight warns", quota.code());
        };
        let value = match applied {
            Ok(Some(v)) => Some(v),
            Err(e) if e.kind != ProviderErrorKind::NotFound => {
                warn(&e);
                None
            }
            // No applied value: AWS's default.
            _ => match c
                .quotas
                .get_aws_default_service_quota()
                .service_code(FSX_QUOTA_SERVICE)
                .quota_code(quota.code())
                .send()
                .await
            {
                Ok(o) => o.quota().and_then(|q| q.value()),
                Err(e) => {
                    warn(&sdk_error("servicequotas:GetAWSDefaultServiceQuota", e));
                    None
                }
            },
        };
        Ok(value.map(|v| Quota {
            name: quota.name().to_string(),
            code: quota.code().to_string(),
            value: if v.is_finite() && v >= 0.0 { v.min(f64::from(u32::MAX)) as u32 } else { 0 },
        }))
    }
}
