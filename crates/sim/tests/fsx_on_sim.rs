//! The `create_file_system` / `delete_file_system` workflows end to end on the simulated cloud,
//! through the engine with a real SQLite store: an FSx for Lustre volume is created in the
//! HyperPod nodes' subnet with the FSx CSI driver add-on and its static volume and claim, listed
//! by `storage` beside the shared bucket, mounted by a pod (which waits while the file system
//! is not `AVAILABLE`), and deleted; bad requests are refused by field before anything is
//! recorded (and the simulator refuses them too); the cluster delete waits for the volumes to
//! go; a kill -9 while the file system is being created or deleted resumes without a second
//! CreateFileSystem or DeleteFileSystem. A volume linked to the shared bucket gets one data
//! repository association (the simulator refuses what FSx refuses for one), removed before the
//! file system; a kill -9 mid-link creates it once. A file system attached to one cluster is
//! refused to another.

use instantstart_core::engine::{EngineError, Outcome};
use instantstart_core::operation::{Actor, Face, Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::preflight::CheckStatus;
use instantstart_core::provider::{
    CreateDataRepositoryAssociation, CreateLustreFileSystem, FsxApi, KubeApi, KubeObject, KubeTarget, LUSTRE_VERSION,
    LustreDeploymentType, LustreQuota, ObjectRef, ProviderErrorKind, S3Event, Tags,
};
use instantstart_core::validate::ValidationKind;
use instantstart_core::workflow;
use instantstart_core::workflow::fsx::FsxOwnership;
use instantstart_core::workload::{StorageKind, read};
use instantstart_testkit::Bed;
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const CREATE: &str = "fsx:CreateFileSystem";

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
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
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

/// A file system someone else created in the nodes' subnet (the cluster's VPC) is attached as a
/// volume: no CreateFileSystem, the add-on and the claim only, listed as `attached`, mounted by
/// a pod; what cannot be attached is refused by field before anything is recorded; deleting
/// the volume releases it (claim and volume go) and the file system stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_file_system_is_attached_listed_mounted_and_released() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
    cluster(&b).await;
    let theirs = foreign_file_system(&b).await;
    let creates = b.sim.calls(CREATE);

    let attach = json!({ "cluster": "demo", "name": "shared", "file_system_id": theirs.id });
    let op = run(&b, OperationKind::CreateFileSystem, &attach).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["addon:aws-fsx-csi-driver", "claim"]);
    assert_eq!(b.sim.calls(CREATE), creates, "attaching creates no file system");

    let rec = b.store.get_cluster("demo").unwrap().unwrap();
    let listed = read::storage(&b.sim, &b.sim, &rec).await.unwrap();
    let fsx: Vec<_> = listed.iter().filter(|s| s.kind == StorageKind::FsxLustre).collect();
    assert_eq!(fsx.len(), 1, "{listed:#?}");
    assert_eq!((fsx[0].name.as_str(), fsx[0].status.as_str()), ("shared", "Bound"));
    assert_eq!(fsx[0].ownership, Some(FsxOwnership::Attached));
    assert_eq!(fsx[0].file_system.as_ref().map(|f| f.id.as_str()), Some(theirs.id.as_str()));
    b.sim.apply(&target(), &pod("reader", "fsx-shared")).await.unwrap();
    pod_status(&b, "reader", |s| s["phase"] == "Running").await;

    // What cannot be attached: by field, nothing recorded.
    let table: &[(Value, &str)] = &[
        (json!({ "cluster": "demo", "name": "again", "file_system_id": theirs.id }), "file_system_id"),
        (json!({ "cluster": "demo", "name": "ghost", "file_system_id": "fs-0123456789abcdef0" }), "file_system_id"),
        (json!({ "cluster": "demo", "name": "shared" }), "name"),
        (
            json!({ "cluster": "demo", "name": "x", "file_system_id": theirs.id, "per_unit_storage_throughput": 125 }),
            "per_unit_storage_throughput",
        ),
    ];
    let before = b.store.list_operations(&Default::default()).unwrap().len();
    for (req, field) in table {
        let e = b.engine.submit_checked(OperationKind::CreateFileSystem, req, user(), None).await.unwrap_err();
        assert_eq!(fields(e).1, [field.to_string()], "{req}");
    }
    assert_eq!(b.store.list_operations(&Default::default()).unwrap().len(), before);

    // Released: the claim and the volume go, the file system stays.
    let del = run(&b, OperationKind::DeleteFileSystem, &json!({ "cluster": "demo", "name": "shared" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert_eq!(del.steps.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["claim"]);
    assert_eq!(b.sim.calls("fsx:DeleteFileSystem"), 0);
    let kept = b.sim.describe_lustre_file_system(REGION, &theirs.id).await.unwrap().unwrap();
    assert_eq!((kept.lifecycle.as_str(), kept.tags.len()), ("AVAILABLE", 1), "untouched: {kept:?}");
    let listed = read::storage(&b.sim, &b.sim, &rec).await.unwrap();
    assert!(listed.iter().all(|s| s.kind == StorageKind::S3), "{listed:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_wait_for_an_available_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
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
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
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
        file_system_type_version: LUSTRE_VERSION.into(),
        tags: Tags::new(),
    };
    let e = b.sim.create_lustre_file_system(&direct(3600, g.security_group_ids.clone())).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::InvalidRequest && e.message.contains("storage_capacity_gib"), "{e:?}");
    let e = b.sim.create_lustre_file_system(&direct(1200, vec!["sg-0000000000000000".into()])).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::InvalidRequest && e.message.contains("port 988"), "{e:?}");
}

