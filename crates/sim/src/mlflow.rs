//! Simulated SageMaker managed MLflow: tracking servers and the runs of simulated training jobs.
//!
//! - A tracking server is `Creating` for [`timings::MLFLOW_TRACKING_SERVER_CREATE`] (AWS takes
//!   about 20 minutes), then `Created`. Creation checks what SageMaker checks up front: the name,
//!   the size, an `s3://` artifact store and a role that exists in the account. The
//!   "resource fails" fault makes it `CreateFailed` half-way.
//! - DeleteMlflowTrackingServer makes it `Deleting` for
//!   [`timings::MLFLOW_TRACKING_SERVER_DELETE`], then it is gone (a `Creating` server cannot be
//!   deleted yet; an unknown one is `ResourceNotFound`). With the "resource fails" fault the
//!   deletion stops half-way in `DeleteFailed` with the fault's reason; deleting again retries.
//! - Runs are not stored: they are derived from the training jobs of every simulated cluster
//!   whose rank-0 container carries `MLFLOW_TRACKING_URI` = the server's ARN and whose service
//!   account's EKS Pod Identity role may call `sagemaker-mlflow:*` on it ([`may_report`]) (what
//!   `instantstart-recipes` sets) — one run per job, named after the job, in the experiment
//!   `MLFLOW_EXPERIMENT_NAME` (`Default` when unset). A run starts when the container starts.
//!   Only jobs that started after the server was created report to it: a deleted server's runs
//!   are gone, also from a new server of the same name (and ARN).
//! - Metrics come from [`training_curve`](crate::training_curve), the curve the simulated
//!   training logs print (`step k | loss … | … tokens/s`): one step every
//!   [`TRAINING_STEP_SECONDS`](crate::TRAINING_STEP_SECONDS) of training time, `loss` and
//!   `throughput` (tokens/s) logged at every step. So the plot in the UI and the job's log lines
//!   agree, and a restarted server shows the same history.

use crate::base::{Lifecycle, Phase, rkey, stable_hash};
use crate::cloud::SimCloud;
use crate::kube::pod::{self, PodView};
use crate::kube::pod::{PodRun, Role};
use crate::kube::training;
use crate::kube::{nodes, workload};
use crate::kube::{parse_training_log_line, training_curve};
use crate::timings;
use crate::world::{TrackingServerRec, World};
use async_trait::async_trait;
use instantstart_core::provider::{
    CreateTrackingServer, MetricPoint, MlflowRun, MlflowTracking, ProviderError, ProviderErrorKind, Result, RunMetrics,
    RunQuery, TrackingServer, tracking_server_name,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// Most points of one metric history (the newest), like the log's rotation.
const MAX_POINTS: u64 = 5000;

fn view(w: &World, r: &TrackingServerRec, now: f64) -> TrackingServer {
    let (status, failure_reason) = r.status(now).unwrap_or(("Deleting", None));
    let id = format!("t-{:012x}", stable_hash(&[&r.arn]) & 0xffff_ffff_ffff);
    TrackingServer {
        name: r.name.clone(),
        arn: r.arn.clone(),
        region: r.region.clone(),
        status: status.to_string(),
        url: (status == "Created").then(|| format!("https://{id}.{}.experiments.sagemaker.aws", r.region)),
        artifact_store_uri: Some(r.artifact_store_uri.clone()),
        role_arn: Some(r.role_arn.clone()),
        size: Some(r.size),
        mlflow_version: Some(r.mlflow_version.clone()),
        created_at: Some(w.display_time(r.life.created_at)),
        failure_reason,
        tags: r.tags.clone(),
    }
}

fn invalid(api: &str, message: String) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, format!("ValidationException: {message}"))
}

