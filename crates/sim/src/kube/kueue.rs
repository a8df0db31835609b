//! Kueue as the HyperPod task governance add-on runs it, simulated: which training jobs of a
//! cluster are queued, admitted, preempted or finished at a moment, and the Kueue objects
//! (`Workload`, `ClusterQueue`, `LocalQueue`, `WorkloadPriorityClass`, `ResourceFlavor`,
//! `kueue.x-k8s.io/v1beta1`, named as the add-on names them: `instantstart_core::governance`) that
//! say so through the API server, accepted by Kueue v0.19.2's CRDs (`vendor/schemas/kueue`) —
//! so the control plane's real read path (`instantstart_core::workload::admission`) is the one
//! the tests exercise.
//!
//! Kueue runs while the add-on (`amazon-sagemaker-hyperpod-taskgovernance`) is installed on the
//! EKS cluster. Teams and priority classes are SageMaker's: a team is a compute quota of one of
//! the cluster's HyperPod clusters (its guaranteed accelerators per instance type: `accelerators`,
//! or `count` × the type's accelerators), a priority class one of the scheduler config's, its
//! weight the Workload's priority. A job takes part when its object (`HyperPodPyTorchJob`,
//! `RayJob`) carries `kueue.x-k8s.io/queue-name: hyperpod-ns-<team>-localqueue`; it asks for the
//! accelerators of all its pods, of the instance type its pods select.
//!
//! # The model ([`admissions`], deterministic: a pure function of the objects and the time)
//!
//! Events are replayed from the first job's creation to `now`. At each event (a job arrives or
//! one admitted ends: admitted + [`timings::POD_START`](crate::timings::POD_START) + its run
//! time), the pending jobs are tried by priority (weight, then arrival, then name; with fair
//! share, by their team's share first):
//!
//! - **Admission.** A job fits when its team's usage of the type stays within its guaranteed
//!   quota plus what it may borrow (`LendAndBorrow`: `borrow_limit` percent of the quota, 50
//!   when unset), and the cluster has the accelerators free: every team's quota of the type,
//!   less what is in use, less the idle quota of teams that do not lend (`DontLend`).
//! - **Reclaim.** A job within its team's guarantee that does not fit because other teams
//!   borrowed evicts borrowing jobs of those teams (lowest priority, then newest, first) — Kueue's
//!   `reclaimWithinCohort: Any`, which HyperPod sets.
//! - **Preemption in the team.** Otherwise, when the team's quota says `PreemptTeamTasks:
//!   LowerPriority`, it evicts the team's lower-priority jobs (lowest, then newest, first) —
//!   `withinClusterQueue: LowerPriority`.
//!
//! - **Fair share.** When the scheduler config has `FairShare: Enabled`, the pending jobs are
//!   tried first by the share of idle quota their team would hold once admitted — what it
//!   borrows beyond its guarantee per unit of its quota's fair-share weight, lowest first (a job
//!   within its guarantee has share 0; a borrowing team of weight 0 comes last) — then by
//!   priority; Kueue's fair sharing (`fairSharing.weight`). Otherwise first come, first served
//!   by priority. Preemption by fair share (a team over its share losing borrowed quota to one
//!   under it) is not modelled.
//!
//! Evictions happen only when they make the job fit. An evicted job waits again (its pods are
//! gone) and starts from the beginning when admitted again.
//!
//! While a job is not admitted its pods are held before scheduling (`SchedulingGated`, the
//! message naming the queue); an admitted job's pods start at its admission.

