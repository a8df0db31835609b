//! Task governance end to end on the simulated cloud, with the real engine and SQLite store:
//! switching on installs the add-on, creates the scheduler config and one quota per team;
//! a changed spec updates exactly what differs (by version), removes dropped teams and records
//! nothing when the state matches; preflight refuses quotas the cluster's groups cannot hold
//! and a scheduler config that is not ours; lost responses and a restart mid-operation create
//! nothing twice (per-API call counters); switching off tears down in order; the simulated
//! Kueue lends idle GPUs by fair-share weight when fair share is on.

use instantstart_core::engine::{EngineError, Outcome};
use instantstart_core::operation::{Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    EksApi, HyperPodApi, KubeApi, KubeObject, KubeTarget, ListParams, SchedulerPolicy, TASK_GOVERNANCE_ADDON, Tags,
    TaskGovernanceApi,
};
use instantstart_core::validate::ValidationKind;
use instantstart_core::workload::admission::{AdmissionState, admission_of};
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const CREATE_QUOTA: &str = "sagemaker:CreateComputeQuota";
const CREATE_CONFIG: &str = "sagemaker:CreateClusterSchedulerConfig";

async fn run(b: &Bed, kind: OperationKind, req: &Value) -> Operation {
    let Outcome::Submitted(s) = b.engine.submit_checked(kind, req, user(), None).await.unwrap() else {
        panic!("{kind:?}: no operation");
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    op
}

/// `gpu` (2 × ml.g5.12xlarge, 4 GPUs each) and `cpu` (1 × ml.m5.xlarge).
async fn created(dir: &Path, speed: f64) -> Bed {
    let b = Bed::sim(dir).speed(speed).seed(5).build();
    let req = json!({
        "name": "demo",
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "gpu", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "cpu", "instance_type": "ml.m5.xlarge", "count": 1, "availability_zone": "us-east-1a" }
        ]}
    });
    run(&b, OperationKind::CreateCluster, &req).await;
    b
}

fn governance(spec: Value) -> Value {
    json!({ "cluster": "demo", "governance": spec })
}

fn two_teams() -> Value {
    json!({
        "priority_classes": [{ "name": "inference", "weight": 100 }, { "name": "training", "weight": 50 }],
        "teams": [
            { "name": "research", "quotas": [{ "instance_type": "ml.g5.12xlarge", "count": 1 }], "borrow_limit": 100,
              "fair_share_weight": 10 },
            { "name": "prod", "quotas": [{ "instance_type": "ml.g5.12xlarge", "accelerators": 4 }], "sharing": "Lend" }
        ]
    })
}

fn keys(op: &Operation) -> Vec<&str> {
    op.steps.iter().map(|s| s.key.as_str()).collect()
}