/// The preflight adds the requested GiB and one file system to what the region's Lustre file
/// systems use and refuses a request over the deployment type's FSx quota (422 naming the field
/// and the quota code) before anything is recorded; the simulator refuses the same create
/// (`ServiceLimitExceeded`), and a raised quota lets it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fsx_quotas_are_checked_before_anything_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
    cluster(&b).await;
    let first = run(&b, OperationKind::CreateFileSystem, &json!({ "cluster": "demo", "name": "one" })).await;
    assert_eq!(first.status, OperationStatus::Succeeded, "{first:#?}");
    // 1200 GiB in use; the scratch storage quota is lowered to 2400.
    b.sim.set_lustre_quota(REGION, LustreQuota::ScratchStorage, 2400).unwrap();
    let over = json!({ "cluster": "demo", "name": "two", "storage_capacity_gib": 2400 });
    let e = b.engine.submit_checked(OperationKind::CreateFileSystem, &over, user(), None).await.unwrap_err();
    let EngineError::Validation(v) = e else { panic!("expected a validation error, got {e:?}") };
    assert_eq!(v.kind, ValidationKind::Unprocessable);
    assert_eq!(v.findings.iter().map(|f| f.field.as_str()).collect::<Vec<_>>(), ["storage_capacity_gib"]);
    let rule = &v.findings[0].rule;
    assert!(rule.contains("L-AD2FC696") && rule.contains("3600") && rule.contains("Service Quotas"), "{rule}");
    // The dry run shows the checks; a request within the quota passes.
    let dry = b
        .engine
        .dry_run_checked(OperationKind::CreateFileSystem, &json!({ "cluster": "demo", "name": "two" }))
        .await
        .unwrap();
    let quota: Vec<_> =
        dry.checks.iter().filter(|c| c.check == "quota").map(|c| (c.field.as_str(), c.status)).collect();
    assert_eq!(quota, [("storage_capacity_gib", CheckStatus::Pass), ("deployment_type", CheckStatus::Pass)]);
    // The number of file systems: no persistent one allowed.
    b.sim.set_lustre_quota(REGION, LustreQuota::Persistent2FileSystems, 0).unwrap();
    let persistent = json!({ "cluster": "demo", "name": "ckpt", "deployment_type": "PERSISTENT_2", "per_unit_storage_throughput": 125 });
    let e = b.engine.submit_checked(OperationKind::CreateFileSystem, &persistent, user(), None).await.unwrap_err();
    assert_eq!(fields(e), (ValidationKind::Unprocessable, vec!["deployment_type".to_string()]));
    assert_eq!(b.sim.calls(CREATE), 1);
    assert_eq!(
        b.store
            .list_operations(&Default::default())
            .unwrap()
            .iter()
            .filter(|o| o.kind == OperationKind::CreateFileSystem)
            .count(),
        1
    );

    // The simulator refuses the same create as FSx would.
    let hp = instantstart_core::provider::HyperPodApi::describe_hyperpod_cluster(&b.sim, REGION, "demo-hp")
        .await
        .unwrap()
        .unwrap();
    let g = &hp.instance_groups[0];
    let direct = CreateLustreFileSystem {
        region: REGION.into(),
        client_request_token: "t-over".into(),
        subnet_id: g.subnet_ids[0].clone(),
        security_group_ids: g.security_group_ids.clone(),
        deployment_type: LustreDeploymentType::Scratch2,
        storage_capacity_gib: 2400,
        per_unit_storage_throughput: None,
        file_system_type_version: LUSTRE_VERSION.into(),
        tags: Tags::new(),
    };
    let e = b.sim.create_lustre_file_system(&direct).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::QuotaExceeded && e.message.contains("ServiceLimitExceeded"), "{e:?}");
    let q = b.sim.lustre_quota(REGION, LustreQuota::ScratchStorage).await.unwrap().unwrap();
    assert_eq!((q.code.as_str(), q.value), ("L-AD2FC696", 2400));
    b.sim.set_lustre_quota(REGION, LustreQuota::ScratchStorage, 100_800).unwrap();
    let two = run(&b, OperationKind::CreateFileSystem, &over).await;
    assert_eq!(two.status, OperationStatus::Succeeded, "{two:#?}");
}