fn create(w: &mut World, req: &CreateTrackingServer, now: f64, fails: Option<&str>) -> Result<TrackingServer> {
    const API: &str = "sagemaker:CreateMlflowTrackingServer";
    tracking_server_name(&req.name).map_err(|e| invalid(API, format!("TrackingServerName {e}")))?;
    if !req.artifact_store_uri.starts_with("s3://") || req.artifact_store_uri.len() <= "s3://".len() {
        return Err(invalid(API, format!("ArtifactStoreUri {} is not an s3:// URI", req.artifact_store_uri)));
    }
    let role = req.role_arn.rsplit('/').next().unwrap_or_default();
    if !req.role_arn.starts_with("arn:aws:iam::") || !w.roles.contains_key(role) {
        return Err(invalid(API, format!("RoleArn {} cannot be assumed by SageMaker", req.role_arn)));
    }
    let key = rkey(&req.region, &req.name);
    if w.mlflow_servers.get(&key).is_some_and(|r| r.exists(now)) {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::AlreadyExists,
            format!("ResourceInUse: Tracking server {} already exists", req.name),
        ));
    }
    let mut life = Lifecycle::new(now, timings::MLFLOW_TRACKING_SERVER_CREATE);
    if let Some(reason) = fails {
        life.fail_after(timings::MLFLOW_TRACKING_SERVER_CREATE * timings::FAILURE_SHARE, reason);
    }
    let rec = TrackingServerRec {
        name: req.name.clone(),
        region: req.region.clone(),
        arn: format!("arn:aws:sagemaker:{}:{}:mlflow-tracking-server/{}", req.region, w.account, req.name),
        artifact_store_uri: req.artifact_store_uri.clone(),
        size: req.size,
        role_arn: req.role_arn.clone(),
        mlflow_version: req.mlflow_version.clone().unwrap_or_else(|| "3.0".into()),
        tags: req.tags.clone(),
        life,
        delete_failure: None,
    };
    w.mlflow_servers.insert(key, rec.clone());
    Ok(view(w, &rec, now))
}

fn delete(w: &mut World, region: &str, name: &str, now: f64, fails: Option<&str>) -> Result<()> {
    const API: &str = "sagemaker:DeleteMlflowTrackingServer";
    let not_found =
        || ProviderError::not_found(API, format!("ResourceNotFound: Cannot find TrackingServer with name {name}"));
    let rec = w.mlflow_servers.get_mut(&rkey(region, name)).ok_or_else(not_found)?;
    match rec.status(now).ok_or_else(not_found)?.0 {
        "Deleting" => return Ok(()),
        "Creating" => {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::Conflict,
                format!(
                    "ValidationException: Tracking server {name} is Creating; it can be deleted once creation has finished"
                ),
            ));
        }
        "DeleteFailed" => rec.life.deleting = None,
        _ => {}
    }
    rec.delete_failure = fails.map(str::to_string);
    rec.life.start_deleting(now, timings::MLFLOW_TRACKING_SERVER_DELETE);
    Ok(())
}

fn server_by_arn<'a>(w: &'a World, api: &str, arn: &str, now: f64) -> Result<&'a TrackingServerRec> {
    let rec = w.mlflow_servers.values().find(|r| r.arn == arn && r.exists(now)).ok_or_else(|| {
        ProviderError::not_found(api, format!("RESOURCE_DOES_NOT_EXIST: no tracking server with ARN {arn}"))
    })?;
    match rec.life.phase(now) {
        Phase::Active => Ok(rec),
        Phase::Creating => Err(ProviderError::new(
            api,
            ProviderErrorKind::Transient,
            format!("tracking server {} is still Creating; its MLflow API is not reachable yet", rec.name),
        )),
        _ => Err(ProviderError::new(
            api,
            ProviderErrorKind::Failed,
            format!("tracking server {} is not running; its MLflow API is not reachable", rec.name),
        )),
    }
}

/// A run derived from a training job, with its whole metric history up to now.
struct SimRun {
    run: MlflowRun,
    steps: Vec<(u64, f64)>,
}

