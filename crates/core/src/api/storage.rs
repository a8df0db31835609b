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
//! - Read errors keep their HTTP meaning as engine errors: missing → `404`, ambiguous or not
//!   ready → `409`, invalid → `400`, a provider failure by its kind.

use super::clusters::resolve;
use super::submission::Submission;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, KubeApi};
use crate::store::Store;
use crate::workflow::fsx::DeleteFileSystemRequest;
use crate::workload::read::{self, ReadError};
use crate::workload::{StorageListing, StorageSummary};

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

/// One level of `cluster`'s shared bucket under `prefix` (ending with `/`; empty: the top),
/// from `cursor` (the previous page's `next_cursor`).
pub async fn objects(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    cluster: &str,
    prefix: &str,
    cursor: Option<&str>,
) -> Result<StorageListing, EngineError> {
    let c = resolve(store, cluster)?;
    read::storage_objects(aws, &c.record, prefix, cursor).await.map_err(engine_error)
}

/// Create the FSx for Lustre volume `body` on `cluster`.
pub fn create_file_system(cluster: String, body: FileSystemBody) -> Submission {
    Submission::new(OperationKind::CreateFileSystem, &body.request(cluster))
}

/// Delete the FSx volume `name` of `cluster` (its claim and volume, then the file system).
pub fn delete_file_system(cluster: String, name: String) -> Submission {
    Submission::new(OperationKind::DeleteFileSystem, &DeleteFileSystemRequest { cluster, name, file_system_id: None })
}

/// A read error as the engine error of the same HTTP meaning.
fn engine_error(e: ReadError) -> EngineError {
    match e {
        ReadError::Provider(p) => EngineError::Provider(p),
        ReadError::Validation(v) => EngineError::Validation(v),
        ReadError::Missing(what) => EngineError::Missing(what),
        ReadError::Ambiguous(m) | ReadError::NotReady(m) => EngineError::InvalidState(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderError, ProviderErrorKind};
    use crate::validate::ValidationError;

    #[test]
    fn read_errors_keep_their_meaning_and_message() {
        let throttled = ProviderError::new("ListObjectsV2", ProviderErrorKind::Throttled, "slow down");
        let invalid = ValidationError::invalid("prefix", "must end with /");
        let cases = [
            (ReadError::Provider(throttled.clone()), EngineError::Provider(throttled)),
            (ReadError::Validation(invalid.clone()), EngineError::Validation(invalid)),
            (ReadError::Missing("a shared bucket".into()), EngineError::Missing("a shared bucket".into())),
            (ReadError::Ambiguous("in 2 namespaces".into()), EngineError::InvalidState("in 2 namespaces".into())),
            (ReadError::NotReady("no log yet".into()), EngineError::InvalidState("no log yet".into())),
        ];
        for (read, engine) in cases {
            let message = read.to_string();
            let got = engine_error(read);
            assert_eq!(got.to_string(), message);
            assert_eq!(got, engine);
        }
    }
}
