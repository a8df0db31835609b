//! Test backends: every contract test runs on each store the crate offers.
//!
//! [`backends`] returns a fresh SQLite store in memory, one in a file, and one in a fresh
//! database of a private PostgreSQL server ([`PgServer`]): started by these tests in a temporary
//! directory, listening on a free loopback port (its unix socket in the same directory), run as
//! the unprivileged `postgres` user when the tests run as root, stopped and removed when the
//! last test holding it ends (also on panic: `Drop`). Tests running at the same time share
//! one server, each in its own database.
//!
//! When PostgreSQL's binaries cannot be found (`PG_BIN`, `/usr/lib/postgresql/<version>/bin`,
//! then `PATH`), the tests fail with a message saying so, unless `INSTANTSTART_SKIP_POSTGRES=1`
//! is set: then they run on SQLite only (`cargo xtask test` installs PostgreSQL when missing).

#![allow(dead_code)] // each test file uses part of this module

use instantstart_store::{PostgresStore, SqliteStore, StoreBackend};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Keeps whatever a backend needs alive (a temporary directory, the PostgreSQL server).
pub enum Guard {
    None,
    Dir(tempfile::TempDir),
    Postgres(Arc<PgServer>),
}

/// A backend under test: its name, the store, and what keeps it alive.
pub type Backend = (&'static str, Box<dyn StoreBackend>, Guard);
/// A backend opened twice on the same data: its name, the two handles, what keeps them alive.
pub type SharedBackend = (&'static str, Vec<Arc<dyn StoreBackend>>, Guard);

/// Every backend, each fresh and empty.
pub fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = SqliteStore::open(&dir.path().join("state.db")).expect("open sqlite file");
    let mut all: Vec<Backend> = vec![
        ("sqlite memory", Box::new(SqliteStore::open_in_memory().expect("open sqlite")), Guard::None),
        ("sqlite file", Box::new(file), Guard::Dir(dir)),
    ];
    if let Some(server) = pg_server() {
        let url = server.create_database();
        let store = PostgresStore::connect(&url).expect("connect to the test PostgreSQL");
        all.push(("postgres", Box::new(store), Guard::Postgres(server)));
    }
    all
}

/// Every backend that can be opened twice on the same data, the two handles each with their
/// own connection(s).
pub fn shared_backends() -> Vec<SharedBackend> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let sqlite: Vec<Arc<dyn StoreBackend>> =
        (0..2).map(|_| Arc::new(SqliteStore::open(&path).expect("open sqlite")) as Arc<dyn StoreBackend>).collect();
    let mut all = vec![("sqlite file", sqlite, Guard::Dir(dir))];
    if let Some(server) = pg_server() {
        let url = server.create_database();
        let pg: Vec<Arc<dyn StoreBackend>> =
            (0..2).map(|_| Arc::new(PostgresStore::connect(&url).expect("connect")) as Arc<dyn StoreBackend>).collect();
        all.push(("postgres", pg, Guard::Postgres(server)));
    }
    all
}

const SKIP_ENV: &str = "INSTANTSTART_SKIP_POSTGRES";

/// The shared test server (started when no test holds one), or `None` when PostgreSQL tests
/// are skipped. Panics with the reason when PostgreSQL is wanted but cannot run.
pub fn pg_server() -> Option<Arc<PgServer>> {
    if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
        return None;
    }
    static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(server) = shared.upgrade() {
        return Some(server);
    }
    let bin = pg_bin().unwrap_or_else(|| {
        panic!(
            "PostgreSQL is not installed (no initdb/pg_ctl in $PG_BIN, /usr/lib/postgresql/*/bin or PATH): \
             install it (apt-get install postgresql; `cargo xtask test` does) or set {SKIP_ENV}=1 to run the \
             store tests on SQLite only"
        )
    });
    let server =
        Arc::new(PgServer::start(&bin, false).unwrap_or_else(|e| panic!("cannot start a test PostgreSQL: {e}")));
    *shared = Arc::downgrade(&server);
    Some(server)
}

