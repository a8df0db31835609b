//! [`SimCloud`]: configuration, the simulated clock, the pipeline every call goes through
//! (count → fault injection → act → persist), persistence of the world, and helpers that seed
//! the world (training plans, quotas, pre-existing VPCs, EKS clusters and buckets).
//!
//! # Shared worlds
//! With [`SimConfig::world_store`] the world lives in a [`WorldStore`] several processes share
//! (replicas on one PostgreSQL database). Every call of the pipeline (and every seeding helper)
//! then runs as: lock the stored world → adopt it if its version moved (else keep the cached
//! copy) → act → write it back when it changed (mutations at once, reads' counters at most every
//! [`READ_SAVE_INTERVAL`]) → unlock. Other reads of the world refresh the cache without locking.
//! The simulated clock is one for every replica: the world stores an anchor (simulated time
//! `sim_now` at store time `saved_at`, and the speed), every replica computes
//! `sim_now + (store clock − saved_at) × speed` on the store's clock, and a write moves the
//! anchor forward; so time advances once however many replicas run, and no replica ticks it.
//! A mutation whose write-back fails is reported as a transient error and dropped from the
//! cache (the next call reloads the stored world): the stored world never holds half a call.

use crate::base::{Cx, rkey};
use crate::faults::{SimFaults, Verdict};
use crate::world::World;
use crate::world_store::{Snapshot, WorldLock, WorldStore, WorldStoreError};
use instantstart_core::instance_types::is_cluster_instance_type;
use instantstart_core::provider::{ProviderError, ProviderErrorKind, Result, TrainingPlan};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// How to run the simulated world.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Simulated seconds per wall-clock second: 1.0 = real AWS timings, 60 for demos, 1000+
    /// for tests.
    pub speed: f64,
    /// Where the world is persisted; `None` keeps it in memory only.
    pub state_file: Option<PathBuf>,
    /// AWS account id of a new world (a loaded world keeps its own).
    pub account: String,
    /// Seed of the random generator (ids, fault rolls) of a new world, for deterministic runs;
    /// `None` seeds from the OS. A loaded world continues its persisted generator.
    pub seed: Option<u64>,
    /// A world shared with other processes (see the module docs, "Shared worlds"); exclusive
    /// with `state_file`.
    pub world_store: Option<SharedWorld>,
    /// Simulated time stands still unless [`SimCloud::advance`] moves it (tests that need a
    /// state reached deterministically, not after some wall time); `speed` then only paces the
    /// simulated Kubernetes API's watch polls. Off by default (wall clock × `speed`); not
    /// available with `world_store`.
    pub manual_clock: bool,
}

/// A handle on a [`WorldStore`] in a [`SimConfig`] (equal when it is the same store).
#[derive(Clone, Debug)]
pub struct SharedWorld(pub Arc<dyn WorldStore>);

impl PartialEq for SharedWorld {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            speed: 1.0,
            state_file: None,
            account: "123456789012".into(),
            seed: None,
            world_store: None,
            manual_clock: false,
        }
    }
}

impl SimConfig {
    /// Default configuration at `speed`.
    pub fn with_speed(speed: f64) -> Self {
        SimConfig { speed, ..Default::default() }
    }

    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    pub fn account(mut self, account: impl Into<String>) -> Self {
        self.account = account.into();
        self
    }

    /// Time moves only by [`SimCloud::advance`] ([`SimConfig::manual_clock`]).
    pub fn manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }

    /// Keeps the world in `store`, shared with every process using the same store.
    pub fn world_store(mut self, store: Arc<dyn WorldStore>) -> Self {
        self.world_store = Some(SharedWorld(store));
        self
    }
}