use super::objects::str_at;
use super::pod::{self, PodView};
use super::workload;
use crate::base::stable_hash;
use crate::timings;
use crate::world::KubeWorld;
use crate::world::World;
use instantstart_core::governance::{
    MANAGED_QUEUE_LABEL, PRIORITY_LABEL, QUEUE_LABEL, QUOTA_ALLOCATION_LABEL, class_of_priority, priority_class_name,
    team_cluster_queue, team_namespace, team_of_queue, team_queue,
};
use instantstart_core::provider::{PreemptTeamTasks, QuotaConfig, SharingStrategy, TASK_GOVERNANCE_ADDON};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `apiVersion` of Kueue's kinds.
pub(crate) const KUEUE_API: &str = "kueue.x-k8s.io/v1beta1";
/// The kinds served while Kueue runs.
pub(crate) const KUEUE_KINDS: &[&str] =
    &["Workload", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "ResourceFlavor"];
/// The cohort the teams' ClusterQueues share (AWS does not document its name; nothing reads it).
const COHORT: &str = "hyperpod-cohort";
/// SageMaker's default borrow limit (percent of the team's quota).
const DEFAULT_BORROW_LIMIT: u32 = 50;
/// The pod set name of a job's Workload.
const POD_SET: &str = "workers";

/// Where one job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Queued,
    Admitted,
    Preempted,
    Finished,
}

/// One job under Kueue at a moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobQueue {
    pub namespace: String,
    pub name: String,
    pub kind: String,
    pub uid: String,
    pub team: String,
    pub priority: Option<String>,
    pub weight: u32,
    pub instance_type: String,
    pub resource: String,
    pub accelerators: u32,
    pub pods: u32,
    /// The pod template of the job's pods (the Workload's `podSets[].template`).
    pub template: Value,
    pub arrived: f64,
    pub state: State,
    /// When the current admission began.
    pub admitted_at: Option<f64>,
    /// When the state last changed.
    pub since: f64,
    pub reason: String,
    pub message: String,
    /// Accelerators of this job beyond its team's guarantee when it was admitted.
    pub borrowing: u32,
}

/// One team's queue at a moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TeamQueue {
    pub quota: QuotaConfig,
    /// Guaranteed accelerators per instance type, with the accelerator resource.
    pub guaranteed: BTreeMap<String, (String, u32)>,
    pub used: BTreeMap<String, u32>,
}

impl TeamQueue {
    fn borrow_cap(&self, instance_type: &str) -> u32 {
        if self.quota.strategy != SharingStrategy::LendAndBorrow {
            return 0;
        }
        let q = self.guaranteed.get(instance_type).map_or(0, |g| g.1);
        (q * self.quota.borrow_limit.unwrap_or(DEFAULT_BORROW_LIMIT)).div_ceil(100)
    }

    fn lends(&self) -> bool {
        self.quota.strategy != SharingStrategy::DontLend
    }

    pub fn borrowed(&self, instance_type: &str) -> u32 {
        let q = self.guaranteed.get(instance_type).map_or(0, |g| g.1);
        self.used.get(instance_type).copied().unwrap_or(0).saturating_sub(q)
    }
}

/// Kueue's view of one cluster at a moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Admissions {
    /// By the key of the job's object.
    pub jobs: BTreeMap<String, JobQueue>,
    pub teams: BTreeMap<String, TeamQueue>,
    /// Weights of the scheduler config's priority classes, by class name.
    pub weights: BTreeMap<String, u32>,
    /// Idle quota is lent by fair-share weight (the scheduler config's `FairShare`).
    pub fair_share: bool,
}

impl Admissions {
    /// (pending, admitted) Workloads among the jobs `of` selects.
    fn counts(&self, of: impl Fn(&JobQueue) -> bool) -> (usize, usize) {
        let n = |s: &[State]| self.jobs.values().filter(|j| of(j) && s.contains(&j.state)).count();
        (n(&[State::Queued, State::Preempted]), n(&[State::Admitted]))
    }

    /// `None`: the pods of the job at `key` are not held by Kueue; `Some(None)`: held (not
    /// admitted); `Some(Some(t))`: admitted at `t`.
    pub fn hold(&self, key: &str) -> Option<(Option<f64>, String)> {
        let j = self.jobs.get(key)?;
        match j.state {
            State::Admitted | State::Finished => Some((j.admitted_at, String::new())),
            State::Queued | State::Preempted => Some((
                None,
                format!("the job waits in Kueue queue {} ({}): {}", team_queue(&j.team), j.reason, j.message),
            )),
        }
    }
}

