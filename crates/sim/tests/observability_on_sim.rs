//! HyperPod observability as a managed feature (issue #21), on the simulated cloud with a real
//! SQLite store: ON creates the Amazon Managed Service for Prometheus workspace, the collector's
//! role and Pod Identity association, then the add-on whose configuration values name the
//! workspace — each exactly once even when a create's response is lost or the server is killed
//! mid-step; OFF removes the add-on, the association and the role and keeps the workspace;
//! deleting the cluster deletes the workspace too.

use instantstart_core::engine::Outcome;
use instantstart_core::operation::{Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{
    AmpApi, CreateEksAddon, EksApi, IamApi, PrometheusWorkspace, ProviderErrorKind, ResourceState, is_owned,
    ownership_tags, prometheus_alias,
};
use instantstart_core::workflow::observability::{
    OBSERVABILITY_ADDON, OBSERVABILITY_NAMESPACE, OBSERVABILITY_SERVICE_ACCOUNT, observability_addon_values,
    observability_policy, observability_role, observability_trust_policy,
};
use instantstart_sim::{FaultMode, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const EKS: &str = "demo";

async fn create_cluster(b: &Bed) {
    let req = json!({
        "name": "demo",
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }
        ]}
    });
    let s = b.engine.submit(OperationKind::CreateCluster, &req, user(), None).unwrap();
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
}

async fn set_observability(b: &Bed, on: bool) -> Operation {
    let req = json!({ "cluster": "demo", "patch": { "observability": on } });
    let Outcome::Submitted(s) = b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap()
    else {
        panic!("switching observability is a change")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "{op:#?}");
    op
}

async fn workspaces(b: &Bed) -> Vec<PrometheusWorkspace> {
    b.sim.list_prometheus_workspaces(REGION, &prometheus_alias("demo")).await.unwrap()
}

