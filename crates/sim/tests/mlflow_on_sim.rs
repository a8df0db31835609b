//! The `create_tracking_server` / `delete_tracking_server` workflows end to end on the simulated
//! cloud, through the engine with a real SQLite store: the server and the role InstantStart
//! created go, a caller-supplied role stays, a foreign server is refused (or stops the step in
//! `needs_attention`), `DeleteFailed` fails the step with its reason, and neither a lost response
//! nor a crash mid-deletion makes the engine call DeleteMlflowTrackingServer twice (checked with
//! the sim's per-API call counters).

use instantstart_core::engine::{Engine, EngineConfig, EngineError, Outcome};
use instantstart_core::operation::{Actor, Face, Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    CreateIamRole, CreateTrackingServer, IamApi, MlflowTracking, Tags, TrackingServerSize,
};
use instantstart_core::store::Store;
use instantstart_core::validate::ValidationKind;
use instantstart_core::workflow;
use instantstart_sim::{FaultMode, SimCloud, SimConfig, SimFaults};
use instantstart_store::SqliteStore;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const DELETE: &str = "sagemaker:DeleteMlflowTrackingServer";

struct Bed {
    sim: SimCloud,
    engine: Engine,
}

fn bed(dir: &Path, speed: f64) -> Bed {
    let sim = SimCloud::new(SimConfig::with_speed(speed).state_file(dir.join("world.json")).seed(7)).unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let workflows = workflow::all(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone(), None);
    let engine = Engine::new(store, workflows, EngineConfig::scaled(speed));
    Bed { sim, engine }
}

fn user() -> Actor {
    Actor { face: Face::Api, principal: "test".into() }
}

fn create_request(name: &str) -> Value {
    json!({ "name": name, "region": REGION, "artifact_store_uri": format!("s3://team-bucket/mlflow/{name}") })
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
    let b = bed(dir.path(), 2000.0);
    let created = run(&b, OperationKind::CreateTrackingServer, &create_request("team")).await;
    assert_eq!(created.status, OperationStatus::Succeeded, "{created:#?}");
    assert!(b.sim.get_role("team-mlflow-role").await.unwrap().is_some());

    // The dry run shows both steps and what the assessment found; nothing is called.
    let dry = b.engine.dry_run_checked(OperationKind::DeleteTrackingServer, &delete_request("team")).await.unwrap();
    let planned: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(planned, ["tracking_server", "role"]);
    assert_eq!(dry.prepared.target, "mlflow/team");
    assert_eq!(dry.prepared.request["found"]["owner"], "team", "a server without a cluster owns itself");
    assert_eq!(dry.prepared.request["found"]["role"], "team-mlflow-role");
    assert_eq!(b.sim.calls(DELETE), 0);

    let deleted = run(&b, OperationKind::DeleteTrackingServer, &delete_request("team")).await;
    assert_eq!(deleted.status, OperationStatus::Succeeded, "{deleted:#?}");
    assert_eq!(keys(&deleted), ["tracking_server", "role"]);
    let server = deleted.step("tracking_server").unwrap();
    assert_eq!(server.outputs["deleted"], "team", "{server:#?}");
    assert!(deleted.step("role").unwrap().finished_at >= server.finished_at, "the role goes after the server");
    assert_eq!(b.sim.describe_tracking_server(REGION, "team").await.unwrap(), None);
    assert_eq!(b.sim.get_role("team-mlflow-role").await.unwrap(), None);
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
    let b = bed(dir.path(), 2000.0);
    let role_arn = foreign_role(&b.sim, "byo-mlflow-role").await;
    let mut req = create_request("byo");
    req["role_arn"] = json!(role_arn);
    let created = run(&b, OperationKind::CreateTrackingServer, &req).await;
    assert_eq!((created.status, keys(&created)), (OperationStatus::Succeeded, vec!["tracking_server"]));

    let deleted = run(&b, OperationKind::DeleteTrackingServer, &delete_request("byo")).await;
    assert_eq!(deleted.status, OperationStatus::Succeeded, "{deleted:#?}");
    assert_eq!(keys(&deleted), ["tracking_server"], "no role step for a role InstantStart did not create");
    assert_eq!(deleted.request["found"].get("role"), None);
    assert_eq!(b.sim.describe_tracking_server(REGION, "byo").await.unwrap(), None);
    assert!(b.sim.get_role("byo-mlflow-role").await.unwrap().is_some(), "the caller's role stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_server_is_refused_and_one_that_is_not_the_owners_needs_attention() {
    let dir = tempfile::tempdir().unwrap();
    let b = bed(dir.path(), 2000.0);
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
    let b = bed(dir.path(), 2000.0);
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
    let b = bed(dir.path(), 2000.0);
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
        let b = bed(dir.path(), 400.0);
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
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let op = b.engine.get(&s.operation.id).unwrap();
            if op.step("tracking_server").unwrap().phase == StepPhase::Polling {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "tracking_server never reached polling");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        b.engine.abort_all();
        assert_eq!(b.sim.calls(DELETE), 1);
        s.operation.id
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let b = bed(dir.path(), 400.0);
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
