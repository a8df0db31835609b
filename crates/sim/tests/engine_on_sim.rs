//! The operation engine driving the create/delete pipelines on the simulated cloud, with a real
//! SQLite store: completion, step retry, cancellation, conflicts, faults, and crash/restart
//! without replaying any mutation (checked with the sim's per-API call counters). The
//! crash/restart tests run on SQLite and on PostgreSQL ([`dirs`]: the store suite's private
//! server, unless `INSTANTSTART_SKIP_POSTGRES=1`).

#[path = "../../store/tests/common/mod.rs"]
mod common;

use instantstart_core::operation::{OperationKind, OperationStatus, StepPhase, StepUpdate};
use instantstart_core::provider::{EksApi, HyperPodApi, NetworkApi, ProviderErrorKind, S3Api};
use instantstart_core::store::{ACTIVE_CLUSTER, StoreError};
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// A data directory per store the kill/restart tests run on: SQLite (a file in the directory)
/// and, unless `INSTANTSTART_SKIP_POSTGRES=1`, a fresh PostgreSQL database of the store suite's
/// private server (its URL kept in the directory's `store-url`, so a bed reopened on the
/// directory — a restart — finds the same store: `instantstart_testkit::open_store`).
fn dirs() -> Vec<(&'static str, tempfile::TempDir, Option<Arc<common::PgServer>>)> {
    let mut all = vec![("sqlite", tempfile::tempdir().unwrap(), None)];
    if let Some(server) = common::pg_server() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("store-url"), server.create_database()).unwrap();
        all.push(("postgres", dir, Some(server)));
    }
    all
}

// Every bed is `Bed::sim(dir)` (seed 7, the world in `world.json`, the store of `open_store`)
// with the engine's own retry budget (24 failures per API while submitting): the
// fault-injection test throttles 30% and fails 10% of ALL calls, and must complete with the
// defaults.

fn request(name: &str) -> Value {
    json!({
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } }
        ]}
    })
}

/// Submits a create pipeline for `demo` on a bed over `dir` with `faults`, "crashes" (aborts
/// every driver) once step `key` is in one of `phases`, then restarts on the same `dir`,
/// resumes, and answers the new bed with the finished operation (asserted to have succeeded
/// with one create per resource).
async fn crash_at_and_resume(
    dir: &Path,
    faults: SimFaults,
    key: &str,
    phases: &[StepPhase],
) -> (Bed, instantstart_core::operation::Operation) {
    crash_when_and_resume(dir, faults, &format!("{key} to reach {phases:?}"), |op| {
        phases.contains(&op.step(key).unwrap().phase)
    })
    .await
}

/// [`crash_at_and_resume`] once `when` holds. Simulated time moves 5 s at a time until then
/// (a manual clock), so a state lasting longer (a resource being polled) is caught however
/// loaded the machine; the restarted bed runs on the wall clock again.
async fn crash_when_and_resume(
    dir: &Path,
    faults: SimFaults,
    what: &str,
    when: impl Fn(&instantstart_core::operation::Operation) -> bool,
) -> (Bed, instantstart_core::operation::Operation) {
    let mut b = Bed::sim(dir).speed(400.0).manual_clock().build();
    b.sim.set_faults(faults);
    let id = b.submit(OperationKind::CreateCluster, &request("demo")).id;
    b.advance_until(&id, what, Duration::from_secs(5), when).await;
    b.restart().await;
    b.sim.set_manual_clock(false).unwrap();
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_created_once(&b.sim);
    (b, op)
}

/// Every create API the pipeline uses, called exactly once per resource.
fn assert_created_once(sim: &SimCloud) {
    let expected = [
        ("ec2:CreateVpc", 1),
        // 2 public + 2 private subnets with the VPC, then one /20 compute subnet per group AZ.
        ("ec2:CreateSubnet", 6),
        // EKS cluster role, HyperPod execution role, the S3 CSI driver's Pod Identity role.
        ("iam:CreateRole", 3),
        ("s3:CreateBucket", 1),
        // The lifecycle script, once.
        ("s3:PutObject", 1),
        ("eks:CreateCluster", 1),
        ("eks:CreateAddon", 4),
        ("eks:CreatePodIdentityAssociation", 1),
        ("sagemaker:CreateCluster", 1),
        // The new VPC's S3 gateway endpoint.
        ("ec2:CreateVpcEndpoint", 1),
    ];
    let stats = sim.stats();
    for (api, n) in expected {
        assert_eq!(stats.get(api).copied().unwrap_or(0), n, "{api} calls; all stats: {stats:?}");
    }
}