/// Whether `pod` has AWS credentials that may call the MLflow API of tracking server `arn`: the
/// `sagemaker-mlflow` plugin signs every call with the pod's credentials, and pods get none but
/// their service account's EKS Pod Identity (the nodes' instance role is not theirs), whose role
/// must allow `sagemaker-mlflow:*` on the server
/// (https://docs.aws.amazon.com/sagemaker/latest/dg/mlflow-create-tracking-server-iam.html).
/// Without them the run is never recorded.
fn may_report(w: &World, kw: &crate::world::KubeWorld, pod: &PodView, arn: &str, now: f64) -> bool {
    let sa = pod.spec.get("serviceAccountName").and_then(Value::as_str).unwrap_or("default");
    let Some(c) = w.eks.values().find(|c| c.arn == kw.eks_arn) else { return false };
    if crate::eks::pod_identity_problem(w, c, &pod.namespace, sa, None, now).is_some() {
        return false;
    }
    c.pod_identity
        .values()
        .find(|a| a.namespace == pod.namespace && a.service_account == sa)
        .and_then(|a| w.role_by_arn(&a.role_arn))
        .is_some_and(|r| r.allows("sagemaker-mlflow:LogMetric", arn) && r.allows("sagemaker-mlflow:CreateRun", arn))
}

fn env_of(pod: &PodView, name: &str) -> Option<String> {
    pod.spec.pointer("/containers/0/env")?.as_array()?.iter().find_map(|e| {
        (e.get("name").and_then(Value::as_str) == Some(name))
            .then(|| e.get("value").and_then(Value::as_str).map(str::to_string))
            .flatten()
    })
}

/// The runs reported to the server `arn` (created at `since`) by the training jobs of every
/// simulated cluster that started after it: one per job, from the pod that logs the steps (rank
/// 0 of a HyperPod job, the head of a RayJob). Its metric history is what that pod's log reports
/// (parsed back with [`parse_training_log_line`]), so the plot and the log always agree —
/// in-place restarts included.
fn runs(w: &World, arn: &str, since: f64, now: f64) -> Vec<SimRun> {
    let mut out = Vec::new();
    for kw in w.kube.values() {
        let nodes = nodes::nodes(w, kw, now);
        for pod in workload::all_pods(kw, None, now) {
            let Some(run @ PodRun::Training { job, role, .. }) = &pod.run else { continue };
            let reports = match role {
                Role::Rank => pod.rank == 0,
                Role::RayHead => true,
                Role::RayWorker => false,
            };
            if !reports || env_of(&pod, "MLFLOW_TRACKING_URI").as_deref() != Some(arn) {
                continue;
            }
            if !may_report(w, kw, &pod, arn, now) {
                continue;
            }
            let st = pod::pod_state(&pod, &nodes, now);
            let Some(started) = st.started_at.filter(|t| *t >= since) else { continue };
            let job_uid = pod.owner.as_ref().map(|o| o.3.clone()).unwrap_or_else(|| pod.uid.clone());
            let experiment = env_of(&pod, "MLFLOW_EXPERIMENT_NAME").unwrap_or_else(|| "Default".into());
            let mut steps: Vec<(u64, f64)> = training::log_lines(&pod, run, &st, now)
                .into_iter()
                .filter_map(|(t, line)| parse_training_log_line(&line).map(|(k, _, _)| (k, t)))
                .collect();
            if steps.len() as u64 > MAX_POINTS {
                steps.drain(..steps.len() - MAX_POINTS as usize);
            }
            let mut metrics = BTreeMap::new();
            if let Some((k, _)) = steps.last() {
                let (loss, throughput) = training_curve(job, *k);
                metrics.insert("loss".to_string(), loss);
                metrics.insert("throughput".to_string(), throughput);
            }
            let status = match st.phase {
                "Failed" => "FAILED",
                "Succeeded" => "FINISHED",
                _ => "RUNNING",
            };
            let params = BTreeMap::from([
                ("cluster".to_string(), kw.eks_cluster.clone()),
                ("namespace".to_string(), pod.namespace.clone()),
                ("image".to_string(), pod.image().to_string()),
                ("world_size".to_string(), pod.world_size.to_string()),
            ]);
            out.push(SimRun {
                run: MlflowRun {
                    run_id: format!("{:016x}{:016x}", stable_hash(&[arn, &job_uid]), stable_hash(&[&job_uid, arn])),
                    name: job.clone(),
                    experiment_id: (stable_hash(&[arn, &experiment]) % 1_000_000_000).to_string(),
                    experiment,
                    status: status.to_string(),
                    start_time: Some(w.display_time(started)),
                    end_time: st.finished_at.map(|t| w.display_time(t)),
                    metrics,
                    params,
                },
                steps,
            });
        }
    }
    out.sort_by(|a, b| b.run.start_time.cmp(&a.run.start_time).then_with(|| a.run.run_id.cmp(&b.run.run_id)));
    out
}

