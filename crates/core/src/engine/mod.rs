//! The durable operation engine.
//!
//! An operation is a DAG of steps produced by a [`Workflow`]. The engine runs every step whose
//! dependencies have succeeded, concurrently, and drives each one through its phases with a
//! [`StepExecutor`]:
//!
//! 1. persist `submitting` (attempt, start time) — **before** any provider call;
//! 2. `observe`: look for the resource by its deterministic name / token and our ownership tag;
//!    adopt it if it is ours, stop with `needs_attention` if a same-named resource is not ours;
//! 3. otherwise `submit` the mutation with the step's persisted idempotency token;
//! 4. persist `submitted` with the resource reference, right after the call returns;
//! 5. persist `polling`, then poll with adaptive backoff until the resource is ready
//!    (`succeeded`, outputs recorded) or the provider reports a terminal failure (`failed`, with
//!    the provider's reason); a poll that finds its effect undone on purpose (a failed resource
//!    deleted to be replaced, [`Progress::Resubmit`]) goes back to step 1's `submitting`
//!    within the same attempt.
//!
//! # Guarantees
//! - A step found in `submitting` after a crash observes before it submits again; a step in
//!   `submitted`/`polling` only polls. Retrying a failed step goes through observe as well.
//!   Hence a retry, a restart or a transient error never replays a mutation that took effect.
//! - One running operation per target (enforced by the store); a second gets a conflict.
//! - The same idempotency key with the same request returns the existing operation.
//! - A driver that stops on an error (the store failing) records the operation as `failed`,
//!   with the steps that were under way failed and retryable; it is never left `running` with
//!   nothing driving it (unless the store stays down, and then it resumes at the next start).
//!
//! - One driver per operation across replicas sharing a store: a driver first acquires the
//!   operation's lease ([`crate::store::Lease`]), renews it every quarter of
//!   [`EngineConfig::lease_ttl`] and before every submission, and writes every phase with its
//!   fencing token. When a write or renewal is fenced, or the lease may have lapsed by the
//!   local clock (checked before every provider call, and again between a step's observation
//!   and its create, so a driver stalled past the TTL during `observe` does not create on an
//!   answer the new owner has made stale), the driver stops at once and records nothing more. [`Engine::start_lease_sweep`] resumes operations whose lease lapsed; taking
//!   over another replica's lapsed lease is recorded in the audit log (`operation.takeover`,
//!   both replicas and tokens) and publishes the operation's state again, so a follower sees a
//!   phase the stopped driver wrote but did not publish.
//!
//! # Caveats
//! - Cancelling stops the operation between provider calls; it does not roll back what was
//!   created (a delete operation does that). Cancelling on a replica that does not drive the
//!   operation marks it cancelled in the store; the driving replica stops at its next fenced
//!   write or renewal.
//! - No client can fence a call already on its way: a driver stopped after its last lease check
//!   and before its create reached the provider sends that create when it resumes, after the
//!   new owner made the resource. AWS refuses it (the name exists, or the step's client token
//!   returns the first resource), so nothing is created twice, but the call is made.

mod backoff;
pub mod reads;

pub use backoff::{Backoff, DEFAULT_LEASE_TTL, EngineConfig};

use crate::diff::Plan;
use crate::operation::{
    Actor, AuditEntry, NewOperation, Operation, OperationId, OperationKind, OperationStatus, ResourceRef, Step,
    StepPhase, StepSpec, StepUpdate, request_hash,
};
use crate::preflight::{self, PreflightCheck};
use crate::provider::ProviderError;
use crate::store::{Inserted, Lease, Store, StoreError};
use crate::validate::ValidationError;
use async_trait::async_trait;
use chrono::Utc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;

/// What a step executor sees: its identity, the request and the outputs of finished steps.
#[derive(Debug, Clone)]
pub struct StepContext<'a> {
    pub operation_id: &'a OperationId,
    pub step_key: &'a str,
    /// Persisted when the operation was created; the same on every attempt.
    pub idempotency_token: &'a str,
    /// The attempt this is (1 for the first; a step retry starts the next), persisted before
    /// any provider call of the attempt. A step that must send a fresh token to replace a
    /// resource that failed derives it from `idempotency_token` and this.
    pub attempt: u32,
    pub request: &'a Value,
    /// Outputs of the operation's succeeded steps, by step key.
    pub inputs: &'a BTreeMap<String, Value>,
}

impl StepContext<'_> {
    /// A string output of a finished step.
    pub fn input_str(&self, step: &str, field: &str) -> Result<String, StepError> {
        self.inputs
            .get(step)
            .and_then(|o| o.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| StepError::MissingInput(format!("{step}.{field}")))
    }

    /// An output of a finished step, deserialized.
    pub fn input<T: serde::de::DeserializeOwned>(&self, step: &str, field: &str) -> Result<T, StepError> {
        let v = self
            .inputs
            .get(step)
            .and_then(|o| o.get(field))
            .ok_or_else(|| StepError::MissingInput(format!("{step}.{field}")))?;
        serde_json::from_value(v.clone()).map_err(|e| StepError::MissingInput(format!("{step}.{field}: {e}")))
    }
}

/// What `observe` found: is the step's effect already in place?
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// The effect is not in place: submit.
    Absent,
    /// The effect is in place (our resource exists, or for a deletion, the deletion is done or
    /// under way): adopt it, do not submit.
    Exists(ResourceRef),
    /// A same-named resource exists that is not ours: stop and ask.
    Foreign { reason: String },
}

/// What `poll` found.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Ready; outputs are handed to dependent steps.
    Done(Value),
    /// Still converging; `detail` is shown as progress.
    Waiting { detail: String },
    /// Terminal failure, with the provider's reason.
    Failed { reason: String },
    /// The effect is undone — the step removed a failed resource to replace it — so the step
    /// goes back to `submitting` (persisted first) and observes and submits again within the
    /// same attempt. At most `EngineConfig::max_retries` times per run of the step.
    Resubmit { detail: String },
}

/// Why a step call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The step cannot proceed; not retryable without a change.
    #[error("{0}")]
    Invalid(String),
    #[error("missing input {0}")]
    MissingInput(String),
}

impl StepError {
    fn is_retryable(&self) -> bool {
        matches!(self, StepError::Provider(e) if e.is_retryable())
    }
}

/// The retry budget of one run of a step's `submitting` phase (observe, then submit).
///
/// An attempt makes several provider calls (an add-on step reads the add-on twice and creates
/// it), and a retryable failure of any of them starts the attempt over. A budget counted in
/// attempts therefore shrinks with every call a step makes: under 30% throttling and 10% 5xx
/// on every call (`cargo xtask chaos`) three calls succeed together 22% of the time, and 24
/// attempts in a row all failed about once in 450 runs of such a step — a pipeline of twenty
/// steps lost one of them every few runs. What the budget is for is a call that keeps failing,
/// so it counts failures **per API**: a step gives up when one API (e.g. `eks:DescribeAddon`)
/// has failed `max_retries` times in this run of the phase, and in any case after
/// [`SUBMIT_RETRY_CEILING`] × `max_retries` retries in all.
#[derive(Debug)]
struct SubmitRetries {
    per_api: u32,
    total: u32,
    failures: BTreeMap<String, u32>,
}

/// Bound on all retries of one run of the `submitting` phase, in multiples of `max_retries`.
const SUBMIT_RETRY_CEILING: u32 = 4;

impl SubmitRetries {
    fn new(max_retries: u32) -> Self {
        SubmitRetries { per_api: max_retries, total: 0, failures: BTreeMap::new() }
    }