async fn run_to_end(b: &Bed, kind: OperationKind, req: &Value) -> instantstart_core::operation::Operation {
    let s = b.engine.submit(kind, req, user(), None).unwrap();
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "operation did not finish: {op:#?}");
    op
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_completes_with_one_create_per_resource_and_overlaps_the_eks_wait() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(op.steps.iter().all(|s| s.phase == StepPhase::Succeeded && s.attempts == 1));
    assert_created_once(&b.sim);

    // The independent work finished while the EKS control plane was still creating.
    let eks_done = op.step("eks_cluster").unwrap().finished_at.unwrap();
    for key in ["bucket", "eks_cluster_role", "hyperpod_execution_role", "compute_subnets"] {
        assert!(op.step(key).unwrap().finished_at.unwrap() < eks_done, "{key} should overlap the EKS wait");
    }

    // The cluster is registered, active, and really exists in the simulated account.
    let rec = b.store.get_cluster("demo").unwrap().unwrap();
    assert_eq!(rec.hyperpod_cluster.as_deref(), Some("demo-hp"));
    assert!(rec.vpc_id.is_some() && rec.bucket.is_some());
    assert_eq!(b.store.get_setting(ACTIVE_CLUSTER).unwrap().as_deref(), Some("demo"));
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    assert!(hp.state.is_active());
    // Each group landed in a /20 compute subnet of its own AZ.
    let net = b.sim.describe_network("us-east-1", rec.vpc_id.as_deref().unwrap()).await.unwrap();
    let compute: Vec<_> =
        net.subnets.iter().filter(|s| s.name.as_deref().is_some_and(|n| n.contains("-compute-"))).collect();
    assert_eq!(compute.len(), 2);
    assert!(compute.iter().all(|s| s.cidr.prefix_len() == 20));
    // The audit log recorded who asked.
    let audit = b.store.list_audit(Some("cluster/demo"), 10).unwrap();
    assert!(audit.iter().any(|a| a.action == "operation.create" && a.actor.principal == "test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_is_retried_alone() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    b.sim.set_faults(SimFaults::none().with(
        "sagemaker:CreateCluster",
        FaultMode::Fail {
            kind: ProviderErrorKind::QuotaExceeded,
            message: "ml.g5.2xlarge for cluster usage: limit 0".into(),
        },
    ));
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Failed);
    let hp = op.step("hyperpod_cluster").unwrap();
    assert_eq!(hp.phase, StepPhase::Failed);
    assert!(hp.error.as_deref().unwrap().contains("limit 0"), "provider reason is kept: {hp:?}");
    // Independent steps still finished; nothing else failed.
    assert_eq!(op.step("storage").unwrap().phase, StepPhase::Succeeded);
    assert_eq!(op.steps.iter().filter(|s| s.phase == StepPhase::Failed).count(), 1);

    b.sim.set_faults(SimFaults::none());
    // Retrying a step that did not fail is refused.
    assert!(b.engine.retry_step(&op.id, "eks_cluster", user()).is_err());
    b.engine.retry_step(&op.id, "hyperpod_cluster", user()).unwrap();
    let op = b.engine.wait(&op.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(op.step("hyperpod_cluster").unwrap().attempts, 2);
    assert!(
        op.steps.iter().filter(|s| s.key != "hyperpod_cluster").all(|s| s.attempts == 1),
        "only the failed step ran again"
    );
    assert_created_once(&b.sim);
    assert!(b.store.list_audit(Some("cluster/demo"), 10).unwrap().iter().any(|a| a.action == "step.retry"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_pipeline_resumes_without_replaying_a_mutation() {
    // "Crash" while the EKS control plane is being polled.
    for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
        eprintln!("on {store}");
        crash_at_and_resume(dir.path(), SimFaults::none(), "eks_cluster", &[StepPhase::Polling]).await;
    }
}

/// The new steps and pieces: a crash while `addon:vpc-cni` is being polled, and lost responses
/// of CreateVpc (the network with its S3 gateway endpoint) and CreateAddon, create nothing
/// twice; the result has the endpoint and a VPC CNI HyperPod accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vpc_cni_step_and_the_s3_endpoint_survive_a_restart_and_lost_responses() {
    use instantstart_core::provider::addon_version_at_least;
    for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
        eprintln!("on {store}");
        let faults = SimFaults::none()
            .with("ec2:CreateVpc", FaultMode::LostResponse)
            .with("eks:CreateAddon", FaultMode::LostResponse);
        let (b, op) =
            crash_at_and_resume(dir.path(), faults, "addon:vpc-cni", &[StepPhase::Submitted, StepPhase::Polling]).await;
        let rec = b.store.get_cluster("demo").unwrap().unwrap();
        let net = b.sim.describe_network("us-east-1", rec.vpc_id.as_deref().unwrap()).await.unwrap();
        assert!(net.s3_endpoint_id.is_some(), "{net:#?}");
        let cni = b.sim.describe_addon("us-east-1", "demo", "vpc-cni").await.unwrap().expect("vpc-cni add-on");
        assert!(addon_version_at_least(&cni.version, "1.18.3"), "{cni:?}");
        assert_eq!(op.step("addon:vpc-cni").unwrap().outputs["version"], cni.version.as_str());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_found_submitting_after_a_crash_adopts_what_the_provider_already_did() {
    for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
        eprintln!("on {store}");
        let mut b = Bed::sim(dir.path()).build();
        // A lost response: the bucket is created but the caller never hears back (like a crash
        // right after the provider acted). The engine retries by observing first.
        b.sim.set_faults(
            SimFaults::none()
                .with("s3:CreateBucket", FaultMode::LostResponse)
                .with("eks:CreateCluster", FaultMode::LostResponse),
        );
        let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
        assert_created_once(&b.sim);

        // A step left in `submitting` by a crash, whose resource exists: resume adopts it.
        let s = b.engine.submit(OperationKind::DeleteCluster, &json!({ "name": "demo" }), user(), None).unwrap();
        let deleted = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
        assert_eq!(deleted.status, OperationStatus::Succeeded, "{deleted:#?}");
        let before = b.sim.calls("s3:CreateBucket");
        // The bucket was kept by the delete (user data). Record a new create whose bucket step
        // crashed mid-submit: its resource exists already.
        b.engine.abort_all();
        let mut r = request("demo");
        r["hyperpod"] = Value::Null;
        let s = b.engine.submit(OperationKind::CreateCluster, &r, user(), None).unwrap();
        b.kill().await;
        let _ = b.store.update_step(
            &s.operation.id,
            "bucket",
            &StepUpdate { phase: Some(StepPhase::Submitting), attempts: Some(1), ..Default::default() },
        );
        b.restart().await;
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
        assert_eq!(b.sim.calls("s3:CreateBucket"), before, "the existing bucket was adopted, not created again");
        assert_eq!(op.step("bucket").unwrap().detail, None);
    }
}

/// A server killed between `iam:CreateRole` and the attach/put calls after it leaves a role
/// tagged as ours but without its permissions. The create pipeline's role steps and the
/// managed-features `EnsureRole` adopt such roles and complete them — trust policy, managed
/// and inline policies — before reporting them ready, and never call `CreateRole` again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_left_without_policies_by_a_killed_create_are_completed_not_created_again() {
    use instantstart_core::engine::Outcome;
    use instantstart_core::names::DerivedNames;
    use instantstart_core::provider::{CreateIamRole, ownership_tags};
    use instantstart_core::workflow::create_cluster::{hyperpod_bucket_policy, service_trust_policy};
    use instantstart_core::workflow::features::{autoscaling_policy, autoscaling_role};

    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    // What the killed attempt left: CreateRole acted (trust policy and our tags), nothing else.
    let bare = |name: &str, trusted: &str| CreateIamRole {
        name: name.into(),
        trust_policy: service_trust_policy(trusted),
        managed_policies: vec![],
        inline_policies: vec![],
        tags: ownership_tags("demo", "op-killed"),
    };
    let names = DerivedNames::for_cluster("demo");
    b.sim.seed_role(&bare(&names.eks_cluster_role, "eks.amazonaws.com")).unwrap();
    b.sim.seed_role(&bare(&names.hyperpod_execution_role, "sagemaker.amazonaws.com")).unwrap();
    // The S3 CSI driver's role, left with a plain service trust instead of the Pod Identity one.
    let csi = instantstart_core::workflow::create_cluster::s3_csi_role("demo");
    b.sim.seed_role(&bare(&csi, "pods.eks.amazonaws.com")).unwrap();
    assert!(b.sim.role_policies(&names.eks_cluster_role).unwrap().managed_policies.is_empty());

    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("iam:CreateRole"), 0, "all three roles were adopted: {:?}", b.sim.stats());
    let csi_role = b.sim.role_policies(&csi).unwrap();
    assert_eq!(csi_role.trust_policy, instantstart_core::workflow::steps::pod_identity_trust_policy());
    let eks_role = b.sim.role_policies(&names.eks_cluster_role).unwrap();
    // Completed with the trust the create pipeline wants: EKS, for this cluster and account only.
    assert_eq!(
        eks_role.trust_policy,
        instantstart_core::workflow::create_cluster::eks_cluster_trust_policy(
            "123456789012",
            "us-east-1",
            &names.eks_cluster
        )
    );
    assert_eq!(eks_role.managed_policies, ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]);
    assert!(eks_role.inline_policies.is_empty());
    let bucket = op.step("bucket").unwrap().outputs["bucket"].as_str().unwrap().to_string();
    let exec_role = b.sim.role_policies(&names.hyperpod_execution_role).unwrap();
    assert_eq!(exec_role.trust_policy, service_trust_policy("sagemaker.amazonaws.com"));
    assert_eq!(exec_role.managed_policies, ["arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]);
    assert_eq!(
        exec_role.inline_policies,
        [
            ("instantstart-shared-bucket".to_string(), hyperpod_bucket_policy(&bucket)),
            (
                instantstart_core::workflow::create_cluster::HYPERPOD_EKS_NODE_POLICY.to_string(),
                instantstart_core::workflow::create_cluster::hyperpod_eks_node_policy()
            )
        ]
    );
    assert_eq!(
        csi_role.inline_policies,
        [(
            "instantstart-s3-csi-bucket".to_string(),
            instantstart_core::workflow::create_cluster::s3_csi_policy(&bucket)
        )]
    );

    // The managed-autoscaling role (an `EnsureRole` step), left bare and with a stale trust
    // policy: adopted, its trust policy replaced and its inline policy put.
    let autoscaling = autoscaling_role("demo");
    b.sim.seed_role(&bare(&autoscaling, "eks.amazonaws.com")).unwrap();
    let request = json!({ "cluster": "demo", "patch": { "managed_autoscaling": true } });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::SetFeatures, &request, user(), None).await.unwrap()
    else {
        panic!("enabling autoscaling is a change");
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let step = op.step("autoscaling_role").unwrap();
    assert_eq!((step.phase, step.attempts), (StepPhase::Succeeded, 1));
    assert_eq!(b.sim.calls("iam:CreateRole"), 0, "the autoscaling role was adopted: {:?}", b.sim.stats());
    let role = b.sim.role_policies(&autoscaling).unwrap();
    assert_eq!(role.trust_policy, service_trust_policy("hyperpod.sagemaker.amazonaws.com"));
    assert!(role.managed_policies.is_empty());
    let rec = b.store.get_cluster("demo").unwrap().unwrap();
    assert_eq!(role.inline_policies, [("instantstart-autoscaling".to_string(), autoscaling_policy(&rec, "demo-hp"))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_server_errors_do_not_duplicate_anything() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    b.sim.set_faults(SimFaults { throttle_rate: 0.3, error_rate: 0.1, ..SimFaults::none() });
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_created_once(&b.sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_idempotency_cancel_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(200.0).build();
    let req = request("demo");
    let first = b.engine.submit(OperationKind::CreateCluster, &req, user(), Some("key-1".into())).unwrap();
    assert!(first.created);
    // Same key, same request: the same operation.
    let again = b.engine.submit(OperationKind::CreateCluster, &req, user(), Some("key-1".into())).unwrap();
    assert!(!again.created);
    assert_eq!(again.operation.id, first.operation.id);
    // Same key, another request: refused.
    let err =
        b.engine.submit(OperationKind::CreateCluster, &request("other"), user(), Some("key-1".into())).unwrap_err();
    assert!(
        matches!(err, instantstart_core::engine::EngineError::Store(StoreError::IdempotencyMismatch { .. })),
        "{err:?}"
    );
    // A second mutation of the same cluster while the first runs: conflict.
    let err = b.engine.submit(OperationKind::DeleteCluster, &json!({ "name": "demo" }), user(), None).unwrap_err();
    assert!(matches!(err, instantstart_core::engine::EngineError::Store(StoreError::Conflict { .. })), "{err:?}");

    // Cancel stops it between calls; a retry of a cancelled step picks it up again.
    let cancelled = b.engine.cancel(&first.operation.id, user()).unwrap();
    let cancelled = b.engine.wait(&cancelled.id, WAIT).await.unwrap();
    assert_eq!(cancelled.status, OperationStatus::Cancelled);
    let stopped =
        cancelled.steps.iter().find(|s| s.phase == StepPhase::Cancelled).expect("a cancelled step").key.clone();
    b.engine.retry_step(&first.operation.id, &stopped, user()).unwrap();
    let done = b.engine.wait(&first.operation.id, WAIT).await.unwrap();
    assert_eq!(done.status, OperationStatus::Succeeded, "{done:#?}");
    assert_created_once(&b.sim);

    // Delete removes everything InstantStart created, keeps the bucket, forgets the cluster.
    let del = run_to_end(&b, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert!(b.sim.describe_eks_cluster("us-east-1", "demo").await.unwrap().is_none());
    assert!(b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().is_none());
    assert!(b.store.get_cluster("demo").unwrap().is_none());
    assert_eq!(b.store.get_setting(ACTIVE_CLUSTER).unwrap(), None);
    let rec_bucket = done.step("bucket").unwrap().outputs["bucket"].as_str().unwrap().to_string();
    assert!(b.sim.describe_bucket(&rec_bucket).await.unwrap().is_some(), "the data bucket is kept by default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_reports_every_finding_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let mut req = request("Bad_Name");
    req["availability_zones"] = json!(["us-east-1a"]);
    req["hyperpod"]["instance_groups"][1]["interface_mode"] = json!("efa_only");
    let err = b.engine.submit(OperationKind::CreateCluster, &req, user(), None).unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    let fields: Vec<&str> = v.findings.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["name", "availability_zones"]);
    // What needs EC2's specs of the type is the preflight's: g5.2xlarge has no EFA, so no
    // EFA-only interfaces (422 naming the field, with the specs that decided it).
    let mut req = request("demo");
    req["hyperpod"]["instance_groups"][1]["interface_mode"] = json!("efa_only");
    let err = b.engine.submit_checked(OperationKind::CreateCluster, &req, user(), None).await.unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    assert_eq!(v.kind, instantstart_core::validate::ValidationKind::Unprocessable);
    assert_eq!(v.findings[0].field, "hyperpod.instance_groups[1].interface_mode", "{v:?}");
    assert!(v.findings[0].rule.contains("does not support EFA-only"), "{}", v.findings[0].rule);
    // A type EC2 does not describe is accepted; the checks that need its specs warn.
    let mut req = request("demo");
    req["hyperpod"]["instance_groups"][0]["instance_type"] = json!("ml.p6e-gb200.36xlarge");
    req["hyperpod"]["instance_groups"][0]["availability_zone"] = json!("us-east-1b");
    req["hyperpod"]["instance_groups"][0]["deep_health_checks"] = json!({ "stress": true, "connectivity": true });
    let dry = b.engine.dry_run_checked(OperationKind::CreateCluster, &req).await.unwrap();
    let specs: Vec<_> = dry.checks.iter().filter(|c| c.check == "instance_specs").collect();
    assert_eq!(specs.len(), 2, "{specs:#?}");
    assert!(
        specs.iter().all(|c| c.status == instantstart_core::preflight::CheckStatus::Warn
            && c.detail.contains("could not be checked")),
        "{specs:#?}"
    );
    assert!(b.store.list_operations(&Default::default()).unwrap().is_empty());
    assert!(b.sim.stats().keys().all(|k| !k.contains("Create")), "nothing was called");
    // A wrongly shaped body names the field.
    let err = b
        .engine
        .dry_run(
            OperationKind::CreateCluster,
            &json!({ "name": "x", "region": "us-east-1", "availability_zones": "us-east-1a" }),
        )
        .unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    assert_eq!(v.findings[0].field, "availability_zones");
}

/// The `lifecycle_script` step writes InstantStart's script once under its content-addressed
/// key, and every group without a script of its own is created with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_run_the_uploaded_lifecycle_script() {
    use instantstart_core::lifecycle::{ON_CREATE_SH, default_lifecycle, script_key, script_sha256};
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let step = op.step("lifecycle_script").unwrap();
    assert_eq!(step.depends_on, ["bucket"]);
    assert!(step.title.contains(&script_key()), "the key is named when the operation is recorded: {}", step.title);
    assert!(op.step("hyperpod_cluster").unwrap().depends_on.contains(&"lifecycle_script".to_string()));
    let bucket = op.step("bucket").unwrap().outputs["bucket"].as_str().unwrap().to_string();
    assert_eq!(step.outputs["key"], script_key());
    assert_eq!(step.outputs["sha256"], script_sha256());
    let head = b.sim.head_object(&bucket, &script_key()).await.unwrap().expect("uploaded");
    assert_eq!(head.size_bytes, ON_CREATE_SH.len() as u64);
    assert_eq!(head.sha256.as_deref(), Some(script_sha256().as_str()));
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    for g in &hp.instance_groups {
        assert_eq!(g.lifecycle_script, Some(default_lifecycle(&bucket)), "{}", g.name);
    }
    assert_eq!(b.sim.calls("s3:PutObject"), 1);
}

/// A server killed after the step's `submitting` phase was persisted but before PutObject took
/// effect (PutObject is throttled until the kill), and a PutObject whose response is lost:
/// either way the resumed/retried step observes with HeadObject first, and exactly one
/// PutObject reaches S3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_script_is_put_once_across_a_kill_between_persist_and_put() {
    for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
        eprintln!("on {store}");
        let mut b = Bed::sim(dir.path()).speed(400.0).build();
        b.sim.set_faults(SimFaults::none().with(
            "s3:PutObject",
            FaultMode::Fail {
                kind: ProviderErrorKind::Throttled,
                message: "SlowDown: reduce your request rate".into(),
            },
        ));
        let id = b.submit(OperationKind::CreateCluster, &request("demo")).id;
        b.wait_for(&id, "lifecycle_script to retry its submission", |op| {
            let step = op.step("lifecycle_script").unwrap();
            step.phase == StepPhase::Submitting && step.detail.as_deref().is_some_and(|d| d.starts_with("retrying"))
        })
        .await;
        assert_eq!(b.sim.calls("s3:PutObject"), 0, "nothing reached S3 before the kill");
        b.restart().await;
        assert_eq!(b.engine.resume_all().unwrap(), 1);
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
        assert_eq!(b.sim.calls("s3:PutObject"), 1, "{:?}", b.sim.stats());
        assert!(b.sim.calls("s3:HeadObject") >= 2, "observed before putting, polled after");

        // A lost PutObject response: the retry adopts the object instead of writing it again.
        let dir = tempfile::tempdir().unwrap();
        let b = Bed::sim(dir.path()).build();
        b.sim.set_faults(SimFaults::none().with("s3:PutObject", FaultMode::LostResponse));
        let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
        assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
        assert_eq!(b.sim.calls("s3:PutObject"), 1);
        assert_eq!(op.step("lifecycle_script").unwrap().detail.as_deref(), None);
        assert_created_once(&b.sim);
    }
}

/// Scaling a group sends it back as described — here a 1000 GB volume, stress checks and the
/// cluster's lifecycle script — not rebuilt from defaults; a group added later reuses the
/// cluster's script.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_echoes_the_group_and_added_groups_reuse_the_cluster_script() {
    use instantstart_core::engine::Outcome;
    use instantstart_core::spec::DeepHealthChecks;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let mut req = request("demo");
    req["hyperpod"]["instance_groups"][0]["ebs_volume_gb"] = json!(1000);
    req["hyperpod"]["instance_groups"][0]["deep_health_checks"] = json!({ "stress": true });
    let op = run_to_end(&b, OperationKind::CreateCluster, &req).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let script = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap().instance_groups[0]
        .lifecycle_script
        .clone()
        .expect("created with a script");

    let scale = json!({ "cluster": "demo", "group": "workers", "patch": { "count": 3 } });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::UpdateInstanceGroup, &scale, user(), None).await.unwrap()
    else {
        panic!("scaling is a change");
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    let w = hp.instance_groups.iter().find(|g| g.name == "workers").unwrap();
    assert_eq!(w.target_count, 3);
    assert_eq!(w.ebs_volume_gb, Some(1000), "the described EBS size was sent back");
    assert_eq!(w.deep_health_checks, DeepHealthChecks { stress: true, connectivity: false });
    assert_eq!(w.lifecycle_script.as_ref(), Some(&script));
    assert_eq!(w.threads_per_core, Some(1));

    let add = json!({ "cluster": "demo", "group": {
        "name": "more", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" } });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::AddInstanceGroup, &add, user(), None).await.unwrap()
    else {
        panic!("adding a group is a change");
    };
    assert_eq!(s.operation.request["group"]["lifecycle_script"], serde_json::to_value(&script).unwrap(), "recorded");
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    let more = hp.instance_groups.iter().find(|g| g.name == "more").unwrap();
    assert_eq!(more.lifecycle_script.as_ref(), Some(&script), "the cluster's script key is reused");
    assert_eq!(b.sim.calls("s3:PutObject"), 1, "nothing uploaded again");
}

/// Everything the training operator feature creates in the simulated account: its role (with
/// trust and managed policy), its Pod Identity association and the add-on.
async fn operator_state(b: &Bed) -> (Option<instantstart_sim::RolePolicies>, usize, bool) {
    use instantstart_core::workflow::features::*;
    let assoc = b
        .sim
        .list_pod_identity_associations(
            "us-east-1",
            "demo",
            TRAINING_OPERATOR_NAMESPACE,
            TRAINING_OPERATOR_SERVICE_ACCOUNT,
        )
        .await
        .unwrap();
    let addon = b.sim.describe_addon("us-east-1", "demo", TRAINING_OPERATOR_ADDON).await.unwrap();
    (b.sim.role_policies(&training_operator_role("demo")), assoc.len(), addon.is_some())
}

async fn set_training_operator(b: &Bed, on: bool) -> instantstart_core::operation::Operation {
    use instantstart_core::engine::Outcome;
    let request = json!({ "cluster": "demo", "patch": { "training_operator": on } });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::SetFeatures, &request, user(), None).await.unwrap()
    else {
        panic!("switching the training operator is a change");
    };
    b.engine.wait(&s.operation.id, WAIT).await.unwrap()
}

/// Training operator ON creates its role, its association and the add-on (in that order, the
/// add-on healthy, i.e. with its identity); OFF removes exactly those, and the S3 CSI driver's
/// identity made by create-cluster is untouched. Delete-cluster then removes that one too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn training_operator_on_then_off_removes_exactly_what_on_created() {
    use instantstart_core::workflow::features::*;
    use instantstart_core::workflow::steps::pod_identity_trust_policy;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let csi =
        b.sim.list_pod_identity_associations("us-east-1", "demo", "kube-system", "s3-csi-driver-sa").await.unwrap();
    assert_eq!(csi.len(), 1, "create-cluster associated the S3 CSI driver");
    assert_eq!(operator_state(&b).await, (None, 0, false));
    let before = b.sim.stats();

    let on = set_training_operator(&b, true).await;
    assert_eq!(on.status, OperationStatus::Succeeded, "{on:#?}");
    let finished = |k: &str| on.step(k).unwrap().finished_at.unwrap();
    assert!(finished("training_operator_role") <= finished("training_operator_identity"));
    assert!(finished("training_operator_identity") <= finished(&format!("addon:{TRAINING_OPERATOR_ADDON}")));
    let (role, assoc, addon) = operator_state(&b).await;
    let role = role.expect("the operator's role");
    assert_eq!(role.trust_policy, pod_identity_trust_policy());
    assert_eq!(role.managed_policies, [TRAINING_OPERATOR_POLICY]);
    assert_eq!((assoc, addon), (1, true));
    let a = b.sim.describe_addon("us-east-1", "demo", TRAINING_OPERATOR_ADDON).await.unwrap().unwrap();
    assert!(a.health_issues.is_empty(), "the operator has its identity: {a:?}");
    let delta = |api: &str| b.sim.calls(api) - before.get(api).copied().unwrap_or(0);
    assert_eq!(delta("iam:CreateRole"), 1);
    assert_eq!(delta("eks:CreatePodIdentityAssociation"), 1);

    let off = set_training_operator(&b, false).await;
    assert_eq!(off.status, OperationStatus::Succeeded, "{off:#?}");
    // The add-on takes its deletion time; the association and the role are gone at once.
    let (role, assoc, _) = operator_state(&b).await;
    assert_eq!((role.is_none(), assoc), (true, 0));
    assert_eq!(delta("iam:DeleteRole"), 1);
    assert_eq!(delta("eks:DeletePodIdentityAssociation"), 1);
    assert_eq!(delta("eks:DeleteAddon"), 1);
    let still =
        b.sim.list_pod_identity_associations("us-east-1", "demo", "kube-system", "s3-csi-driver-sa").await.unwrap();
    assert_eq!(still, csi, "OFF leaves the S3 CSI driver's identity alone");

    // Delete-cluster removes the driver's association and role with the rest.
    let del = run_to_end(&b, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert!(b.sim.role_policies(&instantstart_core::workflow::create_cluster::s3_csi_role("demo")).is_none());
    assert_eq!(delta("eks:DeletePodIdentityAssociation"), 2);
}

/// A crash (the engine aborted, a new one resumes from the store) while the training
/// operator's identity steps run, or a response lost after EKS acted: nothing is created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_or_lost_response_in_the_identity_steps_creates_nothing_twice() {
    for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
        eprintln!("on {store}");
        {
            let b = Bed::sim(dir.path()).build();
            let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
            assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
            // Lost responses: the role and the association are made, the engine never hears back.
            b.sim.set_faults(
                SimFaults::none()
                    .with("iam:CreateRole", FaultMode::LostResponse)
                    .with("eks:CreatePodIdentityAssociation", FaultMode::LostResponse),
            );
            let on = set_training_operator(&b, true).await;
            assert_eq!(on.status, OperationStatus::Succeeded, "{on:#?}");
            b.sim.set_faults(SimFaults::none());
            assert_eq!(operator_state(&b).await.1, 1);
            // 1 S3 CSI association + 1 for the operator, whatever the retries.
            assert_eq!(b.sim.calls("eks:CreatePodIdentityAssociation"), 2, "{:?}", b.sim.stats());
            let off = set_training_operator(&b, false).await;
            assert_eq!(off.status, OperationStatus::Succeeded, "{off:#?}");
            // Wait until the add-on's deletion finished, so the operator can be switched on again.
            b.wait_until("the add-on to be deleted", || async { !operator_state(&b).await.2 }).await;
        }
        // Kill at each new step: abort when that step was reached, resume in a new engine.
        for (round, key) in [
            "training_operator_role",
            "training_operator_identity",
            "addon:amazon-sagemaker-hyperpod-training-operator",
        ]
        .into_iter()
        .enumerate()
        {
            let mut b = Bed::sim(dir.path()).build();
            let request = json!({ "cluster": "demo", "patch": { "training_operator": true } });
            let id = b.submit_checked(OperationKind::SetFeatures, &request).await.operation.id;
            b.wait_for(&id, &format!("{key} to start"), |op| {
                op.step(key).unwrap().phase != StepPhase::Pending || op.status.is_terminal()
            })
            .await;
            b.restart().await;
            b.engine.resume_all().unwrap();
            let op = b.engine.wait(&id, WAIT).await.unwrap();
            assert_eq!(op.status, OperationStatus::Succeeded, "round {round} ({key}): {op:#?}");
            let (role, assoc, addon) = operator_state(&b).await;
            assert!(role.is_some() && assoc == 1 && addon, "round {round} ({key})");
            // Each round created exactly one role and one association (the first round's two
            // associations: S3 CSI + the operator's first ON).
            assert_eq!(
                b.sim.calls("eks:CreatePodIdentityAssociation"),
                3 + round as u64,
                "round {round}: {:?}",
                b.sim.stats()
            );
            let off = set_training_operator(&b, false).await;
            assert_eq!(off.status, OperationStatus::Succeeded, "{off:#?}");
            b.wait_until("the add-on to be deleted", || async { !operator_state(&b).await.2 }).await;
        }
    }
}

/// Every managed feature on creates a role per feature (training operator, inference operator,
/// tiered checkpointing, autoscaling, observability); delete-cluster removes each of them after what uses it,
/// so no IAM role tagged for the cluster is left in the account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cluster_after_every_feature_leaves_no_role_of_the_cluster() {
    use instantstart_core::engine::Outcome;
    use instantstart_core::workflow::delete_cluster::{
        AUTOSCALING_ROLE_STEP, CHECKPOINT_ROLE_STEP, INFERENCE_ROLE_STEP,
    };
    use instantstart_core::workflow::features::*;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let created_by_pipeline = b.sim.roles_tagged_for("demo");
    let patch = json!({
        "training_operator": true,
        "inference_operator": true,
        "tiered_checkpointing": { "enabled": true },
        "managed_autoscaling": true,
        "observability": true
    });
    let Outcome::Submitted(s) = b
        .engine
        .submit_checked(OperationKind::SetFeatures, &json!({ "cluster": "demo", "patch": patch }), user(), None)
        .await
        .unwrap()
    else {
        panic!("turning every feature on is a change");
    };
    let on = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(on.status, OperationStatus::Succeeded, "{on:#?}");
    let feature_roles = [
        training_operator_role("demo"),
        inference_role("demo"),
        checkpoint_role("demo"),
        autoscaling_role("demo"),
        instantstart_core::workflow::observability::observability_role("demo"),
    ];
    let tagged = b.sim.roles_tagged_for("demo");
    for role in &feature_roles {
        assert!(tagged.contains(role), "{role} created by the features: {tagged:?}");
        assert!(!created_by_pipeline.contains(role), "{role}");
    }

    let del = run_to_end(&b, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert_eq!(b.sim.roles_tagged_for("demo"), Vec::<String>::new(), "no role of the cluster is left");
    // Each role went after what used it.
    let finished = |k: &str| del.step(k).unwrap().finished_at.unwrap();
    assert!(finished("hyperpod_cluster") <= finished(AUTOSCALING_ROLE_STEP));
    assert!(finished("eks_cluster") <= finished(CHECKPOINT_ROLE_STEP));
    assert!(finished("eks_cluster") <= finished(INFERENCE_ROLE_STEP));
    let unregister = &del.step("unregister").unwrap().depends_on;
    for k in [
        AUTOSCALING_ROLE_STEP,
        CHECKPOINT_ROLE_STEP,
        INFERENCE_ROLE_STEP,
        "training_operator_role",
        "observability_role",
        "prometheus_workspace",
    ] {
        assert!(unregister.contains(&k.to_string()), "{k}");
    }
    assert!(finished("eks_cluster") <= finished("prometheus_workspace"), "the add-on writes to it until then");
    use instantstart_core::provider::AmpApi;
    let left = b
        .sim
        .list_prometheus_workspaces("us-east-1", &instantstart_core::provider::prometheus_alias("demo"))
        .await
        .unwrap();
    assert!(left.is_empty(), "the cluster's Prometheus workspace is deleted with it: {left:?}");
}

/// A same-named role that is not ours is left alone: the step needs attention, nothing else stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_feature_role_is_left_alone_by_delete_cluster() {
    use instantstart_core::provider::{CreateIamRole, IamApi};
    use instantstart_core::workflow::delete_cluster::CHECKPOINT_ROLE_STEP;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let name = instantstart_core::workflow::features::checkpoint_role("demo");
    b.sim
        .seed_role(&CreateIamRole {
            name: name.clone(),
            trust_policy: instantstart_core::workflow::create_cluster::service_trust_policy("ec2.amazonaws.com"),
            managed_policies: vec![],
            inline_policies: vec![],
            tags: [("team".to_string(), "someone-else".to_string())].into_iter().collect(),
        })
        .unwrap();
    let del = run_to_end(&b, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    let step = del.step(CHECKPOINT_ROLE_STEP).unwrap();
    assert_eq!(step.phase, StepPhase::NeedsAttention, "{step:?}");
    assert!(step.error.as_deref().unwrap().contains(&name), "{step:?}");
    assert!(b.sim.get_role(&name).await.unwrap().is_some(), "the foreign role is kept");
    assert!(b.sim.describe_eks_cluster("us-east-1", "demo").await.unwrap().is_none(), "the rest of the teardown ran");
}

/// An add-on that ends `CREATE_FAILED` fails its step with the add-on's health issue; a step
/// retry deletes it and creates it again (a fresh token; one CreateAddon per attempt), through
/// lost responses of both calls, and the pipeline then completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_failed_addon_is_deleted_and_created_again_by_a_step_retry() {
    use instantstart_core::provider::ResourceState;
    use instantstart_core::workflow::create_cluster::BASE_ADDONS;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let issue =
        "ConfigurationConflict: Conflicts found when trying to apply. Will not continue due to resolve conflicts mode";
    b.sim.set_faults(SimFaults::none().with("eks:CreateAddon", FaultMode::resource_fails(issue)));
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Failed);
    // The S3 CSI driver's add-on waits for its identity, which waits for the agent's add-on.
    let first = ["vpc-cni", "eks-pod-identity-agent", "cert-manager"];
    let keys: Vec<String> = first.iter().map(|a| format!("addon:{a}")).collect();
    let failed: Vec<String> = op.steps.iter().filter(|s| s.phase == StepPhase::Failed).map(|s| s.key.clone()).collect();
    assert_eq!(failed, keys, "only the add-ons failed");
    assert_eq!(op.step("addon:aws-mountpoint-s3-csi-driver").unwrap().phase, StepPhase::Pending);
    for k in &keys {
        let error = op.step(k).unwrap().error.clone().unwrap();
        assert!(error.contains(issue) && error.contains("retry this step"), "{k}: {error}");
    }
    for a in first {
        let found = b.sim.describe_addon("us-east-1", "demo", a).await.unwrap().unwrap();
        assert!(matches!(found.state, ResourceState::Failed { .. }), "{found:?}");
    }
    assert_eq!(b.sim.calls("eks:CreateAddon"), 3, "one per add-on step");

    // Retry each: the failed add-on is deleted, then created again; the first retry through a
    // lost DeleteAddon and a lost CreateAddon response (both acted).
    b.sim.set_faults(
        SimFaults::none()
            .with("eks:DeleteAddon", FaultMode::LostResponse)
            .with("eks:CreateAddon", FaultMode::LostResponse),
    );
    for k in &keys {
        b.engine.retry_step(&op.id, k, user()).unwrap();
        let after = b.engine.wait(&op.id, WAIT).await.unwrap();
        let step = after.step(k).unwrap();
        assert_eq!((step.phase, step.attempts), (StepPhase::Succeeded, 2), "{step:?}");
    }
    let op = b.engine.wait(&op.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("eks:DeleteAddon"), 3, "each failed add-on deleted once");
    // Two attempts of three steps, one of the S3 CSI driver's.
    assert_eq!(b.sim.calls("eks:CreateAddon"), 7, "exactly one CreateAddon per attempt");
    assert_eq!(op.step("addon:aws-mountpoint-s3-csi-driver").unwrap().attempts, 1);
    for a in BASE_ADDONS {
        let found = b.sim.describe_addon("us-east-1", "demo", a).await.unwrap().unwrap();
        assert_eq!(found.state, ResourceState::Active, "{found:?}");
    }
}