#[async_trait]
impl MlflowTracking for SimCloud {
    async fn list_tracking_servers(&self, region: &str) -> Result<Vec<TrackingServer>> {
        self.read("sagemaker:ListMlflowTrackingServers", |w, cx| {
            Ok(w.mlflow_servers
                .values()
                .filter(|r| r.region == region && r.exists(cx.now))
                .map(|r| view(w, r, cx.now))
                .collect())
        })
    }

    async fn describe_tracking_server(&self, region: &str, name: &str) -> Result<Option<TrackingServer>> {
        self.read("sagemaker:DescribeMlflowTrackingServer", |w, cx| {
            Ok(w.mlflow_servers.get(&rkey(region, name)).filter(|r| r.exists(cx.now)).map(|r| view(w, r, cx.now)))
        })
    }

    async fn create_tracking_server(&self, req: &CreateTrackingServer) -> Result<TrackingServer> {
        self.write("sagemaker:CreateMlflowTrackingServer", |w, cx| create(w, req, cx.now, cx.resource_fails.as_deref()))
    }

    async fn delete_tracking_server(&self, region: &str, name: &str) -> Result<()> {
        self.write("sagemaker:DeleteMlflowTrackingServer", |w, cx| {
            delete(w, region, name, cx.now, cx.resource_fails.as_deref())
        })
    }

    async fn search_runs(&self, arn: &str, query: &RunQuery) -> Result<Vec<MlflowRun>> {
        const API: &str = "sagemaker-mlflow:SearchRuns";
        self.read(API, |w, cx| {
            let since = server_by_arn(w, API, arn, cx.now)?.life.created_at;
            let max = query.max_results.clamp(1, instantstart_core::provider::MAX_RUNS) as usize;
            let all = runs(w, arn, since, cx.now);
            if let Some(e) = &query.experiment
                && !all.iter().any(|r| &r.run.experiment == e)
            {
                return Err(ProviderError::not_found(
                    API,
                    format!("RESOURCE_DOES_NOT_EXIST: Could not find experiment with name {e}"),
                ));
            }
            Ok(all
                .into_iter()
                .filter(|r| query.experiment.as_ref().is_none_or(|e| &r.run.experiment == e))
                .take(max)
                .map(|r| r.run)
                .collect())
        })
    }

    async fn metric_history(&self, arn: &str, run_id: &str, keys: &[String]) -> Result<RunMetrics> {
        const API: &str = "sagemaker-mlflow:GetMetricHistory";
        self.read(API, |w, cx| {
            let since = server_by_arn(w, API, arn, cx.now)?.life.created_at;
            let run = runs(w, arn, since, cx.now).into_iter().find(|r| r.run.run_id == run_id).ok_or_else(|| {
                ProviderError::not_found(API, format!("RESOURCE_DOES_NOT_EXIST: Run '{run_id}' not found"))
            })?;
            let keys: Vec<String> =
                if keys.is_empty() { run.run.metrics.keys().cloned().collect() } else { keys.to_vec() };
            let series = keys
                .into_iter()
                .map(|key| {
                    let points = run
                        .steps
                        .iter()
                        .filter_map(|(k, t)| {
                            let (loss, throughput) = training_curve(&run.run.name, *k);
                            let value = match key.as_str() {
                                "loss" => loss,
                                "throughput" => throughput,
                                _ => return None,
                            };
                            Some(MetricPoint {
                                step: *k as i64,
                                value,
                                timestamp: w.display_time(*t).timestamp_millis(),
                            })
                        })
                        .collect();
                    (key, points)
                })
                .collect();
            Ok(RunMetrics { run_id: run_id.to_string(), series })
        })
    }
}
