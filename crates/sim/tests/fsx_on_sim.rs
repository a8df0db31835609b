//! The `create_file_system` / `delete_file_system` workflows end to end on the simulated cloud,
//! through the engine with a real SQLite store: an FSx for Lustre volume is created in the
//! HyperPod nodes' subnet with the FSx CSI driver add-on and its static volume and claim, listed
//! by `storage` beside the shared bucket, mounted by a pod (which waits while the file system
//! is not `AVAILABLE`), and deleted; bad requests are refused by field before anything is
//! recorded (and the simulator refuses them too); the cluster delete waits for the volumes to
//! go; a kill -9 while the file system is being created or deleted resumes without a second
//! CreateFileSystem or DeleteFileSystem.

use instantstart_core::engine::{Engine, EngineConfig, EngineError, Outcome};
use instantstart_core::operation::{Actor, Face, Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    CreateLustreFileSystem, FsxApi, KubeApi, KubeObject, KubeTarget, LustreDeploymentType, ObjectRef,
    ProviderErrorKind, Tags,
};
use instantstart_core::store::Store;
use instantstart_core::validate::ValidationKind;
use instantstart_core::workflow;
use instantstart_core::workload::{StorageKind, read};
use instantstart_sim::{SimCloud, SimConfig};
use instantstart_store::SqliteStore;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const CREATE: &str = "fsx:CreateFileSystem";

struct Bed {
    sim: SimCloud,
    store: Arc<dyn Store>,
    engine: Engine,
}

fn bed(dir: &Path, speed: f64) -> Bed {
    let sim = SimCloud::new(SimConfig::with_speed(speed).state_file(dir.join("world.json")).seed(7)).unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let workflows = workflow::all(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone(), None);
    let engine = Engine::new(store.clone(), workflows, EngineConfig::scaled(speed));
    Bed { sim, store, engine }
}

fn user() -> Actor {
    Actor { face: Face::Api, principal: "test".into() }
}

async fn run(b: &Bed, kind: OperationKind, req: &Value) -> Operation {
    let Outcome::Submitted(s) = b.engine.submit_checked(kind, req, user(), None).await.unwrap() else {
        panic!("{kind:?}: no operation");
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "operation did not finish: {op:#?}");
    op
}

/// A cluster `demo` with a HyperPod group in us-east-1a.
async fn cluster(b: &Bed) {
    let create = json!({
        "name": "demo",
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }
        ]}
    });
    let op = run(b, OperationKind::CreateCluster, &create).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
}

fn target() -> KubeTarget {
    KubeTarget::new(REGION.to_string(), "demo".to_string())
}

/// A bare pod mounting `claim` at /fsx/scratch.
fn pod(name: &str, claim: &str) -> KubeObject {
    KubeObject(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": { "app": name } },
        "spec": {
            "containers": [{ "name": "main", "image": "busybox", "volumeMounts": [{ "name": "fsx", "mountPath": "/fsx/scratch" }] }],
            "volumes": [{ "name": "fsx", "persistentVolumeClaim": { "claimName": claim } }]
        }
    }))
}

