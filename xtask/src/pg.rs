//! A private PostgreSQL server for `cargo xtask chaos` and `cargo xtask bench` (several server
//! replicas on one database), started as the store's tests start theirs
//! (`crates/store/tests/common`): Debian's `initdb` and `pg_ctl` (from `PG_BIN`,
//! `/usr/lib/postgresql/<version>/bin` or `PATH`) in a temporary directory, listening on a free
//! loopback port with its unix socket in the same directory, as the unprivileged `postgres`
//! user when xtask runs as root, `fsync=off` (a benchmark of the server, not of the disk).
//!
//! # Guarantees
//! - The server is stopped (`pg_ctl stop -m immediate`) and its directory removed when the
//!   [`PgServer`] drops, also when a run fails or panics.
//! - [`PgServer::start`] answers `Ok(None)` (nothing started) when the binaries cannot be found
//!   or `INSTANTSTART_SKIP_POSTGRES=1`, so callers can skip what needs it and say so.

use crate::harness::TempDir;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A running private PostgreSQL server; see the module docs.
pub struct PgServer {
    dir: TempDir,
    bin: PathBuf,
    as_postgres_user: bool,
    port: u16,
    databases: AtomicUsize,
    /// The server's major version (`initdb --version`), for reports.
    pub version: String,
}

/// The directory holding `initdb` and `pg_ctl`, if any.
pub fn find_bin() -> Option<PathBuf> {
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("PG_BIN").map(PathBuf::from) {
        return has_tools(&dir).then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, d)| has_tools(d))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has_tools(d))
}

/// Why PostgreSQL runs cannot happen here, or `None` when they can.
pub fn unavailable() -> Option<String> {
    if std::env::var("INSTANTSTART_SKIP_POSTGRES").is_ok_and(|v| v == "1") {
        return Some("INSTANTSTART_SKIP_POSTGRES=1".into());
    }
    find_bin().is_none().then(|| {
        "PostgreSQL's initdb/pg_ctl not found in $PG_BIN, /usr/lib/postgresql/*/bin or PATH \
         (apt-get install postgresql)"
            .into()
    })
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl PgServer {
    /// Starts a server, or `Ok(None)` when PostgreSQL is not available ([`unavailable`]).
    pub fn start() -> Result<Option<PgServer>> {
        if unavailable().is_some() {
            return Ok(None);
        }
        let bin = find_bin().context("no PostgreSQL binaries")?;
        let dir = TempDir::new("pg")?;
        let as_postgres_user = running_as_root();
        std::fs::create_dir(dir.path().join("sock"))?;
        if as_postgres_user {
            run(Command::new("chown").arg("-R").arg("postgres:").arg(dir.path()))?;
        }
        let version = Command::new(bin.join("initdb"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let mut server = PgServer { dir, bin, as_postgres_user, port: 0, databases: AtomicUsize::new(0), version };
        let data = server.dir.path().join("data");
        run(server.tool("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]))?;
        // A free port can be taken between choosing and binding it: try a few.
        let mut last = String::new();
        for _ in 0..5 {
            let port = crate::harness::free_port()?;
            let options = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
                server.dir.path().join("sock").display()
            );
            let log = server.dir.path().join("server.log");
            let started = run(server
                .tool("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o"])
                .arg(&options)
                .arg("start"));
            match started {
                Ok(()) => {
                    server.port = port;
                    return Ok(Some(server));
                }
                Err(e) => last = format!("{e:#}; server log: {}", std::fs::read_to_string(&log).unwrap_or_default()),
            }
        }
        bail!("cannot start PostgreSQL: {last}")
    }

    /// A command running one of the server's tools, as `postgres` when we are root.
    fn tool(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        if self.as_postgres_user {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Creates a new, empty database and returns its URL.
    pub fn create_database(&self) -> Result<String> {
        let name = format!("x{}", self.databases.fetch_add(1, Ordering::SeqCst));
        run(Command::new(self.bin.join("createdb")).args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            &name,
        ]))?;
        Ok(format!("postgres://postgres@127.0.0.1:{}/{name}", self.port))
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self.tool("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output();
        // The directory is removed when `dir` drops.
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