    /// Counts the retryable failure `e`; whether the step may try again.
    fn allows(&mut self, e: &StepError) -> bool {
        let StepError::Provider(p) = e else { return false };
        let failures = self.failures.entry(p.api.clone()).or_default();
        if *failures >= self.per_api || self.total >= self.per_api.saturating_mul(SUBMIT_RETRY_CEILING) {
            return false;
        }
        *failures += 1;
        self.total += 1;
        true
    }
}

/// Executes one kind of step. Every method must be safe to call repeatedly.
#[async_trait]
pub trait StepExecutor: Send + Sync {
    /// Looks for the step's resource (read-only).
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError>;
    /// Performs the mutation. Called only after `observe` returned `Absent`.
    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError>;
    /// Checks the submitted resource's status (read-only).
    async fn poll(&self, cx: &StepContext<'_>, resource: &ResourceRef) -> Result<Progress, StepError>;
}

/// A validated request, ready to become an operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Prepared {
    pub target: String,
    /// The request in canonical form (defaults filled in).
    pub request: Value,
    pub steps: Vec<StepSpec>,
}

/// What a workflow learns from the real state before an operation is recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    /// The explicit diff against the real state; an empty plan means "already in this state":
    /// no operation is recorded and nothing is called. `None` for workflows without a diff.
    pub plan: Option<Plan>,
    /// Preflight checks; a failed one rejects the request (422) before anything is recorded.
    pub checks: Vec<PreflightCheck>,
    /// The request reduced to what actually changes (re-prepared before recording).
    pub reduced_request: Option<Value>,
}

/// A kind of operation: validates requests, lays out the step DAG, and provides executors.
#[async_trait]
pub trait Workflow: Send + Sync {
    fn kind(&self) -> OperationKind;
    /// Validates `request` against the rules and the current state; returns the step DAG.
    /// Performs no mutation (this is also the dry run).
    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError>;
    /// The executor of step `key` for `request` (the stored, prepared request).
    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>>;
    /// Called once when a new operation of this kind was recorded (e.g. register the cluster).
    fn on_recorded(&self, _op: &Operation) -> Result<(), EngineError> {
        Ok(())
    }
    /// Reads the real state (read-only provider calls): the explicit diff and preflight checks.
    async fn assess(&self, _prepared: &Prepared) -> Result<Assessment, EngineError> {
        Ok(Assessment::default())
    }
}

/// Result of [`Engine::submit_checked`].
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// An operation was recorded and started (or replayed from its idempotency key).
    Submitted(Box<Submission>),
    /// The real state already matches: nothing recorded, nothing called.
    NoChange(Plan),
}

/// Result of [`Engine::dry_run_checked`]: the steps, the diff and the preflight checks.
#[derive(Debug, Clone, PartialEq)]
pub struct DryRun {
    pub prepared: Prepared,
    pub plan: Option<Plan>,
    pub checks: Vec<PreflightCheck>,
}

/// Errors of the engine API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no workflow for operation kind {0:?}")]
    UnknownKind(OperationKind),
    #[error("operation {0} not found")]
    NotFound(OperationId),
    #[error("no cluster named {0}")]
    UnknownCluster(String),
    /// Something the request names does not exist (HTTP 404).
    #[error("{0} not found")]
    Missing(String),
    #[error("step {step} of operation {operation} not found")]
    StepNotFound { operation: OperationId, step: String },
    /// The request is valid but the state does not allow it (HTTP 409).
    #[error("{0}")]
    InvalidState(String),
    /// The caller may not do this (HTTP 403), e.g. a namespace outside its token's Kubernetes
    /// binding; the message starts with the field (`namespace: …`).
    #[error("{0}")]
    Forbidden(String),
    /// Reading the real state failed (assessment or preflight).
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// A phase change, broadcast to live followers (WebSocket/SSE, CLI `--wait`, MCP progress).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperationEvent {
    pub operation_id: OperationId,
    pub target: String,
    pub status: OperationStatus,
    /// The step that changed, if the event is about a step.
    pub step: Option<String>,
    pub phase: Option<StepPhase>,
    pub detail: Option<String>,
    pub at: chrono::DateTime<Utc>,
    /// The whole operation right after the change, read once by the engine and shared by every
    /// follower (with its JSON, serialized once): followers need no store read per change.
    /// Not serialized; `None` only for events built elsewhere.
    #[serde(skip)]
    pub snapshot: Option<Arc<OperationSnapshot>>,
}

/// An operation as it was right after a change, with its JSON computed at most once.
#[derive(Debug)]
pub struct OperationSnapshot {
    pub operation: Operation,
    json: std::sync::OnceLock<Arc<str>>,
}

impl OperationSnapshot {
    pub fn new(operation: Operation) -> Self {
        OperationSnapshot { operation, json: std::sync::OnceLock::new() }
    }

    /// The operation as JSON, serialized by the first caller and shared with the others.
    pub fn json(&self) -> Arc<str> {
        self.json
            .get_or_init(|| serde_json::to_string(&self.operation).unwrap_or_else(|_| "null".into()).into())
            .clone()
    }
}

impl PartialEq for OperationSnapshot {
    fn eq(&self, other: &Self) -> bool {
        self.operation == other.operation
    }
}

/// Result of [`Engine::submit`].
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub operation: Operation,
    /// False when an identical request with the same idempotency key already existed.
    pub created: bool,
    /// The explicit diff the operation applies, when the workflow has one.
    pub plan: Option<Plan>,
}

struct Running {
    cancel: watch::Sender<bool>,
}

struct Inner {
    store: Arc<dyn Store>,
    workflows: HashMap<OperationKind, Arc<dyn Workflow>>,
    config: EngineConfig,
    /// This process's replica id: the holder named in the leases it takes.
    replica: String,
    events: broadcast::Sender<OperationEvent>,
    running: Mutex<HashMap<OperationId, Running>>,
    tasks: Mutex<JoinSet<()>>,
    /// One clone per step task alive (they run in their driver's own `JoinSet`): what
    /// [`Engine::halt`] waits on after the drivers.
    live_steps: Arc<()>,
    /// The sweep taking over operations whose lease lapsed ([`Engine::start_lease_sweep`]).
    sweep: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Test hook: renewals are skipped while set (a replica stalled past its TTL).
    renewals_paused: std::sync::atomic::AtomicBool,
    /// Whether changes are published to the store's change feed ([`Engine::start_change_relay`]).
    publishing: std::sync::atomic::AtomicBool,
    /// The relay of other replicas' changes into [`Engine::subscribe`].
    relay: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The operation engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// The replica id of [`Engine::new`]: the only process on its store.
pub const LOCAL_REPLICA: &str = "local";

/// Deterministic idempotency token of a step: the same for every attempt and restart.
pub fn step_token(operation: &OperationId, step_key: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{operation}/{step_key}").as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("is-{hex}")
}

impl Engine {
    /// An engine with the replica id [`LOCAL_REPLICA`]: the one process using its store, so a
    /// new engine on the same store (a restart) takes every running operation back at once.
    /// Processes sharing a store need distinct ids: [`Engine::with_replica`].
    pub fn new(store: Arc<dyn Store>, workflows: Vec<Arc<dyn Workflow>>, config: EngineConfig) -> Self {
        Self::with_replica(store, workflows, config, LOCAL_REPLICA.into())
    }

