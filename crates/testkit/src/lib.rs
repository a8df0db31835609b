//! One test bed for the workspace's tests: the simulated cloud ([`SimCloud`]), a store and the
//! operation [`Engine`] on a data directory, optionally the HTTP server on a loopback port with
//! a typed [`instantstart_client::Client`]; and waits on operations and state that replace
//! wall-clock sleeps.
//!
//! ```ignore
//! let dir = tempfile::tempdir().unwrap();
//! let mut bed = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
//! let op = bed.run_ok(OperationKind::CreateCluster, &request).await;
//! bed.restart().await; // kill -9: a fresh engine on the same store and world file
//! assert_eq!(bed.engine.resume_all().unwrap(), 0);
//! ```
//!
//! A bed on a directory keeps the world in `world.json` and the store in `db.sqlite` (or, when
//! the directory holds a `store-url` file, in the PostgreSQL database it names); a served bed
//! ([`BedBuilder::serve`]) is assembled by the server itself (`AppState::assemble`: its file
//! names, Helm, the workload renderer), on the world the builder configured; its REST API is
//! reached through the typed client ([`Bed::client`]) or raw, status and headers included
//! ([`Bed::send`], [`Bed::call`], [`Bed::get_until`]: the `http` module).
//!
//! Time: the simulator runs on wall clock × speed (the product's clock) unless the bed is built
//! with [`BedBuilder::manual_clock`]; then simulated time moves only by [`Bed::advance`], and a
//! state machine is stepped deterministically (the engine keeps polling on its own, scaled,
//! wall-clock timers; what it finds depends only on the simulated time).
//!
//! # Guarantees
//! - Nothing outlives the bed: dropping it aborts the engine's drivers, as a crash would, and
//!   stops the HTTP server; a test leaves no server or task behind. [`Bed::kill`] and
//!   [`Bed::restart`] return only once every driver and step task of the old engine is gone
//!   (no sleep guessing how long an aborted task takes).
//! - Every wait is bounded ([`BedBuilder::timeout`], 30 s by default) and panics with what it
//!   waited for; an operation wait names the operation, its status and every step's phase.
//! - [`Bed::wait_for`] follows the engine's change stream and re-reads the store on every
//!   change (and at least every 50 ms), so it returns as soon as the predicate holds.

use instantstart_core::engine::{Engine, EngineConfig, Outcome, Submission, Workflow};
use instantstart_core::operation::{Actor, Face, Operation, OperationId, OperationKind, OperationStatus};
use instantstart_core::provider::HelmReleases;
use instantstart_core::store::Store;
use instantstart_core::workflow;
use instantstart_core::workload::WorkloadRenderer;
use instantstart_sim::{SimCloud, SimConfig};
use serde_json::Value;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a wait lasts by default before it panics.
pub const WAIT: Duration = Duration::from_secs(30);

/// The admin token of a served bed.
pub const TOKEN: &str = "ist_testkit_admin_token_for_loopback";

/// The region the kit's helpers and the served bed's default region use.
pub const REGION: &str = "us-east-1";

mod http;
pub mod world;
pub use http::{Reply, admin, as_token};

/// Changes the options a served bed's server starts with (see [`BedBuilder::server_options`]).
pub type SetServerOptions = Arc<dyn Fn(&mut instantstart_server::ServerOptions) + Send + Sync>;

/// Builds the workflows of a bed from its simulated cloud and store (see [`BedBuilder::workflows`]).
pub type Workflows = Arc<dyn Fn(&SimCloud, &Arc<dyn Store>) -> Vec<Arc<dyn Workflow>> + Send + Sync>;

/// The actor of every submission a bed makes: the REST API face, principal `test`.
pub fn user() -> Actor {
    Actor { face: Face::Api, principal: "test".into() }
}

/// Configures a [`Bed`]; from [`Bed::sim`].
#[derive(Clone)]
pub struct BedBuilder {
    dir: PathBuf,
    speed: f64,
    seed: u64,
    manual_clock: bool,
    persist_world: bool,
    in_memory_store: bool,
    helm: bool,
    renderer: Option<Arc<dyn WorkloadRenderer>>,
    workflows: Option<Workflows>,
    engine_config: Option<EngineConfig>,
    timeout: Duration,
    server_options: Option<SetServerOptions>,
    port: u16,
    /// The directory of [`Bed::temp`], removed with the last clone of the builder (the bed's).
    temp: Option<Arc<tempfile::TempDir>>,
}