/// Whether Kueue runs in the cluster behind `kw` (the task governance add-on is installed).
pub(crate) fn running(w: &World, kw: &KubeWorld, now: f64) -> bool {
    w.eks.values().find(|c| c.arn == kw.eks_arn).is_some_and(|c| {
        c.addons.get(TASK_GOVERNANCE_ADDON).is_some_and(|a| a.life.exists(now) && !a.life.is_deleting())
    })
}

/// Whether `namespace` is a team's (`hyperpod-ns-<team>`), which the add-on creates while Kueue
/// runs and the team has a quota.
pub(crate) fn team_namespace_exists(w: &World, kw: &KubeWorld, namespace: &str, now: f64) -> bool {
    let Some(team) = namespace.strip_prefix("hyperpod-ns-") else { return false };
    running(w, kw, now) && governance(w, kw, now).0.contains_key(team)
}

/// The teams (compute quotas), the priority class weights and whether idle quota is lent by
/// fair-share weight (the scheduler config's `FairShare`) in the cluster behind `kw`.
fn governance(w: &World, kw: &KubeWorld, now: f64) -> (BTreeMap<String, TeamQueue>, BTreeMap<String, u32>, bool) {
    let arns: Vec<&str> = w.hyperpod.values().filter(|h| h.eks_arn == kw.eks_arn).map(|h| h.arn.as_str()).collect();
    let mut weights = BTreeMap::new();
    let mut fair_share = false;
    for sc in w.scheduler_configs.values().filter(|s| arns.contains(&s.cluster_arn.as_str()) && s.exists(now)) {
        fair_share |= sc.policy.fair_share;
        for p in &sc.policy.priority_classes {
            weights.insert(p.name.clone(), u32::from(p.weight));
        }
    }
    let mut teams = BTreeMap::new();
    for q in w.compute_quotas.values().filter(|q| arns.contains(&q.cluster_arn.as_str()) && q.exists(now)) {
        let mut guaranteed = BTreeMap::new();
        for r in &q.config.resources {
            let info = crate::ec2_specs::instance_type_info(&r.instance_type);
            let per = info.map_or(0, |i| i.accelerators);
            let resource = info.and_then(|i| pod::accelerator_resource(&i.accelerator)).unwrap_or("nvidia.com/gpu");
            let n = r.accelerators.unwrap_or_else(|| r.count.unwrap_or(0) * per);
            guaranteed.insert(r.instance_type.clone(), (resource.to_string(), n));
        }
        teams.insert(q.config.team.clone(), TeamQueue { quota: q.config.clone(), guaranteed, used: BTreeMap::new() });
    }
    (teams, weights, fair_share)
}

/// What a job asks for: (instance type, resource, accelerators, pods, run time once started).
fn request(pods: &[PodView]) -> (String, String, u32, u32, Option<f64>) {
    let mut instance_type = String::new();
    let mut resource = "nvidia.com/gpu".to_string();
    let mut total = 0;
    let mut run: Option<f64> = None;
    for p in pods {
        if let Some(t) = p.spec.pointer("/nodeSelector/node.kubernetes.io~1instance-type").and_then(Value::as_str) {
            instance_type = t.to_string();
        }
        if let Some((r, n)) = pod::accelerator_request(&p.spec) {
            resource = r;
            total += n;
        }
        run = match (run, p.batch_run) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (None, b) => b,
            (a, None) => a,
        };
    }
    (instance_type, resource, total, pods.len() as u32, run)
}