    /// An engine whose leases name `replica`. A server keeps its replica id across restarts,
    /// so after a crash it takes its own operations back at once instead of after the TTL.
    pub fn with_replica(
        store: Arc<dyn Store>,
        workflows: Vec<Arc<dyn Workflow>>,
        config: EngineConfig,
        replica: String,
    ) -> Self {
        let (events, _) = broadcast::channel(4096);
        Engine {
            inner: Arc::new(Inner {
                store,
                workflows: workflows.into_iter().map(|w| (w.kind(), w)).collect(),
                config,
                replica,
                events,
                running: Mutex::new(HashMap::new()),
                tasks: Mutex::new(JoinSet::new()),
                live_steps: Arc::new(()),
                sweep: Mutex::new(None),
                renewals_paused: std::sync::atomic::AtomicBool::new(false),
                publishing: std::sync::atomic::AtomicBool::new(false),
                relay: Mutex::new(None),
            }),
        }
    }

    /// The replica id this engine's leases carry.
    pub fn replica_id(&self) -> &str {
        &self.inner.replica
    }

    /// Whether this engine is driving operation `id` now.
    pub fn is_driving(&self, id: &OperationId) -> bool {
        self.inner.running.lock().expect("lock").contains_key(id)
    }

    /// Starts the background sweep (every TTL/4): it takes over running operations whose
    /// lease lapsed (their replica died) and resumes them from their persisted phases, exactly
    /// as a restart does. Idempotent; stopped by [`Engine::abort_all`].
    pub fn start_lease_sweep(&self) {
        let mut sweep = self.inner.sweep.lock().expect("lock");
        if sweep.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let engine = self.clone();
        let period = renewal_period(self.inner.config.lease_ttl);
        *sweep = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                match engine.inner.store.unleased_running_operations() {
                    Ok(ids) => {
                        for id in ids {
                            if !engine.is_driving(&id) {
                                tracing::info!(operation = %id, replica = %engine.inner.replica, "taking over an operation whose lease lapsed");
                                engine.spawn(id);
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "lease sweep: listing unleased operations failed"),
                }
            }
        }));
    }

    /// Live streams across replicas sharing a store: from now on every change this engine
    /// makes is also published to the store's change feed ([`Store::publish_change`]), and a
    /// relay task reads the feed by sequence number and re-emits the changes other replicas
    /// made to this engine's [`Engine::subscribe`]rs, in feed order. It reads when the store
    /// signals a change ([`Store::change_signal`], PostgreSQL's `LISTEN`) and at least every
    /// [`RELAY_SAFETY_PERIOD`] (a lost notification delays a change, never loses it); a store
    /// without a signal is read every [`RELAY_PERIOD`].
    /// The relay resumes from the last sequence number it read after a store error, so a
    /// follower misses nothing (unless the relay falls more than
    /// [`crate::store::CHANGE_FEED_KEEP`] changes behind). Every change carries the whole
    /// operation, so followers converge whatever they missed. Idempotent. A single process on
    /// its own store needs none of it.
    pub fn start_change_relay(&self) -> Result<(), EngineError> {
        let mut relay = self.inner.relay.lock().expect("lock");
        if relay.as_ref().is_some_and(|h| !h.is_finished()) {
            return Ok(());
        }
        let mut cursor = self.inner.store.latest_change_seq()?;
        self.inner.publishing.store(true, std::sync::atomic::Ordering::SeqCst);
        let inner = self.inner.clone();
        let signal = self.inner.store.change_signal();
        *relay = Some(tokio::spawn(async move {
            loop {
                match &signal {
                    Some(signal) => {
                        tokio::select! {
                            _ = signal.notified() => {}
                            _ = tokio::time::sleep(RELAY_SAFETY_PERIOD) => {}
                        }
                    }
                    None => tokio::time::sleep(RELAY_PERIOD).await,
                }
                loop {
                    let changes = match inner.store.changes_since(cursor, 512) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(error = %e, "change relay: reading the feed failed; trying again");
                            break;
                        }
                    };
                    let full = changes.len() == 512;
                    for change in changes {
                        cursor = change.seq;
                        if change.replica != inner.replica {
                            broadcast_change(&inner, &change.operation, None);
                        }
                    }
                    if !full {
                        break;
                    }
                }
            }
        }));
        Ok(())
    }

    /// Test hook: while `paused`, this engine skips its lease renewals, as a replica stalled
    /// (a long GC or network pause) would; its drivers stop by themselves once the lease may
    /// have lapsed by their own clock.
    #[doc(hidden)]
    pub fn pause_lease_renewals(&self, paused: bool) {
        self.inner.renewals_paused.store(paused, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Live phase changes of all operations.
    pub fn subscribe(&self) -> broadcast::Receiver<OperationEvent> {
        self.inner.events.subscribe()
    }

    fn workflow(&self, kind: OperationKind) -> Result<Arc<dyn Workflow>, EngineError> {
        self.inner.workflows.get(&kind).cloned().ok_or(EngineError::UnknownKind(kind))
    }

    /// Validates and lays out the operation without recording or changing anything.
    pub fn dry_run(&self, kind: OperationKind, request: &Value) -> Result<Prepared, EngineError> {
        self.workflow(kind)?.prepare(request)
    }

    /// Validates, reads the real state (explicit diff and preflight), and records and starts
    /// the operation unless the state already matches. This is what every face uses.
    pub async fn submit_checked(
        &self,
        kind: OperationKind,
        request: &Value,
        actor: Actor,
        idempotency_key: Option<String>,
    ) -> Result<Outcome, EngineError> {
        let workflow = self.workflow(kind)?;
        let hash = request_hash(kind, "", request);
        if let Some(existing) = self.replayed(idempotency_key.as_deref(), &hash)? {
            return Ok(Outcome::Submitted(Box::new(Submission { operation: existing, created: false, plan: None })));
        }
        let mut prepared = workflow.prepare(request)?;
        let assessment = self.assess(&workflow, &prepared).await?;
        preflight::blocking(&assessment.checks)?;
        if let Some(plan) = &assessment.plan
            && plan.is_noop()
        {
            return Ok(Outcome::NoChange(plan.clone()));
        }
        if let Some(reduced) = &assessment.reduced_request {
            prepared = workflow.prepare(reduced)?;
        }
        let mut submission = self.record(&workflow, kind, prepared, hash, actor, idempotency_key)?;
        submission.plan = assessment.plan;
        Ok(Outcome::Submitted(Box::new(submission)))
    }

    /// The dry run of [`Engine::submit_checked`]: steps, diff and preflight, nothing changed.
    pub async fn dry_run_checked(&self, kind: OperationKind, request: &Value) -> Result<DryRun, EngineError> {
        let workflow = self.workflow(kind)?;
        let mut prepared = workflow.prepare(request)?;
        let assessment = self.assess(&workflow, &prepared).await?;
        if let Some(reduced) = &assessment.reduced_request {
            prepared = workflow.prepare(reduced)?;
        }
        Ok(DryRun { prepared, plan: assessment.plan, checks: assessment.checks })
    }

    /// The workflow's assessment, its throttled/transient reads retried with the engine's
    /// backoff ([`reads`]).
    async fn assess(&self, workflow: &Arc<dyn Workflow>, prepared: &Prepared) -> Result<Assessment, EngineError> {
        reads::with_read_retries(reads::ReadRetries::new(&self.inner.config), workflow.assess(prepared)).await
    }

    fn replayed(&self, key: Option<&str>, hash: &str) -> Result<Option<Operation>, EngineError> {
        let Some(key) = key else { return Ok(None) };
        match self.inner.store.find_by_idempotency_key(key)? {
            Some(existing) if existing.request_hash == hash => Ok(Some(existing)),
            Some(existing) => Err(StoreError::IdempotencyMismatch { key: key.into(), operation: existing.id }.into()),
            None => Ok(None),
        }
    }

    fn record(
        &self,
        workflow: &Arc<dyn Workflow>,
        kind: OperationKind,
        prepared: Prepared,
        hash: String,
        actor: Actor,
        idempotency_key: Option<String>,
    ) -> Result<Submission, EngineError> {
        let new = NewOperation {
            id: OperationId::generate(),
            kind,
            target: prepared.target,
            actor,
            request: prepared.request,
            idempotency_key,
            request_hash: hash,
            steps: prepared.steps,
        };
        match self.inner.store.insert_operation(new)? {
            Inserted::Existing(operation) => Ok(Submission { operation, created: false, plan: None }),
            Inserted::New(operation) => {
                if let Err(e) = workflow.on_recorded(&operation) {
                    self.inner.store.set_operation_status(
                        &operation.id,
                        OperationStatus::Failed,
                        Some(&e.to_string()),
                    )?;
                    return Err(e);
                }
                self.emit(&operation, None);
                self.spawn(operation.id.clone());
                Ok(Submission { operation, created: true, plan: None })
            }
        }
    }

    /// Records and starts an operation without reading the real state first (no diff, no
    /// preflight). With an idempotency key, an identical earlier request returns its operation
    /// (`created == false`) and starts nothing.
    pub fn submit(
        &self,
        kind: OperationKind,
        request: &Value,
        actor: Actor,
        idempotency_key: Option<String>,
    ) -> Result<Submission, EngineError> {
        let workflow = self.workflow(kind)?;
        // The key identifies the client's request as sent: a replay must return the original
        // operation even when the request would no longer validate (e.g. the cluster it created
        // now exists), so the key is checked before validation.
        let hash = request_hash(kind, "", request);
        if let Some(existing) = self.replayed(idempotency_key.as_deref(), &hash)? {
            return Ok(Submission { operation: existing, created: false, plan: None });
        }
        let prepared = workflow.prepare(request)?;
        self.record(&workflow, kind, prepared, hash, actor, idempotency_key)
    }

    /// Resumes every operation left `running` that no other live replica drives: those
    /// without a live lease, and those whose lease this replica held before it restarted.
    /// Returns how many it took.
    pub fn resume_all(&self) -> Result<usize, EngineError> {
        let ops = self.inner.store.running_operations()?;
        let mut n = 0;
        for op in ops {
            if self.is_driving(&op.id) {
                continue;
            }
            let Some(lease) =
                self.inner.store.acquire_lease(&op.id, &self.inner.replica, self.inner.config.lease_ttl)?
            else {
                continue;
            };
            tracing::info!(operation = %op.id, target = %op.target, token = lease.token, "resuming operation");
            self.spawn_leased(op.id, Some(lease));
            n += 1;
        }
        Ok(n)
    }

    /// Retries a failed, needs-attention or cancelled step (and lets blocked steps continue).
    pub fn retry_step(&self, id: &OperationId, key: &str, actor: Actor) -> Result<Operation, EngineError> {
        let op = self.get(id)?;
        let step =
            op.step(key).ok_or_else(|| EngineError::StepNotFound { operation: id.clone(), step: key.to_string() })?;
        if !matches!(step.phase, StepPhase::Failed | StepPhase::NeedsAttention | StepPhase::Cancelled) {
            return Err(EngineError::InvalidState(format!(
                "step {key} is {}; only failed, needs_attention or cancelled steps can be retried",
                step.phase.as_str()
            )));
        }
        if op.status == OperationStatus::Running {
            return Err(EngineError::InvalidState(format!(
                "operation {id} is still running; retry the step when it has finished"
            )));
        }
        // Reset the steps while the operation is still terminal (no driver acts on it), then
        // reopen it: a driver that is just finishing sees the reset steps when it looks again.
        let reset = StepUpdate {
            phase: Some(StepPhase::Pending),
            error: Some(None),
            detail: Some(None),
            finished_at: Some(None),
            ..Default::default()
        };
        let previous: Vec<(String, StepPhase)> = op
            .steps
            .iter()
            .filter(|s| s.key == key || s.phase == StepPhase::Cancelled)
            .map(|s| (s.key.clone(), s.phase))
            .collect();
        for (k, _) in &previous {
            self.inner.store.update_step(id, k, &reset)?;
        }
        if let Err(e) = self.inner.store.reopen_operation(id) {
            // Another operation holds the target: put the steps back as they were.
            for (k, phase) in &previous {
                let _ = self.inner.store.update_step(id, k, &StepUpdate { phase: Some(*phase), ..Default::default() });
            }
            return Err(e.into());
        }
        self.inner.store.append_audit(&AuditEntry {
            at: Utc::now(),
            actor,
            action: "step.retry".into(),
            target: op.target.clone(),
            operation_id: Some(id.clone()),
            detail: serde_json::json!({ "step": key, "previous_phase": step.phase, "previous_error": step.error }),
        })?;
        let op = self.get(id)?;
        self.emit(&op, Some(key));
        self.spawn(id.clone());
        Ok(op)
    }

    /// Cancels a running operation: steps stop between provider calls; nothing is rolled back.
    pub fn cancel(&self, id: &OperationId, actor: Actor) -> Result<Operation, EngineError> {
        let op = self.get(id)?;
        if op.status != OperationStatus::Running {
            return Err(EngineError::InvalidState(format!("operation {id} is {}, not running", op.status.as_str())));
        }
        self.inner.store.append_audit(&AuditEntry {
            at: Utc::now(),
            actor,
            action: "operation.cancel".into(),
            target: op.target.clone(),
            operation_id: Some(id.clone()),
            detail: Value::Null,
        })?;
        let signalled = match self.inner.running.lock().expect("lock").get(id) {
            Some(r) => {
                let _ = r.cancel.send(true);
                true
            }
            None => false,
        };
        if !signalled {
            // Nobody drives it here: it is unleased, or another replica drives it (that
            // replica's next fenced write or renewal sees the cancellation and stops).
            finish_cancelled(&self.inner, None, id)?;
        }
        self.get(id)
    }

    pub fn get(&self, id: &OperationId) -> Result<Operation, EngineError> {
        self.inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))
    }

    /// Waits until the operation is no longer running, or `timeout` passes; returns its state.
    pub async fn wait(&self, id: &OperationId, timeout: std::time::Duration) -> Result<Operation, EngineError> {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let op = self.get(id)?;
            if op.status.is_terminal() {
                return Ok(op);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return self.get(id),
                r = rx.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = r {
                        return self.get(id);
                    }
                }
            }
        }
    }

    /// Stops all running operation tasks without changing their stored phases, as a crash
    /// would. Used on shutdown (operations resume on the next start) and in tests.
    pub fn abort_all(&self) {
        if let Some(sweep) = self.inner.sweep.lock().expect("lock").take() {
            sweep.abort();
        }
        if let Some(relay) = self.inner.relay.lock().expect("lock").take() {
            relay.abort();
        }
        self.inner.tasks.lock().expect("lock").abort_all();
        self.inner.running.lock().expect("lock").clear();
    }

    /// [`Engine::abort_all`], then waits until every aborted task has stopped (a task inside a
    /// store call finishes that call first).
    ///
    /// # Guarantees
    /// Once it returns, no task of this engine calls the store or a provider again: the
    /// in-process equivalent of a killed server, which tests restart on the same store without
    /// guessing how long the aborted tasks take to go.
    pub async fn halt(&self) {
        let sweep = self.inner.sweep.lock().expect("lock").take();
        let relay = self.inner.relay.lock().expect("lock").take();
        let mut tasks = std::mem::take(&mut *self.inner.tasks.lock().expect("lock"));
        self.inner.running.lock().expect("lock").clear();
        for handle in [sweep, relay].into_iter().flatten() {
            handle.abort();
            let _ = handle.await;
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        // A driver's step tasks are aborted with it, and gone once their futures are dropped.
        while Arc::strong_count(&self.inner.live_steps) > 1 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    fn emit(&self, op: &Operation, step: Option<&str>) {
        emit(&self.inner, op, step);
    }

    fn spawn(&self, id: OperationId) {
        self.spawn_leased(id, None);
    }

    /// Starts the driver of `id` unless this engine drives it already. The driver acquires
    /// the operation's lease first (unless `lease` is one just acquired) and drives only
    /// while it holds it: a renewal task keeps it, and the driver stops at once when a
    /// renewal or a fenced write says the lease moved on.
    fn spawn_leased(&self, id: OperationId, mut lease: Option<Lease>) {
        let mut running = self.inner.running.lock().expect("lock");
        if running.contains_key(&id) {
            return;
        }
        let (tx, mut rx) = watch::channel(false);
        running.insert(id.clone(), Running { cancel: tx });
        drop(running);
        let inner = self.inner.clone();
        self.inner.tasks.lock().expect("lock").spawn(async move {
            loop {
                // The lease as it was before this replica asks for it: when another replica
                // held it and it lapsed (not released), acquiring it is a takeover.
                let mut previous = None;
                let acquired = match lease.take() {
                    Some(l) => Ok(Some(l)),
                    None => {
                        previous = inner.store.get_lease(&id).ok().flatten();
                        inner.store.acquire_lease(&id, &inner.replica, inner.config.lease_ttl)
                    }
                };
                let held = match acquired {
                    Ok(Some(l)) => {
                        if let Some(p) = previous.filter(|p| is_takeover(p, &l)) {
                            record_takeover(&inner, &id, &p, &l);
                        }
                        l
                    }
                    Ok(None) => {
                        tracing::debug!(operation = %id, "another replica drives the operation (or it ended)");
                        inner.running.lock().expect("lock").remove(&id);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(operation = %id, error = %e, "could not acquire the operation's lease; the sweep tries again");
                        inner.running.lock().expect("lock").remove(&id);
                        return;
                    }
                };
                let guard = Arc::new(LeaseGuard::new(held, inner.config.lease_ttl));
                // Dropping the driver future (lease lost) aborts every step task it spawned:
                // no provider call starts after this replica knows it lost the lease.
                let result = tokio::select! {
                    r = run_operation(&inner, &guard, &id, rx) => r,
                    lost = keep_lease(&inner, &guard) => Err(EngineError::Store(lost)),
                };
                // A driver that finished with its lease lapsed by the local clock (a process
                // stopped past the TTL, then resumed, that found the operation ended by the
                // replica that took it over) lost the lease too: it neither releases it nor
                // drives a reopened operation.
                let result = result.and_then(|()| guard.ensure());
                if let Err(e) = &result {
                    if is_fenced(e) {
                        tracing::warn!(operation = %id, replica = %inner.replica, error = %e, "lost the operation's lease: stopped driving it");
                        inner.running.lock().expect("lock").remove(&id);
                        return;
                    }
                    tracing::error!(operation = %id, error = %e, "operation driver stopped");
                    record_driver_failure(&inner, &guard, &id, e).await;
                }
                if let Err(e) = inner.store.release_lease(&guard.lease) {
                    tracing::debug!(operation = %id, error = %e, "releasing the lease failed; it lapses after the TTL");
                }
                // A retry may have reopened the operation while this driver was finishing; its
                // `spawn` saw this driver registered and left the work to it. Decide under the
                // same lock `spawn` takes.
                let mut running = inner.running.lock().expect("lock");
                let reopened = result.is_ok()
                    && matches!(inner.store.get_operation(&id), Ok(Some(op)) if op.status == OperationStatus::Running);
                if !reopened {
                    running.remove(&id);
                    return;
                }
                let (tx, fresh) = watch::channel(false);
                running.insert(id.clone(), Running { cancel: tx });
                rx = fresh;
            }
        });
    }
}

/// The lease a driver holds, with the local deadline after which it must assume it lapsed
/// (the start of the last successful renewal plus the TTL, on this process's monotonic
/// clock: never later than the store's expiry).
struct LeaseGuard {
    lease: Lease,
    valid_until: Mutex<tokio::time::Instant>,
}

impl LeaseGuard {
    fn new(lease: Lease, ttl: std::time::Duration) -> Self {
        LeaseGuard { lease, valid_until: Mutex::new(tokio::time::Instant::now() + ttl) }
    }

    /// Records a successful renewal asked for at `asked`.
    fn renewed(&self, asked: tokio::time::Instant, ttl: std::time::Duration) {
        let mut until = self.valid_until.lock().expect("lock");
        *until = (*until).max(asked + ttl);
    }

    /// Refuses (as fenced) once the lease may have lapsed by the local clock: checked before
    /// every provider call.
    fn ensure(&self) -> Result<(), EngineError> {
        if tokio::time::Instant::now() >= *self.valid_until.lock().expect("lock") {
            return Err(lapsed(&self.lease, "its lease was not renewed within the TTL"));
        }
        Ok(())
    }
}

/// Whether acquiring `held` took the lease over from `previous`, another replica's lease that
/// lapsed (a released lease has expiry 0: its driver finished; the same replica resumes its own).
fn is_takeover(previous: &Lease, held: &Lease) -> bool {
    previous.replica != held.replica && previous.expires_at.timestamp_micros() > 0 && held.token > previous.token
}

/// Records that this replica took `id` over from the replica whose lease lapsed: an
/// `operation.takeover` audit entry naming both replicas and fencing tokens (every write of the
/// old holder after this point is refused), and the operation's state published again, so a
/// follower sees a phase the old driver wrote but was stopped before publishing.
fn record_takeover(inner: &Inner, id: &OperationId, previous: &Lease, held: &Lease) {
    tracing::info!(operation = %id, replica = %held.replica, token = held.token, previous = %previous.replica, "took over the operation's lapsed lease");
    let op = match inner.store.get_operation(id) {
        Ok(Some(op)) => op,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(operation = %id, error = %e, "reading the operation taken over failed");
            return;
        }
    };
    let entry = AuditEntry {
        at: Utc::now(),
        actor: Actor { face: crate::operation::Face::System, principal: format!("replica:{}", held.replica) },
        action: "operation.takeover".into(),
        target: op.target.clone(),
        operation_id: Some(id.clone()),
        detail: serde_json::json!({
            "replica": held.replica,
            "token": held.token,
            "previous_replica": previous.replica,
            "previous_token": previous.token,
            "previous_expires_at": previous.expires_at,
        }),
    };
    if let Err(e) = inner.store.append_audit(&entry) {
        tracing::warn!(operation = %id, error = %e, "recording the takeover in the audit log failed");
    }
    emit_fenced(inner, held, &op, None);
}

