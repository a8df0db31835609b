//! Training workloads: HyperPod job recovery and logs, hang monitors, Ray jobs, model downloads, GPU metrics.

use super::*;

fn uids(p: &[Value]) -> Vec<String> {
    p.iter().map(|x| x["metadata"]["uid"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn hyperpod_jobs_restart_in_place_then_fully_then_fail_when_the_budget_is_spent() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    // One in-place restart per window, then one full job restart; the fourth fault fails it.
    apply(&s, hyperpod_job("ft", 2, 600, 1, 1, json!([]))).await;
    let c = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    assert_eq!(hp_summary(&hp(&s, "ft").await), (c(&["Created"]), 0, 0, 0));
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await;
    let names: Vec<&str> = p.iter().map(|x| x["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ft-workers-0", "ft-workers-1"]);
    assert_eq!(p[0]["metadata"]["ownerReferences"][0]["kind"], "HyperPodPyTorchJob");
    let first_uids = uids(&p);
    adv(&s, timings::POD_START + 1.0);
    assert_eq!(hp_summary(&hp(&s, "ft").await), (c(&["Created", "Running"]), 0, 0, 0));

    // Table: each fault, then what the status shows while restarting and once running again.
    let table: [(&str, Summary, f64, Summary, bool); 3] = [
        (
            "in place",
            (c(&["Created", "Restarting"]), 1, 1, 0),
            timings::PROCESS_RESTART + 1.0,
            (c(&["Created", "Running"]), 1, 1, 0),
            true,
        ),
        (
            "full job restart",
            (c(&["Created", "Restarting"]), 2, 0, 1),
            timings::POD_START + 1.0,
            (c(&["Created", "Running"]), 2, 0, 1),
            false,
        ),
        (
            "in place after the full restart",
            (c(&["Created", "Restarting"]), 3, 1, 1),
            timings::PROCESS_RESTART + 1.0,
            (c(&["Created", "Running"]), 3, 1, 1),
            true,
        ),
    ];
    let mut before = first_uids.clone();
    for (what, restarting, wait, running, same_pods) in table {
        adv(&s, 30.0);
        s.set_faults(SimFaults::none().with_process_fault(crate::ProcessFault::on("ft")));
        assert!(s.faults().process_faults.is_empty(), "{what}: the fault was used");
        assert_eq!(hp_summary(&hp(&s, "ft").await), restarting, "{what}");
        adv(&s, wait);
        assert_eq!(hp_summary(&hp(&s, "ft").await), running, "{what}");
        let now = uids(&pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await);
        assert_eq!(now == before, same_pods, "{what}: pods kept in place, or recreated");
        before = now;
    }
    let log = log_of(&s, "ft-workers-0").await;
    assert!(log.iter().any(|l| l.starts_with("Resuming from checkpoint at step ")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("restarting the training processes in place")), "{log:?}");

    // The fourth fault exhausts the budget.
    adv(&s, 30.0);
    s.set_faults(SimFaults::none().with_process_fault(crate::ProcessFault::on("ft")));
    let failed = hp(&s, "ft").await;
    assert_eq!(hp_summary(&failed).0, c(&["Created", "Failed"]));
    let cond =
        failed["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Failed").unwrap().clone();
    assert_eq!(cond["reason"], "RestartBudgetExhausted");
    assert!(cond["message"].as_str().unwrap().contains("restart budget exhausted after 3 restart(s)"), "{cond}");
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await;
    assert!(p.iter().all(|x| x["status"]["phase"] == "Failed"));
    assert!(log_of(&s, "ft-workers-0").await.iter().any(|l| l.contains("restart budget exhausted")));
    // A failed job writes no checkpoint; nothing else is faulted later.
    assert!(s.list_objects("is-demo-data", "checkpoints/", None).await.unwrap().entries.is_empty());
    s.delete(&target(), &oref("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", Some("default"), "ft"))
        .await
        .unwrap();
    assert!(pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await.is_empty(), "delete leaves no pods");
}

#[tokio::test]
async fn hyperpod_jobs_log_the_curve_and_checkpoint_into_the_bucket() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    apply(&s, hyperpod_job("curve", 2, 100, 3, 1, json!([]))).await;
    adv(&s, timings::POD_START + 35.0);
    // A fault through fail_apis (fail_once) on any running job.
    s.set_faults(SimFaults::none().with(
        crate::PROCESS_FAULT_API,
        FaultMode::fail_once(ProviderErrorKind::Failed, "CUDA error: an illegal memory access"),
    ));
    assert!(s.faults().fail_apis.is_empty(), "fail_once is used up");
    let job = hp(&s, "curve").await;
    assert_eq!(hp_summary(&job).1, 1);
    adv(&s, 100.0 - 35.0 + timings::PROCESS_RESTART - 1.0);
    assert!(hp_summary(&hp(&s, "curve").await).0.contains(&"Running".to_string()), "the restart delayed the end");
    adv(&s, 2.0);
    let done = hp(&s, "curve").await;
    assert_eq!(hp_summary(&done).0, ["Created", "Completed"]);
    assert!(done["status"]["completionTime"].is_string());
    let log = log_of(&s, "curve-workers-1").await;
    let steps: Vec<(u64, f64, f64)> = log.iter().filter_map(|l| crate::parse_training_log_line(l)).collect();
    assert_eq!(steps.len(), 10, "{log:?}");
    for (i, (step, loss, throughput)) in steps.iter().enumerate() {
        assert_eq!(*step, i as u64 + 1);
        assert_eq!((*loss, *throughput), crate::training_curve("curve", *step));
    }
    assert!(log.iter().any(|l| l.contains("worker process failed: CUDA error")), "{log:?}");
    assert_eq!(log.last().unwrap(), "Training complete: 10 steps; checkpoint saved");
    let ckpt = s.list_objects("is-demo-data", "checkpoints/curve/step-10/", None).await.unwrap();
    let keys: Vec<&str> = ckpt.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "checkpoints/curve/step-10/model.safetensors",
            "checkpoints/curve/step-10/optimizer.pt",
            "checkpoints/curve/step-10/trainer_state.json"
        ]
    );
}

