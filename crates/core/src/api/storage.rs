//! Storage of a cluster: the shared bucket (how pods mount it, its status, one level of its
//! listing) and its FSx for Lustre volumes (the file system with its static volume and claim
//! `fsx-<name>`), and the submissions that create and delete a volume. Model downloads into the
//! bucket are workloads (`api::downloads`).
//!
//! # Guarantees
//!
//! - An unknown cluster is a `404` ([`super::clusters::resolve`]).
//! - A listing's prefix is checked (a `400` naming `prefix`) before the bucket is read; a
//!   cluster without a shared bucket is a `404` naming it.

use super::clusters::{Cluster, resolve};
use super::submission::Submission;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, KubeApi};
use crate::store::Store;
use crate::workflow::fsx::DeleteFileSystemRequest;
use crate::workload::read::{self, ReadError};
pub use crate::workload::{StorageListing, StorageSummary};

pub use crate::workflow::fsx::FileSystemBody;

/// The storage of `cluster`: the shared bucket and its FSx for Lustre volumes.
pub async fn list(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    cluster: &str,
) -> Result<Vec<StorageSummary>, EngineError> {
    let c = resolve(store, cluster)?;
    Ok(read::storage(aws, kube, &c.record).await?)
}

/// One level of the shared bucket of `cluster` (found with [`resolve`]) under `prefix` (ending
/// with `/`; empty: the top), from `cursor` (the previous page's `next_cursor`).
pub async fn objects(
    aws: &dyn AwsCloud,
    cluster: &Cluster,
    prefix: &str,
    cursor: Option<&str>,
) -> Result<StorageListing, ReadError> {
    read::storage_objects(aws, &cluster.record, prefix, cursor).await
}

/// Create the FSx for Lustre volume `body` on `cluster` (or attach `body.file_system_id`).
pub fn create_file_system(cluster: String, body: FileSystemBody) -> Submission {
    Submission::new(OperationKind::CreateFileSystem, &body.request(cluster))
}

/// Delete the FSx volume `name` of `cluster` (its claim and volume, then the file system if
/// InstantStart created it; an attached file system is only released).
pub fn delete_file_system(cluster: String, name: String) -> Submission {
    Submission::new(
        OperationKind::DeleteFileSystem,
        &DeleteFileSystemRequest { cluster, name, file_system_id: None, ownership: None, data_repositories: vec![] },
    )
}