/// Someone else's failed add-on is never deleted: the step needs attention, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_addon_that_is_not_ours_is_left_alone() {
    use instantstart_core::provider::{CreateEksAddon, ResourceState};
    use instantstart_core::workflow::features::TRAINING_OPERATOR_ADDON;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    b.sim.set_faults(SimFaults::none().with("eks:CreateAddon", FaultMode::resource_fails("AccessDenied: not ours")));
    b.sim
        .create_addon(&CreateEksAddon {
            region: "us-east-1".into(),
            cluster: "demo".into(),
            name: TRAINING_OPERATOR_ADDON.into(),
            version: None,
            client_request_token: "someone-else".into(),
            tags: [("team".to_string(), "platform".to_string())].into_iter().collect(),
            configuration_values: None,
        })
        .await
        .unwrap();
    b.sim.set_faults(SimFaults::none());
    b.sim.advance(Duration::from_secs(600));
    let a = b.sim.describe_addon("us-east-1", "demo", TRAINING_OPERATOR_ADDON).await.unwrap().unwrap();
    assert!(matches!(a.state, ResourceState::Failed { .. }), "{a:?}");
    let on = set_training_operator(&b, true).await;
    let step = on.step(&format!("addon:{TRAINING_OPERATOR_ADDON}")).unwrap();
    assert_eq!(step.phase, StepPhase::NeedsAttention, "{step:?}");
    assert!(step.error.as_deref().unwrap().contains("not tagged as InstantStart's"), "{step:?}");
    assert_eq!(b.sim.calls("eks:DeleteAddon"), 0, "left alone");
}