/// The pod's status once its phase or its waiting reason settles (at most [`WAIT`]).
async fn pod_status(b: &Bed, name: &str, want: impl Fn(&Value) -> bool) -> Value {
    let r = ObjectRef {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("default".into()),
        name: name.into(),
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = b.sim.get(&target(), &r).await.unwrap().map(|o| o.0["status"].clone()).unwrap_or(Value::Null);
        if want(&status) {
            return status;
        }
        assert!(tokio::time::Instant::now() < deadline, "pod {name} never settled: {status:#}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn fields(e: EngineError) -> (ValidationKind, Vec<String>) {
    match e {
        EngineError::Validation(v) => (v.kind, v.findings.into_iter().map(|f| f.field).collect()),
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_is_created_listed_mounted_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let b = bed(dir.path(), 2000.0);
    cluster(&b).await;
    let req = json!({ "cluster": "demo", "name": "scratch", "deployment_type": "PERSISTENT_2",
                      "storage_capacity_gib": 2400, "per_unit_storage_throughput": 250 });
    let op = run(&b, OperationKind::CreateFileSystem, &req).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["addon:aws-fsx-csi-driver", "file_system", "claim"]);
    assert_eq!(op.target, "cluster/demo/fsx/scratch");
    assert_eq!(b.sim.calls(CREATE), 1);

    // In the nodes' subnet and security group, tagged as ours for the volume.
    let rec = b.store.get_cluster("demo").unwrap().unwrap();
    let hp = instantstart_core::provider::HyperPodApi::describe_hyperpod_cluster(&b.sim, REGION, "demo-hp")
        .await
        .unwrap()
        .unwrap();
    let listed = read::storage(&b.sim, &b.sim, &rec).await.unwrap();
    let kinds: Vec<StorageKind> = listed.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [StorageKind::S3, StorageKind::FsxLustre], "storage lists both kinds");
    let fsx = &listed[1];
    assert_eq!(
        (fsx.name.as_str(), fsx.claim.as_str(), fsx.mount_path.as_str()),
        ("scratch", "default/fsx-scratch", "/fsx/scratch")
    );
    assert_eq!(fsx.status, "Bound");
    let fs = fsx.file_system.clone().unwrap();
    assert_eq!(fs.subnet_ids, hp.instance_groups[0].subnet_ids[..1]);
    assert_eq!(
        (fs.lifecycle.as_str(), fs.storage_capacity_gib, fs.per_unit_storage_throughput),
        ("AVAILABLE", 2400, Some(250))
    );
    let pv = ObjectRef {
        api_version: "v1".into(),
        kind: "PersistentVolume".into(),
        namespace: None,
        name: "fsx-demo-scratch".into(),
    };
    let pv = b.sim.get(&target(), &pv).await.unwrap().unwrap().0;
    assert_eq!(pv["spec"]["csi"]["driver"], "fsx.csi.aws.com");
    assert_eq!(pv["spec"]["csi"]["volumeHandle"], fs.id.as_str());
    assert_eq!(pv["spec"]["csi"]["volumeAttributes"]["mountname"], fs.mount_name.clone().unwrap().as_str());

    // A pod mounts it.
    b.sim.apply(&target(), &pod("reader", "fsx-scratch")).await.unwrap();
    pod_status(&b, "reader", |s| s["phase"] == "Running").await;

    // Creating it again changes nothing: the same file system is found, no second create.
    let again = run(&b, OperationKind::CreateFileSystem, &req).await;
    assert_eq!(again.status, OperationStatus::Succeeded, "{again:#?}");
    assert_eq!(b.sim.calls(CREATE), 1, "observe before submit found the file system by its tags");

    // Deleted: the claim, the volume and the file system go.
    let del = run(&b, OperationKind::DeleteFileSystem, &json!({ "cluster": "demo", "name": "scratch" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert_eq!(b.sim.calls("fsx:DeleteFileSystem"), 1);
    assert_eq!(b.sim.describe_lustre_file_system(REGION, &fs.id).await.unwrap(), None);
    let listed = read::storage(&b.sim, &b.sim, &rec).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    let gone = b
        .engine
        .submit_checked(OperationKind::DeleteFileSystem, &json!({ "cluster": "demo", "name": "scratch" }), user(), None)
        .await;
    assert!(matches!(gone, Err(EngineError::Missing(_))), "{gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_wait_for_an_available_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let b = bed(dir.path(), 2000.0);
    cluster(&b).await;
    let op = run(&b, OperationKind::CreateFileSystem, &json!({ "cluster": "demo", "name": "scratch" })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let fs_id = op.step("file_system").unwrap().outputs["file_system_id"].as_str().unwrap().to_string();
    // Someone deletes the file system under the claim: a new pod cannot mount it.
    b.sim.delete_lustre_file_system(REGION, &fs_id, "t").await.unwrap();
    b.sim.apply(&target(), &pod("late", "fsx-scratch")).await.unwrap();
    let status = pod_status(&b, "late", |s| s["containerStatuses"][0]["state"]["waiting"]["message"].is_string()).await;
    let message = status["containerStatuses"][0]["state"]["waiting"]["message"].as_str().unwrap();
    assert!(message.contains("FailedMount") && message.contains(&fs_id), "{message}");
    assert_ne!(status["phase"], "Running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_by_field_before_anything_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let b = bed(dir.path(), 2000.0);
    cluster(&b).await;
    let table: &[(Value, ValidationKind, &[&str])] = &[
        (
            json!({ "cluster": "demo", "name": "a", "storage_capacity_gib": 3600 }),
            ValidationKind::Invalid,
            &["storage_capacity_gib"],
        ),
        (
            json!({ "cluster": "demo", "name": "a", "deployment_type": "PERSISTENT_2" }),
            ValidationKind::Invalid,
            &["per_unit_storage_throughput"],
        ),
        (json!({ "cluster": "demo", "name": "A_b" }), ValidationKind::Invalid, &["name"]),
        (
            json!({ "cluster": "demo", "name": "a", "placement": { "subnet_id": "subnet-1", "security_group_ids": ["sg-1"] } }),
            ValidationKind::Invalid,
            &["placement"],
        ),
    ];
    for (req, kind, want) in table {
        let e = b.engine.submit_checked(OperationKind::CreateFileSystem, req, user(), None).await.unwrap_err();
        assert_eq!(fields(e), (*kind, want.iter().map(|s| s.to_string()).collect()), "{req}");
    }
    let unknown = b
        .engine
        .submit_checked(OperationKind::CreateFileSystem, &json!({ "cluster": "nope", "name": "a" }), user(), None)
        .await;
    assert!(matches!(unknown, Err(EngineError::UnknownCluster(_))), "{unknown:?}");
    assert_eq!(b.sim.calls(CREATE), 0);
    assert!(
        b.store.list_operations(&Default::default()).unwrap().iter().all(|o| o.kind == OperationKind::CreateCluster)
    );

    // The simulator refuses what FSx refuses, like the preflight.
    let hp = instantstart_core::provider::HyperPodApi::describe_hyperpod_cluster(&b.sim, REGION, "demo-hp")
        .await
        .unwrap()
        .unwrap();
    let g = &hp.instance_groups[0];
    let direct = |capacity: u32, sgs: Vec<String>| CreateLustreFileSystem {
        region: REGION.into(),
        client_request_token: format!("t-{capacity}-{}", sgs.len()),
        subnet_id: g.subnet_ids[0].clone(),
        security_group_ids: sgs,
        deployment_type: LustreDeploymentType::Scratch2,
        storage_capacity_gib: capacity,
        per_unit_storage_throughput: None,
        tags: Tags::new(),
    };
    let e = b.sim.create_lustre_file_system(&direct(3600, g.security_group_ids.clone())).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::InvalidRequest && e.message.contains("storage_capacity_gib"), "{e:?}");
    let e = b.sim.create_lustre_file_system(&direct(1200, vec!["sg-0000000000000000".into()])).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::InvalidRequest && e.message.contains("port 988"), "{e:?}");
}

/// A server killed while the file system is being submitted or polled resumes without a second
/// CreateFileSystem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_create_or_delete_creates_and_deletes_once() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        let dir = tempfile::tempdir().unwrap();
        let req = json!({ "cluster": "demo", "name": "scratch" });
        let id = {
            let b = bed(dir.path(), 500.0);
            cluster(&b).await;
            let s = match b.engine.submit_checked(OperationKind::CreateFileSystem, &req, user(), None).await {
                Ok(Outcome::Submitted(s)) => s,
                other => panic!("{other:?}"),
            };
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                let phase = b.engine.get(&s.operation.id).unwrap().step("file_system").unwrap().phase;
                if phase == kill_at || phase == StepPhase::Succeeded {
                    break;
                }
                assert!(tokio::time::Instant::now() < deadline, "{kill_at:?} to be reached");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            b.engine.abort_all();
            b.sim.flush().unwrap();
            s.operation.id
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let b = bed(dir.path(), 500.0);
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls(CREATE), 1, "{kill_at:?}: one CreateFileSystem");
        assert_eq!(b.sim.list_lustre_file_systems(REGION).await.unwrap().len(), 1, "{kill_at:?}");

        // The delete, killed while the file system is being deleted, resumes and only polls.
        let s = match b
            .engine
            .submit_checked(
                OperationKind::DeleteFileSystem,
                &json!({ "cluster": "demo", "name": "scratch" }),
                user(),
                None,
            )
            .await
        {
            Ok(Outcome::Submitted(s)) => s,
            other => panic!("{other:?}"),
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let phase = b.engine.get(&s.operation.id).unwrap().step("file_system").unwrap().phase;
            if phase == kill_at || phase == StepPhase::Succeeded {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "delete: {kill_at:?} never reached");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        b.engine.abort_all();
        b.sim.flush().unwrap();
        drop(b);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let b = bed(dir.path(), 500.0);
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "delete {kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls("fsx:DeleteFileSystem"), 1, "{kill_at:?}: one DeleteFileSystem");
        assert!(b.sim.list_lustre_file_systems(REGION).await.unwrap().is_empty(), "{kill_at:?}");
    }
}

/// Deleting the cluster deletes its volumes' file systems: after the HyperPod cluster whose
/// nodes mount them, before the network they sit in, each once (a file system's network
/// interfaces would keep the VPC from being deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_delete_removes_its_volumes_before_the_network() {
    let dir = tempfile::tempdir().unwrap();
    let b = bed(dir.path(), 2000.0);
    cluster(&b).await;
    for name in ["scratch", "ckpt"] {
        let op = run(&b, OperationKind::CreateFileSystem, &json!({ "cluster": "demo", "name": name })).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    }
    let ids: Vec<String> = {
        let mut ids: Vec<String> =
            b.sim.list_lustre_file_systems(REGION).await.unwrap().into_iter().map(|f| f.id).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids.len(), 2);
    // A caller cannot name file systems of its own: the assessment records the real ones.
    let forged =
        json!({ "name": "demo", "file_systems": [{ "name": "other", "file_system_id": "fs-0000000000000000f" }] });
    let del = run(&b, OperationKind::DeleteCluster, &forged).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    let mut deleted: Vec<String> =
        del.steps.iter().filter_map(|s| s.key.strip_prefix("fsx:").map(str::to_string)).collect();
    deleted.sort();
    assert_eq!(deleted, ids, "one step per volume, by file system id");
    let order = |key: &str| del.steps.iter().find(|s| s.key == key).unwrap().finished_at.unwrap();
    for id in &ids {
        let step = del.steps.iter().find(|s| s.key == format!("fsx:{id}")).unwrap();
        assert!(step.depends_on.contains(&"hyperpod_cluster".to_string()), "{step:#?}");
        assert!(order(&format!("fsx:{id}")) <= order("network"), "the file system goes before the network");
    }
    assert_eq!(b.sim.calls("fsx:DeleteFileSystem"), 2);
    assert!(b.sim.list_lustre_file_systems(REGION).await.unwrap().is_empty());
}
