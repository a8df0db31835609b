//! The `create_tracking_server` / `delete_tracking_server` workflows end to end on the simulated
//! cloud, through the engine with a real SQLite store: the server and the role InstantStart
//! created go, a caller-supplied role stays, a foreign server is refused (or stops the step in
//! `needs_attention`), `DeleteFailed` fails the step with its reason, and neither a lost response
//! nor a crash mid-deletion makes the engine call DeleteMlflowTrackingServer twice (checked with
//! the sim's per-API call counters).
//!
//! Deleting a cluster deletes the tracking servers created for it (and the roles InstantStart
//! made for them) beside the EKS teardown — and only those: another cluster's, one created
//! without a cluster (even when it is named like the cluster) and a caller-supplied role stay;
//! `keep_tracking_servers` keeps them all; a restart mid-delete only polls.

use instantstart_core::engine::{EngineError, Outcome};
use instantstart_core::operation::{Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    CreateIamRole, CreateTrackingServer, EksApi, IamApi, MlflowTracking, Tags, TrackingServerSize,
};
use instantstart_core::validate::ValidationKind;
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const DELETE: &str = "sagemaker:DeleteMlflowTrackingServer";

fn create_request(name: &str) -> Value {
    json!({ "name": name, "region": REGION, "artifact_store_uri": format!("s3://is-team-bucket/mlflow/{name}") })
}

fn delete_request(name: &str) -> Value {
    json!({ "name": name, "region": REGION })
}

/// Submits through the assessment (what every face does) and waits for the end.
async fn run(b: &Bed, kind: OperationKind, req: &Value) -> Operation {
    let Outcome::Submitted(s) = b.engine.submit_checked(kind, req, user(), None).await.unwrap() else {
        panic!("{kind:?}: no operation");
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "operation did not finish: {op:#?}");
    op
}

/// Waits (at most [`WAIT`]) until `step` of operation `id` is being polled.
async fn until_polling(b: &Bed, id: &instantstart_core::operation::OperationId, step: &str) {
    b.wait_for(id, &format!("{step} to be polled"), |op| op.step(step).unwrap().phase == StepPhase::Polling).await;
}

fn keys(op: &Operation) -> Vec<&str> {
    op.steps.iter().map(|s| s.key.as_str()).collect()
}