/// A server killed while a step retry replaces a failed add-on — while the deletion is polled,
/// or once the new add-on is being polled — resumes without a second DeleteAddon or CreateAddon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_a_failed_addon_is_replaced_creates_nothing_twice() {
    use instantstart_core::workflow::steps::ADDON_REPLACEMENT;
    for kill_at in [ADDON_REPLACEMENT, "eks-addon"] {
        for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
            eprintln!("on {store}");
            let mut b = Bed::sim(dir.path()).build();
            b.sim.set_faults(SimFaults::none().with("eks:CreateAddon", FaultMode::resource_fails("InternalFailure")));
            let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
            assert_eq!(op.step("addon:vpc-cni").unwrap().phase, StepPhase::Failed, "{kill_at}");
            b.sim.set_faults(SimFaults::none());
            b.engine.retry_step(&op.id, "addon:vpc-cni", user()).unwrap();
            let id = op.id;
            b.wait_for(&id, &format!("addon:vpc-cni to wait on its {kill_at}"), |op| {
                let step = op.step("addon:vpc-cni").unwrap();
                matches!(step.phase, StepPhase::Submitted | StepPhase::Polling)
                    && step.resource.as_ref().is_some_and(|r| r.kind == kill_at)
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            b.restart().await;
            b.engine.resume_all().unwrap();
            let op = b.engine.wait(&id, WAIT).await.unwrap();
            let step = op.step("addon:vpc-cni").unwrap();
            assert_eq!((step.phase, step.attempts), (StepPhase::Succeeded, 2), "{kill_at}: {step:?}");
            assert_eq!(b.sim.calls("eks:DeleteAddon"), 1, "{kill_at}");
            assert_eq!(b.sim.calls("eks:CreateAddon"), 4, "{kill_at}: three failed creates, one replacement");
        }
    }
}