/// The directory holding `initdb` and `pg_ctl`.
fn pg_bin() -> Option<PathBuf> {
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

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A private PostgreSQL server for tests; see the module docs.
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres_user: bool,
    port: u16,
    databases: AtomicUsize,
    tls: bool,
}

impl PgServer {
    /// A server of its own (not shared) with TLS on: a certificate for `127.0.0.1` issued by a
    /// test CA ([`PgServer::tls_ca`]); plain connections are still accepted. `None` when
    /// PostgreSQL tests are skipped.
    pub fn with_tls() -> Option<Arc<PgServer>> {
        if std::env::var(SKIP_ENV).is_ok_and(|v| v == "1") {
            return None;
        }
        let bin = pg_bin().expect("PostgreSQL is not installed (see pg_server)");
        Some(Arc::new(PgServer::start(&bin, true).unwrap_or_else(|e| panic!("cannot start a TLS PostgreSQL: {e}"))))
    }

    /// The CA that issued a TLS server's certificate (PEM).
    pub fn tls_ca(&self) -> Option<PathBuf> {
        self.tls.then(|| self.dir.path().join("tls/ca.crt"))
    }

    /// Another CA, which did not issue the server's certificate (PEM).
    pub fn other_ca(&self) -> Option<PathBuf> {
        self.tls.then(|| self.dir.path().join("tls/other.crt"))
    }

    /// Makes the test CAs and the server's certificate and key in `<dir>/tls` with `openssl`.
    fn make_certificates(dir: &Path) -> Result<(), String> {
        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls).map_err(|e| e.to_string())?;
        std::fs::write(tls.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
            .map_err(|e| e.to_string())?;
        let openssl = |args: &[&str]| run(Command::new("openssl").current_dir(&tls).args(args));
        for ca in ["ca", "other"] {
            openssl(&[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.crt"),
                "-days",
                "2",
                "-subj",
                &format!("/CN=instantstart test {ca}"),
            ])?;
        }
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ])?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ])?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tls.join("server.key"), std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn start(bin: &Path, tls: bool) -> Result<Self, String> {
        let dir = tempfile::Builder::new().prefix("instantstart-pg-").tempdir().map_err(|e| e.to_string())?;
        let as_postgres_user = running_as_root();
        std::fs::create_dir(dir.path().join("sock")).map_err(|e| e.to_string())?;
        if tls {
            Self::make_certificates(dir.path())?;
        }
        if as_postgres_user {
            run(Command::new("chown").arg("-R").arg("postgres:").arg(dir.path()))?;
        }
        let mut server =
            PgServer { dir, bin: bin.to_path_buf(), as_postgres_user, port: 0, databases: AtomicUsize::new(0), tls };
        let data = server.data_dir();
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
            let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
            let mut options = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
                server.dir.path().join("sock").display()
            );
            if tls {
                let t = server.dir.path().join("tls");
                options.push_str(&format!(
                    " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                    t.join("server.crt").display(),
                    t.join("server.key").display()
                ));
            }
            let log = server.dir.path().join("server.log");
            match run(server
                .tool("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o"])
                .arg(&options)
                .arg("start"))
            {
                Ok(()) => {
                    server.port = port;
                    return Ok(server);
                }
                Err(e) => last = format!("{e}; server log: {}", std::fs::read_to_string(&log).unwrap_or_default()),
            }
        }
        Err(last)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
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

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a new, empty database and returns its URL.
    pub fn create_database(&self) -> String {
        let name = format!("t{}", self.databases.fetch_add(1, Ordering::SeqCst));
        let mut admin = self.admin();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).expect("create a test database");
        self.url(&name)
    }

    /// A superuser connection to the `postgres` database (tests run on std threads, where the
    /// blocking client may be used directly).
    pub fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.url("postgres"), postgres::NoTls).expect("connect to the test PostgreSQL")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data_dir();
        let _ = self.tool("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output();
        // The temporary directory is removed when `dir` drops.
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
