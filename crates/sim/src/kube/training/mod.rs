//! Simulated training workloads and what they leave behind.
//!
//! - **The curve.** Every simulated training job follows one loss/throughput curve, a pure
//!   function of the job name and the step ([`training_curve`]), so the container logs, the
//!   simulated MLflow runs and the tests see the same numbers: a loss that decays from about
//!   2.2–3.2 towards a floor of 0.35–0.65 with a little per-step noise, and a throughput
//!   (tokens per second, the whole job) that warms up over the first steps and then jitters
//!   around a per-job base. One step is logged every [`TRAINING_STEP_SECONDS`] of training
//!   time (restarts do not count).
//! - **`HyperPodPyTorchJob`** (`sagemaker.amazonaws.com/v1`, the HyperPod training operator):
//!   `replicaSpecs[].replicas` pods named `<job>-<spec>-<index>`, run for the job's duration
//!   ([`DURATION_ANNOTATION`](super::DURATION_ANNOTATION), default
//!   [`timings::PYTORCHJOB_DEFAULT_RUN`]). A **process fault** (injected with
//!   [`SimFaults::process_faults`](crate::SimFaults::process_faults) or a fault on
//!   `k8s:ProcessFault`, or raised by a `logMonitoringConfiguration` rule that sees the job
//!   hang) restarts the training processes in place — the pods stay where they are — for
//!   [`timings::PROCESS_RESTART`], as the operator does while
//!   `runPolicy.restartPolicy.numRestartBeforeFullJobRestart` in-place restarts per
//!   `evalPeriodSeconds` remain; then it restarts the whole job (pods recreated, training
//!   resumes from the step it reached) while `maxFullJobRestarts` remain; then the job fails
//!   (`RestartBudgetExhausted`). Status: `conditions` (`Created`, `Running`, `Restarting`,
//!   `Completed` or `Failed`), `restartCount` (every restart), `restartStatus`
//!   (`restartCount` in the window since the last full restart, `fullJobRestartCount`,
//!   `currentEvalPeriod`), `jobPods`, `masterAddr`/`masterPort`, `startTime`,
//!   `completionTime`.
//! - **`RayJob`** (`ray.io/v1`, KubeRay): a head pod and the worker groups' pods of its
//!   `RayCluster` (`<job>-raycluster-<id>`); once they run, the entrypoint is submitted and runs
//!   for the job's duration on the head (whose log carries the training lines). Status as
//!   KubeRay writes it: `jobDeploymentStatus` (`Initializing`, `Running`, `Complete`,
//!   `Failed`), `jobStatus` (`PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`), `rayClusterName`,
//!   `jobId`, `dashboardURL`, `rayClusterStatus`, `startTime`, `endTime`.
//! - **Model downloads** (the `batch/v1` Jobs of `recipes::download`, recognised by their
//!   `instantstart.io/destination` annotation) run for a time that grows with the model size
//!   and, when they succeed, write the repository's files (`config.json`, tokenizer,
//!   `model.safetensors` shards sized from the parameter count in the repository name) under
//!   the destination in the bucket behind the shared claim. A HyperPod job that completes
//!   writes its final checkpoint under `checkpoints/<job>/` when it mounts that claim.

pub(crate) mod pods;

use super::nodes;
use super::objects::str_at;
use super::pod::{self, NodeInfo, PodRun, PodState, PodView, Role};
use super::workload;
use crate::base::stable_hash;
use crate::faults::{FaultMode, SimFaults};
use crate::timings;
use crate::world::{FaultEvent, KubeRec, KubeWorld, Recovery};
use crate::world::{ObjectRec, World};
pub use pods::TRAINING_STEP_SECONDS;
use pods::{DESTINATION_ANNOTATION, DESTINATION_VOLUME_ANNOTATION, same_time};
pub(crate) use pods::{
    HP_API, HP_KIND, RAY_API, RAY_KIND, apply_download, apply_hyperpod_plan, apply_ray, hyperpod_plan,
    parameter_billions, ray_cluster_name,
};
use serde_json::{Value, json};
/// A uniform number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// `(loss, throughput in tokens/s)` of training job `job` at `step` (steps count from 1; step 0
/// is the untrained model). Rounded as the log prints them (4 and 1 decimals).
pub fn training_curve(job: &str, step: u64) -> (f64, f64) {
    let h = stable_hash(&["training-curve", job]);
    let start = 2.2 + unit(h);
    let floor = 0.35 + 0.3 * unit(stable_hash(&["floor", job]));
    let tau = 30.0 + 90.0 * unit(stable_hash(&["tau", job]));
    let n = unit(stable_hash(&[job, &step.to_string()])) - 0.5;
    let s = step as f64;
    let loss = floor + (start - floor) / (1.0 + s / tau).powf(0.9) * (1.0 + 0.03 * n);
    let base = 6000.0 + 8000.0 * unit(stable_hash(&["throughput", job]));
    let warmup = 0.55 + 0.45 * (s.min(5.0) / 5.0);
    let jitter = 1.0 + 0.04 * (unit(stable_hash(&["jitter", job, &step.to_string()])) - 0.5);
    let throughput = base * warmup * jitter;
    ((loss * 1e4).round() / 1e4, (throughput * 10.0).round() / 10.0)
}