fn lapsed(lease: &Lease, reason: &str) -> EngineError {
    EngineError::Store(StoreError::Fenced { operation: lease.operation_id.clone(), reason: reason.into() })
}

fn is_fenced(e: &EngineError) -> bool {
    matches!(e, EngineError::Store(StoreError::Fenced { .. }))
}

/// How often a held lease is renewed (and the sweep looks for lapsed ones): a quarter of the
/// TTL, so two renewals may fail before the lease lapses.
fn renewal_period(ttl: std::time::Duration) -> std::time::Duration {
    (ttl / 4).max(std::time::Duration::from_millis(5))
}

/// Renews `g`'s lease every [`renewal_period`] until it is lost; returns why. A renewal that
/// fails on a store error is tried again at the next period; the lease counts as lost when
/// the store refuses it (fenced) or when no renewal succeeded within the TTL.
async fn keep_lease(inner: &Inner, g: &LeaseGuard) -> StoreError {
    let ttl = inner.config.lease_ttl;
    loop {
        tokio::time::sleep(renewal_period(ttl)).await;
        let started = tokio::time::Instant::now();
        let deadline = *g.valid_until.lock().expect("lock");
        if inner.renewals_paused.load(std::sync::atomic::Ordering::SeqCst) {
            if started >= deadline {
                return StoreError::Fenced {
                    operation: g.lease.operation_id.clone(),
                    reason: "its lease was not renewed within the TTL".into(),
                };
            }
            continue;
        }
        match inner.store.renew_lease(&g.lease, ttl) {
            Ok(_) => g.renewed(started, ttl),
            Err(e @ StoreError::Fenced { .. }) => return e,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return StoreError::Fenced {
                    operation: g.lease.operation_id.clone(),
                    reason: format!("its lease could not be renewed within the TTL ({e})"),
                };
            }
            Err(e) => {
                tracing::warn!(operation = %g.lease.operation_id, error = %e, "lease renewal failed; trying again")
            }
        }
    }
}