/// Kueue's state of the cluster behind `kw` at `now` (see the module docs); empty when Kueue
/// does not run.
pub(crate) fn admissions(w: &World, kw: &KubeWorld, now: f64) -> Admissions {
    if !running(w, kw, now) {
        return Admissions::default();
    }
    let (mut teams, weights, fair_share) = governance(w, kw, now);
    let mut jobs: BTreeMap<String, JobQueue> = BTreeMap::new();
    let mut runs: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for (key, rec) in &kw.objects {
        let o = &rec.object;
        let kind = str_at(o, "/kind").unwrap_or_default();
        if !matches!(kind, "HyperPodPyTorchJob" | "RayJob") {
            continue;
        }
        let Some(queue) = o.pointer("/metadata/labels").and_then(|l| l.get(QUEUE_LABEL)).and_then(Value::as_str) else {
            continue;
        };
        let team = team_of_queue(queue).unwrap_or(queue).to_string();
        let priority = o
            .pointer("/metadata/labels")
            .and_then(|l| l.get(PRIORITY_LABEL))
            .and_then(Value::as_str)
            .map(|p| class_of_priority(p).unwrap_or(p).to_string());
        let pods = workload::pods_of(key, rec, now);
        let (instance_type, resource, accelerators, npods, run) = request(&pods);
        // Kueue's pod set template: the pods' spec (only labels and annotations are allowed
        // in its metadata).
        let template =
            pods.first().map_or_else(|| json!({ "spec": { "containers": [] } }), |p| json!({ "spec": p.spec }));
        let (reason, message) = if !teams.contains_key(&team) {
            ("Inadmissible".to_string(), format!("LocalQueue {queue} doesn't exist"))
        } else if let Some(p) = priority.as_ref().filter(|p| !weights.contains_key(*p)) {
            ("Inadmissible".to_string(), format!("workload priority class {}-priority not found", p))
        } else {
            ("Pending".to_string(), "waiting for quota".to_string())
        };
        runs.insert(key.clone(), run);
        jobs.insert(
            key.clone(),
            JobQueue {
                namespace: str_at(o, "/metadata/namespace").unwrap_or("default").to_string(),
                name: str_at(o, "/metadata/name").unwrap_or_default().to_string(),
                kind: kind.to_string(),
                uid: str_at(o, "/metadata/uid").unwrap_or_default().to_string(),
                team,
                weight: priority.as_ref().and_then(|p| weights.get(p)).copied().unwrap_or(0),
                priority,
                instance_type,
                resource,
                accelerators,
                pods: npods,
                template,
                arrived: rec.created_at,
                state: State::Queued,
                admitted_at: None,
                since: rec.created_at,
                reason,
                message,
                borrowing: 0,
            },
        );
    }
    let mut t = jobs.values().map(|j| j.arrived).fold(f64::INFINITY, f64::min);
    while t <= now {
        // Jobs that ended by `t` free their quota.
        for (key, j) in jobs.iter_mut() {
            if j.state == State::Admitted
                && let (Some(at), Some(Some(run))) = (j.admitted_at, runs.get(key))
                && at + timings::POD_START + run <= t
            {
                j.state = State::Finished;
                j.since = at + timings::POD_START + run;
                j.reason = "Succeeded".into();
                j.message = "Job finished successfully".into();
                if let Some(team) = teams.get_mut(&j.team) {
                    *team.used.entry(j.instance_type.clone()).or_insert(0) -= j.accelerators;
                }
            }
        }
        admit_pending(&mut jobs, &mut teams, fair_share, t);
        let next_arrival = jobs.values().map(|j| j.arrived).filter(|a| *a > t).fold(f64::INFINITY, f64::min);
        let next_end = jobs
            .iter()
            .filter(|(_, j)| j.state == State::Admitted)
            .filter_map(|(k, j)| Some(j.admitted_at? + timings::POD_START + (*runs.get(k)?)?))
            .filter(|e| *e > t)
            .fold(f64::INFINITY, f64::min);
        t = next_arrival.min(next_end);
    }
    Admissions { jobs, teams, weights, fair_share }
}