/// Errors of the simulator itself (not of simulated API calls, which are `ProviderError`s).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid simulator configuration: {0}")]
    InvalidConfig(String),
    #[error("cannot read simulator state {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write simulator state {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("simulator state {path} is not valid: {source}")]
    Corrupt { path: PathBuf, source: serde_json::Error },
    #[error("simulator state {path} has format {found}; this build reads format {expected}")]
    UnsupportedFormat { path: PathBuf, found: u32, expected: u32 },
    #[error("cannot encode simulator state: {0}")]
    Encode(serde_json::Error),
    /// The shared world's store failed.
    #[error(transparent)]
    Store(#[from] WorldStoreError),
    /// A seeding helper was given something the simulated cloud rejects.
    #[error(transparent)]
    Rejected(#[from] ProviderError),
}

/// The simulated AWS account and the Kubernetes API of its EKS clusters. Cheap to clone; all
/// clones share one world.
#[derive(Clone)]
pub struct SimCloud {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCloud")
            .field("speed", &self.speed())
            .field("state_file", &self.inner.state_file)
            .field("world_store", &self.inner.shared)
            .finish_non_exhaustive()
    }
}

/// One simulated world. Every [`SimCloud`] of the same state file in a process shares it.
struct Inner {
    state_file: Option<PathBuf>,
    /// Where a shared world lives (then `state_file` is `None`).
    shared: Option<Arc<dyn WorldStore>>,
    state: Mutex<State>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        // A shared world's unsaved read counters are dropped (a write needs the store's lock).
        if st.dirty
            && let Err(e) = st.save(self.state_file.as_deref())
        {
            tracing::error!(error = %e, "simulator: saving the world on shutdown failed");
        }
    }
}

/// The worlds with a state file that are open in this process, by absolute path.
fn open_worlds() -> &'static Mutex<HashMap<PathBuf, Weak<Inner>>> {
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<Inner>>>> = OnceLock::new();
    OPEN.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Simulated time: `base_sim` plus wall time since `base` times `speed`, or `base_sim` alone
/// when `manual` (only [`SimCloud::advance`] moves it). Uses tokio's clock, so a paused test
/// runtime drives the simulation too.
struct Clock {
    base: Instant,
    base_sim: f64,
    speed: f64,
    manual: bool,
}

impl Clock {
    fn now(&self) -> f64 {
        if self.manual {
            return self.base_sim;
        }
        self.base_sim + self.base.elapsed().as_secs_f64() * self.speed
    }
}

pub(crate) struct State {
    pub world: World,
    faults: SimFaults,
    clock: Clock,
    /// Changed since the last save (only counters or the clock: mutations save at once).
    dirty: bool,
    last_save: Option<Instant>,
    /// Shared world: the stored version the cached `world` was loaded from or written as (0:
    /// none; the next call loads the stored world whole).
    version: u64,
    /// Shared world: the store's clock at `clock.base`.
    store_base: chrono::DateTime<chrono::Utc>,
}

/// Reads are saved at most this often (their only change is a counter).
const READ_SAVE_INTERVAL: Duration = Duration::from_secs(1);

impl State {
    pub fn now(&self) -> f64 {
        self.clock.now()
    }

    /// Brings the world to `now` (the tick), in this order: [`settle`] (finished deletions,
    /// workload outputs), then pending process faults and log-monitor detections into running
    /// training jobs, then HyperPod's managed Karpenter scales the groups it manages.
    pub fn advance_world(&mut self, now: f64) {
        settle(&mut self.world, now);
        crate::kube::inject_process_faults(&mut self.world, &mut self.faults, now);
        crate::kube::karpenter::reconcile(&mut self.world, now);
    }

    /// Restarts the clock from now at `speed` (simulated time so far is kept).
    fn rebase(&mut self, speed: f64) {
        let now = self.now();
        self.store_base += chrono::Duration::from_std(self.clock.base.elapsed()).unwrap_or_default();
        self.clock = Clock { base: Instant::now(), base_sim: now, speed, manual: self.clock.manual };
    }

    /// Shared world: takes the stored world when `snap` carries it, and re-anchors the clock
    /// on the store's clock (see the module docs); time never goes back in this process.
    fn adopt(&mut self, snap: Snapshot) -> Result<(), SimError> {
        if let Some(body) = snap.body {
            self.world = decode(&body, Path::new("sim_world (shared)"))?;
            self.version = snap.version;
            self.dirty = false;
        }
        let speed = self.world.speed.unwrap_or(self.clock.speed);
        let since = (snap.now - self.world.saved_at).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6;
        let derived = self.world.sim_now + since * speed;
        let base_sim = derived.max(self.clock.now());
        self.clock = Clock { base: Instant::now(), base_sim, speed, manual: self.clock.manual };
        self.store_base = snap.now;
        Ok(())
    }

