//! SageMaker managed MLflow: tracking servers, their runs and metrics, deletion and faults.

use super::*;

async fn mlflow_server(s: &SimCloud) -> TrackingServer {
    let role = s
        .create_role(&CreateIamRole {
            name: "team-mlflow-role".into(),
            trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
            managed_policies: vec![],
            inline_policies: vec![],
            tags: tags(),
        })
        .await
        .unwrap();
    s.create_tracking_server(&CreateTrackingServer {
        region: REGION.into(),
        name: "team".into(),
        artifact_store_uri: "s3://is-demo-data/mlflow/team".into(),
        size: TrackingServerSize::Small,
        role_arn: role.arn,
        mlflow_version: None,
        tags: tags(),
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn tracking_servers_take_simulated_time_and_check_their_inputs() {
    let s = sim();
    let mut req = CreateTrackingServer {
        region: REGION.into(),
        name: "team".into(),
        artifact_store_uri: "s3://is-demo-data/mlflow".into(),
        size: TrackingServerSize::Small,
        role_arn: "arn:aws:iam::123456789012:role/missing".into(),
        mlflow_version: None,
        tags: tags(),
    };
    let e = s.create_tracking_server(&req).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    assert!(e.message.contains("RoleArn"), "{e}");
    req.artifact_store_uri = "/local".into();
    assert!(s.create_tracking_server(&req).await.unwrap_err().message.contains("ArtifactStoreUri"));

    let created = mlflow_server(&s).await;
    assert_eq!(created.status, "Creating");
    assert!(created.arn.ends_with(":mlflow-tracking-server/team"), "{}", created.arn);
    req.artifact_store_uri = "s3://is-demo-data/mlflow".into();
    req.role_arn = s.get_role("team-mlflow-role").await.unwrap().unwrap().arn;
    let dup = s.create_tracking_server(&req).await.unwrap_err();
    assert_eq!(dup.kind, ProviderErrorKind::AlreadyExists, "{dup}");
    let arn = created.arn.clone();
    let e = s.search_runs(&arn, &RunQuery { experiment: None, max_results: 10 }).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient, "not reachable while Creating: {e}");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE - 1.0);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "Creating");
    adv(&s, 1.0);
    let up = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!((up.status.as_str(), up.state()), ("Created", ResourceState::Active));
    assert!(up.url.as_deref().is_some_and(|u| u.ends_with(".us-east-1.experiments.sagemaker.aws")));
    assert_eq!(s.list_tracking_servers(REGION).await.unwrap(), vec![up]);
    assert!(s.list_tracking_servers("us-west-2").await.unwrap().is_empty());
    assert_eq!(s.describe_tracking_server(REGION, "nope").await.unwrap(), None);
    assert!(s.search_runs(&arn, &RunQuery { experiment: None, max_results: 10 }).await.unwrap().is_empty());
}

#[tokio::test]
async fn runs_and_metrics_come_from_the_training_jobs_that_report_to_the_server() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let server = mlflow_server(&s).await;
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    let env = json!([{"name": "MLFLOW_TRACKING_URI", "value": server.arn}, {"name": "MLFLOW_EXPERIMENT_NAME", "value": "sft"}]);
    mlflow_writer(&s, &server, "tracked-mlflow").await;
    let mut tracked = hyperpod_job("tracked", 2, 100, 3, 1, json!([]));
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = env.clone();
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["serviceAccountName"] = json!("tracked-mlflow");
    apply(&s, tracked).await;
    apply(&s, hyperpod_job("untracked", 1, 100, 3, 1, json!([]))).await;
    // The MLflow env without credentials that may call the server: no run.
    let mut anonymous = hyperpod_job("anonymous", 1, 100, 3, 1, json!([]));
    anonymous["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = env;
    apply(&s, anonymous).await;
    adv(&s, timings::POD_START + 55.0);
    let q = RunQuery { experiment: None, max_results: 10 };
    let runs = s.search_runs(&server.arn, &q).await.unwrap();
    assert_eq!(runs.len(), 1, "one run per job that carries the MLflow env and may report: {runs:?}");
    let run = &runs[0];
    assert_eq!((run.name.as_str(), run.experiment.as_str(), run.status.as_str()), ("tracked", "sft", "RUNNING"));
    assert_eq!(run.params["world_size"], "2");
    let history = s.metric_history(&server.arn, &run.run_id, &["loss".into(), "throughput".into()]).await.unwrap();
    let log = log_of(&s, "tracked-workers-0").await;
    let logged: Vec<(u64, f64, f64)> = log.iter().filter_map(|l| crate::parse_training_log_line(l)).collect();
    assert!(logged.len() >= 4, "{log:?}");
    let plotted: Vec<(u64, f64, f64)> = history.series["loss"]
        .iter()
        .zip(&history.series["throughput"])
        .map(|(l, t)| (l.step as u64, l.value, t.value))
        .collect();
    assert_eq!(plotted, logged, "the plot is the log");
    assert_eq!(run.metrics["loss"], logged.last().unwrap().1);
    assert!(history.series["loss"].windows(2).all(|w| w[0].timestamp < w[1].timestamp));

    adv(&s, 100.0);
    let done = s.search_runs(&server.arn, &q).await.unwrap();
    assert_eq!(done[0].status, "FINISHED");
    assert!(done[0].end_time.is_some());
    let all = s.metric_history(&server.arn, &run.run_id, &[]).await.unwrap();
    assert_eq!(all.series["loss"].len(), 10);
    assert_eq!(all.series.keys().collect::<Vec<_>>(), ["loss", "throughput"]);
    let filtered = s.search_runs(&server.arn, &RunQuery { experiment: Some("sft".into()), max_results: 10 }).await;
    assert_eq!(filtered.unwrap().len(), 1);
    let missing = s.search_runs(&server.arn, &RunQuery { experiment: Some("rl".into()), max_results: 10 }).await;
    assert_eq!(missing.unwrap_err().kind, ProviderErrorKind::NotFound);
    let e = s.metric_history(&server.arn, "0000", &[]).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn a_tracking_server_given_the_resource_fault_fails_half_way_with_its_reason() {
    let s = sim();
    s.set_faults(SimFaults::none().with(
        "sagemaker:CreateMlflowTrackingServer",
        FaultMode::resource_fails("S3 bucket is not accessible by the role"),
    ));
    let created = mlflow_server(&s).await;
    assert_eq!(created.status, "Creating");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE * timings::FAILURE_SHARE);
    let failed = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!(failed.status, "CreateFailed");
    assert_eq!(failed.state(), ResourceState::Failed { reason: "S3 bucket is not accessible by the role".into() });
    let e = s.search_runs(&failed.arn, &RunQuery { experiment: None, max_results: 1 }).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Failed, "a failed server has no MLflow API: {e}");
}

