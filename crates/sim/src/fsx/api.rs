//! `FsxApi` for [`SimCloud`]: each call goes through the cloud's pipeline, then the rules of
//! [`crate::fsx`].

use super::*;
use crate::cloud::SimCloud;
use async_trait::async_trait;

#[async_trait]
impl FsxApi for SimCloud {
    async fn list_lustre_file_systems(&self, region: &str) -> Result<Vec<LustreFileSystem>> {
        self.read("fsx:DescribeFileSystems", |w, cx| {
            Ok(w.file_systems
                .values()
                .filter(|r| r.region == region && r.lifecycle(cx.now).is_some())
                .map(|r| view(r, cx.now))
                .collect())
        })
    }

    async fn describe_lustre_file_system(&self, region: &str, id: &str) -> Result<Option<LustreFileSystem>> {
        self.read("fsx:DescribeFileSystems", |w, cx| {
            Ok(w.file_systems
                .get(id)
                .filter(|r| r.region == region && r.lifecycle(cx.now).is_some())
                .map(|r| view(r, cx.now)))
        })
    }

    async fn create_lustre_file_system(&self, req: &CreateLustreFileSystem) -> Result<LustreFileSystem> {
        self.write("fsx:CreateFileSystem", |w, cx| create(w, req, cx.now, cx.resource_fails.as_deref()))
    }

    async fn delete_lustre_file_system(&self, region: &str, id: &str, _client_request_token: &str) -> Result<()> {
        self.write("fsx:DeleteFileSystem", |w, cx| delete(w, region, id, cx.now))
    }

    async fn list_data_repository_associations(
        &self,
        region: &str,
        file_system_id: &str,
    ) -> Result<Vec<DataRepositoryAssociation>> {
        self.read("fsx:DescribeDataRepositoryAssociations", |w, cx| Ok(associations(w, region, file_system_id, cx.now)))
    }

    async fn create_data_repository_association(
        &self,
        req: &CreateDataRepositoryAssociation,
    ) -> Result<DataRepositoryAssociation> {
        self.write("fsx:CreateDataRepositoryAssociation", |w, cx| {
            create_association(w, req, cx.now, cx.resource_fails.as_deref())
        })
    }

    async fn delete_data_repository_association(
        &self,
        region: &str,
        association_id: &str,
        _client_request_token: &str,
    ) -> Result<()> {
        self.write("fsx:DeleteDataRepositoryAssociation", |w, cx| delete_association(w, region, association_id, cx.now))
    }

    async fn lustre_quota(&self, region: &str, quota: LustreQuota) -> Result<Option<Quota>> {
        self.read("servicequotas:GetServiceQuota", |w, _| {
            Ok(Some(Quota {
                name: quota.name().to_string(),
                code: quota.code().to_string(),
                value: w.lustre_quota(region, quota),
            }))
        })
    }
}