#[tokio::test]
async fn log_monitors_detect_hangs_like_the_operator() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let healthy = json!([{"name": "steps", "logPattern": ".*loss (\\d+\\.\\d+).*", "expectedStartCutOffInSeconds": 60, "expectedRecurringFrequencyInSeconds": 30}]);
    let hanging =
        json!([{"name": "never", "logPattern": ".*Experiment configuration.*", "expectedStartCutOffInSeconds": 30}]);
    let slow = json!([{"name": "slow", "logPattern": ".*\\| (\\d+)\\.\\d tokens/s", "metricThreshold": 1000000, "operator": "lt", "metricEvaluationDataPoints": 3}]);
    apply(&s, hyperpod_job("ok", 1, 300, 1, 0, healthy)).await;
    apply(&s, hyperpod_job("hangs", 1, 300, 1, 0, hanging)).await;
    adv(&s, timings::POD_START + 200.0);
    let ok = hp(&s, "ok").await;
    assert_eq!(hp_summary(&ok), (vec!["Created".to_string(), "Running".to_string()], 0, 0, 0));
    // Hang at 30 s → restart in place; hang again 30 s after the restart → budget spent.
    let hangs = hp(&s, "hangs").await;
    assert_eq!(hp_summary(&hangs).0, ["Created", "Failed"]);
    let cond =
        hangs["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Failed").unwrap().clone();
    assert!(cond["message"].as_str().unwrap().contains("log monitor never: HANGING"), "{cond}");
    assert_eq!(hangs["status"]["restartCount"], 1);
    // A metric rule: three throughput values below the threshold in a row → SLOW.
    s.delete(&target(), &oref("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", Some("default"), "ok"))
        .await
        .unwrap();
    apply(&s, hyperpod_job("slow", 1, 300, 0, 0, slow)).await;
    adv(&s, timings::POD_START + 29.0);
    assert_eq!(hp_summary(&hp(&s, "slow").await).0, ["Created", "Running"]);
    adv(&s, 2.0);
    let slow = hp(&s, "slow").await;
    assert_eq!(hp_summary(&slow).0, ["Created", "Failed"]);
    assert!(slow["status"]["conditions"][2]["message"].as_str().unwrap().contains("log monitor slow: SLOW"), "{slow}");
}