async fn hp_arn(sim: &SimCloud) -> String {
    sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap().arn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_then_changed_then_off() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    let arn = hp_arn(&b.sim).await;

    // The dry run shows the steps and the explicit diff; nothing is called.
    let dry = b.engine.dry_run_checked(OperationKind::SetGovernance, &governance(two_teams())).await.unwrap();
    let planned: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        planned,
        ["addon:amazon-sagemaker-hyperpod-taskgovernance", "scheduler_config", "quota:prod", "quota:research"]
    );
    let fields: Vec<&str> = dry.plan.as_ref().unwrap().changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["enabled", "priority_classes", "teams.prod", "teams.research"]);
    assert_eq!(b.sim.calls(CREATE_CONFIG), 0);

    let on = run(&b, OperationKind::SetGovernance, &governance(two_teams())).await;
    assert_eq!(keys(&on), planned);
    assert!(b.sim.describe_addon(REGION, "demo", TASK_GOVERNANCE_ADDON).await.unwrap().is_some());
    let configs = b.sim.list_scheduler_configs(REGION, &arn).await.unwrap();
    assert_eq!(configs.len(), 1);
    assert_eq!(configs[0].name, "demo-policy");
    assert_eq!(configs[0].policy.priority_classes.len(), 2);
    let quotas = b.sim.list_compute_quotas(REGION, &arn).await.unwrap();
    let mut teams: Vec<&str> = quotas.iter().map(|q| q.config.team.as_str()).collect();
    teams.sort();
    assert_eq!(teams, ["prod", "research"]);
    assert_eq!((b.sim.calls(CREATE_CONFIG), b.sim.calls(CREATE_QUOTA)), (1, 2));

    // The same spec again: no operation.
    let again = b.engine.submit_checked(OperationKind::SetGovernance, &governance(two_teams()), user(), None).await;
    assert!(matches!(again, Ok(Outcome::NoChange(_))), "{again:?}");

    // research gets 2 instances, prod goes, a priority class changes: the config and research's
    // quota are updated from their versions, prod's quota deleted.
    let changed = json!({
        "priority_classes": [{ "name": "inference", "weight": 90 }],
        "teams": [{ "name": "research", "quotas": [{ "instance_type": "ml.g5.12xlarge", "count": 2 }], "borrow_limit": 100,
                    "fair_share_weight": 10 }]
    });
    let op = run(&b, OperationKind::SetGovernance, &governance(changed)).await;
    assert_eq!(keys(&op), ["remove_quota:prod", "scheduler_config", "quota:research"]);
    assert_eq!(b.sim.calls("sagemaker:UpdateClusterSchedulerConfig"), 1);
    assert_eq!(b.sim.calls("sagemaker:UpdateComputeQuota"), 1);
    let configs = b.sim.list_scheduler_configs(REGION, &arn).await.unwrap();
    assert_eq!((configs[0].version, configs[0].status.as_str()), (2, "Updated"));
    let quotas = b.sim.list_compute_quotas(REGION, &arn).await.unwrap();
    let live: Vec<_> = quotas.iter().filter(|q| q.status != "Deleting").collect();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].config.resources[0].count, Some(2));

    let off = run(&b, OperationKind::SetGovernance, &governance(json!({ "enabled": false }))).await;
    assert_eq!(
        keys(&off),
        ["remove_quota:research", "remove_scheduler_config", "remove:amazon-sagemaker-hyperpod-taskgovernance"]
    );
    assert!(b.sim.list_scheduler_configs(REGION, &arn).await.unwrap().is_empty());
    assert!(b.sim.list_compute_quotas(REGION, &arn).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_names_the_field_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    let too_much = json!({ "teams": [
        { "name": "a", "quotas": [{ "instance_type": "ml.g5.12xlarge", "count": 2 }] },
        { "name": "b", "quotas": [{ "instance_type": "ml.g5.12xlarge", "count": 1 }, { "instance_type": "ml.p5.48xlarge", "count": 1 }] },
        { "name": "c", "quotas": [{ "instance_type": "ml.g5.12xlarge", "accelerators": 9 }] }
    ]});
    let e =
        b.engine.submit_checked(OperationKind::SetGovernance, &governance(too_much), user(), None).await.unwrap_err();
    let EngineError::Validation(v) = e else { panic!("{e:?}") };
    assert_eq!(v.kind, ValidationKind::Unprocessable);
    let fields: Vec<&str> = v.findings.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "governance.teams[1].quotas[0].count",
            "governance.teams[1].quotas[1].instance_type",
            "governance.teams[2].quotas[0].accelerators"
        ]
    );
    let bad = json!({ "teams": [{ "name": "Research" }] });
    let e = b.engine.submit_checked(OperationKind::SetGovernance, &governance(bad), user(), None).await.unwrap_err();
    let EngineError::Validation(v) = e else { panic!("{e:?}") };
    assert_eq!((v.kind, v.findings[0].field.as_str()), (ValidationKind::Invalid, "governance.teams[0].name"));

    // A scheduler config someone else made on the cluster is refused, not adopted.
    let arn = hp_arn(&b.sim).await;
    let policy = SchedulerPolicy { priority_classes: vec![], fair_share: true };
    b.sim.create_scheduler_config(REGION, "theirs", &arn, &policy, &Tags::new()).await.unwrap();
    let e = b
        .engine
        .submit_checked(OperationKind::SetGovernance, &governance(two_teams()), user(), None)
        .await
        .unwrap_err();
    let EngineError::Validation(v) = e else { panic!("{e:?}") };
    assert_eq!((v.kind, v.findings[0].field.as_str()), (ValidationKind::Unprocessable, "governance.enabled"));
    // And the simulator refuses a second config on the cluster, like SageMaker.
    let second = b.sim.create_scheduler_config(REGION, "demo-policy", &arn, &policy, &Tags::new()).await.unwrap_err();
    assert!(second.message.contains("ConflictException"), "{second}");
    assert_eq!(b.sim.calls(CREATE_QUOTA), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses_create_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await;
    b.sim.set_faults(
        SimFaults::none().with(CREATE_CONFIG, FaultMode::LostResponse).with(CREATE_QUOTA, FaultMode::LostResponse),
    );
    run(&b, OperationKind::SetGovernance, &governance(two_teams())).await;
    assert_eq!(b.sim.calls(CREATE_CONFIG), 1, "{:?}", b.sim.stats());
    assert_eq!(b.sim.calls(CREATE_QUOTA), 2, "{:?}", b.sim.stats());
    let arn = hp_arn(&b.sim).await;
    assert_eq!(b.sim.list_compute_quotas(REGION, &arn).await.unwrap().len(), 2);

    b.sim.set_faults(SimFaults::none().with("sagemaker:UpdateComputeQuota", FaultMode::LostResponse));
    let mut more = two_teams();
    more["teams"][0]["quotas"][0]["count"] = json!(2);
    run(&b, OperationKind::SetGovernance, &governance(more)).await;
    assert_eq!(b.sim.calls("sagemaker:UpdateComputeQuota"), 1, "the lost update was observed, not sent again");
}