/// How often [`Engine::start_change_relay`] reads the change feed of a store that gives no
/// change signal.
pub const RELAY_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);
/// How often [`Engine::start_change_relay`] reads the change feed of a store that signals
/// changes, in case a signal was lost.
pub const RELAY_SAFETY_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

fn emit(inner: &Inner, op: &Operation, step: Option<&str>) {
    if inner.publishing.load(std::sync::atomic::Ordering::SeqCst)
        && let Err(e) = inner.store.publish_change(&inner.replica, op)
    {
        tracing::warn!(operation = %op.id, error = %e, "publishing the change for other replicas failed");
    }
    broadcast_change(inner, op, step);
}

/// [`emit`] by the driver holding `lease`: the publication is fenced too
/// ([`Store::publish_change_fenced`]), so a driver that paused between its write and this call
/// and lost the lease meanwhile publishes nothing, to other replicas or its own followers.
fn emit_fenced(inner: &Inner, lease: &Lease, op: &Operation, step: Option<&str>) {
    if inner.publishing.load(std::sync::atomic::Ordering::SeqCst) {
        match inner.store.publish_change_fenced(lease, op) {
            Ok(_) => {}
            Err(e @ StoreError::Fenced { .. }) => {
                tracing::warn!(operation = %op.id, replica = %inner.replica, error = %e, "not publishing a change: the lease moved on");
                return;
            }
            Err(e) => {
                tracing::warn!(operation = %op.id, error = %e, "publishing the change for other replicas failed")
            }
        }
    }
    broadcast_change(inner, op, step);
}