/// The log line of `step`: `step 12 | loss 1.2345 | lr 2.00e-05 | 9123.4 tokens/s`.
pub fn training_log_line(job: &str, step: u64) -> String {
    let (loss, throughput) = training_curve(job, step);
    format!("step {step} | loss {loss:.4} | lr 2.00e-05 | {throughput:.1} tokens/s")
}

/// `(step, loss, throughput)` of a line written by [`training_log_line`] (anywhere in the line,
/// so prefixes such as `[rank0]:` are fine).
pub fn parse_training_log_line(line: &str) -> Option<(u64, f64, f64)> {
    instantstart_core::log_lines::parse_training_step(line)
}
/// API name under which a fault in [`SimFaults::fail_apis`] becomes a process fault:
/// `fail_once` faults one running HyperPod job once (the message is the reason), `fail` keeps
/// faulting every running HyperPod job each time it runs again.
pub const PROCESS_FAULT_API: &str = "k8s:ProcessFault";
/// Port of the rendezvous on the rank-0 pod.
const MASTER_PORT: &str = "23456";
// ---------------------------------------------------------------------------------------------
// Logs

/// The log of a training or download pod (see `logs::lines`).
pub(crate) fn log_lines(pod: &PodView, run: &PodRun, st: &PodState, until: f64) -> Vec<(f64, String)> {
    log_lines_after(pod, run, st, f64::NEG_INFINITY, until)
}

/// The lines of [`log_lines`] later than `after`, without formatting the earlier step lines
/// (a follower asks for the few new ones many times a second).
pub(crate) fn log_lines_after(
    pod: &PodView,
    run: &PodRun,
    st: &PodState,
    after: f64,
    until: f64,
) -> Vec<(f64, String)> {
    let Some(start) = st.started_at else { return Vec::new() };
    let end = st.finished_at.unwrap_or(f64::INFINITY);
    let mut out: Vec<(f64, String)> = Vec::new();
    let image = pod.image();
    match run {
        PodRun::Download { repo, container_path, files } => {
            let run = pod.batch_run.unwrap_or(0.0);
            out.push((start, format!("Starting {image}")));
            out.push((start + 1.0, format!("Fetching {} files from {repo}", files.len())));
            let per = (run - timings::DOWNLOAD_SETUP).max(0.0) / files.len().max(1) as f64;
            let mut t = start + timings::DOWNLOAD_SETUP.min(run);
            for (name, size) in files {
                t += per;
                out.push((t.min(start + run), format!("Downloaded {name} ({size} bytes)")));
            }
            if pod.fails.is_none() {
                out.push((
                    start + run,
                    format!("copied {} file(s), kept 0 already present, into {container_path}", files.len()),
                ));
            }
        }
        PodRun::Training { job, role, resumed_step, total_steps, offset, restarts, killed } => {
            match role {
                Role::Rank => {
                    out.push((start, format!("Starting {image}")));
                    out.push((
                        start + 1.0,
                        format!(
                            "Initializing distributed environment: world_size={} rank={}",
                            pod.world_size, pod.rank
                        ),
                    ));
                    out.push((start + 2.0, "Loading dataset and model".to_string()));
                    if *resumed_step > 0 {
                        out.push((start + 2.0, format!("Resuming from checkpoint at step {resumed_step}")));
                    }
                }
                Role::RayHead => {
                    out.push((start, format!("Starting {image}")));
                    out.push((start + 1.0, "Ray runtime started (head node, dashboard on 0.0.0.0:8265)".to_string()));
                    out.push((start + offset, format!("Job '{job}' submitted; entrypoint running on the head node")));
                }
                Role::RayWorker => {
                    out.push((start, format!("Starting {image}")));
                    out.push((start + 1.0, "Ray runtime started (worker node); connected to the head".to_string()));
                }
            }
            if *role != Role::RayWorker {
                steps(&mut out, job, start + offset, end, *resumed_step, *total_steps, restarts, after, until);
            }
            if let Some((at, why)) = killed.as_ref().filter(|(at, _)| *at <= end) {
                out.push((*at, format!("RuntimeError: {why}")));
                out.push((*at, "[hyperpodrun] restart budget exhausted; the job stops".to_string()));
            } else if end.is_finite() {
                match (&pod.fails, role) {
                    (Some(why), _) => {
                        out.push((end, format!("RuntimeError: {why}")));
                        out.push((end, "Process exited with code 1".to_string()));
                    }
                    (None, Role::RayWorker) => out.push((end, "Ray runtime stopped".to_string())),
                    (None, _) => out.push((end, format!("Training complete: {total_steps} steps; checkpoint saved"))),
                }
            }
        }
    }
    out.retain(|(t, _)| *t <= until && *t <= end && *t > after);
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    const MAX_LINES: usize = 5000;
    if out.len() > MAX_LINES {
        out.drain(..out.len() - MAX_LINES);
    }
    out
}