/// kill -9 while every kind of governance step is under way: the resumed operation observes
/// and creates (or deletes) nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_operation_resumes_without_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let speed = 200.0;
    let mut b = created(dir.path(), speed).await;
    // From here simulated time moves a second at a time, at the engine's pace: a quota takes 20
    // simulated seconds, so the kill lands while it is polled however loaded the machine.
    b.sim.set_manual_clock(true).unwrap();
    let id = b.submit_checked(OperationKind::SetGovernance, &governance(two_teams())).await.operation.id;
    b.advance_until(&id, "quota:prod to be polled", Duration::from_secs(1), |op| {
        op.step("quota:prod").unwrap().phase == StepPhase::Polling
    })
    .await;
    b.restart().await;
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls(CREATE_CONFIG), 1, "{:?}", b.sim.stats());
    assert_eq!(b.sim.calls(CREATE_QUOTA), 2, "{:?}", b.sim.stats());

    // Off, killed while the scheduler config is being deleted: resumed, deleted once.
    b.sim.set_manual_clock(true).unwrap();
    let off = governance(json!({ "enabled": false }));
    let id = b.submit_checked(OperationKind::SetGovernance, &off).await.operation.id;
    b.advance_until(&id, "remove_scheduler_config to be polled", Duration::from_secs(1), |op| {
        op.step("remove_scheduler_config").unwrap().phase == StepPhase::Polling
    })
    .await;
    b.restart().await;
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("sagemaker:DeleteClusterSchedulerConfig"), 1, "{:?}", b.sim.stats());
    assert_eq!(b.sim.calls("sagemaker:DeleteComputeQuota"), 2, "{:?}", b.sim.stats());
}

/// Deleting a governed cluster removes its quotas, then the scheduler config, then the add-on,
/// before the HyperPod cluster goes; killed (abort, new engine) while the scheduler config is
/// being deleted, the resumed operation deletes nothing twice and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_governed_cluster_removes_governance_first_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let speed = 200.0;
    let mut b = created(dir.path(), speed).await;
    let id = {
        run(&b, OperationKind::SetGovernance, &governance(two_teams())).await;
        let dry = b.engine.dry_run_checked(OperationKind::DeleteCluster, &json!({ "name": "demo" })).await.unwrap();
        let planned: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
        let at = |k: &str| planned.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k}: {planned:?}"));
        assert!(at("remove_quota:prod") < at("remove_scheduler_config"), "{planned:?}");
        assert!(at("remove_quota:research") < at("remove_scheduler_config"), "{planned:?}");
        assert!(at("remove_scheduler_config") < at("remove:amazon-sagemaker-hyperpod-taskgovernance"), "{planned:?}");
        assert!(at("remove:amazon-sagemaker-hyperpod-taskgovernance") < at("hyperpod_cluster"), "{planned:?}");
        let hp = dry.prepared.steps.iter().find(|s| s.key == "hyperpod_cluster").unwrap();
        assert!(hp.depends_on.iter().any(|d| d == "remove_scheduler_config"), "{:?}", hp.depends_on);

        b.sim.set_manual_clock(true).unwrap();
        let id = b.submit_checked(OperationKind::DeleteCluster, &json!({ "name": "demo" })).await.operation.id;
        let op = b
            .advance_until(&id, "remove_scheduler_config to be polled", Duration::from_secs(1), |op| {
                op.step("remove_scheduler_config").unwrap().phase == StepPhase::Polling
            })
            .await;
        assert_ne!(op.step("hyperpod_cluster").unwrap().phase, StepPhase::Succeeded);
        id
    };
    b.restart().await;
    assert_eq!(b.engine.resume_all().unwrap(), 1);
    let op = b.engine.wait(&id, Duration::from_secs(120)).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("sagemaker:DeleteClusterSchedulerConfig"), 1, "{:?}", b.sim.stats());
    assert_eq!(b.sim.calls("sagemaker:DeleteComputeQuota"), 2, "{:?}", b.sim.stats());
    assert!(b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().is_none());
}