#[tokio::test]
async fn ray_jobs_run_head_and_workers_with_kuberay_statuses() {
    let s = sim();
    gpu_world(&s, 2).await;
    install_chart(&s, &KUBERAY_OPERATOR).await;
    let template = json!({"metadata": {"labels": {"app.kubernetes.io/instance": "verl"}}, "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.49.0",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    apply(&s, json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "verl", "namespace": "default", "annotations": {crate::DURATION_ANNOTATION: "60"}},
        "spec": {"entrypoint": "python3 -m verl.trainer.main_ppo", "submissionMode": "K8sJobMode", "shutdownAfterJobFinishes": true,
                 "rayClusterSpec": {"rayVersion": "2.49.0", "headGroupSpec": {"rayStartParams": {}, "template": template},
                    "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {}, "template": template}]}}})).await;
    let p = pods(&s, &[("app.kubernetes.io/instance", "verl")]).await;
    let kinds: Vec<&str> = p.iter().map(|x| x["metadata"]["labels"]["ray.io/node-type"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.contains(&"head") && kinds.contains(&"worker"));
    let head = p.iter().find(|x| x["metadata"]["labels"]["ray.io/node-type"] == "head").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let status = |v: &Value| {
        (
            v["status"]["jobDeploymentStatus"].as_str().unwrap().to_string(),
            v["status"]["jobStatus"].as_str().unwrap_or("").to_string(),
        )
    };
    let table = [
        (0.0, ("Initializing", "")),
        (timings::POD_START + 1.0, ("Running", "PENDING")),
        (timings::RAY_JOB_SUBMIT, ("Running", "RUNNING")),
        (58.0, ("Running", "RUNNING")),
        (2.0, ("Complete", "SUCCEEDED")),
    ];
    for (wait, (deployment, job)) in table {
        adv(&s, wait);
        let v = get(&s, "ray.io/v1", "RayJob", Some("default"), "verl").await.unwrap();
        assert_eq!(status(&v), (deployment.to_string(), job.to_string()), "after +{wait}");
        assert!(v["status"]["rayClusterName"].as_str().unwrap().starts_with("verl-raycluster-"));
    }
    let log = log_of(&s, &head).await;
    let steps = log.iter().filter(|l| crate::parse_training_log_line(l).is_some()).count();
    assert_eq!(steps, 6, "{log:?}");
}

#[tokio::test]
async fn model_downloads_fill_the_bucket_when_the_job_completes() {
    let s = sim();
    gpu_world(&s, 1).await;
    shared_bucket(&s).await;
    let mut pod = json!({"restartPolicy": "Never", "containers": [{"name": "download", "image": "python:3.12-slim",
        "env": [{"name": "HF_REPO_ID", "value": "Qwen/Qwen3-0.6B"}, {"name": "DESTINATION", "value": "/s3/models/Qwen/Qwen3-0.6B"}]}]});
    shared_mount(&mut pod);
    apply(&s, json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "download-qwen", "namespace": "default",
        "annotations": {"instantstart.io/model-id": "Qwen/Qwen3-0.6B", "instantstart.io/destination": "models/Qwen/Qwen3-0.6B"}},
        "spec": {"backoffLimit": 3, "template": {"spec": pod}}})).await;
    adv(&s, timings::POD_START + 5.0);
    assert!(s.list_objects("is-demo-data", "", None).await.unwrap().entries.is_empty(), "nothing before the end");
    // ~1.2 GB at 250 MB/s plus the set-up.
    adv(&s, 60.0);
    let done = get(&s, "batch/v1", "Job", Some("default"), "download-qwen").await.unwrap();
    assert_eq!(done["status"]["conditions"][0]["type"], "Complete");
    let top = s.list_objects("is-demo-data", "", None).await.unwrap();
    assert_eq!(top.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["models/"]);
    let model = s.list_objects("is-demo-data", "models/Qwen/Qwen3-0.6B/", None).await.unwrap();
    let get_size = |k: &str| model.entries.iter().find(|e| e.key.ends_with(k)).and_then(|e| e.size_bytes);
    assert!(get_size("/config.json").is_some_and(|n| (500..2000).contains(&n)));
    assert!(get_size("/model.safetensors").is_some_and(|n| (1_200_000_000..1_300_000_000).contains(&n)));
    let pod = pods(&s, &[("job-name", "download-qwen")]).await[0]["metadata"]["name"].as_str().unwrap().to_string();
    let log = log_of(&s, &pod).await;
    assert!(
        log.last().unwrap().starts_with("copied 7 file(s), kept 0 already present, into /s3/models/Qwen/Qwen3-0.6B"),
        "{log:?}"
    );
    // The data outlives the Job, and keeps the bucket from being deleted.
    s.delete(&target(), &oref("batch/v1", "Job", Some("default"), "download-qwen")).await.unwrap();
    assert_eq!(s.list_objects("is-demo-data", "models/", None).await.unwrap().entries.len(), 1);
    assert_eq!(kind(s.delete_bucket("is-demo-data").await), ProviderErrorKind::Failed);
}

#[test]
fn repository_files_are_sized_from_the_parameter_count() {
    let files = crate::kube::training::pods::repository_files("meta-llama/Llama-3.1-70B-Instruct", false);
    let weights: u64 = files.iter().filter(|(f, _)| f.ends_with(".safetensors")).map(|(_, s)| s).sum();
    assert!((140_000_000_000..141_000_000_000).contains(&weights), "{weights}");
    assert!(files.iter().any(|(f, _)| f == "model-00029-of-00029.safetensors"), "{files:?}");
    assert!(files.iter().any(|(f, _)| f == "model.safetensors.index.json"));
    let data = crate::kube::training::pods::repository_files("openai/gsm8k", true);
    assert!(data.iter().any(|(f, _)| f.ends_with(".parquet")));
}

#[tokio::test]
async fn metrics_follow_the_gpus_jobs_use_and_an_in_place_restart_idles_them() {
    use instantstart_core::provider::{Metric, MetricsSource, MetricsWindow};
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let target = KubeTarget::new(REGION, "demo");
    let w = MetricsWindow { since_seconds: 120, step_seconds: 5 };
    apply(&s, hyperpod_job("watch", 1, 600, 3, 1, json!([]))).await;
    adv(&s, timings::POD_START + 60.0);

    let latest = |set: &instantstart_core::provider::SeriesSet, m: Metric| {
        set.series.iter().find(|x| x.metric == m).and_then(|x| x.latest()).unwrap_or(-1.0)
    };
    let job = s.job_metrics(&target, "default", "watch", &w).await.unwrap();
    assert_eq!(job.series.iter().map(|x| x.metric).collect::<Vec<_>>(), Metric::ALL.to_vec());
    assert!((85.0..=98.0).contains(&latest(&job, Metric::GpuUtilization)), "{job:?}");
    assert!(latest(&job, Metric::Throughput) > 1000.0, "{job:?}");
    assert_eq!(job.gpu_memory_total_mib, Some(24_576.0), "an A10G");
    // The log and the series agree: the loss is that of one of the newest logged steps (the
    // grid's last point may be a moment before the newest line).
    let log = log_of(&s, "watch-workers-0").await;
    let logged: Vec<f64> = log.iter().filter_map(|l| crate::parse_training_log_line(l)).map(|x| x.1).collect();
    assert!(logged.iter().rev().take(2).any(|l| *l == latest(&job, Metric::Loss)), "{logged:?} {job:?}");
    // Deterministic: the same read gives the same numbers.
    assert_eq!(s.job_metrics(&target, "default", "watch", &w).await.unwrap().series, job.series);

    // The job's node is busy, the other idle; a node without the job reads 0 everywhere.
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "watch")]).await;
    let busy = p[0]["spec"]["nodeName"].as_str().unwrap().to_string();
    let nodes = s
        .list(
            &target,
            &instantstart_core::provider::ListParams {
                api_version: "v1".into(),
                kind: "Node".into(),
                namespace: None,
                labels: vec![],
            },
        )
        .await
        .unwrap();
    let idle = nodes.iter().filter_map(|n| n.0["metadata"]["name"].as_str()).find(|n| *n != busy).unwrap().to_string();
    let on_busy = s.node_metrics(&target, &busy, &w).await.unwrap();
    assert_eq!(on_busy.series.len(), 2, "one GPU: utilization and memory");
    assert!(on_busy.series.iter().all(|x| x.gpu == Some(0) && x.node.as_deref() == Some(busy.as_str())));
    assert!(latest(&on_busy, Metric::GpuUtilization) >= 85.0);
    let on_idle = s.node_metrics(&target, &idle, &w).await.unwrap();
    assert!(on_idle.series.iter().all(|x| !x.points.is_empty() && x.points.iter().all(|p| p[1] == 0.0)), "{on_idle:?}");
    assert_eq!(s.node_metrics(&target, "nope", &w).await.unwrap_err().kind, ProviderErrorKind::NotFound);

    // An in-place restart: the GPUs idle and their memory is freed, no step is logged
    // (throughput 0); then it resumes. Seen in the window once it is over.
    s.set_faults(SimFaults::none().with_process_fault(crate::ProcessFault::on("watch")));
    adv(&s, timings::PROCESS_RESTART + 40.0);
    let after = s.job_metrics(&target, "default", "watch", &w).await.unwrap();
    let values = |set: &instantstart_core::provider::SeriesSet, m: Metric| -> Vec<f64> {
        set.series.iter().find(|x| x.metric == m).map(|x| x.points.iter().map(|p| p[1]).collect()).unwrap_or_default()
    };
    // A dip: a zero after a busy point, then busy again.
    let dip = |v: &[f64]| {
        let first = v.iter().position(|x| *x > 0.0);
        let zero = first.and_then(|f| v[f..].iter().position(|x| *x == 0.0).map(|z| f + z));
        zero.is_some_and(|z| v[z..].iter().any(|x| *x > 0.0))
    };
    for m in [Metric::GpuUtilization, Metric::GpuMemoryUsed, Metric::Throughput] {
        assert!(dip(&values(&after, m)), "{m:?}: {:?}", values(&after, m));
    }
    assert!(values(&after, Metric::GpuUtilization).iter().filter(|x| **x == 0.0).count() >= 3, "{after:?}");
    assert!(dip(&values(&s.node_metrics(&target, &busy, &w).await.unwrap(), Metric::GpuMemoryUsed)));
    assert!(latest(&after, Metric::Throughput) > 1000.0 && latest(&after, Metric::GpuUtilization) >= 85.0);
    assert!(s.stats().get("k8s:Metrics").copied().unwrap_or(0) >= 6, "every read is counted");
}