/// Sends a change to this engine's subscribers.
fn broadcast_change(inner: &Inner, op: &Operation, step: Option<&str>) {
    if inner.events.receiver_count() == 0 {
        return;
    }
    let s = step.and_then(|k| op.step(k));
    let _ = inner.events.send(OperationEvent {
        operation_id: op.id.clone(),
        target: op.target.clone(),
        status: op.status,
        step: step.map(str::to_string),
        phase: s.map(|s| s.phase),
        detail: s.and_then(|s| s.error.clone().or_else(|| s.detail.clone())),
        at: Utc::now(),
        snapshot: Some(Arc::new(OperationSnapshot::new(op.clone()))),
    });
}

/// Attempts (with backoff, about 10 s in all) to record that a driver stopped on an error.
const DRIVER_FAILURE_ATTEMPTS: u32 = 8;

/// After the driver of `id` stopped on `error` (typically the store failing), records the
/// operation as failed so it is never left `running` with nothing driving it. The steps that
/// were under way (or, when none was, the first unfinished one) are marked failed with the
/// reason, so retrying that step continues the operation (it observes before it submits). The
/// store may still be failing: this tries [`DRIVER_FAILURE_ATTEMPTS`] times with backoff; if
/// every attempt fails, the operation stays `running` in the store and resumes at the next
/// start, which is also correct.
async fn record_driver_failure(inner: &Inner, g: &LeaseGuard, id: &OperationId, error: &EngineError) {
    let reason = format!("the operation's driver stopped: {error}; retry the failed step to continue");
    let mut delay = std::time::Duration::from_millis(50);
    for attempt in 1..=DRIVER_FAILURE_ATTEMPTS {
        match mark_stopped_operation_failed(inner, g, id, &reason) {
            Ok(()) => return,
            Err(e @ StoreError::Fenced { .. }) => {
                tracing::warn!(operation = %id, error = %e, "not recording the stopped driver: the lease moved on");
                return;
            }
            Err(e) => {
                tracing::warn!(operation = %id, attempt, error = %e, "recording the stopped driver failed");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(2));
            }
        }
    }
    tracing::error!(operation = %id, "could not record the failure; the operation resumes at the next start");
}

fn mark_stopped_operation_failed(
    inner: &Inner,
    g: &LeaseGuard,
    id: &OperationId,
    reason: &str,
) -> Result<(), StoreError> {
    let Some(op) = inner.store.get_operation(id)? else { return Ok(()) };
    if op.status != OperationStatus::Running {
        return Ok(());
    }
    if op.steps.iter().all(|s| s.phase == StepPhase::Succeeded) {
        inner.store.set_operation_status_fenced(&g.lease, OperationStatus::Succeeded, None)?;
    } else {
        let under_way =
            |s: &&Step| matches!(s.phase, StepPhase::Submitting | StepPhase::Submitted | StepPhase::Polling);
        let mut to_fail: Vec<&Step> = op.steps.iter().filter(under_way).collect();
        if to_fail.is_empty() {
            to_fail.extend(op.steps.iter().find(|s| !s.phase.is_terminal()));
        }
        for s in to_fail {
            inner.store.update_step_fenced(
                &g.lease,
                &s.key,
                &StepUpdate {
                    phase: Some(StepPhase::Failed),
                    error: Some(Some(reason.to_string())),
                    finished_at: Some(Some(Utc::now())),
                    ..Default::default()
                },
            )?;
        }
        inner.store.set_operation_status_fenced(&g.lease, OperationStatus::Failed, Some(reason))?;
    }
    if let Some(op) = inner.store.get_operation(id)? {
        emit_fenced(inner, &g.lease, &op, None);
    }
    Ok(())
}

/// Marks the unfinished steps and the operation cancelled: fenced by `lease` when the driver
/// does it, unfenced when nobody drives the operation here.
fn finish_cancelled(inner: &Inner, lease: Option<&Lease>, id: &OperationId) -> Result<(), EngineError> {
    let op = inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
    for s in op.steps.iter().filter(|s| !s.phase.is_terminal()) {
        let update =
            StepUpdate { phase: Some(StepPhase::Cancelled), finished_at: Some(Some(Utc::now())), ..Default::default() };
        match lease {
            Some(l) => inner.store.update_step_fenced(l, &s.key, &update)?,
            None => inner.store.update_step(id, &s.key, &update)?,
        };
    }
    match lease {
        Some(l) => inner.store.set_operation_status_fenced(l, OperationStatus::Cancelled, Some("cancelled"))?,
        None => inner.store.set_operation_status(id, OperationStatus::Cancelled, Some("cancelled"))?,
    }
    if let Some(op) = inner.store.get_operation(id)? {
        match lease {
            Some(l) => emit_fenced(inner, l, &op, None),
            None => emit(inner, &op, None),
        }
    }
    Ok(())
}