/// A one-pod HyperPodPyTorchJob of `team` asking for `gpus` GPUs of an ml.g5.12xlarge for
/// `seconds`.
fn team_job(name: &str, team: &str, gpus: u32, seconds: u32) -> KubeObject {
    KubeObject(json!({
        "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
        "metadata": { "name": name, "namespace": format!("hyperpod-ns-{team}"),
                      "labels": { "kueue.x-k8s.io/queue-name": format!("hyperpod-ns-{team}-localqueue"),
                                  "kueue.x-k8s.io/priority-class": "training-priority" } },
        "spec": { "replicaSpecs": [{ "name": "pods", "replicas": 1, "template": { "spec": {
            "nodeSelector": { "node.kubernetes.io/instance-type": "ml.g5.12xlarge" },
            "containers": [{ "name": "pytorch", "image": "pytorch/pytorch:2.5.1",
                             "env": [{ "name": "SIM_DURATION_SECONDS", "value": seconds.to_string() }],
                             "resources": { "limits": { "nvidia.com/gpu": gpus } } }] } } }] },
    }))
}

/// `name → admission state` of the team jobs, as the control plane reads them from Kueue.
async fn admission_states(sim: &SimCloud) -> Vec<(String, AdmissionState)> {
    let target = KubeTarget::new(REGION, "demo");
    let list = |api: &str, kind: &str| ListParams {
        api_version: api.into(),
        kind: kind.into(),
        namespace: None,
        labels: vec![],
    };
    let jobs = sim.list(&target, &list("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob")).await.unwrap();
    let workloads = sim.list(&target, &list("kueue.x-k8s.io/v1beta1", "Workload")).await.unwrap();
    let queues = sim.list(&target, &list("kueue.x-k8s.io/v1beta1", "ClusterQueue")).await.unwrap();
    let mut out: Vec<(String, AdmissionState)> = jobs
        .iter()
        .map(|j| {
            (j.0["metadata"]["name"].as_str().unwrap().to_string(), admission_of(j, &workloads, &queues).unwrap().state)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Fair share: when idle quota frees up and two teams wait to borrow it, the team with more
/// fair-share weight per borrowed GPU gets it, though the other team asked first; with fair
/// share off, first come, first served. (The simulated Kueue replays admissions from the
/// objects, so switching the policy re-decides the same history.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_share_lends_idle_gpus_by_weight() {
    let dir = tempfile::tempdir().unwrap();
    let b = created(dir.path(), 2000.0).await; // 2 × ml.g5.12xlarge: 8 GPUs
    let spec = |fair_share: bool| {
        json!({
            "fair_share": fair_share,
            "priority_classes": [{ "name": "training", "weight": 50 }],
            "teams": [
                { "name": "a", "quotas": [{ "instance_type": "ml.g5.12xlarge", "accelerators": 2 }], "borrow_limit": 100,
                  "fair_share_weight": 10 },
                { "name": "b", "quotas": [{ "instance_type": "ml.g5.12xlarge", "accelerators": 2 }], "borrow_limit": 100,
                  "fair_share_weight": 90 },
                { "name": "lender", "quotas": [{ "instance_type": "ml.g5.12xlarge", "count": 1 }], "sharing": "Lend" }
            ]
        })
    };
    run(&b, OperationKind::SetGovernance, &governance(spec(true))).await;
    b.sim.set_speed(1.0).unwrap();
    let target = KubeTarget::new(REGION, "demo");
    // Every GPU taken; the lender's first job ends soon and frees 2 of them.
    for job in [
        team_job("l1", "lender", 2, 100),
        team_job("l2", "lender", 2, 10_000_000),
        team_job("a1", "a", 2, 10_000_000),
        team_job("b1", "b", 2, 10_000_000),
        team_job("a2", "a", 2, 10_000_000), // asks first to borrow
        team_job("b2", "b", 2, 10_000_000),
    ] {
        b.sim.apply(&target, &job).await.unwrap();
    }
    use AdmissionState::{Admitted, Finished, Queued};
    let states = |pairs: [(&str, AdmissionState); 6]| pairs.map(|(n, s)| (n.to_string(), s)).to_vec();
    assert_eq!(
        admission_states(&b.sim).await,
        states([
            ("a1", Admitted),
            ("a2", Queued),
            ("b1", Admitted),
            ("b2", Queued),
            ("l1", Admitted),
            ("l2", Admitted)
        ])
    );
    b.sim.advance(Duration::from_secs(600));
    // b (weight 90) borrows the 2 freed GPUs before a (weight 10), which asked first.
    assert_eq!(
        admission_states(&b.sim).await,
        states([
            ("a1", Admitted),
            ("a2", Queued),
            ("b1", Admitted),
            ("b2", Admitted),
            ("l1", Finished),
            ("l2", Admitted)
        ])
    );
    // Fair share off: first come, first served.
    b.sim.set_speed(2000.0).unwrap();
    run(&b, OperationKind::SetGovernance, &governance(spec(false))).await;
    assert_eq!(
        admission_states(&b.sim).await,
        states([
            ("a1", Admitted),
            ("a2", Admitted),
            ("b1", Admitted),
            ("b2", Queued),
            ("l1", Finished),
            ("l2", Admitted)
        ])
    );
}