impl BedBuilder {
    /// Simulated seconds per wall-clock second (default 2000); the engine's timers are scaled
    /// by it ([`EngineConfig::scaled`]) unless [`BedBuilder::engine_config`] says otherwise.
    pub fn speed(mut self, speed: f64) -> Self {
        self.speed = speed;
        self
    }

    /// The seed of a new world's random generator (default 7).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Simulated time moves only by [`Bed::advance`] ([`SimConfig::manual_clock`]).
    pub fn manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }

    /// Keeps the world in memory only (no `world.json`; a restart keeps the same world).
    pub fn world_in_memory(mut self) -> Self {
        self.persist_world = false;
        self
    }

    /// An in-memory SQLite store (a restart keeps the same store).
    pub fn store_in_memory(mut self) -> Self {
        self.in_memory_store = true;
        self
    }

    /// The simulator as the Helm runner, as the server has it: create-cluster installs the
    /// pinned charts.
    pub fn helm(mut self) -> Self {
        self.helm = true;
        self
    }

    /// The workload renderer (workload operations need one).
    pub fn renderer(mut self, renderer: Arc<dyn WorkloadRenderer>) -> Self {
        self.renderer = Some(renderer);
        self
    }

    /// Replaces `workflow::all` (and [`BedBuilder::helm`], [`BedBuilder::renderer`]) with `f`.
    pub fn workflows(
        mut self,
        f: impl Fn(&SimCloud, &Arc<dyn Store>) -> Vec<Arc<dyn Workflow>> + Send + Sync + 'static,
    ) -> Self {
        self.workflows = Some(Arc::new(f));
        self
    }

    /// The engine's timing (default: [`EngineConfig::scaled`] by the speed).
    pub fn engine_config(mut self, config: EngineConfig) -> Self {
        self.engine_config = Some(config);
        self
    }

    /// How long every wait of the bed lasts before it panics (default [`WAIT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What a served bed's server starts with, changed by `set` (after the kit's defaults: the
    /// simulated cloud at the bed's speed, admin token [`TOKEN`], default region [`REGION`]);
    /// kept for [`Bed::restart`].
    pub fn server_options(
        mut self,
        set: impl Fn(&mut instantstart_server::ServerOptions) + Send + Sync + 'static,
    ) -> Self {
        self.server_options = Some(Arc::new(set));
        self
    }

    /// A served bed listens on loopback `port` (default 0: any free one), retried for a few
    /// seconds while a port just released is still taken; a restart then serves on the same
    /// port again, as a restarted process does. Without it a restart takes a new port and the
    /// old one stops answering.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    fn sim_config(&self, file: &str) -> SimConfig {
        let mut config = SimConfig::with_speed(self.speed).seed(self.seed);
        if self.persist_world {
            config = config.state_file(self.dir.join(file));
        }
        if self.manual_clock {
            config = config.manual_clock();
        }
        config
    }

    fn open_store(&self) -> Arc<dyn Store> {
        if self.in_memory_store {
            return Arc::new(instantstart_store::SqliteStore::open_in_memory().expect("in-memory store"));
        }
        open_store(&self.dir)
    }

    fn engine(&self, sim: &SimCloud, store: &Arc<dyn Store>) -> Engine {
        let workflows = match &self.workflows {
            Some(f) => f(sim, store),
            None => {
                let helm: Option<Arc<dyn HelmReleases>> = self.helm.then(|| Arc::new(sim.clone()) as _);
                workflow::all_with_helm(
                    Arc::new(sim.clone()),
                    Arc::new(sim.clone()),
                    helm,
                    store.clone(),
                    self.renderer.clone(),
                )
            }
        };
        let config = self.engine_config.unwrap_or_else(|| EngineConfig::scaled(self.speed));
        Engine::new(store.clone(), workflows, config)
    }

    /// The simulated cloud, the store and the engine.
    pub fn build(self) -> Bed {
        let sim = SimCloud::new(self.sim_config("world.json")).expect("simulated cloud");
        let store = self.open_store();
        let engine = self.engine(&sim, &store);
        Bed { sim, store, engine, served: None, config: self }
    }

    /// [`BedBuilder::build`] assembled by the server (`AppState::assemble` on the directory,
    /// admin token [`TOKEN`], default region [`REGION`]) and served on a loopback port, with a
    /// client ([`Bed::client`]). The workflow options of the builder do not apply: the server
    /// has its own (Helm and the workload renderer included).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn serve(self) -> Bed {
        // The world the server opens is this one (one world per state file in a process).
        let sim = SimCloud::new(self.sim_config("sim-world.json")).expect("simulated cloud");
        let served = Served::start(&self);
        let (store, engine) = (served.state.store.clone(), served.state.engine.clone());
        Bed { sim, store, engine, served: Some(served), config: self }
    }
}