/// A file system someone else created in the nodes' subnet (not tagged as ours), once `AVAILABLE`.
async fn foreign_file_system(b: &Bed) -> instantstart_core::provider::LustreFileSystem {
    let hp = instantstart_core::provider::HyperPodApi::describe_hyperpod_cluster(&b.sim, REGION, "demo-hp")
        .await
        .unwrap()
        .unwrap();
    let g = &hp.instance_groups[0];
    let theirs = b
        .sim
        .create_lustre_file_system(&CreateLustreFileSystem {
            region: REGION.into(),
            client_request_token: "theirs".into(),
            subnet_id: g.subnet_ids[0].clone(),
            security_group_ids: g.security_group_ids.clone(),
            deployment_type: LustreDeploymentType::Scratch2,
            storage_capacity_gib: 2400,
            per_unit_storage_throughput: None,
            file_system_type_version: LUSTRE_VERSION.into(),
            tags: Tags::from([("team".to_string(), "data".to_string())]),
        })
        .await
        .unwrap();
    b.wait_until("their file system to become AVAILABLE", || async {
        b.sim.describe_lustre_file_system(REGION, &theirs.id).await.unwrap().unwrap().lifecycle == "AVAILABLE"
    })
    .await;
    theirs
}

/// Attaching and releasing, each killed while its `claim` step is being submitted or polled,
/// resume to one volume (then none) without creating or deleting a file system.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_attach_or_release_touches_no_file_system() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        let dir = tempfile::tempdir().unwrap();
        let (id, fs_id) = {
            let b = Bed::sim(dir.path()).speed(500.0).seed(7).build();
            cluster(&b).await;
            let theirs = foreign_file_system(&b).await;
            let req = json!({ "cluster": "demo", "name": "shared", "file_system_id": theirs.id });
            let s = match b.engine.submit_checked(OperationKind::CreateFileSystem, &req, user(), None).await {
                Ok(Outcome::Submitted(s)) => s,
                other => panic!("{other:?}"),
            };
            b.wait_for(&s.operation.id, "{kill_at:?} never reached", |op| {
                let phase = op.step("claim").unwrap().phase;
                phase == kill_at || phase == StepPhase::Succeeded
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            (s.operation.id, theirs.id)
        };
        let mut b = Bed::sim(dir.path()).speed(500.0).seed(7).build();
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls(CREATE), 1, "{kill_at:?}: only the owner's CreateFileSystem");
        let rec = b.store.get_cluster("demo").unwrap().unwrap();
        let attached = workflow::fsx::attached_volumes(&b.sim, &target(), "demo").await.unwrap();
        assert_eq!(attached.len(), 1, "{kill_at:?}: {attached:?}");
        assert_eq!(attached[0].file_system_id, fs_id);

        let s = match b
            .engine
            .submit_checked(
                OperationKind::DeleteFileSystem,
                &json!({ "cluster": "demo", "name": "shared" }),
                user(),
                None,
            )
            .await
        {
            Ok(Outcome::Submitted(s)) => s,
            other => panic!("{other:?}"),
        };
        b.wait_for(&s.operation.id, "release: {kill_at:?} never reached", |op| {
            let phase = op.step("claim").unwrap().phase;
            phase == kill_at || phase == StepPhase::Succeeded
        })
        .await;
        b.kill().await;
        b.sim.flush().unwrap();
        b.restart().await;
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "release {kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls("fsx:DeleteFileSystem"), 0, "{kill_at:?}: released, not deleted");
        assert!(b.sim.describe_lustre_file_system(REGION, &fs_id).await.unwrap().is_some());
        let listed = read::storage(&b.sim, &b.sim, &rec).await.unwrap();
        assert!(listed.iter().all(|s| s.kind == StorageKind::S3), "{kill_at:?}: {listed:#?}");
    }
}