/// Import gives the control plane access to a cluster someone else created: the simulated
/// Kubernetes API answers 401 until the import's access entry exists; a CONFIG_MAP-only
/// cluster is refused with what to change before anything is recorded; deleting the imported
/// cluster removes only the entry the import created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_adds_the_control_planes_access_entry_and_delete_removes_it() {
    use instantstart_core::engine::Outcome;
    use instantstart_core::provider::{CreateNetwork, KubeApi, ListParams};
    use instantstart_core::subnet::plan_new_vpc;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let zones = vec!["us-east-1a".to_string(), "us-east-1b".to_string()];
    let n = b
        .sim
        .seed_network(&CreateNetwork {
            region: "us-east-1".into(),
            name: "legacy".into(),
            cidr: "10.20.0.0/16".parse().unwrap(),
            subnets: plan_new_vpc("10.20.0.0/16".parse().unwrap(), &zones).unwrap(),
            tags: Default::default(),
        })
        .unwrap();
    let private: Vec<String> = n.subnets.iter().filter(|s| !s.public).map(|s| s.id.clone()).collect();
    b.sim.seed_eks_cluster("us-east-1", "legacy", "1.33", private, Default::default()).unwrap();
    let target = instantstart_core::provider::KubeTarget::new("us-east-1", "legacy");
    let namespaces =
        ListParams { api_version: "v1".into(), kind: "Namespace".into(), namespace: None, labels: Default::default() };
    let denied = b.sim.list(&target, &namespaces).await.unwrap_err();
    assert_eq!(denied.kind, ProviderErrorKind::AccessDenied);
    assert!(denied.message.starts_with("Unauthorized"), "{denied}");

    let import = json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "legacy" });
    // CONFIG_MAP only: no access entry can be made; refused before anything is recorded.
    b.sim.set_eks_authentication_mode("us-east-1", "legacy", "CONFIG_MAP").unwrap();
    let err = b.engine.submit_checked(OperationKind::ImportCluster, &import, user(), None).await.unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    assert_eq!(v.findings[0].field, "eks_cluster");
    assert!(v.findings[0].rule.contains("authenticationMode=API_AND_CONFIG_MAP"), "{}", v.findings[0].rule);
    assert!(b.store.list_operations(&Default::default()).unwrap().is_empty());
    // A missing cluster is a 422 too, not a failed operation.
    let err = b
        .engine
        .submit_checked(
            OperationKind::ImportCluster,
            &json!({ "name": "x", "region": "us-east-1", "eks_cluster": "nope" }),
            user(),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, instantstart_core::engine::EngineError::Validation(ref v) if v.findings[0].field == "eks_cluster"),
        "{err:?}"
    );

    b.sim.set_eks_authentication_mode("us-east-1", "legacy", "API_AND_CONFIG_MAP").unwrap();
    // Without its owner's consent tag the control plane may not give itself access: refused
    // with what to do before anything is recorded, and IAM (the simulated template) refuses
    // the access entry too.
    let err = b.engine.submit_checked(OperationKind::ImportCluster, &import, user(), None).await.unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    assert_eq!(v.findings[0].field, "eks_cluster");
    assert!(v.findings[0].rule.contains("instantstart:import=allowed"), "{}", v.findings[0].rule);
    assert!(b.store.list_operations(&Default::default()).unwrap().is_empty());
    let principal = "arn:aws:iam::123456789012:role/instantstart-control-plane";
    let direct = b
        .sim
        .ensure_access_entry(&instantstart_core::provider::EnsureAccessEntry {
            region: "us-east-1".into(),
            cluster: "legacy".into(),
            principal_arn: principal.into(),
            kind: "STANDARD".into(),
            policies: Vec::new(),
            client_request_token: "t".into(),
            tags: Default::default(),
        })
        .await
        .unwrap_err();
    assert_eq!(direct.kind, ProviderErrorKind::AccessDenied, "{direct}");
    b.sim.tag_eks_cluster("us-east-1", "legacy", "instantstart:import", "allowed").unwrap();
    let dry = b.engine.dry_run_checked(OperationKind::ImportCluster, &import).await.unwrap();
    let check = dry.checks.iter().find(|c| c.check == "access_entry").expect("the access check");
    assert!(check.detail.contains("will be created"), "{}", check.detail);
    let keys: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    // Without a bucket: the missing add-ons but no S3 CSI driver (nothing to mount).
    assert_eq!(
        keys,
        [
            "eks_cluster",
            "access_entry",
            "addon:vpc-cni",
            "addon:eks-pod-identity-agent",
            "addon:cert-manager",
            "register"
        ]
    );
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::ImportCluster, &import, user(), None).await.unwrap()
    else {
        panic!("an import is never a no-op")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(op.step("access_entry").unwrap().outputs["created"], true);
    let principal = "arn:aws:iam::123456789012:role/InstantStartSimulated";
    let entry = b.sim.describe_access_entry("us-east-1", "legacy", principal).await.unwrap().expect("our entry");
    assert!(instantstart_core::provider::is_owned(&entry.tags, "adopted"));
    assert!(b.sim.list(&target, &namespaces).await.is_ok(), "the Kubernetes API admits the control plane now");

    // Forgetting the cluster removes our entry (and nothing else).
    let del = run_to_end(&b, OperationKind::DeleteCluster, &json!({ "name": "adopted" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert!(b.sim.describe_access_entry("us-east-1", "legacy", principal).await.unwrap().is_none());
    assert!(b.sim.describe_eks_cluster("us-east-1", "legacy").await.unwrap().is_some());
    assert!(b.sim.list(&target, &namespaces).await.is_err());
}

/// An EKS cluster someone else created, with cert-manager installed as their add-on.
async fn seed_legacy(sim: &SimCloud) {
    use instantstart_core::provider::{CreateEksAddon, CreateNetwork};
    use instantstart_core::subnet::plan_new_vpc;
    let zones = vec!["us-east-1a".to_string(), "us-east-1b".to_string()];
    let n = sim
        .seed_network(&CreateNetwork {
            region: "us-east-1".into(),
            name: "legacy".into(),
            cidr: "10.20.0.0/16".parse().unwrap(),
            subnets: plan_new_vpc("10.20.0.0/16".parse().unwrap(), &zones).unwrap(),
            tags: Default::default(),
        })
        .unwrap();
    let private: Vec<String> = n.subnets.iter().filter(|s| !s.public).map(|s| s.id.clone()).collect();
    let consent = [("instantstart:import".to_string(), "allowed".to_string())].into_iter().collect();
    sim.seed_eks_cluster("us-east-1", "legacy", "1.33", private, consent).unwrap();
    let theirs = [("owner".to_string(), "platform-team".to_string())].into_iter().collect();
    sim.create_addon(&CreateEksAddon {
        region: "us-east-1".into(),
        cluster: "legacy".into(),
        name: "cert-manager".into(),
        version: None,
        client_request_token: "theirs".into(),
        tags: theirs,
        configuration_values: None,
    })
    .await
    .unwrap();
}

/// Import is adoption: the dry run reports each dependency as present (left alone) or to be
/// installed; the operation installs the missing add-ons and charts, the S3 CSI identity and the
/// `s3-shared` claim of the named bucket, and records the bucket; deleting the imported cluster
/// removes exactly what the import installed (their cert-manager and the EKS cluster stay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_reconciles_dependencies_mounts_the_bucket_and_delete_removes_only_what_it_installed() {
    use instantstart_core::engine::Outcome;
    use instantstart_core::preflight::CheckStatus;
    use instantstart_core::provider::{HelmReleases, KubeApi, KubeTarget, ObjectRef, PINNED_CHARTS};
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).helm().build();
    seed_legacy(&b.sim).await;
    let import =
        json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "legacy", "bucket": "is-adopted-data" });

    // A bucket outside the management role's grant is a 422 on `bucket`, nothing recorded.
    let bad = json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "legacy", "bucket": "someone-elses" });
    let err = b.engine.submit_checked(OperationKind::ImportCluster, &bad, user(), None).await.unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    assert_eq!(v.findings[0].field, "bucket", "{v:?}");
    assert!(b.store.list_operations(&Default::default()).unwrap().is_empty());

    let dry = b.engine.dry_run_checked(OperationKind::ImportCluster, &import).await.unwrap();
    let dependency = |key: &str| dry.checks.iter().find(|c| c.check == "dependency" && c.field == key).cloned();
    let cert = dependency("addon:cert-manager").expect("cert-manager reported");
    assert!(cert.detail.contains("present, left alone"), "{}", cert.detail);
    assert_eq!(cert.status, CheckStatus::Pass);
    let cni = dependency("addon:vpc-cni").expect("vpc-cni reported");
    assert!(cni.detail.contains("will be installed"), "{}", cni.detail);
    assert!(dependency("chart:kuberay-operator").expect("charts reported").detail.contains("will be installed"));
    assert!(dependency("chart:hyperpod-dependencies").is_none(), "no HyperPod, no HyperPod chart");
    let keys: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    for k in
        ["addon:vpc-cni", "s3_csi_identity", "addon:aws-mountpoint-s3-csi-driver", "bucket", "storage", "chart:keda"]
    {
        assert!(keys.contains(&k), "{k} planned: {keys:?}");
    }
    assert!(!keys.contains(&"addon:cert-manager"), "present: no step");
    assert_eq!(keys.last(), Some(&"register"));
    // Every dependency waits for the access entry (charts talk to the Kubernetes API).
    let chart = dry.prepared.steps.iter().find(|s| s.key == "chart:keda").unwrap();
    assert_eq!(chart.depends_on, ["access_entry"]);

    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::ImportCluster, &import, user(), None).await.unwrap()
    else {
        panic!("an import is never a no-op")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let rec = b.store.get_cluster("adopted").unwrap().unwrap();
    assert_eq!(rec.bucket.as_deref(), Some("is-adopted-data"));
    assert!(b.sim.describe_bucket("is-adopted-data").await.unwrap().is_some());
    let target = KubeTarget::new("us-east-1", "legacy");
    let claim = ObjectRef {
        api_version: "v1".into(),
        kind: "PersistentVolumeClaim".into(),
        namespace: Some("default".into()),
        name: "s3-shared".into(),
    };
    assert!(b.sim.get(&target, &claim).await.unwrap().is_some(), "the claim exists");
    let csi = instantstart_core::workflow::create_cluster::s3_csi_role("adopted");
    assert!(b.sim.role_policies(&csi).is_some(), "the S3 CSI driver's role");
    let cert = b.sim.describe_addon("us-east-1", "legacy", "cert-manager").await.unwrap().unwrap();
    assert_eq!(cert.tags.get("owner").map(String::as_str), Some("platform-team"), "theirs, untouched");
    for chart in PINNED_CHARTS.iter().filter(|c| !c.before_hyperpod) {
        assert!(
            b.sim.get_release(&target, chart.namespace, chart.release).await.unwrap().is_some(),
            "{}",
            chart.release
        );
    }

    // Forgetting it removes what the import installed, nothing else.
    let dry = b.engine.dry_run_checked(OperationKind::DeleteCluster, &json!({ "name": "adopted" })).await.unwrap();
    let keys: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    assert!(keys.contains(&"addon:eks-pod-identity-agent") && keys.contains(&"storage"), "{keys:?}");
    assert!(!keys.contains(&"addon:cert-manager") && !keys.contains(&"addon:vpc-cni"), "{keys:?}");
    let access = dry.prepared.steps.iter().find(|s| s.key == "access_entry").unwrap();
    assert_eq!(access.depends_on.len(), keys.len() - 2, "the access entry goes last: {:?}", access.depends_on);
    let del = run_to_end(&b, OperationKind::DeleteCluster, &json!({ "name": "adopted" })).await;
    assert_eq!(del.status, OperationStatus::Succeeded, "{del:#?}");
    assert!(b.sim.describe_addon("us-east-1", "legacy", "cert-manager").await.unwrap().is_some());
    assert!(b.sim.describe_addon("us-east-1", "legacy", "vpc-cni").await.unwrap().is_some(), "networking stays");
    assert!(b.sim.describe_addon("us-east-1", "legacy", "eks-pod-identity-agent").await.unwrap().is_none());
    assert!(b.sim.role_policies(&csi).is_none());
    assert!(b.sim.describe_bucket("is-adopted-data").await.unwrap().is_some(), "the bucket stays");
    assert!(b.sim.describe_eks_cluster("us-east-1", "legacy").await.unwrap().is_some());
    assert!(b.store.get_cluster("adopted").unwrap().is_none());
}