/// Free accelerators of `instance_type` for team `team`: the cohort's quota, less what is in
/// use, less the idle quota of other teams that do not lend.
fn free(teams: &BTreeMap<String, TeamQueue>, team: &str, instance_type: &str) -> i64 {
    let mut free = 0i64;
    for (name, q) in teams {
        let Some((_, g)) = q.guaranteed.get(instance_type) else {
            free -= i64::from(q.used.get(instance_type).copied().unwrap_or(0));
            continue;
        };
        let used = q.used.get(instance_type).copied().unwrap_or(0);
        free += i64::from(*g) - i64::from(used);
        if name != team && !q.lends() {
            free -= i64::from(g.saturating_sub(used));
        }
    }
    free
}

fn fits(teams: &BTreeMap<String, TeamQueue>, j: &JobQueue) -> bool {
    let Some(q) = teams.get(&j.team) else { return false };
    let used = q.used.get(&j.instance_type).copied().unwrap_or(0);
    let g = q.guaranteed.get(&j.instance_type).map_or(0, |g| g.1);
    used + j.accelerators <= g + q.borrow_cap(&j.instance_type)
        && i64::from(j.accelerators) <= free(teams, &j.team, &j.instance_type)
}

fn order(a: &JobQueue, b: &JobQueue) -> std::cmp::Ordering {
    b.weight.cmp(&a.weight).then(a.arrived.total_cmp(&b.arrived)).then(a.name.cmp(&b.name))
}

/// Evicts `victims` (in order) until `j` fits; nothing when even all of them would not do.
fn evict_for(
    jobs: &mut BTreeMap<String, JobQueue>,
    teams: &mut BTreeMap<String, TeamQueue>,
    key: &str,
    victims: Vec<String>,
    reason: &str,
    t: f64,
) -> bool {
    let j = jobs[key].clone();
    let mut trial = teams.clone();
    let mut chosen = Vec::new();
    for v in victims {
        if fits(&trial, &j) {
            break;
        }
        let vj = &jobs[&v];
        *trial.get_mut(&vj.team).expect("team").used.entry(vj.instance_type.clone()).or_insert(0) -= vj.accelerators;
        chosen.push(v);
    }
    if chosen.is_empty() || !fits(&trial, &j) {
        return false;
    }
    *teams = trial;
    for v in chosen {
        let vj = jobs.get_mut(&v).expect("victim");
        vj.state = State::Preempted;
        vj.admitted_at = None;
        vj.since = t;
        vj.borrowing = 0;
        vj.reason = reason.to_string();
        vj.message = match reason {
            "InCohortReclamation" => format!(
                "Preempted to accommodate a workload ({}/{}) due to reclamation within the cohort: team {} takes back \
                 its lent quota",
                j.namespace, j.name, j.team
            ),
            _ => format!(
                "Preempted to accommodate a higher priority workload ({}/{}, priority {}) in the ClusterQueue",
                j.namespace,
                j.name,
                j.priority.as_deref().unwrap_or("none")
            ),
        };
    }
    true
}

/// A team's weighted share of the cohort's idle quota once `j` is admitted: what it would borrow
/// beyond its guarantee per unit of fair-share weight (0 when it borrows nothing; a team of
/// weight 0 that borrows comes last). Kueue's fair sharing admits the workload whose
/// ClusterQueue's share stays lowest first.
fn share_after(teams: &BTreeMap<String, TeamQueue>, j: &JobQueue) -> u64 {
    let Some(q) = teams.get(&j.team) else { return u64::MAX };
    let g = q.guaranteed.get(&j.instance_type).map_or(0, |g| g.1);
    let borrow = (q.used.get(&j.instance_type).copied().unwrap_or(0) + j.accelerators).saturating_sub(g);
    match (borrow, q.quota.fair_share_weight) {
        (0, _) => 0,
        (_, 0) => u64::MAX,
        (b, w) => u64::from(b) * 1_000_000 / u64::from(w),
    }
}

