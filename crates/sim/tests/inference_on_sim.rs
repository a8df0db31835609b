//! The HyperPod inference operator as a managed feature, on the simulated cloud with a real
//! SQLite store: ON creates the execution role (named, trusted and permitted as AWS documents)
//! and the add-on with configuration values its published schema accepts, exactly once even
//! when a create's response is lost or the server is killed mid-step; OFF removes exactly the
//! add-on and the role ON created.

use instantstart_core::engine::Outcome;
use instantstart_core::operation::{Operation, OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{EksApi, HyperPodApi, IamApi, ResourceState};
use instantstart_core::workflow::features::{
    INFERENCE_MANAGED_POLICY, INFERENCE_OPERATOR_ADDON, inference_role, inference_trust_policy,
};
use instantstart_sim::{FaultMode, SimFaults};
use instantstart_testkit::{Bed, user};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const REGION: &str = "us-east-1";
const EKS: &str = "demo";

async fn create_cluster(b: &Bed) -> Operation {
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
    op
}

async fn set_inference(b: &Bed, on: bool) -> Operation {
    let req = json!({ "cluster": "demo", "patch": { "inference_operator": on } });
    let Outcome::Submitted(s) = b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap()
    else {
        panic!("switching the inference operator is a change")
    };
    let op = b.engine.wait(&s.operation.id, WAIT).await.unwrap();
    assert!(op.status.is_terminal(), "{op:#?}");
    op
}

/// The add-on is ACTIVE with exactly the values AWS documents, and its role is as AWS requires.
async fn assert_installed(b: &Bed, bucket: &str) {
    let addon = b.sim.describe_addon(REGION, EKS, INFERENCE_OPERATOR_ADDON).await.unwrap().expect("add-on");
    assert_eq!(addon.state, ResourceState::Active);
    let role = b.sim.get_role(&inference_role("demo")).await.unwrap().expect("execution role");
    assert_eq!(role.name, "SageMakerHyperPodInference-demo");
    let hp = b.sim.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!(
        b.sim.addon_configuration_values(REGION, EKS, INFERENCE_OPERATOR_ADDON),
        Some(json!({
            "executionRoleArn": role.arn,
            "tlsCertificateS3Bucket": bucket,
            "hyperpodClusterArn": hp.arn,
            "keda": { "enabled": false },
            "alb": { "enabled": false }
        }))
    );
    let policies = b.sim.role_policies(&role.name).unwrap();
    assert_eq!(policies.managed_policies, [INFERENCE_MANAGED_POLICY]);
    let eks = b.sim.describe_eks_cluster(REGION, EKS).await.unwrap().unwrap();
    let issuer = eks.oidc_issuer.unwrap();
    let oidc = b.sim.get_oidc_provider(&issuer).await.unwrap().expect("OIDC provider");
    assert_eq!(policies.trust_policy, inference_trust_policy(&oidc.arn, &issuer));
    assert_eq!(policies.inline_policies.len(), 1);
    assert!(policies.inline_policies[0].1.to_string().contains(&format!("arn:aws:s3:::{bucket}/*")));
}

fn bucket_of(op: &Operation) -> String {
    op.step("bucket").unwrap().outputs["bucket"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_installs_the_configured_addon_and_off_removes_exactly_it_and_its_role() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(5).build();
    let created = create_cluster(&b).await;
    let bucket = bucket_of(&created);
    let (roles_before, addons_before) = (b.sim.calls("iam:CreateRole"), b.sim.calls("eks:CreateAddon"));

    let op = set_inference(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        ["addon:cert-manager", "oidc_provider", "inference_role", "addon:amazon-sagemaker-hyperpod-inference"]
    );
    assert_installed(&b, &bucket).await;
    assert_eq!(b.sim.calls("iam:CreateRole") - roles_before, 1);
    assert_eq!(b.sim.calls("eks:CreateAddon") - addons_before, 1, "cert-manager adopted, the operator created");
    assert_eq!(b.sim.calls("eks:DescribeAddonConfiguration"), 1, "the values were checked against the schema");

    // Already on: no change, nothing recorded.
    let req = json!({ "cluster": "demo", "patch": { "inference_operator": true } });
    assert!(matches!(
        b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap(),
        Outcome::NoChange(_)
    ));

    let op = set_inference(&b, false).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys, ["remove:amazon-sagemaker-hyperpod-inference", "remove_inference_role"]);
    assert_eq!(b.sim.describe_addon(REGION, EKS, INFERENCE_OPERATOR_ADDON).await.unwrap(), None);
    assert_eq!(b.sim.get_role(&inference_role("demo")).await.unwrap(), None);
    assert!(b.sim.describe_addon(REGION, EKS, "cert-manager").await.unwrap().is_some(), "shared prerequisite kept");
    assert_eq!(b.sim.calls("iam:DeleteRole"), 1, "only the execution role was deleted");
    assert_eq!(b.sim.calls("eks:DeleteAddon"), 1, "only the operator's add-on was deleted");

    // And on again: the same chain, nothing left over from the first time in the way.
    let op = set_inference(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_installed(&b, &bucket).await;
}

/// Each new step's create acts but its response is lost (as when the server dies right after the
/// call): the retry observes first and adopts, so every resource is created exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses_at_each_new_step_create_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(5).build();
    let bucket = bucket_of(&create_cluster(&b).await);
    let (roles, addons) = (b.sim.calls("iam:CreateRole"), b.sim.calls("eks:CreateAddon"));
    b.sim.set_faults(
        SimFaults::none()
            .with("iam:CreateOpenIDConnectProvider", FaultMode::LostResponse)
            .with("iam:CreateRole", FaultMode::LostResponse)
            .with("eks:CreateAddon", FaultMode::LostResponse),
    );
    let op = set_inference(&b, true).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_installed(&b, &bucket).await;
    assert_eq!(b.sim.calls("iam:CreateOpenIDConnectProvider"), 1);
    assert_eq!(b.sim.calls("iam:CreateRole") - roles, 1);
    assert_eq!(b.sim.calls("eks:CreateAddon") - addons, 1);
}

/// The server is killed while a new step is being polled; the restarted engine resumes the
/// operation and polls — no create is sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_at_each_new_step_resumes_without_a_second_create() {
    for key in ["oidc_provider", "inference_role", "addon:amazon-sagemaker-hyperpod-inference"] {
        let dir = tempfile::tempdir().unwrap();
        let (id, roles, addons) = {
            let b = Bed::sim(dir.path()).seed(5).build();
            let bucket = bucket_of(&create_cluster(&b).await);
            assert!(!bucket.is_empty());
            let (roles, addons) = (b.sim.calls("iam:CreateRole"), b.sim.calls("eks:CreateAddon"));
            let req = json!({ "cluster": "demo", "patch": { "inference_operator": true } });
            let Outcome::Submitted(s) =
                b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap()
            else {
                panic!("a change")
            };
            b.wait_for(&s.operation.id, &format!("{key} to get past submitting"), |op| {
                let phase = op.step(key).unwrap().phase;
                matches!(phase, StepPhase::Submitted | StepPhase::Polling | StepPhase::Succeeded)
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            (s.operation.id, roles, addons)
        };
        let b = Bed::sim(dir.path()).seed(5).build();
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{key}: {op:#?}");
        assert_eq!(b.sim.calls("iam:CreateOpenIDConnectProvider"), 1, "{key}");
        assert_eq!(b.sim.calls("iam:CreateRole") - roles, 1, "{key}");
        assert_eq!(b.sim.calls("eks:CreateAddon") - addons, 1, "{key}");
        let rec = b.store.get_cluster("demo").unwrap().unwrap();
        assert_installed(&b, rec.bucket.as_deref().unwrap_or_default()).await;
    }
}

/// What AWS refuses, the workflow refuses first or reports: a cluster without a bucket gets a
/// 422 naming the field before anything is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_a_bucket_is_refused_before_anything_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).seed(5).build();
    create_cluster(&b).await;
    let mut rec = b.store.get_cluster("demo").unwrap().unwrap();
    rec.bucket = None;
    b.store.put_cluster(&rec).unwrap();
    let req = json!({ "cluster": "demo", "patch": { "inference_operator": true } });
    let err = b.engine.submit_checked(OperationKind::SetFeatures, &req, user(), None).await.unwrap_err();
    let text = format!("{err:?}");
    assert!(text.contains("patch.inference_operator") && text.contains("TLS certificates"), "{text}");
    assert_eq!(
        b.sim.calls("iam:CreateRole"),
        3,
        "only the cluster's own roles (EKS, HyperPod execution, S3 CSI driver)"
    );
    assert!(b.sim.describe_addon(REGION, EKS, INFERENCE_OPERATOR_ADDON).await.unwrap().is_none());
}