/// A server killed while the import's add-on step is polled, or between the persisted
/// `submitting` phase and the call, resumes without creating anything twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_import_creates_nothing_twice() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
            eprintln!("on {store}");
            let import = json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "legacy", "bucket": "is-adopted-data" });
            let mut b = Bed::sim(dir.path()).helm().build();
            seed_legacy(&b.sim).await;
            let id = b.submit_checked(OperationKind::ImportCluster, &import).await.operation.id;
            b.wait_for(&id, &format!("addon:eks-pod-identity-agent to reach {kill_at:?}"), |op| {
                let phase = op.step("addon:eks-pod-identity-agent").unwrap().phase;
                phase == kill_at || phase == StepPhase::Succeeded
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            b.restart().await;
            b.engine.resume_all().unwrap();
            let op = b.engine.wait(&id, WAIT).await.unwrap();
            assert_eq!(op.status, OperationStatus::Succeeded, "{kill_at:?}: {op:#?}");
            // Their cert-manager (seeded), then vpc-cni, the agent and the S3 CSI driver, each once.
            assert_eq!(b.sim.calls("eks:CreateAddon"), 1 + 3, "{kill_at:?}");
            assert_eq!(b.sim.calls("eks:CreatePodIdentityAssociation"), 1, "{kill_at:?}");
            assert_eq!(
                b.sim.calls("iam:CreateRole"),
                2,
                "{kill_at:?}: the S3 CSI driver's and the load balancer controller's roles"
            );
            assert_eq!(b.sim.calls("s3:CreateBucket"), 1, "{kill_at:?}");
            assert_eq!(b.sim.calls("eks:CreateAccessEntry"), 1, "{kill_at:?}");
        }
    }
}