async fn run_operation(
    inner: &Arc<Inner>,
    guard: &Arc<LeaseGuard>,
    id: &OperationId,
    cancel: watch::Receiver<bool>,
) -> Result<(), EngineError> {
    let g: &LeaseGuard = guard;
    let first = inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
    let workflow = inner.workflows.get(&first.kind).cloned().ok_or(EngineError::UnknownKind(first.kind))?;
    let mut in_flight: HashSet<String> = HashSet::new();
    let mut steps: JoinSet<(String, Result<(), EngineError>)> = JoinSet::new();
    loop {
        let op = inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
        if op.status != OperationStatus::Running {
            return Ok(());
        }
        let cancelled = *cancel.borrow();
        if !cancelled {
            let done: HashSet<&str> =
                op.steps.iter().filter(|s| s.phase == StepPhase::Succeeded).map(|s| s.key.as_str()).collect();
            for s in &op.steps {
                let ready = !s.phase.is_terminal()
                    && !in_flight.contains(&s.key)
                    && (s.phase != StepPhase::Pending || s.depends_on.iter().all(|d| done.contains(d.as_str())));
                if !ready {
                    continue;
                }
                let Some(executor) = workflow.executor(&op.request, &s.key) else {
                    fail_step(inner, g, id, &s.key, &format!("no executor for step {}", s.key))?;
                    continue;
                };
                in_flight.insert(s.key.clone());
                let (inner2, id2, key, cancel2) = (inner.clone(), id.clone(), s.key.clone(), cancel.clone());
                let guard2 = guard.clone();
                let alive = inner.live_steps.clone();
                steps.spawn(async move {
                    let _alive = alive;
                    let r = drive_step(&inner2, &guard2, &id2, &key, executor, cancel2).await;
                    (key, r)
                });
            }
        }
        if in_flight.is_empty() {
            let op = inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
            if cancelled {
                return finish_cancelled(inner, Some(&g.lease), id);
            }
            let failed: Vec<String> = op
                .steps
                .iter()
                .filter(|s| matches!(s.phase, StepPhase::Failed | StepPhase::NeedsAttention))
                .map(|s| format!("{}: {}", s.key, s.error.clone().unwrap_or_default()))
                .collect();
            let (status, error) = if op.steps.iter().all(|s| s.phase == StepPhase::Succeeded) {
                (OperationStatus::Succeeded, None)
            } else if op.steps.iter().any(|s| s.phase == StepPhase::NeedsAttention) {
                (OperationStatus::NeedsAttention, Some(failed.join("; ")))
            } else {
                (OperationStatus::Failed, Some(failed.join("; ")))
            };
            inner.store.set_operation_status_fenced(&g.lease, status, error.as_deref())?;
            if let Some(op) = inner.store.get_operation(id)? {
                emit_fenced(inner, &g.lease, &op, None);
            }
            return Ok(());
        }
        let mut cancel_watch = cancel.clone();
        tokio::select! {
            joined = steps.join_next() => {
                match joined {
                    Some(Ok((key, result))) => {
                        in_flight.remove(&key);
                        if let Err(e) = result {
                            if is_fenced(&e) {
                                // The lease moved on: stop everything, write nothing more.
                                return Err(e);
                            }
                            fail_step(inner, g, id, &key, &e.to_string())?;
                        }
                    }
                    Some(Err(join_error)) => {
                        // A panicking executor: find which step it was by elimination is not
                        // possible; fail every in-flight step that is not terminal.
                        let op = inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
                        for key in in_flight.drain() {
                            if op.step(&key).is_some_and(|s| !s.phase.is_terminal()) {
                                fail_step(inner, g, id, &key, &format!("step task failed: {join_error}"))?;
                            }
                        }
                        steps.abort_all();
                    }
                    None => in_flight.clear(),
                }
            }
            _ = cancel_watch.changed(), if !cancelled => {}
        }
    }
}

fn fail_step(inner: &Inner, g: &LeaseGuard, id: &OperationId, key: &str, reason: &str) -> Result<(), EngineError> {
    persist(
        inner,
        g,
        id,
        key,
        StepUpdate {
            phase: Some(StepPhase::Failed),
            error: Some(Some(reason.to_string())),
            finished_at: Some(Some(Utc::now())),
            ..Default::default()
        },
    )
}

/// A fenced step write by the driver holding `g`'s lease, then broadcast.
fn persist(inner: &Inner, g: &LeaseGuard, id: &OperationId, key: &str, update: StepUpdate) -> Result<(), EngineError> {
    inner.store.update_step_fenced(&g.lease, key, &update)?;
    if let Some(op) = inner.store.get_operation(id)? {
        emit_fenced(inner, &g.lease, &op, Some(key));
    }
    Ok(())
}

/// Result of a cancellable wait.
enum Waited {
    Elapsed,
    Cancelled,
}

async fn sleep_or_cancel(d: std::time::Duration, cancel: &mut watch::Receiver<bool>) -> Waited {
    if *cancel.borrow() {
        return Waited::Cancelled;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => Waited::Elapsed,
        _ = cancel.changed() => Waited::Cancelled,
    }
}