/// Step lines from `train_start` on, paused by in-place restarts, up to `until`. Step lines at or
/// before `after` are counted but not formatted (the caller drops them).
#[allow(clippy::too_many_arguments)]
fn steps(
    out: &mut Vec<(f64, String)>,
    job: &str,
    train_start: f64,
    end: f64,
    resumed: u64,
    total: u64,
    restarts: &[(f64, String)],
    after: f64,
    until: f64,
) {
    let mut segments: Vec<(f64, f64)> = Vec::new();
    let mut from = train_start;
    for (i, (at, why)) in restarts.iter().enumerate() {
        segments.push((from, *at));
        out.push((*at, format!("[hyperpodrun] worker process failed: {why}")));
        out.push((*at, format!("[hyperpodrun] restarting the training processes in place (restart {})", i + 1)));
        from = at + timings::PROCESS_RESTART;
    }
    segments.push((from, end));
    let mut step = resumed;
    let mut carried = 0.0;
    for (k, (a, b)) in segments.iter().enumerate() {
        if k > 0 {
            out.push((*a, format!("[hyperpodrun] training processes restarted; resuming after step {step}")));
        }
        // Line i of the segment is at t0 + i·STEP (computed the same way whether or not the
        // earlier ones are skipped, so a line's time does not depend on the reader).
        let t0 = *a + (TRAINING_STEP_SECONDS - carried);
        let mut i: u64 = 0;
        if after > t0 {
            // Lines certainly at or before `after` (one short, for rounding) and certainly
            // emitted (before the segment's end and within the step budget).
            let before_after = (((after - t0) / TRAINING_STEP_SECONDS).floor() as u64).saturating_sub(1);
            let in_segment = if b.is_finite() {
                if *b < t0 { 0 } else { (((b - t0) / TRAINING_STEP_SECONDS).floor() as u64).saturating_sub(1) }
            } else {
                u64::MAX
            };
            i = before_after.min(in_segment).min(total.saturating_sub(step));
            step += i;
        }
        loop {
            let t = t0 + i as f64 * TRAINING_STEP_SECONDS;
            // Lines after `until` are not written yet (a long job would otherwise format its
            // whole future on every read).
            if t > *b || t > until || step >= total {
                break;
            }
            step += 1;
            if t > after {
                out.push((t, training_log_line(job, step)));
            }
            i += 1;
        }
        carried = (carried + (b - a)).rem_euclid(TRAINING_STEP_SECONDS);
        if !b.is_finite() {
            break;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statuses

fn t(w: &World, x: f64) -> Value {
    json!(w.k8s_time(x))
}

fn u64_at(v: &Value, pointer: &str, default: u64) -> u64 {
    v.pointer(pointer).and_then(|x| x.as_u64().or_else(|| x.as_str().and_then(|s| s.parse().ok()))).unwrap_or(default)
}

/// The restart budget of a HyperPodPyTorchJob (`runPolicy.restartPolicy`).
struct Budget {
    in_place: u64,
    window: f64,
    full: u64,
}

fn budget(job: &Value) -> Budget {
    let rp = "/spec/runPolicy/restartPolicy";
    Budget {
        in_place: u64_at(job, &format!("{rp}/numRestartBeforeFullJobRestart"), 3),
        window: u64_at(job, &format!("{rp}/evalPeriodSeconds"), 21_600) as f64,
        full: u64_at(job, &format!("{rp}/maxFullJobRestarts"), 1),
    }
}

/// The status the HyperPod training operator writes.
pub(crate) fn hyperpod_status(w: &World, rec: &KubeRec, pods: &[PodView], nodes: &[NodeInfo], now: f64) -> Value {
    let plan = hyperpod_plan(rec);
    let states: Vec<PodState> = pods.iter().map(|p| pod::pod_state(p, nodes, now)).collect();
    let all = |phase: &str| !states.is_empty() && states.iter().all(|s| s.phase == phase);
    let failed = states.iter().any(|s| s.phase == "Failed") && states.iter().all(|s| s.finished_at.is_some());
    let completed = all("Succeeded");
    let running = all("Running");
    let in_place = plan.restarts.iter().find(|(at, _)| *at <= now && now < at + timings::PROCESS_RESTART);
    let events: Vec<&FaultEvent> = rec.training.current(rec.spec_changed_at).collect();
    let mut conditions = vec![
        json!({ "type": "Created", "status": "True", "reason": "JobCreated", "lastTransitionTime": t(w, rec.spec_changed_at) }),
    ];
    let end = states.iter().filter_map(|s| s.finished_at).reduce(f64::max);
    let start = states
        .iter()
        .filter_map(|s| s.started_at)
        .reduce(f64::max)
        .filter(|_| states.iter().all(|s| s.started_at.is_some()));
    if failed {
        let (reason, message) = match &plan.killed {
            Some((_, why)) => ("RestartBudgetExhausted", why.clone()),
            None => ("JobFailed", rec.fails.clone().unwrap_or_else(|| "a training pod failed".into())),
        };
        conditions.push(json!({ "type": "Running", "status": "False", "reason": reason }));
        conditions.push(json!({ "type": "Failed", "status": "True", "reason": reason, "message": message, "lastTransitionTime": end.map(|e| t(w, e)) }));
    } else if completed {
        conditions.push(json!({ "type": "Running", "status": "False", "reason": "JobCompleted" }));
        conditions.push(json!({ "type": "Completed", "status": "True", "reason": "JobCompleted", "message": "the training job completed", "lastTransitionTime": end.map(|e| t(w, e)) }));
    } else if let Some((at, why)) = in_place {
        conditions.push(json!({ "type": "Running", "status": "False", "reason": "Restarting" }));
        conditions.push(json!({ "type": "Restarting", "status": "True", "reason": "InPlaceRestart", "message": format!("restarting the training processes in place after: {why}"), "lastTransitionTime": t(w, *at) }));
    } else if plan.epoch > 0 && !running {
        conditions.push(json!({ "type": "Running", "status": "False", "reason": "Restarting" }));
        conditions.push(json!({ "type": "Restarting", "status": "True", "reason": "FullJobRestart", "message": "recreating the job's pods after a fault", "lastTransitionTime": t(w, plan.epoch_start) }));
    } else if running {
        conditions.push(json!({ "type": "Running", "status": "True", "reason": "JobRunning", "lastTransitionTime": start.map(|s| t(w, s)) }));
    } else if let Some(gate) = states.iter().find_map(|s| s.gated.clone()) {
        conditions
            .push(json!({ "type": "Running", "status": "False", "reason": gate.reason, "message": gate.message }));
    }
    let b = budget(&rec.object);
    let restarts = events.iter().filter(|e| e.recovery != Recovery::Fail).count();
    let full = events.iter().filter(|e| e.recovery == Recovery::FullRestart).count();
    let in_window = events
        .iter()
        .filter(|e| e.recovery == Recovery::InPlace && e.at >= plan.epoch_start && e.at > now - b.window)
        .count();
    let mut s = json!({
        "conditions": conditions,
        "restartCount": restarts,
        "restartStatus": {
            "restartCount": in_window,
            "fullJobRestartCount": full,
            "currentEvalPeriod": ((now - rec.spec_changed_at).max(0.0) / b.window.max(1.0)).floor() as u64,
        },
        "jobPods": pods.iter().map(|p| json!({ "apiVersion": "v1", "kind": "Pod", "name": p.name, "namespace": p.namespace, "uid": p.uid })).collect::<Vec<_>>(),
        "masterPort": MASTER_PORT,
    });
    if let Some(ip) = states.first().and_then(|st| st.pod_ip.clone()) {
        s["masterAddr"] = json!(ip);
    }
    if let Some(first) = states.iter().filter_map(|s| s.started_at).reduce(f64::min) {
        s["startTime"] = t(w, first);
    }
    if completed && let Some(e) = end {
        s["completionTime"] = t(w, e);
    }
    s
}

/// The status KubeRay writes for a RayJob.
pub(crate) fn ray_status(w: &World, rec: &KubeRec, pods: &[PodView], nodes: &[NodeInfo], now: f64) -> Value {
    let o = &rec.object;
    let name = str_at(o, "/metadata/name").unwrap_or_default();
    let ns = str_at(o, "/metadata/namespace").unwrap_or("default");
    let uid = str_at(o, "/metadata/uid").unwrap_or_default();
    let cluster = ray_cluster_name(name, uid);
    let states: Vec<(&PodView, PodState)> = pods.iter().map(|p| (p, pod::pod_state(p, nodes, now))).collect();
    let head = states.iter().find(|(p, _)| matches!(p.run, Some(PodRun::Training { role: Role::RayHead, .. })));
    let workers: Vec<&(&PodView, PodState)> =
        states.iter().filter(|(p, _)| matches!(p.run, Some(PodRun::Training { role: Role::RayWorker, .. }))).collect();
    let ready_workers = workers.iter().filter(|(_, s)| s.started_at.is_some() && s.finished_at.is_none()).count();
    let head_started = head.and_then(|(_, s)| s.started_at);
    let submitted = head_started.map(|s| s + timings::RAY_JOB_SUBMIT).filter(|s| *s <= now);
    let end = head.and_then(|(_, s)| s.finished_at);
    let failed = states.iter().any(|(_, s)| s.phase == "Failed");
    let (job_status, deployment) = match (submitted, end) {
        (_, Some(_)) if failed => ("FAILED", "Failed"),
        (_, Some(_)) => ("SUCCEEDED", "Complete"),
        (Some(_), None) => ("RUNNING", "Running"),
        (None, None) if head_started.is_some() && ready_workers == workers.len() => ("PENDING", "Running"),
        (None, None) => ("", "Initializing"),
    };
    let mut s = json!({
        "jobDeploymentStatus": deployment,
        "rayClusterName": cluster,
        "jobId": format!("{name}-{}", &cluster[cluster.len() - 5..]),
        "dashboardURL": format!("{cluster}-head-svc.{ns}.svc.cluster.local:8265"),
        "rayClusterStatus": {
            "state": if head_started.is_some() && end.is_none() { "ready" } else { "" },
            "desiredWorkerReplicas": workers.len(),
            "availableWorkerReplicas": ready_workers,
            "readyWorkerReplicas": ready_workers,
            "head": { "podIP": head.and_then(|(_, s)| s.pod_ip.clone()).unwrap_or_default() },
        },
        "observedGeneration": o.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
    });
    if !job_status.is_empty() {
        s["jobStatus"] = json!(job_status);
    }
    if let Some(at) = submitted {
        s["startTime"] = t(w, at);
    }
    if let Some(e) = end {
        s["endTime"] = t(w, e);
        s[if failed { "failed" } else { "succeeded" }] = json!(1);
        if failed {
            s["reason"] = json!("AppFailed");
            s["message"] = json!(rec.fails.clone().unwrap_or_else(|| "the entrypoint failed".into()));
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Faults

/// The HyperPod jobs of the world, as (kube world key, object key).
fn hyperpod_jobs(w: &World) -> Vec<(String, String)> {
    w.kube
        .iter()
        .flat_map(|(wk, kw)| {
            kw.objects
                .iter()
                .filter(|(_, r)| {
                    str_at(&r.object, "/apiVersion") == Some(HP_API) && str_at(&r.object, "/kind") == Some(HP_KIND)
                })
                .map(move |(k, _)| (wk.clone(), k.clone()))
        })
        .collect()
}

/// A HyperPod job's training window now: when training (re)started, whether it is running at
/// `at`, and the steps done by then.
struct RunningJob {
    /// Start of the current training segment (after the last restart).
    segment_start: f64,
    /// Training steps done at `at`.
    step: u64,
    /// The natural end of the pods' run.
    end: f64,
    running: bool,
}

fn running_job(w: &World, kw: &KubeWorld, key: &str, rec: &KubeRec, at: f64) -> Option<RunningJob> {
    let nodes = nodes::nodes(w, kw, at);
    let pods = workload::pods_of(key, rec, at);
    if pods.is_empty() {
        return None;
    }
    let states: Vec<PodState> = pods.iter().map(|p| pod::pod_state(p, &nodes, at)).collect();
    let start = states.iter().map(|s| s.started_at).collect::<Option<Vec<f64>>>()?.into_iter().reduce(f64::max)?;
    let end = states.iter().filter_map(|s| s.finished_at).reduce(f64::min);
    let plan = hyperpod_plan(rec);
    let natural_end = pods
        .iter()
        .zip(&states)
        .filter_map(|(p, s)| Some(s.started_at? + p.batch_run?))
        .reduce(f64::min)
        .unwrap_or(f64::INFINITY);
    let mut active = (at - start).max(0.0);
    let mut segment_start = start;
    for (r, _) in plan.restarts.iter().filter(|(r, _)| *r <= at) {
        active -= (at.min(r + timings::PROCESS_RESTART) - r).max(0.0);
        segment_start = segment_start.max(r + timings::PROCESS_RESTART);
    }
    let in_restart = plan.restarts.iter().any(|(r, _)| *r <= at && at < r + timings::PROCESS_RESTART);
    let step = plan.resumed_step + (active / TRAINING_STEP_SECONDS).floor() as u64;
    let running = end.is_none() && plan.killed.is_none() && !in_restart && states.iter().all(|s| s.phase == "Running");
    Some(RunningJob { segment_start, step, end: natural_end, running })
}

/// Records a fault on the HyperPod job at `key` at time `at`, deciding the operator's answer
/// from the restart budget.
fn record_fault(kw: &mut KubeWorld, key: &str, at: f64, step: u64, reason: &str) -> Option<Recovery> {
    let rec = kw.objects.get_mut(key)?;
    let b = budget(&rec.object);
    let plan = hyperpod_plan(rec);
    let events: Vec<&FaultEvent> = rec.training.current(rec.spec_changed_at).collect();
    let full = events.iter().filter(|e| e.recovery == Recovery::FullRestart).count() as u64;
    let in_window = events
        .iter()
        .filter(|e| e.recovery == Recovery::InPlace && e.at >= plan.epoch_start && e.at > at - b.window)
        .count() as u64;
    let total = events.len() as u64;
    let (recovery, reason) = if in_window < b.in_place {
        (Recovery::InPlace, reason.to_string())
    } else if full < b.full {
        (Recovery::FullRestart, reason.to_string())
    } else {
        (
            Recovery::Fail,
            format!(
                "restart budget exhausted after {total} restart(s) ({} in place per {:.0} s window, {} full job restart(s)); last fault: {reason}",
                b.in_place, b.window, b.full
            ),
        )
    };
    let spec_at = rec.spec_changed_at;
    rec.training.faults.push(FaultEvent { at, spec_at, reason, step, recovery });
    kw.resource_version += 1;
    Some(recovery)
}

/// Injects pending process faults and log-monitor detections into running HyperPod jobs.
/// Called on every simulated API call and when faults are set.
pub(crate) fn inject(w: &mut World, faults: &mut SimFaults, now: f64) {
    let jobs = hyperpod_jobs(w);
    if jobs.is_empty() {
        return;
    }
    // Log monitors first (they may have fired in the past).
    for (wk, key) in &jobs {
        for _ in 0..64 {
            let Some(fire) = monitor_fire(w, wk, key, now) else { break };
            let Some(kw) = w.kube.get_mut(wk) else { break };
            if matches!(record_fault(kw, key, fire.0, fire.1, &fire.2), None | Some(Recovery::Fail)) {
                break;
            }
        }
    }
    // Explicit process faults.
    let mut i = 0;
    while i < faults.process_faults.len() {
        let f = faults.process_faults[i].clone();
        let target = jobs.iter().find(|(wk, key)| {
            let Some(kw) = w.kube.get(wk) else { return false };
            let Some(rec) = kw.objects.get(key) else { return false };
            let name_ok = f.job.as_deref().is_none_or(|j| str_at(&rec.object, "/metadata/name") == Some(j));
            let ns_ok = f.namespace.as_deref().is_none_or(|n| str_at(&rec.object, "/metadata/namespace") == Some(n));
            name_ok && ns_ok && running_job(w, kw, key, rec, now).is_some_and(|r| r.running)
        });
        match target.cloned() {
            Some((wk, key)) => {
                if let Some(kw) = w.kube.get(&wk)
                    && let Some(rec) = kw.objects.get(&key)
                    && let Some(r) = running_job(w, kw, &key, rec, now)
                    && let Some(kw) = w.kube.get_mut(&wk)
                {
                    record_fault(kw, &key, now, r.step, &f.reason);
                }
                if f.count <= 1 {
                    faults.process_faults.remove(i);
                } else {
                    faults.process_faults[i].count -= 1;
                    i += 1;
                }
            }
            None => i += 1,
        }
    }
    // `k8s:ProcessFault` in fail_apis.
    let mode = faults.fail_apis.get(PROCESS_FAULT_API).cloned();
    let (reason, once) = match mode {
        Some(FaultMode::FailOnce { message, .. }) => (message, true),
        Some(FaultMode::Fail { message, .. }) => (message, false),
        Some(FaultMode::ResourceFails { reason }) => (reason, false),
        Some(FaultMode::LostResponse) => ("process fault (simulated)".to_string(), true),
        None => return,
    };
    for (wk, key) in &jobs {
        let Some(kw) = w.kube.get(wk) else { continue };
        let Some(rec) = kw.objects.get(key) else { continue };
        let Some(r) = running_job(w, kw, key, rec, now).filter(|r| r.running) else { continue };
        if let Some(kw) = w.kube.get_mut(wk) {
            record_fault(kw, key, now, r.step, &reason);
        }
        if once {
            faults.fail_apis.remove(PROCESS_FAULT_API);
            return;
        }
    }
}

/// A log-monitoring rule of `logMonitoringConfiguration`.
struct Monitor {
    name: String,
    pattern: regex::Regex,
    start_cutoff: Option<f64>,
    recurring: Option<f64>,
    stop: Option<regex::Regex>,
    metric: Option<(f64, String, usize)>,
}

fn monitors(job: &Value) -> Vec<Monitor> {
    let rules = job.pointer("/spec/runPolicy/logMonitoringConfiguration").and_then(Value::as_array);
    rules
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let pattern = regex::Regex::new(r.get("logPattern")?.as_str()?).ok()?;
            let secs = |k: &str| r.get(k).and_then(Value::as_f64).filter(|s| *s > 0.0);
            Some(Monitor {
                name: r.get("name").and_then(Value::as_str).unwrap_or("rule").to_string(),
                pattern,
                start_cutoff: secs("expectedStartCutOffInSeconds"),
                recurring: secs("expectedRecurringFrequencyInSeconds"),
                stop: r.get("stopPattern").and_then(Value::as_str).and_then(|p| regex::Regex::new(p).ok()),
                metric: r.get("metricThreshold").and_then(Value::as_f64).map(|th| {
                    let op = r.get("operator").and_then(Value::as_str).unwrap_or("gt").to_string();
                    let points = r.get("metricEvaluationDataPoints").and_then(Value::as_u64).unwrap_or(1).max(1);
                    (th, op, points as usize)
                }),
            })
        })
        .collect()
}

/// When a log monitor of the HyperPod job at `key` first detects a hang or slowness in the
/// current training segment, up to `now`: (time, step, reason).
fn monitor_fire(w: &World, wk: &str, key: &str, now: f64) -> Option<(f64, u64, String)> {
    let kw = w.kube.get(wk)?;
    let rec = kw.objects.get(key)?;
    let rules = monitors(&rec.object);
    if rules.is_empty() {
        return None;
    }
    let r = running_job(w, kw, key, rec, now)?;
    if hyperpod_plan(rec).killed.is_some() {
        return None;
    }
    let nodes = nodes::nodes(w, kw, now);
    let pod = workload::pods_of(key, rec, now).into_iter().next()?;
    let st = pod::pod_state(&pod, &nodes, now);
    let run = pod.run.clone()?;
    let lines: Vec<(f64, String)> =
        log_lines(&pod, &run, &st, now).into_iter().filter(|(t, _)| *t >= r.segment_start).collect();
    let horizon = now.min(r.end);
    let mut fires: Vec<(f64, String)> = Vec::new();
    for m in &rules {
        let stop_at = m.stop.as_ref().and_then(|s| lines.iter().find(|(_, l)| s.is_match(l)).map(|(t, _)| *t));
        let limit = stop_at.unwrap_or(horizon).min(horizon);
        let matches: Vec<&(f64, String)> = lines.iter().filter(|(t, l)| *t <= limit && m.pattern.is_match(l)).collect();
        if let Some(cut) = m.start_cutoff {
            let deadline = r.segment_start + cut;
            if deadline <= limit && matches.first().is_none_or(|(t, _)| *t > deadline) {
                fires.push((
                    deadline,
                    format!(
                        "log monitor {}: HANGING, no line matched {:?} within {cut:.0} s of the start",
                        m.name,
                        m.pattern.as_str()
                    ),
                ));
            }
        }
        if let Some(freq) = m.recurring {
            for pair in matches.windows(2) {
                if pair[1].0 - pair[0].0 > freq {
                    fires.push((
                        pair[0].0 + freq,
                        format!(
                            "log monitor {}: HANGING, no line matched {:?} for {freq:.0} s",
                            m.name,
                            m.pattern.as_str()
                        ),
                    ));
                    break;
                }
            }
            if let Some((last, _)) = matches.last()
                && last + freq <= limit
            {
                fires.push((
                    last + freq,
                    format!(
                        "log monitor {}: HANGING, no line matched {:?} for {freq:.0} s",
                        m.name,
                        m.pattern.as_str()
                    ),
                ));
            }
        }
        if let Some((threshold, op, points)) = &m.metric {
            let mut streak = 0;
            for (t, l) in &matches {
                let value = m.pattern.captures(l).and_then(|c| c.get(1)).and_then(|v| v.as_str().parse::<f64>().ok());
                let slow = value.is_some_and(|v| match op.as_str() {
                    "gt" => v > *threshold,
                    "gteq" => v >= *threshold,
                    "lt" => v < *threshold,
                    "lteq" => v <= *threshold,
                    "eq" => v == *threshold,
                    _ => false,
                });
                streak = if slow { streak + 1 } else { 0 };
                if streak >= *points {
                    fires.push((*t, format!("log monitor {}: SLOW, the value matched by {:?} was {op} {threshold} {points} time(s) in a row", m.name, m.pattern.as_str())));
                    break;
                }
            }
        }
    }
    let (at, why) = fires.into_iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
    // The step reached when it fired.
    let step = running_job(w, kw, key, rec, at).map_or(r.step, |x| x.step);
    Some((at, step, why))
}

// ---------------------------------------------------------------------------------------------
// Outputs

/// The bucket (and key prefix) behind the shared claim a pod template mounts.
fn bucket_of(kw: &KubeWorld, ns: &str, pod_spec: &Value) -> Option<(String, String)> {
    let volumes = pod_spec.get("volumes").and_then(Value::as_array)?;
    volumes.iter().find_map(|v| {
        let claim = v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str)?;
        let pvc = kw.objects.get(&crate::world::obj_key("v1", "PersistentVolumeClaim", Some(ns), claim))?;
        let pv = super::objects::bound_volume(kw, ns, claim, str_at(&pvc.object, "/spec/volumeName"))?;
        let bucket = str_at(pv, "/spec/csi/volumeAttributes/bucketName")?;
        let prefix = pv
            .pointer("/spec/mountOptions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|o| o.strip_prefix("prefix ").or_else(|| o.strip_prefix("--prefix ")).map(str::to_string))
            .unwrap_or_default();
        Some((bucket.to_string(), prefix))
    })
}

/// Files a finished workload leaves in the bucket (keys relative to the mount).
fn outputs(rec: &KubeRec, pods: &[PodView]) -> Vec<(String, u64)> {
    let o = &rec.object;
    let name = str_at(o, "/metadata/name").unwrap_or_default();
    match pods.first().and_then(|p| p.run.as_ref()) {
        Some(PodRun::Download { files, .. }) => {
            let dest = o
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(DESTINATION_ANNOTATION))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_end_matches('/');
            files.iter().map(|(f, s)| (format!("{dest}/{f}"), *s)).collect()
        }
        Some(PodRun::Training { total_steps, .. }) => {
            let dir = format!("checkpoints/{name}/step-{total_steps}");
            let weights = 500_000_000 + stable_hash(&[name, "ckpt"]) % 1_000_000_000;
            vec![
                (format!("{dir}/model.safetensors"), weights),
                (format!("{dir}/optimizer.pt"), weights * 2),
                (format!("{dir}/trainer_state.json"), 2_000 + stable_hash(&[name, "state"]) % 8_000),
            ]
        }
        None => Vec::new(),
    }
}

/// Whether `o` is a kind that leaves files behind (a download Job, a training job).
fn writes_outputs(o: &Value) -> bool {
    match (str_at(o, "/apiVersion"), str_at(o, "/kind")) {
        (Some(HP_API), Some(HP_KIND)) | (Some(RAY_API), Some(RAY_KIND)) => true,
        // A download into an FSx volume writes nothing to the bucket (the simulator does not
        // model a file system's contents).
        (Some("batch/v1"), Some("Job")) => o
            .pointer("/metadata/annotations")
            .is_some_and(|a| a.get(DESTINATION_ANNOTATION).is_some() && a.get(DESTINATION_VOLUME_ANNOTATION).is_none()),
        _ => false,
    }
}

/// (kube world key, object key, spec version, bucket, files, time written).
type OutputWrite = (String, String, f64, String, Vec<(String, u64)>, f64);

/// Writes the outputs of downloads and training jobs that finished successfully by `now` into
/// their bucket, once per spec version.
pub(crate) fn write_outputs(w: &mut World, now: f64) {
    let mut writes: Vec<OutputWrite> = Vec::new();
    for (wk, kw) in &w.kube {
        let nodes = nodes::nodes(w, kw, now);
        for (key, rec) in &kw.objects {
            if rec.training.outputs_written_for.is_some_and(|at| same_time(at, rec.spec_changed_at))
                || !writes_outputs(&rec.object)
            {
                continue;
            }
            let pods = workload::pods_of(key, rec, now);
            if pods.is_empty() || pods.iter().any(|p| p.run.is_none()) {
                continue;
            }
            let states: Vec<PodState> = pods.iter().map(|p| pod::pod_state(p, &nodes, now)).collect();
            if !states.iter().all(|s| s.phase == "Succeeded") {
                continue;
            }
            let at = states.iter().filter_map(|s| s.finished_at).reduce(f64::max).unwrap_or(now);
            let ns = str_at(&rec.object, "/metadata/namespace").unwrap_or("default");
            let Some((bucket, prefix)) = bucket_of(kw, ns, &pods[0].spec) else { continue };
            let files = outputs(rec, &pods).into_iter().map(|(k, size)| (format!("{prefix}{k}"), size)).collect();
            writes.push((wk.clone(), key.clone(), rec.spec_changed_at, bucket, files, at));
        }
    }
    for (wk, key, spec_at, bucket, files, at) in writes {
        if let Some(b) = w.buckets.get_mut(&bucket) {
            for (k, size) in files {
                b.objects.insert(k, ObjectRec { size, written_at: at, sha256: None });
            }
        }
        if let Some(rec) = w.kube.get_mut(&wk).and_then(|kw| kw.objects.get_mut(&key)) {
            rec.training.outputs_written_for = Some(spec_at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_is_deterministic_and_decreasing_on_average() {
        assert_eq!(training_curve("job-a", 7), training_curve("job-a", 7));
        assert_ne!(training_curve("job-a", 7), training_curve("job-b", 7));
        let (l1, t1) = training_curve("job-a", 1);
        let (l100, t100) = training_curve("job-a", 100);
        let (l1000, _) = training_curve("job-a", 1000);
        assert!(l1 > l100 && l100 > l1000, "{l1} {l100} {l1000}");
        assert!((2.0..3.4).contains(&l1) && (0.3..0.9).contains(&l1000), "{l1} {l1000}");
        assert!(t100 > t1, "warm-up: {t1} → {t100}");
        assert!((5000.0..15000.0).contains(&t100), "{t100}");
    }

    #[test]
    fn log_lines_parse_back() {
        let line = training_log_line("verl-grpo", 42);
        let (loss, throughput) = training_curve("verl-grpo", 42);
        assert_eq!(parse_training_log_line(&line), Some((42, loss, throughput)));
        assert_eq!(parse_training_log_line(&format!("[rank0]: {line}")), Some((42, loss, throughput)));
        assert_eq!(parse_training_log_line("Starting img"), None);
    }
}