/// The store of a bed on `dir`: the PostgreSQL database named in `dir/store-url`, or SQLite in
/// `dir/db.sqlite`.
pub fn open_store(dir: &Path) -> Arc<dyn Store> {
    match std::fs::read_to_string(dir.join("store-url")) {
        Ok(url) => Arc::new(instantstart_store::PostgresStore::connect(url.trim()).expect("PostgreSQL store")),
        Err(_) => Arc::new(instantstart_store::SqliteStore::open(&dir.join("db.sqlite")).expect("SQLite store")),
    }
}

/// A loopback listener on `port` (0: any free one), retried while a port just released is
/// still taken.
fn bind(port: u16) -> std::net::TcpListener {
    let mut tries = 0;
    loop {
        match std::net::TcpListener::bind(("127.0.0.1", port)) {
            Ok(l) => return l,
            Err(e) if port != 0 && tries < 50 => {
                tries += 1;
                eprintln!("binding 127.0.0.1:{port}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("binding 127.0.0.1:{port}: {e}"),
        }
    }
}

/// The port of `http://127.0.0.1:<port>`.
fn served_port(url: &str) -> u16 {
    url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("http://127.0.0.1:<port>")
}

/// The HTTP side of a served bed.
struct Served {
    state: instantstart_server::AppState,
    url: String,
    client: instantstart_client::Client,
    stop: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    fn start(config: &BedBuilder) -> Served {
        let mut opts = instantstart_server::ServerOptions {
            data_dir: config.dir.clone(),
            provider: instantstart_server::ProviderKind::Sim,
            sim_speed: config.speed,
            default_region: REGION.into(),
            token: Some(TOKEN.into()),
            shared_bucket: None,
            unbound_tokens_any_namespace: false,
            admin_system_namespaces: vec![],
            eks_public_access_cidrs: vec![],
            http: Default::default(),
        };
        if let Some(set) = &config.server_options {
            set(&mut opts);
        }
        let state = instantstart_server::AppState::assemble(&opts).expect("server state").state;
        let listener = bind(config.port);
        listener.set_nonblocking(true).expect("non-blocking listener");
        let listener = tokio::net::TcpListener::from_std(listener).expect("listener in the runtime");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = instantstart_server::app(state.clone());
        let task = tokio::spawn(instantstart_server::serve(listener, app, async {
            let _ = stopped.await;
        }));
        let client = instantstart_client::Client::new(&url, Some(TOKEN.into()), Face::Api).expect("client");
        Served { state, url, client, stop: std::sync::Mutex::new(Some(stop)), task }
    }

    fn stop_http(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop_http();
        self.state.engine.abort_all();
    }
}

/// The simulated cloud, the store and the engine of one test (see the module docs).
pub struct Bed {
    pub sim: SimCloud,
    pub store: Arc<dyn Store>,
    pub engine: Engine,
    served: Option<Served>,
    config: BedBuilder,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.engine.abort_all();
    }
}

impl Bed {
    /// A bed on the data directory `dir` (the caller keeps the directory alive).
    pub fn sim(dir: impl AsRef<Path>) -> BedBuilder {
        BedBuilder {
            dir: dir.as_ref().to_path_buf(),
            speed: 2000.0,
            seed: 7,
            manual_clock: false,
            persist_world: true,
            in_memory_store: false,
            helm: false,
            renderer: None,
            workflows: None,
            engine_config: None,
            timeout: WAIT,
            server_options: None,
            port: 0,
            temp: None,
        }
    }

    /// A bed on a fresh temporary data directory that the bed owns (removed when it is
    /// dropped).
    pub fn temp() -> BedBuilder {
        let temp = tempfile::tempdir().expect("a temporary directory");
        let mut builder = Bed::sim(temp.path());
        builder.temp = Some(Arc::new(temp));
        builder
    }

    /// A bed with nothing on disk: the world and an SQLite store in memory (a restart keeps
    /// both). Not for [`BedBuilder::serve`], which needs a data directory.
    pub fn in_memory() -> BedBuilder {
        Bed::sim(std::env::temp_dir()).world_in_memory().store_in_memory()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.config.dir
    }

    /// The typed client of a served bed.
    ///
    /// # Panics
    /// When the bed was not built with [`BedBuilder::serve`].
    pub fn client(&self) -> &instantstart_client::Client {
        &self.served.as_ref().expect("a served bed (BedBuilder::serve)").client
    }

    /// The base URL (`http://127.0.0.1:<port>`) of a served bed.
    pub fn url(&self) -> &str {
        &self.served.as_ref().expect("a served bed (BedBuilder::serve)").url
    }

    /// The loopback port of a served bed.
    pub fn port(&self) -> u16 {
        served_port(self.url())
    }

    /// The server's state of a served bed.
    pub fn state(&self) -> &instantstart_server::AppState {
        &self.served.as_ref().expect("a served bed (BedBuilder::serve)").state
    }

    /// Kill -9: stops every driver without touching the stored phases ([`Engine::halt`]: once
    /// it returns, nothing of the old engine runs) and stops the server.
    pub async fn kill(&self) {
        if let Some(served) = &self.served {
            served.stop_http();
        }
        self.engine.halt().await;
    }

    /// [`Bed::kill`], then a fresh engine (and server) on the same store and world (the world
    /// file is re-attached with its injected faults cleared, as a restarted simulator has
    /// none). Nothing is resumed: the test calls `engine.resume_all()`.
    ///
    /// A WebSocket the old server upgraded runs on a task of its own (axum's) and outlives
    /// it; a test of a client reconnecting after a crash drops the runtime the bed runs on
    /// instead, and serves a new bed on the same directory and [`BedBuilder::port`] (the CLI's
    /// tests do).
    pub async fn restart(&mut self) {
        self.kill().await;
        if let Some(served) = self.served.take() {
            let sim = SimCloud::new(self.config.sim_config("sim-world.json")).expect("simulated cloud");
            drop(served);
            let served = Served::start(&self.config);
            self.store = served.state.store.clone();
            self.engine = served.state.engine.clone();
            self.sim = sim;
            self.served = Some(served);
            return;
        }
        if self.config.persist_world {
            self.sim = SimCloud::new(self.config.sim_config("world.json")).expect("simulated cloud");
        } else {
            self.sim.set_faults(Default::default());
        }
        if !self.config.in_memory_store {
            self.store = self.config.open_store();
        }
        self.engine = self.config.engine(&self.sim, &self.store);
    }

    /// Records `kind` with `request` (no assessment: `Engine::submit`) and starts it.
    ///
    /// # Panics
    /// When the engine refuses the request.
    pub fn submit(&self, kind: OperationKind, request: &Value) -> Operation {
        match self.engine.submit(kind, request, user(), None) {
            Ok(s) => s.operation,
            Err(e) => panic!("submitting {kind:?} failed: {e}\nrequest: {request:#}"),
        }
    }

    /// Validates, assesses and records `kind` (`Engine::submit_checked`, the faces' path).
    ///
    /// # Panics
    /// When the engine refuses the request or finds nothing to change.
    pub async fn submit_checked(&self, kind: OperationKind, request: &Value) -> Submission {
        match self.engine.submit_checked(kind, request, user(), None).await {
            Ok(Outcome::Submitted(s)) => *s,
            Ok(other) => panic!("submitting {kind:?}: expected a change, got {other:?}"),
            Err(e) => panic!("submitting {kind:?} failed: {e}\nrequest: {request:#}"),
        }
    }

    /// [`Bed::submit`], then waits until the operation is no longer running.
    pub async fn run(&self, kind: OperationKind, request: &Value) -> Operation {
        let op = self.submit(kind, request);
        self.wait_done(&op.id).await
    }

    /// [`Bed::run`], asserting that the operation succeeded.
    pub async fn run_ok(&self, kind: OperationKind, request: &Value) -> Operation {
        let op = self.run(kind, request).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{kind:?} did not succeed: {}", summary(&op));
        op
    }

    /// Waits until operation `id` is no longer running.
    pub async fn wait_done(&self, id: &OperationId) -> Operation {
        self.wait_for(id, "to finish", |op| op.status.is_terminal()).await
    }

    /// Waits until `predicate` holds for operation `id` (`what` says what it waits for, in the
    /// panic message); returns the operation as it was then.
    ///
    /// # Panics
    /// On timeout, with the operation's status and steps; when the operation does not exist.
    pub async fn wait_for(&self, id: &OperationId, what: &str, predicate: impl Fn(&Operation) -> bool) -> Operation {
        let mut events = self.engine.subscribe();
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        loop {
            let op = match self.engine.get(id) {
                Ok(op) => op,
                Err(e) => panic!("operation {id}: {e}"),
            };
            if predicate(&op) {
                return op;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("operation {id} {what}: not within {:?}\n{}", self.config.timeout, summary(&op));
            }
            // Any change (or a lag, or 50 ms) re-reads the store.
            let _ = tokio::time::timeout(Duration::from_millis(50), events.recv()).await;
        }
    }

    /// Waits until `check` answers true (state other than an operation's: the world, a read
    /// model); `what` names it in the panic message.
    ///
    /// # Panics
    /// When `check` is still false after the bed's timeout.
    pub async fn wait_until<F, Fut>(&self, what: &str, check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        wait_until(self.config.timeout, what, check).await
    }

    /// Moves simulated time forward by `by` (at once; with [`BedBuilder::manual_clock`] the
    /// only way it moves).
    pub fn advance(&self, by: Duration) {
        self.sim.advance(by);
    }

    /// On a manual clock ([`BedBuilder::manual_clock`], `SimCloud::set_manual_clock`): checks
    /// `predicate` on operation `id` after every change of the operation, and moves simulated
    /// time by `step` only when the engine has been quiet (no change for 20 ms). Simulated
    /// time so follows the engine's pace instead of the wall clock's: on a loaded machine a
    /// state lasting longer than `step` of simulated time (a resource being polled) is not
    /// skipped because the engine was slow to get to it.
    ///
    /// # Panics
    /// On timeout (the bed's), with the operation's steps; when the clock is not manual.
    pub async fn advance_until(
        &self,
        id: &OperationId,
        what: &str,
        step: Duration,
        predicate: impl Fn(&Operation) -> bool,
    ) -> Operation {
        assert!(self.sim.manual_clock(), "advance_until needs a manual clock (BedBuilder::manual_clock)");
        let mut events = self.engine.subscribe();
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        loop {
            let op = match self.engine.get(id) {
                Ok(op) => op,
                Err(e) => panic!("operation {id}: {e}"),
            };
            if predicate(&op) {
                return op;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("operation {id} {what}: not within {:?}\n{}", self.config.timeout, summary(&op));
            }
            if tokio::time::timeout(Duration::from_millis(20), events.recv()).await.is_err() {
                self.sim.advance(step);
            }
        }
    }
}

/// Polls `check` (every 5 ms) until it answers true.
///
/// # Panics
/// When it is still false after `timeout`, naming `what`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "waited {timeout:?} for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// [`wait_until`] for a test without a runtime (a server process driven over blocking
/// sockets): calls `check` (every 10 ms) until it answers `Ok`, and returns that. `Err` says
/// what is still missing.
///
/// # Panics
/// When `check` still answers `Err` after `timeout`, with its last answer.
pub fn wait_blocking<T>(timeout: Duration, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match check() {
            Ok(v) => return v,
            Err(e) if std::time::Instant::now() >= deadline => panic!("waited {timeout:?}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// One line per step (key, phase, attempts, error) under the operation's status and error.
pub fn summary(op: &Operation) -> String {
    let mut out = format!("{} {:?} {:?}", op.id, op.kind, op.status);
    if let Some(e) = &op.error {
        out.push_str(&format!(" error: {e}"));
    }
    for s in &op.steps {
        out.push_str(&format!("\n  {} {:?} attempts={}", s.key, s.phase, s.attempts));
        if let Some(e) = &s.error {
            out.push_str(&format!(" error: {e}"));
        }
    }
    out
}