/// A role outside InstantStart (no ownership tags) that SageMaker may assume.
async fn foreign_role(sim: &SimCloud, name: &str) -> String {
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    let role = CreateIamRole {
        name: name.into(),
        trust_policy: trust,
        managed_policies: vec![],
        inline_policies: vec![],
        tags: Tags::new(),
    };
    sim.create_role(&role).await.unwrap().arn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_then_delete_removes_the_server_and_the_role_instantstart_created() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let created = run(&b, OperationKind::CreateTrackingServer, &create_request("team")).await;
    assert_eq!(created.status, OperationStatus::Succeeded, "{created:#?}");
    assert!(b.sim.get_role("team-mlflow-role").await.unwrap().is_some());

    // The dry run shows both steps and what the assessment found; nothing is called.
    let dry = b.engine.dry_run_checked(OperationKind::DeleteTrackingServer, &delete_request("team")).await.unwrap();
    let planned: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(planned, ["tracking_server", "role", "writer_role"]);
    assert_eq!(dry.prepared.target, "mlflow/team");
    assert_eq!(dry.prepared.request["found"]["owner"], "team", "a server without a cluster owns itself");
    assert_eq!(dry.prepared.request["found"]["role"], "team-mlflow-role");
    assert_eq!(b.sim.calls(DELETE), 0);

    let deleted = run(&b, OperationKind::DeleteTrackingServer, &delete_request("team")).await;
    assert_eq!(deleted.status, OperationStatus::Succeeded, "{deleted:#?}");
    assert_eq!(keys(&deleted), ["tracking_server", "role", "writer_role"]);
    let server = deleted.step("tracking_server").unwrap();
    assert_eq!(server.outputs["deleted"], "team", "{server:#?}");
    assert!(deleted.step("role").unwrap().finished_at >= server.finished_at, "the role goes after the server");
    assert_eq!(b.sim.describe_tracking_server(REGION, "team").await.unwrap(), None);
    assert_eq!(b.sim.get_role("team-mlflow-role").await.unwrap(), None);
    assert_eq!(b.sim.get_role("team-mlflow-writer").await.unwrap(), None, "the writer role goes too");
    assert_eq!(b.sim.calls(DELETE), 1);

    // Deleting it again: nothing to delete, a typed not-found before anything is recorded.
    let again =
        b.engine.submit_checked(OperationKind::DeleteTrackingServer, &delete_request("team"), user(), None).await;
    assert!(matches!(&again, Err(EngineError::Missing(what)) if what.contains("team")), "{again:?}");
    assert_eq!(b.sim.calls(DELETE), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_supplied_role_is_kept_even_when_it_has_our_role_name() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let role_arn = foreign_role(&b.sim, "byo-mlflow-role").await;
    let mut req = create_request("byo");
    req["role_arn"] = json!(role_arn);
    let created = run(&b, OperationKind::CreateTrackingServer, &req).await;
    // The writer role (what training pods assume) is ours whatever role SageMaker runs with.
    assert_eq!((created.status, keys(&created)), (OperationStatus::Succeeded, vec!["tracking_server", "writer_role"]));

    let deleted = run(&b, OperationKind::DeleteTrackingServer, &delete_request("byo")).await;
    assert_eq!(deleted.status, OperationStatus::Succeeded, "{deleted:#?}");
    assert_eq!(
        keys(&deleted),
        ["tracking_server", "writer_role"],
        "no role step for a role InstantStart did not create (the writer role is ours)"
    );
    assert_eq!(deleted.request["found"].get("role"), None);
    assert_eq!(b.sim.describe_tracking_server(REGION, "byo").await.unwrap(), None);
    assert!(b.sim.get_role("byo-mlflow-role").await.unwrap().is_some(), "the caller's role stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_server_is_refused_and_one_that_is_not_the_owners_needs_attention() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let role_arn = foreign_role(&b.sim, "theirs-role").await;
    b.sim
        .create_tracking_server(&CreateTrackingServer {
            region: REGION.into(),
            name: "theirs".into(),
            artifact_store_uri: "s3://their-bucket/mlflow".into(),
            size: TrackingServerSize::Small,
            role_arn,
            mlflow_version: None,
            tags: Tags::new(),
        })
        .await
        .unwrap();
    let e = b
        .engine
        .submit_checked(OperationKind::DeleteTrackingServer, &delete_request("theirs"), user(), None)
        .await
        .unwrap_err();
    let EngineError::Validation(v) = e else { panic!("{e:?}") };
    assert_eq!(v.kind, ValidationKind::Unprocessable);
    assert_eq!(v.findings[0].field, "name");
    assert!(v.findings[0].rule.contains("not created by InstantStart"), "{v:?}");

    // A recorded delete whose server turns out to belong to another owner stops, deleting nothing.
    let created = run(&b, OperationKind::CreateTrackingServer, &create_request("team")).await;
    assert_eq!(created.status, OperationStatus::Succeeded);
    let arn = b.sim.describe_tracking_server(REGION, "team").await.unwrap().unwrap().arn;
    let mut req = delete_request("team");
    req["found"] = json!({ "owner": "another-cluster", "arn": arn });
    let s = b.engine.submit(OperationKind::DeleteTrackingServer, &req, user(), None).unwrap();
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::NeedsAttention, "{op:#?}");
    let step = op.step("tracking_server").unwrap();
    assert_eq!(step.phase, StepPhase::NeedsAttention);
    assert!(step.error.as_deref().is_some_and(|e| e.contains("another-cluster")), "{step:#?}");
    assert_eq!(b.sim.calls(DELETE), 0);
    assert!(b.sim.describe_tracking_server(REGION, "team").await.unwrap().is_some());
    let role = b.sim.get_role("team-mlflow-role").await.unwrap().expect("the role is untouched");
    assert_eq!(role.tags.get("instantstart:cluster").map(String::as_str), Some("team"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_failed_fails_the_step_with_its_reason_and_a_retry_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let created = run(&b, OperationKind::CreateTrackingServer, &create_request("team")).await;
    assert_eq!(created.status, OperationStatus::Succeeded);
    b.sim.set_faults(SimFaults::none().with(DELETE, FaultMode::resource_fails("artifact store cleanup failed")));
    let op = run(&b, OperationKind::DeleteTrackingServer, &delete_request("team")).await;
    assert_eq!(op.status, OperationStatus::Failed, "{op:#?}");
    let step = op.step("tracking_server").unwrap();
    assert_eq!(step.phase, StepPhase::Failed);
    assert!(
        step.error.as_deref().is_some_and(|e| e.contains("DeleteFailed: artifact store cleanup failed")),
        "{step:#?}"
    );
    assert_eq!(op.step("role").unwrap().phase, StepPhase::Pending, "the role waits for the server");
    assert!(b.sim.get_role("team-mlflow-role").await.unwrap().is_some());

    b.sim.set_faults(SimFaults::none());
    b.engine.retry_step(&op.id, "tracking_server", user()).unwrap();
    let op = b.engine.wait(&op.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(DELETE), 2, "one call per attempt");
    assert_eq!(b.sim.describe_tracking_server(REGION, "team").await.unwrap(), None);
    assert_eq!(b.sim.get_role("team-mlflow-role").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_is_not_answered_with_a_second_delete() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let created = run(&b, OperationKind::CreateTrackingServer, &create_request("team")).await;
    assert_eq!(created.status, OperationStatus::Succeeded);
    // SageMaker starts the deletion but the answer is lost: the retry observes `Deleting` first.
    b.sim.set_faults(SimFaults::none().with(DELETE, FaultMode::LostResponse));
    let op = run(&b, OperationKind::DeleteTrackingServer, &delete_request("team")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(DELETE), 1);
    assert_eq!(b.sim.describe_tracking_server(REGION, "team").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_deletion_resumes_by_observing_and_never_deletes_twice() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let b = Bed::sim(dir.path()).speed(400.0).build();
        let created = run(&b, OperationKind::CreateTrackingServer, &create_request("team")).await;
        assert_eq!(created.status, OperationStatus::Succeeded);
        let Outcome::Submitted(s) = b
            .engine
            .submit_checked(OperationKind::DeleteTrackingServer, &delete_request("team"), user(), None)
            .await
            .unwrap()
        else {
            panic!("no operation");
        };
        // Wait until the deletion is being polled, then "crash".
        until_polling(&b, &s.operation.id, "tracking_server").await;
        b.kill().await;
        assert_eq!(b.sim.calls(DELETE), 1);
        s.operation.id
    };
    let b = Bed::sim(dir.path()).speed(400.0).build();
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(DELETE), 1, "the resumed step only polled");
    assert_eq!(b.sim.describe_tracking_server(REGION, "team").await.unwrap(), None);
    assert_eq!(b.sim.get_role("team-mlflow-role").await.unwrap(), None);

    // Gone already: the assessment says so; a delete recorded anyway observes first and succeeds
    // without calling DeleteMlflowTrackingServer.
    let e = b.engine.submit_checked(OperationKind::DeleteTrackingServer, &delete_request("team"), user(), None).await;
    assert!(matches!(e, Err(EngineError::Missing(_))), "{e:?}");
    let s = b.engine.submit(OperationKind::DeleteTrackingServer, &delete_request("team"), user(), None).unwrap();
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(DELETE), 1, "a server that is gone is not deleted again");
}

fn cluster_request(name: &str) -> Value {
    json!({ "name": name, "region": REGION, "availability_zones": ["us-east-1a", "us-east-1b"] })
}

fn for_cluster(name: &str, cluster: &str) -> Value {
    json!({ "name": name, "cluster": cluster })
}

fn delete_cluster(name: &str) -> Value {
    json!({ "name": name })
}

/// Creates `requests` (each kind with its request) one after the other, each to success.
async fn create_all(b: &Bed, requests: &[(OperationKind, Value)]) {
    for (kind, req) in requests {
        let op = run(b, *kind, req).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{kind:?} {req}: {op:#?}");
    }
}

async fn exists(b: &Bed, server: &str) -> bool {
    b.sim.describe_tracking_server(REGION, server).await.unwrap().is_some()
}

async fn role_exists(b: &Bed, role: &str) -> bool {
    b.sim.get_role(role).await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_cluster_deletes_the_tracking_servers_created_for_it_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let byo_role = foreign_role(&b.sim, "byo-mlflow-role").await;
    let mut byo = for_cluster("byo", "demo");
    byo["role_arn"] = json!(byo_role);
    create_all(
        &b,
        &[
            (OperationKind::CreateCluster, cluster_request("demo")),
            (OperationKind::CreateCluster, cluster_request("other")),
            (OperationKind::CreateTrackingServer, for_cluster("team", "demo")),
            (OperationKind::CreateTrackingServer, byo),
            (OperationKind::CreateTrackingServer, for_cluster("other-team", "other")),
            // Created without a cluster, and named like one: tagged with its own name, "demo".
            (OperationKind::CreateTrackingServer, create_request("demo")),
        ],
    )
    .await;
    let standalone = b.sim.describe_tracking_server(REGION, "demo").await.unwrap().unwrap();
    assert_eq!(standalone.tags.get("instantstart:cluster").map(String::as_str), Some("demo"), "the trap is set");

    // The dry run lists one step per server of the cluster (a role step only for our role).
    let dry = b.engine.dry_run_checked(OperationKind::DeleteCluster, &delete_cluster("demo")).await.unwrap();
    let planned: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    let mlflow_steps: Vec<&str> = planned.iter().copied().filter(|k| k.starts_with("mlflow")).collect();
    assert_eq!(
        mlflow_steps,
        ["mlflow:byo", "mlflow_writer:byo", "mlflow:team", "mlflow_role:team", "mlflow_writer:team"],
        "{planned:?}"
    );
    let found = &dry.prepared.request["tracking_servers"];
    assert_eq!(found.as_array().unwrap().len(), 2, "{found:#}");
    assert_eq!(found[1]["role"], "team-mlflow-role");
    assert_eq!(found[0].get("role"), None, "the caller-supplied role is not ours to delete");
    let kept = json!({ "name": "demo", "keep_tracking_servers": true });
    let dry_kept = b.engine.dry_run_checked(OperationKind::DeleteCluster, &kept).await.unwrap();
    assert!(dry_kept.prepared.steps.iter().all(|s| !s.key.starts_with("mlflow")), "{:#?}", dry_kept.prepared.steps);
    assert_eq!(b.sim.calls(DELETE), 0, "dry runs call nothing");

    let op = run(&b, OperationKind::DeleteCluster, &delete_cluster("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(DELETE), 2, "one DeleteMlflowTrackingServer per server of the cluster");
    assert!(!exists(&b, "team").await && !exists(&b, "byo").await);
    assert!(!role_exists(&b, "team-mlflow-role").await);
    assert!(role_exists(&b, "byo-mlflow-role").await, "the caller's role stays");
    assert!(exists(&b, "other-team").await && role_exists(&b, "other-team-mlflow-role").await, "another cluster's");
    assert!(exists(&b, "demo").await && role_exists(&b, "demo-mlflow-role").await, "created without a cluster");
    assert!(b.sim.describe_eks_cluster(REGION, "demo").await.unwrap().is_none());
    // Beside the teardown: the server's deletion started before the control plane was gone,
    // and the cluster was forgotten only after the servers.
    let server = op.step("mlflow:team").unwrap();
    let eks = op.step("eks_cluster").unwrap();
    assert!(server.started_at.unwrap() < eks.finished_at.unwrap(), "{server:#?} {eks:#?}");
    let role = op.step("mlflow_role:team").unwrap();
    assert!(role.started_at >= server.finished_at, "the role goes after its server");
    assert!(op.step("unregister").unwrap().started_at >= role.finished_at);
    assert_eq!(server.outputs["deleted"], "team");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_tracking_servers_outlive_their_cluster_and_can_be_deleted_alone_later() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    create_all(
        &b,
        &[
            (OperationKind::CreateCluster, cluster_request("demo")),
            (OperationKind::CreateTrackingServer, for_cluster("team", "demo")),
        ],
    )
    .await;
    let op = run(&b, OperationKind::DeleteCluster, &json!({ "name": "demo", "keep_tracking_servers": true })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(op.steps.iter().all(|s| !s.key.starts_with("mlflow")), "{op:#?}");
    assert_eq!((op.request["keep_tracking_servers"].as_bool(), op.request.get("tracking_servers")), (Some(true), None));
    assert!(b.sim.describe_eks_cluster(REGION, "demo").await.unwrap().is_none(), "the cluster is gone");
    assert!(exists(&b, "team").await && role_exists(&b, "team-mlflow-role").await, "the server is kept");
    assert_eq!(b.sim.calls(DELETE), 0);

    // Still ours (tagged for the deleted cluster): delete-tracking-server removes it on its own.
    let deleted = run(&b, OperationKind::DeleteTrackingServer, &delete_request("team")).await;
    assert_eq!(deleted.status, OperationStatus::Succeeded, "{deleted:#?}");
    assert_eq!(deleted.request["found"]["owner"], "demo");
    assert!(!exists(&b, "team").await && !role_exists(&b, "team-mlflow-role").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_cluster_delete_never_deletes_a_tracking_server_twice() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let b = Bed::sim(dir.path()).speed(400.0).build();
        create_all(
            &b,
            &[
                (OperationKind::CreateCluster, cluster_request("demo")),
                (OperationKind::CreateTrackingServer, for_cluster("team", "demo")),
            ],
        )
        .await;
        let Outcome::Submitted(s) =
            b.engine.submit_checked(OperationKind::DeleteCluster, &delete_cluster("demo"), user(), None).await.unwrap()
        else {
            panic!("no operation");
        };
        // While the delete runs, the cluster takes no new server (it would outlive the cluster).
        let late_request = for_cluster("late", "demo");
        let late = b.engine.submit_checked(OperationKind::CreateTrackingServer, &late_request, user(), None).await;
        assert!(matches!(&late, Err(EngineError::InvalidState(m)) if m.contains("being deleted")), "{late:?}");
        // Wait until the server's deletion is being polled, then "crash".
        until_polling(&b, &s.operation.id, "mlflow:team").await;
        b.kill().await;
        assert_eq!(b.sim.calls(DELETE), 1);
        s.operation.id
    };
    let b = Bed::sim(dir.path()).speed(400.0).build();
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(DELETE), 1, "the resumed step only polled");
    assert_eq!(op.step("mlflow:team").unwrap().attempts, 1);
    assert!(!exists(&b, "team").await && !role_exists(&b, "team-mlflow-role").await);
    assert!(b.sim.describe_eks_cluster(REGION, "demo").await.unwrap().is_none());
}