/// Tries the pending jobs at `t`, one at a time: by priority (weight), then arrival; with fair
/// share, first by the share their team would have ([`share_after`], recomputed after each
/// admission), so idle quota goes to the teams with the most weight per GPU they borrow.
fn admit_pending(
    jobs: &mut BTreeMap<String, JobQueue>,
    teams: &mut BTreeMap<String, TeamQueue>,
    fair_share: bool,
    t: f64,
) {
    let mut pending: Vec<(String, JobQueue)> = jobs
        .iter()
        .filter(|(_, j)| matches!(j.state, State::Queued | State::Preempted) && j.arrived <= t)
        .filter(|(_, j)| j.reason != "Inadmissible")
        .map(|(k, j)| (k.clone(), j.clone()))
        .collect();
    while !pending.is_empty() {
        let next = (0..pending.len())
            .min_by(|a, b| {
                let (ja, jb) = (&pending[*a].1, &pending[*b].1);
                let share = |j| if fair_share { share_after(teams, j) } else { 0 };
                share(ja).cmp(&share(jb)).then(order(ja, jb))
            })
            .expect("a pending job");
        let (key, j) = pending.remove(next);
        let Some(q) = teams.get(&j.team) else { continue };
        let g = q.guaranteed.get(&j.instance_type).map_or(0, |g| g.1);
        let within_guarantee = q.used.get(&j.instance_type).copied().unwrap_or(0) + j.accelerators <= g;
        let preempts = q.quota.preempt_team_tasks == PreemptTeamTasks::LowerPriority;
        let mut ok = fits(teams, &j);
        if !ok && within_guarantee {
            // Reclaim: other teams' borrowing jobs, lowest priority then newest first.
            let mut victims: Vec<&JobQueue> = jobs
                .values()
                .filter(|v| v.state == State::Admitted && v.team != j.team && v.instance_type == j.instance_type)
                .filter(|v| teams.get(&v.team).is_some_and(|tq| tq.borrowed(&v.instance_type) > 0))
                .collect();
            victims.sort_by(|a, b| a.weight.cmp(&b.weight).then(b.arrived.total_cmp(&a.arrived)));
            let keys = victims.iter().map(|v| key_of(jobs, v)).collect();
            ok = evict_for(jobs, teams, &key, keys, "InCohortReclamation", t);
        }
        if !ok && preempts {
            let mut victims: Vec<&JobQueue> = jobs
                .values()
                .filter(|v| v.state == State::Admitted && v.team == j.team && v.weight < j.weight)
                .filter(|v| v.instance_type == j.instance_type)
                .collect();
            victims.sort_by(|a, b| a.weight.cmp(&b.weight).then(b.arrived.total_cmp(&a.arrived)));
            let keys = victims.iter().map(|v| key_of(jobs, v)).collect();
            ok = evict_for(jobs, teams, &key, keys, "InClusterQueue", t);
        }
        let q = &teams[&j.team];
        let used = q.used.get(&j.instance_type).copied().unwrap_or(0);
        let cap = q.borrow_cap(&j.instance_type);
        let entry = jobs.get_mut(&key).expect("pending job");
        if ok {
            entry.state = State::Admitted;
            entry.admitted_at = Some(t);
            entry.since = t;
            entry.borrowing = (used + j.accelerators).saturating_sub(g).min(j.accelerators);
            entry.reason = "Admitted".into();
            entry.message = if entry.borrowing > 0 {
                format!(
                    "Quota reserved in ClusterQueue {}, borrowing {} {} of idle quota from other teams",
                    team_cluster_queue(&j.team),
                    entry.borrowing,
                    j.resource
                )
            } else {
                format!("Quota reserved in ClusterQueue {}", team_cluster_queue(&j.team))
            };
            *teams.get_mut(&j.team).expect("team").used.entry(j.instance_type.clone()).or_insert(0) += j.accelerators;
        } else if entry.state == State::Queued {
            let free = free(teams, &j.team, &j.instance_type).max(0);
            entry.reason = "Pending".into();
            entry.message = format!(
                "couldn't assign flavors to pod set {POD_SET}: insufficient unused quota for {} in flavor {}: the job \
                 needs {}; team {} uses {used} of its {g} guaranteed and may borrow {cap}; {free} free in the cluster's \
                 quotas",
                j.resource, j.instance_type, j.accelerators, j.team
            );
        }
    }
}