/// A server killed while the file system is being submitted or polled resumes without a second
/// CreateFileSystem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_create_or_delete_creates_and_deletes_once() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        let dir = tempfile::tempdir().unwrap();
        let req = json!({ "cluster": "demo", "name": "scratch" });
        let id = {
            let b = Bed::sim(dir.path()).speed(500.0).seed(7).build();
            cluster(&b).await;
            let s = match b.engine.submit_checked(OperationKind::CreateFileSystem, &req, user(), None).await {
                Ok(Outcome::Submitted(s)) => s,
                other => panic!("{other:?}"),
            };
            b.wait_for(&s.operation.id, "{kill_at:?} to be reached", |op| {
                let phase = op.step("file_system").unwrap().phase;
                phase == kill_at || phase == StepPhase::Succeeded
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            s.operation.id
        };
        let mut b = Bed::sim(dir.path()).speed(500.0).seed(7).build();
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
        b.wait_for(&s.operation.id, "delete: {kill_at:?} never reached", |op| {
            let phase = op.step("file_system").unwrap().phase;
            phase == kill_at || phase == StepPhase::Succeeded
        })
        .await;
        b.kill().await;
        b.sim.flush().unwrap();
        b.restart().await;
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
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
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

const LINK: &str = "fsx:CreateDataRepositoryAssociation";
const UNLINK: &str = "fsx:DeleteDataRepositoryAssociation";

fn linked(name: &str) -> Value {
    json!({ "cluster": "demo", "name": name, "data_repository": {
        "bucket_prefix": "datasets/", "file_system_path": "/datasets", "import": ["NEW", "CHANGED", "DELETED"], "export": ["NEW"] } })
}

/// A volume linked to the shared bucket: the file system is created as Lustre 2.15, one
/// association tagged as the volume's links /datasets to s3://<bucket>/datasets/ before the
/// claim; creating again links nothing twice; the simulator refuses what FSx refuses; the
/// delete removes the association (keeping the files), then the file system.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_linked_to_the_shared_bucket_is_created_refused_as_fsx_would_and_unlinked_first() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
    cluster(&b).await;
    let bucket = b.store.get_cluster("demo").unwrap().unwrap().bucket.unwrap();

    // Refused by field before anything is recorded.
    let bad = json!({ "cluster": "demo", "name": "data", "data_repository": { "file_system_path": "datasets", "bucket_prefix": "/x" } });
    let e = b.engine.submit_checked(OperationKind::CreateFileSystem, &bad, user(), None).await.unwrap_err();
    assert_eq!(
        fields(e),
        (
            ValidationKind::Invalid,
            vec!["data_repository.file_system_path".to_string(), "data_repository.bucket_prefix".to_string()]
        )
    );
    assert_eq!(b.sim.calls(CREATE), 0);

    let op = run(&b, OperationKind::CreateFileSystem, &linked("data")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["addon:aws-fsx-csi-driver", "file_system", "data_repository", "claim"]);
    assert!(op.step("claim").unwrap().depends_on.contains(&"data_repository".to_string()));
    let fs = b.sim.list_lustre_file_systems(REGION).await.unwrap().remove(0);
    assert_eq!(fs.file_system_type_version.as_deref(), Some("2.15"));
    let dras = b.sim.list_data_repository_associations(REGION, &fs.id).await.unwrap();
    assert_eq!(dras.len(), 1, "{dras:#?}");
    let d = &dras[0];
    assert_eq!(d.lifecycle, "AVAILABLE");
    assert_eq!(
        (d.file_system_path.as_str(), d.data_repository_path.clone()),
        ("/datasets", format!("s3://{bucket}/datasets/"))
    );
    assert_eq!((d.import_events.len(), d.export_events.clone()), (3, vec![S3Event::New]));
    assert!(workflow::fsx::is_our_association(d, "demo", "data"), "{d:#?}");
    assert_eq!(b.sim.calls(LINK), 1);

    // Again: the association is found (observe before submit), none is added.
    let again = run(&b, OperationKind::CreateFileSystem, &linked("data")).await;
    assert_eq!(again.status, OperationStatus::Succeeded, "{again:#?}");
    assert_eq!(b.sim.calls(LINK), 1);

    // The simulator refuses what FSx refuses.
    let direct = |token: &str, fs_id: &str, path: &str, repo: &str| CreateDataRepositoryAssociation {
        region: REGION.into(),
        client_request_token: token.into(),
        file_system_id: fs_id.into(),
        file_system_path: path.into(),
        data_repository_path: repo.into(),
        batch_import_metadata: false,
        import_events: vec![],
        export_events: vec![],
        tags: Tags::new(),
    };
    let repo = |p: &str| format!("s3://{bucket}/{p}");
    for (path, repo, says) in [
        ("/datasets/sub", repo("other/"), "overlaps"),
        ("/other", repo("datasets/deeper/"), "overlaps"),
        ("other", repo("other/"), "start with /"),
        ("/other", "s3://no-such-bucket/x/".to_string(), "existing bucket"),
    ] {
        let e = b.sim.create_data_repository_association(&direct(path, &fs.id, path, &repo)).await.unwrap_err();
        assert!(e.kind == ProviderErrorKind::InvalidRequest && e.message.contains(says), "{path} {repo}: {e:?}");
    }
    for i in 0..7 {
        b.sim
            .create_data_repository_association(&direct(
                &format!("t{i}"),
                &fs.id,
                &format!("/d{i}"),
                &repo(&format!("d{i}/")),
            ))
            .await
            .unwrap();
    }
    let e = b.sim.create_data_repository_association(&direct("t8", &fs.id, "/d8", &repo("d8/"))).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::QuotaExceeded && e.message.contains("ServiceLimitExceeded"), "{e:?}");
    // A Lustre 2.10 file system takes none.
    let hp = instantstart_core::provider::HyperPodApi::describe_hyperpod_cluster(&b.sim, REGION, "demo-hp")
        .await
        .unwrap()
        .unwrap();
    let g = &hp.instance_groups[0];
    let old = b
        .sim
        .create_lustre_file_system(&CreateLustreFileSystem {
            region: REGION.into(),
            client_request_token: "old".into(),
            subnet_id: g.subnet_ids[0].clone(),
            security_group_ids: g.security_group_ids.clone(),
            deployment_type: LustreDeploymentType::Scratch2,
            storage_capacity_gib: 1200,
            per_unit_storage_throughput: None,
            file_system_type_version: "2.10".into(),
            tags: Tags::new(),
        })
        .await
        .unwrap();
    b.wait_until("the 2.10 file system to become AVAILABLE", || async {
        b.sim.describe_lustre_file_system(REGION, &old.id).await.unwrap().unwrap().lifecycle == "AVAILABLE"
    })
    .await;
    let e = b.sim.create_data_repository_association(&direct("old", &old.id, "/x", &repo("x/"))).await.unwrap_err();
    assert!(e.kind == ProviderErrorKind::InvalidRequest && e.message.contains("2.12"), "{e:?}");

    // The delete removes only our association, then the file system (which takes the rest).
    let del = run(&b, OperationKind::DeleteFileSystem, &json!({ "cluster": "demo", "name": "data" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    let keys: Vec<&str> = del.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["claim", "data_repository", "file_system"]);
    assert_eq!(b.sim.calls(UNLINK), 1, "the seven untagged associations are not ours to delete");
    assert_eq!(b.sim.describe_lustre_file_system(REGION, &fs.id).await.unwrap(), None);
}

/// A server killed while the link is being submitted or polled resumes without a second
/// CreateDataRepositoryAssociation; the delete killed mid-unlink deletes it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_link_or_unlink_links_and_unlinks_once() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        let dir = tempfile::tempdir().unwrap();
        let id = {
            let b = Bed::sim(dir.path()).speed(500.0).seed(7).build();
            cluster(&b).await;
            let s = match b.engine.submit_checked(OperationKind::CreateFileSystem, &linked("data"), user(), None).await
            {
                Ok(Outcome::Submitted(s)) => s,
                other => panic!("{other:?}"),
            };
            b.wait_for(&s.operation.id, "{kill_at:?} to be reached", |op| {
                let phase = op.step("data_repository").unwrap().phase;
                phase == kill_at || phase == StepPhase::Succeeded
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            s.operation.id
        };
        let mut b = Bed::sim(dir.path()).speed(500.0).seed(7).build();
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls(LINK), 1, "{kill_at:?}: one CreateDataRepositoryAssociation");
        let fs = b.sim.list_lustre_file_systems(REGION).await.unwrap().remove(0);
        assert_eq!(b.sim.list_data_repository_associations(REGION, &fs.id).await.unwrap().len(), 1, "{kill_at:?}");

        let s = match b
            .engine
            .submit_checked(
                OperationKind::DeleteFileSystem,
                &json!({ "cluster": "demo", "name": "data" }),
                user(),
                None,
            )
            .await
        {
            Ok(Outcome::Submitted(s)) => s,
            other => panic!("{other:?}"),
        };
        b.wait_for(&s.operation.id, "unlink: {kill_at:?} never reached", |op| {
            let phase = op.step("data_repository").unwrap().phase;
            phase == kill_at || phase == StepPhase::Succeeded
        })
        .await;
        b.kill().await;
        b.sim.flush().unwrap();
        b.restart().await;
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "unlink {kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls(UNLINK), 1, "{kill_at:?}: one DeleteDataRepositoryAssociation");
        assert!(b.sim.list_lustre_file_systems(REGION).await.unwrap().is_empty(), "{kill_at:?}");
    }
}

/// A file system attached to one cluster is refused to another (422 on `file_system_id` naming
/// the cluster that has it); released there, it is no longer refused for that reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_system_attached_to_one_cluster_is_refused_to_another() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(2000.0).seed(7).build();
    cluster(&b).await;
    let other = json!({
        "name": "other", "region": REGION, "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }
        ]}
    });
    let op = run(&b, OperationKind::CreateCluster, &other).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let theirs = foreign_file_system(&b).await;
    let attach = run(
        &b,
        OperationKind::CreateFileSystem,
        &json!({ "cluster": "demo", "name": "shared", "file_system_id": theirs.id }),
    )
    .await;
    assert_eq!(attach.status, OperationStatus::Succeeded, "{attach:#?}");
    let req = json!({ "cluster": "other", "name": "shared", "file_system_id": theirs.id });
    let e = b.engine.submit_checked(OperationKind::CreateFileSystem, &req, user(), None).await.unwrap_err();
    let EngineError::Validation(v) = e else { panic!("expected a validation error, got {e:?}") };
    assert_eq!(v.kind, ValidationKind::Unprocessable);
    assert_eq!(v.findings[0].field, "file_system_id");
    assert!(v.findings[0].rule.contains("cluster demo") && v.findings[0].rule.contains("one cluster only"), "{v:?}");
    // Released on demo, the other cluster's own rules apply (here: not in its VPC).
    let del = run(&b, OperationKind::DeleteFileSystem, &json!({ "cluster": "demo", "name": "shared" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    let e = b.engine.submit_checked(OperationKind::CreateFileSystem, &req, user(), None).await.unwrap_err();
    let EngineError::Validation(v) = e else { panic!("expected a validation error, got {e:?}") };
    assert!(!v.findings[0].rule.contains("one cluster only"), "{v:?}");
    assert_eq!(b.sim.calls("fsx:DeleteFileSystem"), 0);
}
