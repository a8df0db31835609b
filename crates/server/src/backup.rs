//! Scheduled and on-demand backups of the store (`instantstart-server backup`,
//! `--backup-interval`), on top of [`instantstart_store::backup_store`]. With a management
//! bucket (`--shared-bucket`), each scheduled backup is also uploaded there under
//! [`BUCKET_PREFIX`] (one PutObject through the server's provider: with `--provider aws`, the
//! real bucket).
//!
//! # Guarantees
//! - A backup is uploaded only after it was written locally, under its own file name; a failed
//!   upload is logged as an error and leaves the local backup in place.
//! - A scheduled backup runs on a blocking thread, never on the request path; a failed one is
//!   logged as an error and the next one runs on schedule (the server keeps serving).
//! - [`parse_interval`] accepts `<n>s`, `<n>m`, `<n>h`, `<n>d` (or plain seconds), at least one
//!   minute; anything else is an error naming the rule.

use instantstart_core::provider::{ObjectHead, PutObject, S3Api};
use instantstart_store::{Backup, BackupError, StoreUrl};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Key prefix of backups in the management bucket.
pub const BUCKET_PREFIX: &str = "instantstart-backups/";

/// Where scheduled backups are also uploaded: the provider's S3 and the management bucket.
#[derive(Clone)]
pub struct Upload {
    pub s3: Arc<dyn S3Api>,
    pub bucket: String,
}

/// Uploads `backup` to `to.bucket` as `instantstart-backups/<file name>`.
pub async fn upload(to: &Upload, backup: &Backup) -> Result<ObjectHead, String> {
    let name = backup.path.file_name().and_then(|n| n.to_str()).ok_or("the backup has no file name")?;
    let path = backup.path.clone();
    let body = tokio::task::spawn_blocking(move || std::fs::read(&path))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("read {}: {e}", backup.path.display()))?;
    let req = PutObject {
        bucket: to.bucket.clone(),
        key: format!("{BUCKET_PREFIX}{name}"),
        body,
        content_type: "application/vnd.sqlite3".into(),
    };
    to.s3.put_object(&req).await.map_err(|e| e.to_string())
}

/// Backups kept in the directory when `--backup-keep` is not given.
pub const DEFAULT_KEEP: usize = 7;

/// The shortest schedule: backups more often than this would compete with the server.
pub const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// The default backup directory of a data directory.
pub fn default_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("backups")
}

/// Parses a backup interval; see the module docs.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    const RULE: &str = "a backup interval is <n>s, <n>m, <n>h or <n>d (e.g. 6h), at least 1m";
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{text:?}: {RULE}"))?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => None,
    }
    .ok_or_else(|| format!("{text:?}: {RULE}"))?;
    let d = Duration::from_secs(secs);
    if d < MIN_INTERVAL {
        return Err(format!("{text:?}: {RULE}"));
    }
    Ok(d)
}

/// One backup now.
pub fn backup_now(url: &StoreUrl, dir: &Path, keep: usize) -> Result<Backup, BackupError> {
    instantstart_store::backup_store(url, dir, keep, chrono::Utc::now())
}

/// Takes a backup every `interval` (the first one `interval` after the start) until the task
/// is dropped or aborted.
pub fn spawn_schedule(
    url: StoreUrl,
    dir: PathBuf,
    interval: Duration,
    keep: usize,
    to: Option<Upload>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let (url, dir) = (url.clone(), dir.clone());
            match tokio::task::spawn_blocking(move || backup_now(&url, &dir, keep)).await {
                Ok(Ok(b)) => {
                    tracing::info!(path = %b.path.display(), bytes = b.bytes, pruned = b.pruned.len(), "store backed up");
                    if let Some(to) = &to {
                        match upload(to, &b).await {
                            Ok(o) => tracing::info!(bucket = %o.bucket, key = %o.key, "store backup uploaded"),
                            Err(e) => tracing::error!(error = %e, bucket = %to.bucket, "store backup upload failed"),
                        }
                    }
                }
                Ok(Err(e)) => tracing::error!(error = %e, "scheduled store backup failed"),
                Err(e) => tracing::error!(error = %e, "scheduled store backup task failed"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_backup_is_uploaded_to_the_management_bucket_under_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("instantstart.db");
        drop(instantstart_store::SqliteStore::open(&db).unwrap());
        let b = backup_now(&StoreUrl::Sqlite(db), &dir.path().join("backups"), 2).unwrap();
        let sim = instantstart_sim::SimCloud::new(instantstart_sim::SimConfig::default()).unwrap();
        let bucket = instantstart_core::provider::CreateBucket {
            region: "us-east-1".into(),
            name: "mgmt-shared".into(),
            tags: Default::default(),
        };
        sim.seed_bucket_if_missing(&bucket).unwrap();
        let to = Upload { s3: Arc::new(sim.clone()), bucket: "mgmt-shared".into() };
        let head = upload(&to, &b).await.unwrap();
        let name = b.path.file_name().unwrap().to_str().unwrap();
        assert_eq!((head.key.as_str(), head.size_bytes), (format!("instantstart-backups/{name}").as_str(), b.bytes));
        assert!(sim.head_object("mgmt-shared", &head.key).await.unwrap().is_some());
        let missing = Upload { s3: Arc::new(sim), bucket: "no-such-bucket".into() };
        assert!(upload(&missing, &b).await.unwrap_err().contains("NoSuchBucket"));
    }

    #[test]
    fn intervals() {
        for (text, want) in [
            ("6h", Ok(6 * 3600)),
            ("90m", Ok(5400)),
            ("1d", Ok(86_400)),
            ("3600", Ok(3600)),
            ("60s", Ok(60)),
            ("59s", Err(())),
            ("", Err(())),
            ("h", Err(())),
            ("5w", Err(())),
            ("-1h", Err(())),
            ("99999999999999999999d", Err(())),
        ] {
            let got = parse_interval(text).map(|d| d.as_secs()).map_err(|e| assert!(e.contains("at least 1m"), "{e}"));
            assert_eq!(got, want, "{text:?}");
        }
    }
}