#[tokio::test]
async fn a_deleted_tracking_server_is_deleting_then_gone_and_so_are_its_runs() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let server = mlflow_server(&s).await;
    let e = s.delete_tracking_server(REGION, "team").await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Conflict, "not while Creating: {e}");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    mlflow_writer(&s, &server, "tracked-mlflow").await;
    let mut tracked = hyperpod_job("tracked", 2, 100, 3, 1, json!([]));
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "MLFLOW_TRACKING_URI", "value": server.arn}]);
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["serviceAccountName"] = json!("tracked-mlflow");
    apply(&s, tracked).await;
    adv(&s, timings::POD_START + 30.0);
    let q = RunQuery { experiment: None, max_results: 10 };
    assert_eq!(s.search_runs(&server.arn, &q).await.unwrap().len(), 1);

    s.delete_tracking_server(REGION, "team").await.unwrap();
    let deleting = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!((deleting.status.as_str(), deleting.state()), ("Deleting", ResourceState::Deleting));
    assert_eq!(deleting.role_arn.as_deref(), Some(s.get_role("team-mlflow-role").await.unwrap().unwrap().arn.as_str()));
    assert_eq!(kind(s.search_runs(&server.arn, &q).await), ProviderErrorKind::Failed, "no MLflow API while Deleting");
    s.delete_tracking_server(REGION, "team").await.unwrap();
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE - 1.0);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "Deleting");
    adv(&s, 1.0);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap(), None);
    assert!(s.list_tracking_servers(REGION).await.unwrap().is_empty());
    assert_eq!(kind(s.search_runs(&server.arn, &q).await), ProviderErrorKind::NotFound);
    assert_eq!(kind(s.delete_tracking_server(REGION, "team").await), ProviderErrorKind::NotFound);
    assert_eq!(kind(s.delete_tracking_server("us-west-2", "team").await), ProviderErrorKind::NotFound);
    assert_eq!(s.calls("sagemaker:DeleteMlflowTrackingServer"), 5, "every call reaches the service");

    // A new server of the same name has the same ARN, but not the old server's runs.
    let role_arn = s.get_role("team-mlflow-role").await.unwrap().unwrap().arn;
    let again = s
        .create_tracking_server(&CreateTrackingServer {
            region: REGION.into(),
            name: "team".into(),
            artifact_store_uri: "s3://is-demo-data/mlflow/team".into(),
            size: TrackingServerSize::Small,
            role_arn,
            mlflow_version: None,
            tags: tags(),
        })
        .await
        .unwrap();
    assert_eq!(again.arn, server.arn);
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    assert!(s.search_runs(&server.arn, &q).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_deletion_given_the_resource_fault_stops_in_delete_failed_until_deleted_again() {
    let s = sim();
    mlflow_server(&s).await;
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    s.set_faults(SimFaults::none().with(
        "sagemaker:DeleteMlflowTrackingServer",
        FaultMode::resource_fails("the artifact store could not be cleaned up"),
    ));
    s.delete_tracking_server(REGION, "team").await.unwrap();
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE * timings::FAILURE_SHARE);
    let failed = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!(failed.status, "DeleteFailed");
    assert_eq!(failed.state(), ResourceState::Failed { reason: "the artifact store could not be cleaned up".into() });
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "DeleteFailed", "it stays");

    s.set_faults(SimFaults::none());
    s.delete_tracking_server(REGION, "team").await.unwrap();
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "Deleting");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap(), None);
}

/// The identity a training pod needs to report to `server`: the Pod Identity agent, the
/// server's writer role (as `workflow::mlflow` creates it) and the association of
/// `default/<sa>` with it.
async fn mlflow_writer(s: &SimCloud, server: &TrackingServer, sa: &str) {
    use instantstart_core::workflow::mlflow::{writer_role_name, writer_role_policies};
    addons(s, &["eks-pod-identity-agent"]).await;
    let (_, access) = writer_role_policies(REGION, &server.name, "s3://is-demo-data/mlflow");
    let r = match s.get_role(&writer_role_name(&server.name)).await.unwrap() {
        Some(r) => r,
        None => pod_role(s, &writer_role_name(&server.name), &[], vec![("w".into(), access)]).await,
    };
    s.create_pod_identity_association(&association("default", sa, &r.arn, &format!("tok-{sa}"))).await.unwrap();
}
