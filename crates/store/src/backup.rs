//! Online backups of the SQLite store with SQLite's backup API, while the server keeps
//! writing.
//!
//! [`backup_store`] copies the database a [`StoreUrl`] names into a directory as
//! `instantstart-<UTC time>.db` and keeps the newest `keep` copies there. Restoring is a file
//! copy with the server stopped (docs/server.md): the copy replaces `instantstart.db`, and the
//! `-wal` and `-shm` files beside it are removed.
//!
//! # Guarantees
//! - A backup is a consistent snapshot of committed transactions: SQLite's online backup API
//!   restarts the copy when a writer changes the database in between (no half-applied
//!   operation is ever copied), and the server's writers are never blocked for longer than
//!   one step of the copy.
//! - The backup file appears under its final name only once complete and synced (written as
//!   `.instantstart-<time>.db.partial`, then renamed); a failed backup leaves no file behind
//!   and prunes nothing.
//! - Pruning removes only files named like backups (`instantstart-*.db`), oldest first, and
//!   never the one just written.
//! - A PostgreSQL store is refused with [`BackupError::Postgres`], pointing to `pg_dump` and
//!   RDS snapshots: nothing is written.

use crate::StoreUrl;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// File-name prefix and suffix of a backup.
pub const BACKUP_PREFIX: &str = "instantstart-";
/// See [`BACKUP_PREFIX`].
pub const BACKUP_SUFFIX: &str = ".db";

/// Pages copied per step of the online backup, and the pause between steps (writers proceed
/// in between).
const PAGES_PER_STEP: std::os::raw::c_int = 256;
const PAUSE: Duration = Duration::from_millis(5);

/// Why a backup was not taken.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The store is PostgreSQL, which has its own tools.
    #[error(
        "the store is PostgreSQL: back it up with pg_dump (or, on Amazon RDS, automated backups and snapshots); \
         `instantstart-server backup` copies the SQLite store only"
    )]
    Postgres,
    /// There is no database file to copy.
    #[error("no SQLite database at {0}: start the server once (or check --data-dir / --store-url)")]
    NoDatabase(PathBuf),
    /// Keeping zero backups would delete the one just taken.
    #[error("keep must be at least 1 (the backup just taken is always kept)")]
    KeepZero,
    /// Reading, copying or writing failed.
    #[error("backup of {db} into {dir}: {message}")]
    Failed { db: PathBuf, dir: PathBuf, message: String },
}

/// A backup just taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// The new backup file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Older backups removed to keep the newest `keep`.
    pub pruned: Vec<PathBuf>,
}

/// The file name of a backup taken at `at` (sorts chronologically).
pub fn backup_file_name(at: DateTime<Utc>) -> String {
    format!("{BACKUP_PREFIX}{}{BACKUP_SUFFIX}", at.format("%Y%m%dT%H%M%S%.3fZ"))
}

/// Backs up the store `url` names into `dir` (created when missing); see the module docs.
pub fn backup_store(url: &StoreUrl, dir: &Path, keep: usize, at: DateTime<Utc>) -> Result<Backup, BackupError> {
    match url {
        StoreUrl::Postgres(_) => Err(BackupError::Postgres),
        StoreUrl::Sqlite(db) => backup_sqlite(db, dir, keep, at),
    }
}

/// Backs up the SQLite database at `db` into `dir`; see the module docs.
pub fn backup_sqlite(db: &Path, dir: &Path, keep: usize, at: DateTime<Utc>) -> Result<Backup, BackupError> {
    if keep == 0 {
        return Err(BackupError::KeepZero);
    }
    if !db.is_file() {
        return Err(BackupError::NoDatabase(db.to_path_buf()));
    }
    let failed = |message: String| BackupError::Failed { db: db.to_path_buf(), dir: dir.to_path_buf(), message };
    std::fs::create_dir_all(dir).map_err(|e| failed(format!("create the directory: {e}")))?;
    let name = backup_file_name(at);
    let path = dir.join(&name);
    let partial = dir.join(format!(".{name}.partial"));
    let copied = copy_online(db, &partial).map_err(&failed);
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, &path).map_err(|e| failed(format!("rename {}: {e}", partial.display())))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let pruned = prune(dir, keep, &name).map_err(failed)?;
    Ok(Backup { path, bytes, pruned })
}