async fn drive_step(
    inner: &Arc<Inner>,
    g: &LeaseGuard,
    id: &OperationId,
    key: &str,
    executor: Arc<dyn StepExecutor>,
    mut cancel: watch::Receiver<bool>,
) -> Result<(), EngineError> {
    let config = inner.config;
    let mut resubmits = 0u32;
    'drive: loop {
        if *cancel.borrow() {
            return Ok(());
        }
        let op = inner.store.get_operation(id)?.ok_or_else(|| EngineError::NotFound(id.clone()))?;
        let step =
            op.step(key).ok_or_else(|| EngineError::StepNotFound { operation: id.clone(), step: key.into() })?.clone();
        let inputs: BTreeMap<String, Value> = op
            .steps
            .iter()
            .filter(|s| s.phase == StepPhase::Succeeded)
            .map(|s| (s.key.clone(), s.outputs.clone()))
            .collect();
        let cx = StepContext {
            operation_id: id,
            step_key: key,
            idempotency_token: &step.idempotency_token,
            attempt: step.attempts,
            request: &op.request,
            inputs: &inputs,
        };
        match step.phase {
            StepPhase::Pending => {
                // Intent first: the attempt is durable before any provider call.
                persist(
                    inner,
                    g,
                    id,
                    key,
                    StepUpdate {
                        phase: Some(StepPhase::Submitting),
                        attempts: Some(step.attempts + 1),
                        started_at: Some(step.started_at.unwrap_or_else(Utc::now)),
                        detail: Some(None),
                        error: Some(None),
                        ..Default::default()
                    },
                )?;
            }
            StepPhase::Submitting => {
                let mut retries = 0;
                let mut budget = SubmitRetries::new(config.max_retries);
                let outcome = loop {
                    // Before a mutation, the store confirms (and extends) the lease: a replica
                    // that lost it never submits.
                    g.ensure()?;
                    let asked = tokio::time::Instant::now();
                    inner.store.renew_lease(&g.lease, config.lease_ttl)?;
                    g.renewed(asked, config.lease_ttl);
                    let attempt = match executor.observe(&cx).await {
                        Ok(Observation::Exists(r)) => Ok(Ok((r, "adopted the resource of an earlier attempt"))),
                        Ok(Observation::Foreign { reason }) => Ok(Err(reason)),
                        Ok(Observation::Absent) => {
                            // The lease again, by the local clock, between the observation and
                            // the mutation: a process paused (or a call stalled) past the TTL
                            // during `observe` holds an answer another replica has since made
                            // stale, and must not submit on it.
                            g.ensure()?;
                            executor.submit(&cx).await.map(|r| Ok((r, "submitted")))
                        }
                        Err(e) => Err(e),
                    };
                    match attempt {
                        Err(e) if e.is_retryable() && budget.allows(&e) => {
                            persist(
                                inner,
                                g,
                                id,
                                key,
                                StepUpdate { detail: Some(Some(format!("retrying: {e}"))), ..Default::default() },
                            )?;
                            if let Waited::Cancelled = sleep_or_cancel(config.retry.delay(retries), &mut cancel).await {
                                return Ok(());
                            }
                            retries += 1;
                        }
                        other => break other,
                    }
                };
                match outcome {
                    Ok(Ok((resource, how))) => persist(
                        inner,
                        g,
                        id,
                        key,
                        StepUpdate {
                            phase: Some(StepPhase::Submitted),
                            resource: Some(resource),
                            detail: Some(Some(how.to_string())),
                            ..Default::default()
                        },
                    )?,
                    Ok(Err(reason)) => {
                        return persist(
                            inner,
                            g,
                            id,
                            key,
                            StepUpdate {
                                phase: Some(StepPhase::NeedsAttention),
                                error: Some(Some(reason)),
                                finished_at: Some(Some(Utc::now())),
                                ..Default::default()
                            },
                        );
                    }
                    Err(e) => return fail_step(inner, g, id, key, &e.to_string()),
                }
            }
            StepPhase::Submitted => {
                persist(inner, g, id, key, StepUpdate { phase: Some(StepPhase::Polling), ..Default::default() })?;
            }
            StepPhase::Polling => {
                let Some(resource) = step.resource.clone() else {
                    // Cannot happen through the engine; recover by observing again.
                    persist(
                        inner,
                        g,
                        id,
                        key,
                        StepUpdate { phase: Some(StepPhase::Submitting), ..Default::default() },
                    )?;
                    continue;
                };
                let mut n = 0u32;
                let mut retries = 0u32;
                let mut last_detail = step.detail.clone();
                loop {
                    g.ensure()?;
                    match executor.poll(&cx, &resource).await {
                        Ok(Progress::Done(outputs)) => {
                            return persist(
                                inner,
                                g,
                                id,
                                key,
                                StepUpdate {
                                    phase: Some(StepPhase::Succeeded),
                                    outputs: Some(outputs),
                                    detail: Some(None),
                                    finished_at: Some(Some(Utc::now())),
                                    ..Default::default()
                                },
                            );
                        }
                        Ok(Progress::Failed { reason }) => {
                            return fail_step(inner, g, id, key, &reason);
                        }
                        Ok(Progress::Resubmit { detail }) => {
                            resubmits += 1;
                            if resubmits > config.max_retries {
                                return fail_step(
                                    inner,
                                    g,
                                    id,
                                    key,
                                    &format!("{detail} (submitted again {} times; giving up)", resubmits - 1),
                                );
                            }
                            persist(
                                inner,
                                g,
                                id,
                                key,
                                StepUpdate {
                                    phase: Some(StepPhase::Submitting),
                                    detail: Some(Some(detail)),
                                    ..Default::default()
                                },
                            )?;
                            continue 'drive;
                        }
                        Ok(Progress::Waiting { detail }) => {
                            retries = 0;
                            if last_detail.as_deref() != Some(detail.as_str()) {
                                persist(
                                    inner,
                                    g,
                                    id,
                                    key,
                                    StepUpdate { detail: Some(Some(detail.clone())), ..Default::default() },
                                )?;
                                last_detail = Some(detail);
                            }
                            if let Waited::Cancelled = sleep_or_cancel(config.poll.delay(n), &mut cancel).await {
                                return Ok(());
                            }
                            n += 1;
                        }
                        Err(e) if e.is_retryable() && retries < config.max_retries => {
                            if let Waited::Cancelled = sleep_or_cancel(config.retry.delay(retries), &mut cancel).await {
                                return Ok(());
                            }
                            retries += 1;
                        }
                        Err(e) => return fail_step(inner, g, id, key, &e.to_string()),
                    }
                }
            }
            StepPhase::Succeeded | StepPhase::Failed | StepPhase::NeedsAttention | StepPhase::Cancelled => {
                return Ok(());
            }
        }
    }
}

/// Records the attempt of an action that is not a step (e.g. an audit entry for a dry run).
pub fn audit(store: &dyn Store, actor: Actor, action: &str, target: &str, detail: Value) -> Result<(), StoreError> {
    store.append_audit(&AuditEntry {
        at: Utc::now(),
        actor,
        action: action.into(),
        target: target.into(),
        operation_id: None,
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderErrorKind;

    #[test]
    fn a_takeover_is_acquiring_another_replicas_lapsed_lease() {
        let lease = |replica: &str, token: u64, expires_us: i64| Lease {
            operation_id: OperationId("op-1".into()),
            replica: replica.into(),
            token,
            expires_at: chrono::DateTime::from_timestamp_micros(expires_us).unwrap(),
        };
        // (previous, held, takeover)
        let cases = [
            (lease("a", 3, 1_000), lease("b", 4, 2_000), true),
            // Released by a driver that finished: a retry elsewhere is no takeover.
            (lease("a", 3, 0), lease("b", 4, 2_000), false),
            // A restarted replica taking its own lease back.
            (lease("a", 3, 1_000), lease("a", 4, 2_000), false),
            // Not a newer grant (defensive).
            (lease("a", 3, 1_000), lease("b", 3, 2_000), false),
        ];
        for (previous, held, want) in cases {
            assert_eq!(is_takeover(&previous, &held), want, "{previous:?} -> {held:?}");
        }
    }

    #[test]
    fn step_tokens_are_stable_and_distinct() {
        let id = OperationId("op-1".into());
        assert_eq!(step_token(&id, "eks_cluster"), step_token(&id, "eks_cluster"));
        assert_ne!(step_token(&id, "eks_cluster"), step_token(&id, "network"));
        assert!(step_token(&id, "x").len() <= 64);
    }

    /// The submit budget: failures are counted per API, with a ceiling on all of them.
    #[test]
    fn submit_retries_count_failures_per_api() {
        let throttled =
            |api: &str| StepError::Provider(ProviderError::new(api, ProviderErrorKind::Throttled, "slow down"));
        // (failures in order, max_retries, whether the last one is allowed)
        let cases: &[(&[&str], u32, bool)] = &[
            (&["eks:DescribeAddon"], 2, true),
            (&["eks:DescribeAddon", "eks:DescribeAddon"], 2, true),
            // The third failure of one API in a row is one too many.
            (&["eks:DescribeAddon", "eks:DescribeAddon", "eks:DescribeAddon"], 2, false),
            // Another API failing in between does not spend the first one's budget.
            (&["eks:DescribeAddon", "eks:CreateAddon", "eks:DescribeAddon", "eks:CreateAddon"], 2, true),
            // The ceiling: 4 × max_retries retries in all, whatever the APIs.
            (&["a", "b", "c", "d", "e", "f", "g", "h"], 2, true),
            (&["a", "b", "c", "d", "e", "f", "g", "h", "i"], 2, false),
        ];
        for (failures, max, allowed) in cases {
            let mut budget = SubmitRetries::new(*max);
            let (last, before) = failures.split_last().unwrap();
            for api in before {
                assert!(budget.allows(&throttled(api)), "{failures:?}: {api} refused early");
            }
            assert_eq!(budget.allows(&throttled(last)), *allowed, "{failures:?} with max_retries {max}");
        }
        // A failure that is not a provider error is never retried here.
        assert!(!SubmitRetries::new(24).allows(&StepError::Invalid("bad".into())));
    }
}