    /// Shared world: the world encoded with its clock anchor.
    fn encode_shared(&mut self) -> Result<Vec<u8>, SimError> {
        self.world.sim_now = self.now();
        self.world.saved_at =
            self.store_base + chrono::Duration::from_std(self.clock.base.elapsed()).unwrap_or_default();
        self.world.speed = Some(self.clock.speed);
        serde_json::to_vec(&self.world).map_err(SimError::Encode)
    }

    fn save(&mut self, path: Option<&Path>) -> Result<(), SimError> {
        let Some(path) = path else {
            self.dirty = false;
            return Ok(());
        };
        self.world.sim_now = self.clock.now();
        self.world.saved_at = chrono::Utc::now();
        let bytes = serde_json::to_vec(&self.world).map_err(SimError::Encode)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, bytes).map_err(|source| SimError::Write { path: tmp.clone(), source })?;
        std::fs::rename(&tmp, path).map_err(|source| SimError::Write { path: path.to_path_buf(), source })?;
        self.dirty = false;
        self.last_save = Some(Instant::now());
        Ok(())
    }
}

/// The first step of every tick: the load balancer Services of an EKS cluster whose deletion
/// has completed outlive its controllers (they are left in the VPC), then the world drops what
/// is gone, then completed workloads write their outputs.
fn settle(world: &mut World, now: f64) {
    for key in world.gone_eks(now) {
        crate::kube::orphan_load_balancers(world, &key, now, false);
    }
    world.collect_gone(now);
    crate::kube::write_outputs(world, now);
}