/// Tiered checkpointing, refused on a cluster imported without a bucket, works on one imported
/// with a bucket (the record has it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiered_checkpointing_works_on_a_cluster_imported_with_a_bucket() {
    use instantstart_core::engine::Outcome;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let import = json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "demo",
        "hyperpod_cluster": "demo-hp", "bucket": "is-adopted-data" });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::ImportCluster, &import, user(), None).await.unwrap()
    else {
        panic!("an import is a change")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    // demo's add-ons were all there: none is installed again.
    assert!(
        op.steps.iter().all(|s| !s.key.starts_with("addon:")),
        "{:?}",
        op.steps.iter().map(|s| &s.key).collect::<Vec<_>>()
    );
    let on =
        json!({ "cluster": "adopted", "patch": { "tiered_checkpointing": { "enabled": true, "memory_percent": 20 } } });
    let Outcome::Submitted(s) = b.engine.submit_checked(OperationKind::SetFeatures, &on, user(), None).await.unwrap()
    else {
        panic!("turning checkpointing on is a change")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let role = instantstart_core::workflow::features::checkpoint_role("adopted");
    let policies = b.sim.role_policies(&role).expect("the checkpointing role");
    assert!(format!("{policies:?}").contains("is-adopted-data"), "scoped to the imported bucket: {policies:?}");
}

/// A group added to an imported cluster takes the execution role and security groups the
/// cluster's HyperPod groups already use (the import has no `<name>-hyperpod-exec-role`); with
/// none to take, the request is a 422 on `group` before anything is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_added_to_an_imported_cluster_uses_the_clusters_own_role_and_security_groups() {
    use instantstart_core::engine::Outcome;
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    let op = run_to_end(&b, OperationKind::CreateCluster, &request("demo")).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let import =
        json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "demo", "hyperpod_cluster": "demo-hp" });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::ImportCluster, &import, user(), None).await.unwrap()
    else {
        panic!("an import is a change")
    };
    assert_eq!(b.engine.wait(&s.operation.id, WAIT).await.unwrap().status, OperationStatus::Succeeded);
    let before = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    let role = before.instance_groups[0].execution_role_arn.clone().expect("the group's role");
    let sgs = before.instance_groups[0].security_group_ids.clone();
    assert!(!sgs.is_empty(), "groups report their security groups");
    assert!(
        instantstart_core::provider::IamApi::get_role(&b.sim, "adopted-hyperpod-exec-role").await.unwrap().is_none()
    );

    let add = json!({ "cluster": "adopted", "group": {
        "name": "extra", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" } });
    let Outcome::Submitted(s) =
        b.engine.submit_checked(OperationKind::AddInstanceGroup, &add, user(), None).await.unwrap()
    else {
        panic!("adding a group is a change")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let after = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    let extra = after.instance_groups.iter().find(|g| g.name == "extra").expect("added");
    assert_eq!(extra.execution_role_arn.as_deref(), Some(role.as_str()));
    assert_eq!(extra.security_group_ids, sgs);

    // Tiered checkpointing needs the cluster's bucket, which an import does not record: a 422
    // naming the field, nothing recorded (it used to fail later at its role step).
    let before = b.store.list_operations(&Default::default()).unwrap().len();
    let on =
        json!({ "cluster": "adopted", "patch": { "tiered_checkpointing": { "enabled": true, "memory_percent": 20 } } });
    let err = b.engine.submit_checked(OperationKind::SetFeatures, &on, user(), None).await.unwrap_err();
    let instantstart_core::engine::EngineError::Validation(v) = err else { panic!("{err:?}") };
    assert_eq!(v.findings[0].field, "patch.tiered_checkpointing", "{v:?}");
    assert_eq!(b.store.list_operations(&Default::default()).unwrap().len(), before);
}

/// The network in two steps: `eks_cluster` starts as soon as `vpc` has made the subnets, while
/// `nat_gateway` waits for the NAT gateway; `hyperpod_cluster` starts only after it. A crash
/// while the NAT gateway is awaited resumes polling and creates nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_starts_before_the_nat_gateway_and_a_restart_while_it_waits_creates_nothing_twice() {
    for (store, dir, _pg) in tokio::task::block_in_place(dirs) {
        eprintln!("on {store}");
        // Crashed once EKS has started and the NAT gateway is still awaited.
        let (_b, op) = crash_when_and_resume(dir.path(), SimFaults::none(), "EKS to start during the NAT wait", |op| {
            op.step("nat_gateway").unwrap().phase == StepPhase::Polling
                && op.step("eks_cluster").unwrap().started_at.is_some()
        })
        .await;
        let (vpc, nat, eks, hp) = (
            op.step("vpc").unwrap(),
            op.step("nat_gateway").unwrap(),
            op.step("eks_cluster").unwrap(),
            op.step("hyperpod_cluster").unwrap(),
        );
        assert!(eks.started_at.unwrap() < nat.finished_at.unwrap(), "EKS waited for the NAT gateway: {op:#?}");
        assert!(eks.started_at.unwrap() >= vpc.finished_at.unwrap());
        assert!(hp.started_at.unwrap() >= nat.finished_at.unwrap());
        assert_eq!(nat.outputs["nat_gateway"], "available");
        assert_eq!(nat.outputs["vpc_id"], vpc.outputs["vpc_id"]);
    }
}

/// An operation recorded before the network was split has one `network` step, and the steps
/// after it read the network's outputs from it. After an upgrade it resumes (here from a crash
/// in `submitting`): the `network` step waits for the NAT gateway as it did, the rest finds its
/// inputs, and every resource is created once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_recorded_with_the_single_network_step_resumes_after_an_upgrade() {
    use instantstart_core::operation::{NewOperation, OperationId};
    use instantstart_core::store::{ClusterRecord, ClusterSource};
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).speed(400.0).build();
    let prepared = b.engine.dry_run(OperationKind::CreateCluster, &request("demo")).unwrap();
    // The plan as it was: `network` instead of `vpc` + `nat_gateway`, HyperPod after every add-on.
    let addons: Vec<String> =
        prepared.steps.iter().filter(|s| s.key.starts_with("addon:")).map(|s| s.key.clone()).collect();
    let steps: Vec<_> = prepared
        .steps
        .iter()
        .filter(|s| s.key != "nat_gateway")
        .cloned()
        .map(|mut s| {
            if s.key == "vpc" {
                s.key = "network".into();
            }
            s.depends_on.retain(|d| d != "nat_gateway");
            for d in &mut s.depends_on {
                if d == "vpc" {
                    *d = "network".into();
                }
            }
            if s.key == "hyperpod_cluster" {
                for a in &addons {
                    if !s.depends_on.contains(a) {
                        s.depends_on.push(a.clone());
                    }
                }
            }
            s
        })
        .collect();
    assert!(steps.iter().any(|s| s.key == "network") && steps.iter().all(|s| s.key != "vpc"));
    let op_id = OperationId("op-before-the-split".into());
    b.store
        .insert_operation(NewOperation {
            id: op_id.clone(),
            kind: OperationKind::CreateCluster,
            target: prepared.target.clone(),
            actor: user(),
            request: prepared.request.clone(),
            idempotency_key: None,
            request_hash: "recorded-before-the-split".into(),
            steps,
        })
        .unwrap();
    let now = chrono::Utc::now();
    b.store
        .put_cluster(&ClusterRecord {
            name: "demo".into(),
            region: "us-east-1".into(),
            source: ClusterSource::Created,
            eks_cluster: "demo".into(),
            hyperpod_cluster: Some("demo-hp".into()),
            vpc_id: None,
            bucket: None,
            kubernetes_version: Some("1.33".into()),
            request: Some(serde_json::from_value(prepared.request.clone()).unwrap()),
            created_at: now,
            updated_at: now,
        })
        .unwrap();
    // The old process died while the network step was submitting.
    b.store
        .update_step(
            &op_id,
            "network",
            &StepUpdate {
                phase: Some(StepPhase::Submitting),
                attempts: Some(1),
                started_at: Some(chrono::Utc::now()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&op_id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_created_once(&b.sim);
    let network = op.step("network").unwrap();
    let vpc_id = network.outputs["vpc_id"].as_str().unwrap();
    assert_eq!(b.store.get_cluster("demo").unwrap().unwrap().vpc_id.as_deref(), Some(vpc_id));
    // The legacy step finished once the NAT gateway was available (150 s of simulated time,
    // 375 ms at speed 400), before the EKS cluster began.
    let waited = network.finished_at.unwrap() - network.started_at.unwrap();
    assert!(
        waited >= chrono::Duration::milliseconds(300),
        "the network step did not wait for the NAT gateway: {waited}"
    );
    assert!(op.step("eks_cluster").unwrap().started_at.unwrap() >= network.finished_at.unwrap());
    assert_eq!(
        op.step("eks_cluster").unwrap().resource.as_ref().map(|r| r.id.as_str()),
        Some("demo"),
        "the control plane was created from the legacy step's subnets"
    );
}