fn key_of(jobs: &BTreeMap<String, JobQueue>, j: &JobQueue) -> String {
    jobs.iter()
        .find(|(_, v)| v.uid == j.uid && v.name == j.name && v.namespace == j.namespace)
        .map(|(k, _)| k.clone())
        .unwrap_or_default()
}

fn condition(w: &World, kind: &str, status: bool, reason: &str, message: &str, at: f64) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": w.display_time(at).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

/// The `Workload` Kueue keeps for job `j`.
fn workload_object(w: &World, kw: &KubeWorld, j: &JobQueue) -> Value {
    let hash = stable_hash(&[&j.uid, "workload"]);
    let name = format!("{}-{}-{:05x}", j.kind.to_lowercase(), j.name, hash & 0xf_ffff);
    let mut conditions = Vec::new();
    match j.state {
        State::Queued => conditions.push(condition(w, "QuotaReserved", false, &j.reason, &j.message, j.since)),
        State::Admitted => {
            conditions.push(condition(w, "QuotaReserved", true, "QuotaReserved", &j.message, j.since));
            conditions.push(condition(w, "Admitted", true, "Admitted", "The workload is admitted", j.since));
        }
        State::Preempted => {
            conditions.push(condition(
                w,
                "QuotaReserved",
                false,
                "Pending",
                "waiting for quota after eviction",
                j.since,
            ));
            conditions.push(condition(w, "Evicted", true, "Preempted", &j.message, j.since));
            conditions.push(condition(w, "Preempted", true, &j.reason, &j.message, j.since));
        }
        State::Finished => conditions.push(condition(w, "Finished", true, &j.reason, &j.message, j.since)),
    }
    let mut status = json!({ "conditions": conditions });
    if j.state == State::Admitted {
        status["admission"] = json!({
            "clusterQueue": team_cluster_queue(&j.team),
            "podSetAssignments": [{
                "name": POD_SET,
                "count": j.pods,
                "flavors": { j.resource.clone(): j.instance_type },
                "resourceUsage": { j.resource.clone(): j.accelerators.to_string() },
            }],
        });
    }
    let api_version = if j.kind == "RayJob" { "ray.io/v1" } else { "sagemaker.amazonaws.com/v1" };
    let mut spec = json!({
        "queueName": team_queue(&j.team),
        "priority": j.weight,
        "podSets": [{ "name": POD_SET, "count": j.pods, "template": j.template }],
    });
    if let Some(p) = &j.priority {
        spec["priorityClassName"] = json!(priority_class_name(p));
        spec["priorityClassSource"] = json!("kueue.x-k8s.io/workloadpriorityclass");
    }
    json!({
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": j.namespace,
            "uid": crate::base::uuid_from(hash, stable_hash(&[&kw.uid, &j.uid])),
            "labels": { "kueue.x-k8s.io/job-uid": j.uid },
            "ownerReferences": [{ "apiVersion": api_version, "kind": j.kind, "name": j.name, "uid": j.uid,
                                  "controller": true, "blockOwnerDeletion": true }],
        },
        "spec": spec,
        "status": status,
    })
}

/// Labels the add-on puts on what it creates for a team (the team's namespace carries them too;
/// aws/sagemaker-hyperpod-cli `src/sagemaker/hyperpod/cli/constants/command_constants.py`).
fn team_labels(team: &str) -> Value {
    json!({ MANAGED_QUEUE_LABEL: "true", QUOTA_ALLOCATION_LABEL: team })
}