/// Copies `db` into the new file `to` with the online backup API, then syncs it.
fn copy_online(db: &Path, to: &Path) -> Result<(), String> {
    let src = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| format!("open {}: {e}", db.display()))?;
    src.busy_timeout(Duration::from_secs(10)).map_err(|e| e.to_string())?;
    let mut dst = Connection::open(to).map_err(|e| format!("create {}: {e}", to.display()))?;
    {
        let backup = rusqlite::backup::Backup::new(&src, &mut dst).map_err(|e| format!("start the backup: {e}"))?;
        backup.run_to_completion(PAGES_PER_STEP, PAUSE, None).map_err(|e| format!("copy: {e}"))?;
    }
    // A self-contained file: no WAL beside it.
    let _: String = dst
        .pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))
        .map_err(|e| format!("finish {}: {e}", to.display()))?;
    drop(dst);
    std::fs::File::open(to).and_then(|f| f.sync_all()).map_err(|e| format!("sync {}: {e}", to.display()))
}

/// Removes the oldest backups in `dir` beyond the newest `keep`, never `just_taken`.
fn prune(dir: &Path, keep: usize, just_taken: &str) -> Result<Vec<PathBuf>, String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("list the directory: {e}"))?
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|n| n.starts_with(BACKUP_PREFIX) && n.ends_with(BACKUP_SUFFIX))
        .collect();
    names.sort();
    let excess = names.len().saturating_sub(keep);
    let mut pruned = Vec::new();
    for name in names.into_iter().filter(|n| n != just_taken).take(excess) {
        let path = dir.join(&name);
        std::fs::remove_file(&path).map_err(|e| format!("remove {}: {e}", path.display()))?;
        pruned.push(path);
    }
    Ok(pruned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use chrono::TimeZone;
    use instantstart_core::store::Store;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_backup_is_a_complete_database_and_only_the_newest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("instantstart.db");
        let store = SqliteStore::open(&db).unwrap();
        store.set_setting("active_cluster", Some("demo")).unwrap();
        let backups = dir.path().join("backups");
        std::fs::create_dir_all(&backups).unwrap();
        std::fs::write(backups.join("notes.txt"), "not a backup").unwrap();
        let mut taken = Vec::new();
        for i in 0..4 {
            let b = backup_sqlite(&db, &backups, 2, at(i)).unwrap();
            assert!(b.bytes > 0);
            taken.push(b);
        }
        assert_eq!(taken[2].pruned, vec![taken[0].path.clone()]);
        assert_eq!(taken[3].pruned, vec![taken[1].path.clone()]);
        let mut left: Vec<String> =
            std::fs::read_dir(&backups).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["instantstart-20270115T080002.000Z.db", "instantstart-20270115T080003.000Z.db", "notes.txt"]);
        // The copy opens as a store with the same state (the server is still using the original).
        let restored = SqliteStore::open(&taken[3].path).unwrap();
        assert_eq!(restored.get_setting("active_cluster").unwrap().as_deref(), Some("demo"));
        drop(store);
    }

    #[test]
    fn refusals_name_the_reason_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let pg = StoreUrl::Postgres("postgres://u:secret@db/instantstart".into());
        let e = backup_store(&pg, &out, 3, at(0)).unwrap_err();
        assert!(matches!(e, BackupError::Postgres) && e.to_string().contains("pg_dump"), "{e}");
        assert!(!e.to_string().contains("secret"));
        let missing = dir.path().join("none.db");
        assert!(matches!(backup_sqlite(&missing, &out, 3, at(0)), Err(BackupError::NoDatabase(_))));
        let db = dir.path().join("instantstart.db");
        SqliteStore::open(&db).unwrap();
        assert!(matches!(backup_sqlite(&db, &out, 0, at(0)), Err(BackupError::KeepZero)));
        assert!(!out.exists());
    }
}