/// Exactly one workspace of ours; the add-on ACTIVE and healthy with values naming it; the role
/// and association as AWS documents them.
async fn assert_installed(b: &Bed) -> PrometheusWorkspace {
    let ws = workspaces(b).await;
    assert_eq!(ws.len(), 1, "one workspace: {ws:?}");
    let ws = b.sim.describe_prometheus_workspace(REGION, &ws[0].id).await.unwrap().unwrap();
    assert_eq!(ws.state(), ResourceState::Active);
    assert!(is_owned(&ws.tags, "demo"), "{ws:?}");
    let addon = b.sim.describe_addon(REGION, EKS, OBSERVABILITY_ADDON).await.unwrap().expect("add-on");
    assert_eq!(addon.state, ResourceState::Active);
    assert!(addon.health_issues.is_empty(), "{:?}", addon.health_issues);
    assert!(is_owned(&addon.tags, "demo"));
    assert_eq!(
        b.sim.addon_configuration_values(REGION, EKS, OBSERVABILITY_ADDON),
        Some(observability_addon_values(&ws.arn, &ws.endpoint(REGION)))
    );
    let role = b.sim.get_role(&observability_role("demo")).await.unwrap().expect("collector role");
    let policies = b.sim.role_policies(&role.name).unwrap();
    let eks = b.sim.describe_eks_cluster(REGION, EKS).await.unwrap().unwrap();
    assert_eq!(policies.trust_policy, observability_trust_policy(&eks.arn));
    assert!(policies.managed_policies.is_empty());
    assert_eq!(policies.inline_policies.len(), 1);
    assert_eq!(policies.inline_policies[0].1, observability_policy(&ws.arn), "remote write to this workspace only");
    let assoc = b
        .sim
        .list_pod_identity_associations(REGION, EKS, OBSERVABILITY_NAMESPACE, OBSERVABILITY_SERVICE_ACCOUNT)
        .await
        .unwrap();
    assert_eq!(assoc.len(), 1);
    assert_eq!(assoc[0].role_arn, role.arn);
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_installs_the_addon_writing_to_its_workspace_and_off_keeps_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    create_cluster(&b).await;
    let (roles, addons) = (b.sim.calls("iam:CreateRole"), b.sim.calls("eks:CreateAddon"));

    let op = set_observability(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "addon:eks-pod-identity-agent",
            "prometheus_workspace",
            "observability_role",
            "observability_identity",
            "addon:amazon-sagemaker-hyperpod-observability"
        ]
    );
    let ws = assert_installed(&b).await;
    assert_eq!(b.sim.calls("aps:CreateWorkspace"), 1);
    assert_eq!(b.sim.calls("iam:CreateRole") - roles, 1);
    assert_eq!(b.sim.calls("eks:CreateAddon") - addons, 1, "the agent adopted, the observability add-on created");
    assert_eq!(b.sim.calls("eks:DescribeAddonConfiguration"), 1, "the values were checked against the schema");
    let f = instantstart_core::workflow::features::read_features(
        &b.sim,
        &b.store.get_cluster("demo").unwrap().unwrap(),
        &instantstart_core::provider::HyperPodApi::describe_hyperpod_cluster(&b.sim, REGION, "demo-hp")
            .await
            .unwrap()
            .unwrap(),
    )
    .await
    .unwrap();
    assert!(f.observability, "read from the add-on");

    // Already on: no change, nothing recorded.
    let req = json!({ "cluster": "demo", "patch": { "observability": true } });
    assert!(matches!(
        b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap(),
        Outcome::NoChange(_)
    ));

    let op = set_observability(&b, false).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "remove:amazon-sagemaker-hyperpod-observability",
            "remove_observability_identity",
            "remove_observability_role"
        ]
    );
    assert_eq!(b.sim.describe_addon(REGION, EKS, OBSERVABILITY_ADDON).await.unwrap(), None);
    assert_eq!(b.sim.get_role(&observability_role("demo")).await.unwrap(), None);
    assert!(
        b.sim
            .list_pod_identity_associations(REGION, EKS, OBSERVABILITY_NAMESPACE, OBSERVABILITY_SERVICE_ACCOUNT)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(workspaces(&b).await.iter().map(|w| &w.id).collect::<Vec<_>>(), [&ws.id], "the workspace stays");
    assert!(b.sim.describe_addon(REGION, EKS, "eks-pod-identity-agent").await.unwrap().is_some(), "shared agent kept");
    assert_eq!(b.sim.calls("aps:DeleteWorkspace"), 0);

    // On again: the same workspace (found by its tags), a new role and add-on.
    let op = set_observability(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(assert_installed(&b).await.id, ws.id, "the metric history continues in the same workspace");
    assert_eq!(b.sim.calls("aps:CreateWorkspace"), 1);

    // Deleting the cluster deletes the workspace, the role and the association with it.
    let s = b.engine.submit(OperationKind::DeleteCluster, &json!({ "name": "demo" }), user(), None).unwrap();
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(workspaces(&b).await.is_empty(), "the workspace goes with the cluster");
    assert_eq!(b.sim.describe_prometheus_workspace(REGION, &ws.id).await.unwrap(), None);
    assert_eq!(b.sim.get_role(&observability_role("demo")).await.unwrap(), None);
}

/// Each new step's create acts but its response is lost (as when the server dies right after the
/// call, before it records what it made): the retry observes first and adopts, so every
/// resource is created exactly once — one workspace, one role, one association, one add-on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses_at_each_new_step_create_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    create_cluster(&b).await;
    let (roles, assocs, addons) = (
        b.sim.calls("iam:CreateRole"),
        b.sim.calls("eks:CreatePodIdentityAssociation"),
        b.sim.calls("eks:CreateAddon"),
    );
    b.sim.set_faults(
        SimFaults::none()
            .with("aps:CreateWorkspace", FaultMode::LostResponse)
            .with("iam:CreateRole", FaultMode::LostResponse)
            .with("eks:CreatePodIdentityAssociation", FaultMode::LostResponse)
            .with("eks:CreateAddon", FaultMode::LostResponse),
    );
    let op = set_observability(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_installed(&b).await;
    assert_eq!(b.sim.calls("aps:CreateWorkspace"), 1);
    assert_eq!(b.sim.calls("iam:CreateRole") - roles, 1);
    assert_eq!(b.sim.calls("eks:CreatePodIdentityAssociation") - assocs, 1);
    assert_eq!(b.sim.calls("eks:CreateAddon") - addons, 1);
}

/// The server is killed (the engine's tasks aborted, as by kill -9) while each new step is under
/// way; the restarted engine resumes the operation from the persisted phases: exactly one
/// workspace, one role, one association and one add-on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_at_each_new_step_resumes_without_a_second_create() {
    for key in [
        "prometheus_workspace",
        "observability_role",
        "observability_identity",
        "addon:amazon-sagemaker-hyperpod-observability",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (id, roles, assocs, addons) = {
            let b = Bed::sim(dir.path()).build();
            create_cluster(&b).await;
            let counts = (
                b.sim.calls("iam:CreateRole"),
                b.sim.calls("eks:CreatePodIdentityAssociation"),
                b.sim.calls("eks:CreateAddon"),
            );
            let req = json!({ "cluster": "demo", "patch": { "observability": true } });
            let Outcome::Submitted(s) =
                b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap()
            else {
                panic!("a change")
            };
            b.wait_for(&s.operation.id, &format!("{key} to start"), |op| {
                let phase = op.step(key).unwrap().phase;
                matches!(
                    phase,
                    StepPhase::Submitting | StepPhase::Submitted | StepPhase::Polling | StepPhase::Succeeded
                )
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            (s.operation.id, counts.0, counts.1, counts.2)
        };
        let b = Bed::sim(dir.path()).build();
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{key}: {op:#?}");
        assert_eq!(b.sim.calls("aps:CreateWorkspace"), 1, "{key}");
        assert_eq!(b.sim.calls("iam:CreateRole") - roles, 1, "{key}");
        assert_eq!(b.sim.calls("eks:CreatePodIdentityAssociation") - assocs, 1, "{key}");
        assert_eq!(b.sim.calls("eks:CreateAddon") - addons, 1, "{key}");
        assert_installed(&b).await;
    }
}

/// A same-alias workspace without our tags (AMP aliases are not unique) is never adopted or
/// deleted: ours is created beside it, and deleting the cluster leaves the other one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_workspace_with_our_alias_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    create_cluster(&b).await;
    let foreign = b
        .sim
        .create_prometheus_workspace(&instantstart_core::provider::CreatePrometheusWorkspace {
            region: REGION.into(),
            alias: prometheus_alias("demo"),
            client_token: "someone-else".into(),
            tags: Default::default(),
        })
        .await
        .unwrap();
    let op = set_observability(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let ours = op.step("prometheus_workspace").unwrap().outputs["workspace_id"].as_str().unwrap().to_string();
    assert_ne!(ours, foreign.id);
    let s = b.engine.submit(OperationKind::DeleteCluster, &json!({ "name": "demo" }), user(), None).unwrap();
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let left: Vec<String> = workspaces(&b).await.into_iter().map(|w| w.id).collect();
    assert_eq!(left, [foreign.id], "only ours was deleted");
}

/// What AWS refuses, the simulator refuses: the add-on without the workspace in its values is an
/// `InvalidParameterException`; installed without its Pod Identity it is DEGRADED naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_addon_needs_its_workspace_and_its_identity() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).build();
    create_cluster(&b).await;
    let create = |values| CreateEksAddon {
        region: REGION.into(),
        cluster: EKS.into(),
        name: OBSERVABILITY_ADDON.into(),
        version: None,
        client_request_token: "t-1".into(),
        tags: ownership_tags("demo", "op"),
        configuration_values: values,
    };
    let err = b.sim.create_addon(&create(None)).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest);
    assert!(err.message.contains("ampWorkspace"), "{err:?}");

    let ws = b
        .sim
        .create_prometheus_workspace(&instantstart_core::provider::CreatePrometheusWorkspace {
            region: REGION.into(),
            alias: prometheus_alias("demo"),
            client_token: "ws-1".into(),
            tags: ownership_tags("demo", "op"),
        })
        .await
        .unwrap();
    let values = observability_addon_values(&ws.arn, &ws.endpoint(REGION));
    b.sim.create_addon(&create(Some(values))).await.unwrap();
    let active = || async {
        b.sim.describe_addon(REGION, EKS, OBSERVABILITY_ADDON).await.unwrap().unwrap().state == ResourceState::Active
    };
    b.wait_until("the add-on to become active", active).await;
    let addon = b.sim.describe_addon(REGION, EKS, OBSERVABILITY_ADDON).await.unwrap().unwrap();
    let issues = addon.health_issues.join("; ");
    assert!(
        issues.contains("hyperpod-observability/hyperpod-observability-operator-otel-collector")
            || issues.contains("eks-pod-identity-agent"),
        "{issues}"
    );
}