/// The `ClusterQueue` of a team: its quota per instance type (one flavor per type, one resource
/// group per accelerator resource, so every flavor covers exactly its group's resources) and what
/// it uses and borrows.
fn cluster_queue_object(a: &Admissions, team: &str, q: &TeamQueue) -> Value {
    let mut groups: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (it, (res, n)) in &q.guaranteed {
        let mut r =
            json!({ "name": res, "nominalQuota": n.to_string(), "borrowingLimit": q.borrow_cap(it).to_string() });
        if !q.lends() {
            r["lendingLimit"] = json!("0");
        }
        groups.entry(res.as_str()).or_default().push(json!({ "name": it, "resources": [r] }));
    }
    let groups: Vec<Value> =
        groups.into_iter().map(|(res, flavors)| json!({ "coveredResources": [res], "flavors": flavors })).collect();
    let usage: Vec<Value> = q
        .guaranteed
        .iter()
        .map(|(it, (res, _))| {
            json!({ "name": it, "resources": [{ "name": res, "total": q.used.get(it).copied().unwrap_or(0).to_string(),
                                                "borrowed": q.borrowed(it).to_string() }] })
        })
        .collect();
    let (pending, admitted) = a.counts(|j| j.team == team);
    let mut cq = json!({
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": { "name": team_cluster_queue(team), "labels": team_labels(team) },
        "spec": {
            "cohort": COHORT,
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": team_namespace(team) } },
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": groups,
            "preemption": {
                "withinClusterQueue": q.quota.preempt_team_tasks.as_str(),
                "reclaimWithinCohort": "Any",
            },
        },
        "status": {
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "pendingWorkloads": pending,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
        },
    });
    if a.fair_share {
        cq["spec"]["fairSharing"] = json!({ "weight": q.quota.fair_share_weight.to_string() });
    }
    cq
}

/// The `LocalQueue` of a team, in its namespace, pointing at its ClusterQueue.
fn local_queue_object(a: &Admissions, team: &str) -> Value {
    let (pending, admitted) = a.counts(|j| j.team == team);
    json!({
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": { "name": team_queue(team), "namespace": team_namespace(team), "labels": team_labels(team) },
        "spec": { "clusterQueue": team_cluster_queue(team) },
        "status": { "pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted },
    })
}

/// The `WorkloadPriorityClass` of a scheduler config's priority class: its weight is the value.
fn priority_class_object(class: &str, weight: u32) -> Value {
    json!({
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": { "name": priority_class_name(class) },
        "value": weight,
        "description": format!("priority class {class} of the cluster's scheduler config"),
    })
}

/// The `ResourceFlavor` of an instance type named in some quota (named after the type, selecting
/// its nodes).
fn resource_flavor_object(instance_type: &str) -> Value {
    json!({
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": { "name": instance_type },
        "spec": { "nodeLabels": { "node.kubernetes.io/instance-type": instance_type } },
    })
}

/// The Kueue objects of `kind` in the cluster behind `kw` (namespaced kinds filtered by
/// `namespace`).
pub(crate) fn objects(w: &World, kw: &KubeWorld, kind: &str, namespace: Option<&str>, now: f64) -> Vec<Value> {
    let a = admissions(w, kw, now);
    match kind {
        "Workload" => a
            .jobs
            .values()
            .filter(|j| namespace.is_none_or(|ns| j.namespace == ns))
            .map(|j| workload_object(w, kw, j))
            .collect(),
        "ClusterQueue" => a.teams.iter().map(|(t, q)| cluster_queue_object(&a, t, q)).collect(),
        "LocalQueue" => a
            .teams
            .keys()
            .filter(|t| namespace.is_none_or(|ns| team_namespace(t) == ns))
            .map(|t| local_queue_object(&a, t))
            .collect(),
        "WorkloadPriorityClass" => a.weights.iter().map(|(c, w)| priority_class_object(c, *w)).collect(),
        "ResourceFlavor" => {
            let types: std::collections::BTreeSet<&String> =
                a.teams.values().flat_map(|q| q.guaranteed.keys()).collect();
            types.into_iter().map(|t| resource_flavor_object(t)).collect()
        }
        _ => Vec::new(),
    }
}