impl SimCloud {
    /// Starts the simulated world: loads it from `config.state_file` if that file exists,
    /// otherwise creates a new account (and writes the file).
    pub fn new(config: SimConfig) -> Result<Self, SimError> {
        if !(config.speed.is_finite() && config.speed > 0.0) {
            return Err(SimError::InvalidConfig(format!("speed must be a positive number, got {}", config.speed)));
        }
        if config.account.len() != 12 || !config.account.chars().all(|c| c.is_ascii_digit()) {
            return Err(SimError::InvalidConfig(format!("account must be 12 digits, got {:?}", config.account)));
        }
        if let Some(SharedWorld(store)) = config.world_store.clone() {
            if config.manual_clock {
                return Err(SimError::InvalidConfig(
                    "a shared world runs on the store's clock, not a manual one".into(),
                ));
            }
            if config.state_file.is_some() {
                return Err(SimError::InvalidConfig("a world has a state file or a world store, not both".into()));
            }
            return Self::create_shared(config, store);
        }
        let Some(path) = &config.state_file else {
            return Self::create(config, None);
        };
        let path = std::path::absolute(path).map_err(|source| SimError::Read { path: path.clone(), source })?;
        let mut open = open_worlds().lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, w| w.strong_count() > 0);
        if let Some(inner) = open.get(&path).and_then(Weak::upgrade) {
            // The world is live in this process (an earlier instance, or calls it still has in
            // flight): attach to it, as a restarted control plane finds AWS as it is.
            let cloud = SimCloud { inner };
            {
                let mut st = cloud.lock();
                let now = st.now();
                st.clock =
                    Clock { base: Instant::now(), base_sim: now, speed: config.speed, manual: config.manual_clock };
                st.faults = SimFaults::default();
            }
            return Ok(cloud);
        }
        let cloud = Self::create(config, Some(path.clone()))?;
        open.insert(path, Arc::downgrade(&cloud.inner));
        Ok(cloud)
    }

    fn create(config: SimConfig, state_file: Option<PathBuf>) -> Result<Self, SimError> {
        let loaded = match &state_file {
            Some(path) if path.exists() => Some(load(path)?),
            _ => None,
        };
        let fresh = loaded.is_none();
        let (world, base_sim) = match loaded {
            Some(world) => {
                if world.account != config.account {
                    tracing::warn!(
                        stored = %world.account,
                        configured = %config.account,
                        "simulator: the state file belongs to another account; continuing with the stored one"
                    );
                }
                // Time went on while the process was down, as it does in AWS (not on a manual
                // clock: only `advance` moves it).
                let down = (chrono::Utc::now() - world.saved_at).num_milliseconds().max(0) as f64 / 1000.0;
                let base = if config.manual_clock { world.sim_now } else { world.sim_now + down * config.speed };
                (world, base)
            }
            None => (World::new(config.account.clone(), config.seed.unwrap_or_else(rand::random)), 0.0),
        };
        let mut state = State {
            world,
            faults: SimFaults::default(),
            clock: Clock { base: Instant::now(), base_sim, speed: config.speed, manual: config.manual_clock },
            dirty: false,
            last_save: None,
            version: 0,
            store_base: chrono::Utc::now(),
        };
        if fresh {
            state.save(state_file.as_deref())?;
        }
        Ok(SimCloud { inner: Arc::new(Inner { state_file, shared: None, state: Mutex::new(state) }) })
    }

    /// Attaches to the world in `store`, creating it (under the store's lock, so once) when
    /// the store holds none. A replica started with another speed sets the shared speed.
    fn create_shared(config: SimConfig, store: Arc<dyn WorldStore>) -> Result<Self, SimError> {
        let mut state = State {
            world: World::new(config.account.clone(), config.seed.unwrap_or_else(rand::random)),
            faults: SimFaults::default(),
            clock: Clock { base: Instant::now(), base_sim: 0.0, speed: config.speed, manual: false },
            dirty: false,
            last_save: None,
            version: 0,
            store_base: chrono::Utc::now(),
        };
        let (snap, lock) = store.lock(0)?;
        let fresh = snap.version == 0;
        if fresh {
            state.world.saved_at = snap.now;
            state.world.speed = Some(config.speed);
        } else if let Some(stored) = snap.body.as_deref().map(|b| decode(b, Path::new("sim_world (shared)"))) {
            state.world = stored?;
            state.version = snap.version;
        }
        state.adopt(Snapshot { body: None, ..snap })?;
        if !fresh && state.world.account != config.account {
            tracing::warn!(
                stored = %state.world.account,
                configured = %config.account,
                "simulator: the shared world belongs to another account; continuing with the stored one"
            );
        }
        let speed_changed = state.world.speed != Some(config.speed);
        if speed_changed && !fresh {
            tracing::warn!(
                stored = ?state.world.speed,
                configured = config.speed,
                "simulator: the shared world ran at another speed; every replica now runs at the configured one"
            );
            state.rebase(config.speed);
        }
        let body = if fresh || speed_changed { Some(state.encode_shared()?) } else { None };
        state.version = lock.commit(body)?;
        Ok(SimCloud { inner: Arc::new(Inner { state_file: None, shared: Some(store), state: Mutex::new(state) }) })
    }

    /// An in-memory world running at `speed`.
    pub fn in_memory(speed: f64) -> Result<Self, SimError> {
        Self::new(SimConfig::with_speed(speed))
    }

    /// Simulated seconds per wall-clock second.
    pub fn speed(&self) -> f64 {
        self.lock().clock.speed
    }

    /// Changes the speed from now on (simulated time so far is kept). Tests use it to create
    /// clusters fast and then watch workloads at a pace a poller can follow.
    pub fn set_speed(&self, speed: f64) -> Result<(), SimError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(SimError::InvalidConfig(format!("speed must be a positive number, got {speed}")));
        }
        let mut st = self.lock_local();
        let lock = self.begin(&mut st)?;
        st.rebase(speed);
        self.persist(&mut st, true, lock)
    }

    /// Switches the manual clock on or off from now on ([`SimConfig::manual_clock`]; simulated
    /// time so far is kept). Tests create a cluster at speed, then stop time to step through a
    /// state machine with [`SimCloud::advance`]. Refused for a shared world.
    pub fn set_manual_clock(&self, manual: bool) -> Result<(), SimError> {
        if self.inner.shared.is_some() {
            return Err(SimError::InvalidConfig("a shared world runs on the store's clock, not a manual one".into()));
        }
        let mut st = self.lock_local();
        let speed = st.clock.speed;
        st.rebase(speed);
        st.clock.manual = manual;
        st.dirty = true;
        Ok(())
    }

    /// Whether simulated time moves only by [`SimCloud::advance`].
    pub fn manual_clock(&self) -> bool {
        self.lock_local().clock.manual
    }

    /// Where the world is persisted, if anywhere.
    pub fn state_file(&self) -> Option<&Path> {
        self.inner.state_file.as_deref()
    }

    /// The simulated account id.
    pub fn account(&self) -> String {
        self.lock().world.account.clone()
    }

    /// The world, refreshed first from a shared world's store when it changed there (a store
    /// failure is logged and the cached world used).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        let mut st = self.lock_local();
        if let Some(store) = &self.inner.shared {
            let known = st.version;
            if let Err(e) = store.peek(known).map_err(SimError::from).and_then(|snap| st.adopt(snap)) {
                tracing::warn!(error = %e, "simulator: refreshing the shared world failed; using the cached one");
            }
        }
        st
    }

    /// The world as this process has it (no refresh).
    fn lock_local(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shared world: locks the stored world and adopts it (see the module docs); `None` for
    /// a world of this process.
    fn begin(&self, st: &mut State) -> Result<Option<Box<dyn WorldLock>>, SimError> {
        let Some(store) = &self.inner.shared else { return Ok(None) };
        let (snap, lock) = store.lock(st.version)?;
        if let Err(e) = st.adopt(snap) {
            st.version = 0;
            return Err(e);
        }
        Ok(Some(lock))
    }

    /// Seconds of simulated time since the world was created.
    pub fn sim_seconds(&self) -> f64 {
        self.lock().now()
    }

    /// The simulated wall-clock time (the world's creation time plus simulated seconds).
    pub fn sim_time(&self) -> chrono::DateTime<chrono::Utc> {
        let st = self.lock();
        st.world.display_time(st.now())
    }

    /// Moves simulated time forward by `by` at once (on top of the running clock). Tests use it
    /// to reach a state deterministically.
    pub fn advance(&self, by: Duration) {
        let mut st = self.lock_local();
        let lock = match self.begin(&mut st) {
            Ok(lock) => lock,
            Err(e) => {
                tracing::error!(error = %e, "simulator: advancing the shared clock failed");
                return;
            }
        };
        st.clock.base_sim += by.as_secs_f64();
        st.dirty = true;
        if let Err(e) = self.persist(&mut st, lock.is_some(), lock) {
            tracing::error!(error = %e, "simulator: advancing the shared clock failed");
        }
    }

    /// Replaces the injected faults (not persisted: a restarted simulator has none).
    pub fn set_faults(&self, faults: SimFaults) {
        let mut st = self.lock_local();
        let lock = self.begin(&mut st).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "simulator: locking the shared world failed; faults set on the cached one");
            None
        });
        st.faults = faults;
        let now = st.now();
        st.advance_world(now);
        if let Err(e) = self.persist(&mut st, true, lock) {
            tracing::error!(error = %e, "simulator: saving the world failed");
        }
    }

    /// The faults currently injected (one-shot modes disappear once used).
    pub fn faults(&self) -> SimFaults {
        self.lock().faults.clone()
    }

    /// Calls per API name that reached the simulated service (succeeded, or were refused by
    /// the service itself, e.g. `AlreadyExists`), since the world was created or since
    /// [`SimCloud::reset_stats`]. Calls rejected by an injected fault (throttling, 5xx, `Fail`,
    /// `FailOnce`) did nothing and are counted in [`SimCloud::injected_faults`] instead; a
    /// `LostResponse` call acted and is counted in both. So "exactly one create per resource"
    /// can be asserted under fault injection.
    pub fn stats(&self) -> BTreeMap<String, u64> {
        self.lock().world.counters.clone()
    }

    /// The impersonated Kubernetes calls of EKS cluster `eks_cluster` in `region`, oldest first:
    /// who (the impersonated user), what, and whether RBAC allowed it (`kube::rbac`).
    pub fn kube_audit(&self, region: &str, eks_cluster: &str) -> Vec<crate::kube::KubeAuditEvent> {
        self.lock()
            .world
            .kube
            .get(&crate::base::rkey(region, eks_cluster))
            .map(|kw| kw.audit.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Injected faults per API name (any mode, throttling and 5xx included).
    pub fn injected_faults(&self) -> BTreeMap<String, u64> {
        self.lock().world.injected.clone()
    }

    /// Calls of one API.
    pub fn calls(&self, api: &str) -> u64 {
        self.lock().world.counters.get(api).copied().unwrap_or(0)
    }

    pub fn reset_stats(&self) {
        let mut st = self.lock_local();
        let lock = self.begin(&mut st).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "simulator: locking the shared world failed; counters reset in the cache only");
            None
        });
        st.world.counters.clear();
        st.world.injected.clear();
        st.dirty = true;
        if let Err(e) = self.persist(&mut st, true, lock) {
            tracing::error!(error = %e, "simulator: saving the world failed");
        }
    }

    /// Saves the world now (normally done after every mutation, and for reads at most once a
    /// second and on drop).
    pub fn flush(&self) -> Result<(), SimError> {
        let mut st = self.lock_local();
        match self.begin(&mut st)? {
            Some(lock) => {
                st.dirty = true;
                self.persist(&mut st, true, Some(lock))
            }
            None => st.save(self.inner.state_file.as_deref()),
        }
    }

    /// Sets the HyperPod "for cluster usage" quota of `instance_type` in `region`, as a quota
    /// increase would.
    pub fn set_quota(&self, region: &str, instance_type: &str, value: u32) -> Result<(), SimError> {
        if !is_cluster_instance_type(instance_type) {
            return Err(SimError::Rejected(ProviderError::new(
                "servicequotas:RequestServiceQuotaIncrease",
                ProviderErrorKind::InvalidRequest,
                format!("unknown HyperPod instance type {instance_type}"),
            )));
        }
        self.admin(|w, _| {
            w.quotas.insert(rkey(region, instance_type), value);
            Ok(())
        })
    }

    /// Sets an FSx for Lustre quota of `region`, as a quota increase (or a lower account limit)
    /// would.
    pub fn set_lustre_quota(
        &self,
        region: &str,
        quota: instantstart_core::provider::LustreQuota,
        value: u32,
    ) -> Result<(), SimError> {
        self.admin(|w, _| {
            w.quotas.insert(rkey(region, quota.code()), value);
            Ok(())
        })
    }

    /// Adds an Active SageMaker training plan reserving `instance_count` × `instance_type` in
    /// `availability_zone` of `region`, and returns it (its ARN names it in requests).
    pub fn add_training_plan(
        &self,
        region: &str,
        name: &str,
        instance_type: &str,
        instance_count: u32,
        availability_zone: &str,
    ) -> Result<TrainingPlan, SimError> {
        const API: &str = "sagemaker:CreateTrainingPlan";
        let invalid = |m: String| SimError::Rejected(ProviderError::new(API, ProviderErrorKind::InvalidRequest, m));
        if !is_cluster_instance_type(instance_type) {
            return Err(invalid(format!("unknown HyperPod instance type {instance_type}")));
        }
        if crate::catalog::zone_index(region, availability_zone).is_none() {
            return Err(invalid(format!("{availability_zone} is not an Availability Zone of {region}")));
        }
        self.admin(|w, _| {
            let arn = format!("arn:aws:sagemaker:{region}:{}:training-plan/{name}", w.account);
            if w.training_plans.contains_key(&arn) {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("training plan {name} already exists"),
                )
                .into());
            }
            let plan = TrainingPlan {
                arn: arn.clone(),
                status: "Active".into(),
                availability_zone: availability_zone.into(),
                instance_type: instance_type.into(),
                instance_count,
            };
            w.training_plans.insert(arn, plan.clone());
            Ok(plan)
        })
    }

    /// Changes a training plan's status (e.g. `Expired`).
    pub fn set_training_plan_status(&self, arn: &str, status: &str) -> Result<(), SimError> {
        self.admin(|w, _| match w.training_plans.get_mut(arn) {
            Some(p) => {
                p.status = status.into();
                Ok(())
            }
            None => {
                Err(ProviderError::not_found("sagemaker:UpdateTrainingPlan", format!("no training plan {arn}")).into())
            }
        })
    }

    /// Runs `f` on the world outside the API pipeline (no counter, no fault) and saves.
    pub(crate) fn admin<T>(&self, f: impl FnOnce(&mut World, f64) -> Result<T, SimError>) -> Result<T, SimError> {
        let mut st = self.lock_local();
        let lock = self.begin(&mut st)?;
        let now = st.now();
        settle(&mut st.world, now);
        let out = f(&mut st.world, now);
        if out.is_err() {
            // A refusal changed nothing worth keeping; release the shared world as it is.
            self.persist(&mut st, false, lock)?;
            return out;
        }
        match lock {
            Some(lock) => self.persist(&mut st, true, Some(lock))?,
            None => st.save(self.inner.state_file.as_deref())?,
        }
        out
    }

    /// Runs a read-only call of `api` through the pipeline.
    pub(crate) fn read<T>(&self, api: &str, f: impl FnOnce(&World, &Cx) -> Result<T>) -> Result<T> {
        self.call(api, false, |w, cx| f(w, cx))
    }

    /// Runs a read-only call of `api` that records something on the side (an audit event)
    /// through the pipeline; the world is not saved at once, as for any read.
    pub(crate) fn read_recording<T>(&self, api: &str, f: impl FnOnce(&mut World, &Cx) -> Result<T>) -> Result<T> {
        self.call(api, false, f)
    }

    /// Runs a mutating call of `api` through the pipeline; the world is saved when it succeeds.
    pub(crate) fn write<T>(&self, api: &str, f: impl FnOnce(&mut World, &Cx) -> Result<T>) -> Result<T> {
        self.call(api, true, f)
    }

    /// The pipeline: settle deletions, count the call, inject faults, act, persist.
    fn call<T>(&self, api: &str, mutation: bool, f: impl FnOnce(&mut World, &Cx) -> Result<T>) -> Result<T> {
        let mut st = self.lock_local();
        let lock = self.begin(&mut st).map_err(|e| unavailable(api, &e))?;
        let now = st.now();
        st.advance_world(now);
        let verdict = {
            let State { world, faults, .. } = &mut *st;
            faults.decide(api, || world.roll())
        };
        if verdict != Verdict::Proceed {
            *st.world.injected.entry(api.to_string()).or_insert(0) += 1;
        }
        let (resource_fails, lose_response) = match verdict {
            Verdict::Reject(kind, message) => {
                if let Err(e) = self.persist(&mut st, false, lock) {
                    tracing::warn!(error = %e, "simulator: saving the world failed");
                }
                return Err(ProviderError::new(api, kind, message));
            }
            Verdict::LoseResponse => (None, true),
            Verdict::ResourceFails(reason) => (Some(reason), false),
            Verdict::Proceed => (None, false),
        };
        // Only calls that reach the service count (a rejected-by-fault call did nothing).
        st.world.count(api);
        let cx = Cx { now, resource_fails };
        let result = f(&mut st.world, &cx);
        let wrote = mutation && result.is_ok();
        if let Err(e) = self.persist(&mut st, wrote, lock) {
            if wrote {
                // Not stored, so not done: the cache was dropped (`persist`), as was the call.
                return Err(unavailable(api, &e));
            }
            tracing::warn!(error = %e, "simulator: saving the world failed");
        }
        match result {
            Ok(_) if lose_response => Err(ProviderError::new(
                api,
                ProviderErrorKind::Transient,
                "RequestTimeout: no response from the service (simulated lost response); the request may have been applied",
            )),
            other => other,
        }
    }

    /// Saves now after a mutation; after a read only marks the world dirty and saves at most
    /// every [`READ_SAVE_INTERVAL`]. A shared world is written back (when due) and its `lock`
    /// released; when that fails the cache is dropped (the next call reloads the stored world)
    /// and the error returned. A state file that cannot be written is logged: the world lives
    /// on in memory.
    fn persist(&self, st: &mut State, mutation: bool, lock: Option<Box<dyn WorldLock>>) -> Result<(), SimError> {
        if let Some(lock) = lock {
            st.dirty = true;
            let due = mutation || st.last_save.is_none_or(|t| t.elapsed() >= READ_SAVE_INTERVAL);
            let body = if due { Some(st.encode_shared()?) } else { None };
            return match lock.commit(body) {
                Ok(version) => {
                    st.version = version;
                    if due {
                        st.dirty = false;
                        st.last_save = Some(Instant::now());
                    }
                    Ok(())
                }
                Err(e) => {
                    st.version = 0;
                    Err(e.into())
                }
            };
        }
        let path = self.inner.state_file.as_deref();
        if path.is_none() {
            return Ok(());
        }
        st.dirty = true;
        let due = mutation || st.last_save.is_none_or(|t| t.elapsed() >= READ_SAVE_INTERVAL);
        if due && let Err(e) = st.save(path) {
            tracing::error!(error = %e, "simulator: saving the world failed; it lives on in memory");
        }
        Ok(())
    }
}

/// The transient error of a call the shared world's store could not serve (nothing happened).
fn unavailable(api: &str, e: &SimError) -> ProviderError {
    ProviderError::new(
        api,
        ProviderErrorKind::Transient,
        format!("ServiceUnavailable: simulated world unavailable: {e}"),
    )
}

fn load(path: &Path) -> Result<World, SimError> {
    let bytes = std::fs::read(path).map_err(|source| SimError::Read { path: path.to_path_buf(), source })?;
    decode(&bytes, path)
}

/// Decodes a world saved by [`State::save`] or [`State::encode_shared`]; `path` names it in
/// errors.
fn decode(bytes: &[u8], path: &Path) -> Result<World, SimError> {
    let probe: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|source| SimError::Corrupt { path: path.to_path_buf(), source })?;
    let found = probe.get("format").and_then(serde_json::Value::as_u64).unwrap_or(0) as u32;
    if found != crate::world::FORMAT_VERSION {
        return Err(SimError::UnsupportedFormat {
            path: path.to_path_buf(),
            found,
            expected: crate::world::FORMAT_VERSION,
        });
    }
    serde_json::from_value(probe).map_err(|source| SimError::Corrupt { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speed_changes_from_now_on() {
        let s = SimCloud::in_memory(1.0).unwrap();
        s.advance(Duration::from_secs(100));
        let before = s.sim_seconds();
        s.set_speed(1e6).unwrap();
        assert_eq!(s.speed(), 1e6);
        assert!(s.sim_seconds() >= before, "time never goes back");
        std::thread::sleep(Duration::from_millis(10));
        assert!(s.sim_seconds() >= before + 9_000.0, "{}", s.sim_seconds());
        assert!(matches!(s.set_speed(0.0), Err(SimError::InvalidConfig(_))));
        assert!(matches!(s.set_speed(f64::NAN), Err(SimError::InvalidConfig(_))));
    }

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let dir = std::env::temp_dir().join(format!("sim-manual-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("world.json");
        let _ = std::fs::remove_file(&file);
        let s = SimCloud::new(SimConfig::with_speed(1e6).state_file(&file).manual_clock()).unwrap();
        assert!(s.manual_clock());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.sim_seconds(), 0.0, "wall time does not move a manual clock");
        s.advance(Duration::from_secs(90));
        assert_eq!(s.sim_seconds(), 90.0);
        // Back to wall clock x speed from here, and stopped again: time so far is kept.
        s.set_manual_clock(false).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        s.set_manual_clock(true).unwrap();
        let stopped = s.sim_seconds();
        assert!(stopped >= 90.0 + 4_000.0, "{stopped}");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.sim_seconds(), stopped);
        drop(s);
        // A world reloaded on a manual clock does not count the time it was down.
        let again = SimCloud::new(SimConfig::with_speed(1e6).state_file(&file).manual_clock()).unwrap();
        assert_eq!(again.sim_seconds(), stopped);
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
        // The default is the wall clock.
        assert!(!SimCloud::in_memory(1.0).unwrap().manual_clock());
    }
}
