//! HyperPod on an existing EKS-only cluster, driven by the engine on the simulated cloud with a
//! real SQLite store: import an EKS-only cluster, add HyperPod (only the missing dependencies
//! are installed), use it (add an instance group), remove HyperPod (EKS and its add-ons stay,
//! the record says EKS-only); the refusals before anything is recorded; and a kill -9 mid-add
//! that resumes without a second create.

use instantstart_core::engine::{EngineError, Outcome};
use instantstart_core::operation::{OperationKind, OperationStatus, StepPhase};
use instantstart_core::provider::{CreateEksAddon, CreateNetwork, EksApi, HyperPodApi, IamApi, NetworkApi};
use instantstart_core::validate::ValidationKind;
use instantstart_sim::SimCloud;
use instantstart_testkit::{Bed, user};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// An EKS cluster someone else created (no HyperPod), with cert-manager as their add-on.
async fn seed_legacy(sim: &SimCloud) {
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

async fn run(b: &Bed, kind: OperationKind, req: &Value) -> instantstart_core::operation::Operation {
    let Outcome::Submitted(s) = b.engine.submit_checked(kind, req, user(), None).await.unwrap() else {
        panic!("{kind:?} is a change")
    };
    b.engine.wait(&s.operation.id, WAIT).await.unwrap()
}

/// Imports `legacy` as the EKS-only cluster `adopted` (without a bucket unless `bucket`).
async fn import_eks_only(b: &Bed, bucket: Option<&str>) {
    let mut import = json!({ "name": "adopted", "region": "us-east-1", "eks_cluster": "legacy" });
    if let Some(bucket) = bucket {
        import["bucket"] = json!(bucket);
    }
    let op = run(b, OperationKind::ImportCluster, &import).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(b.store.get_cluster("adopted").unwrap().unwrap().hyperpod_cluster.is_none(), "EKS-only");
}

fn add_request(bucket: Option<&str>) -> Value {
    let mut req = json!({ "cluster": "adopted", "hyperpod": { "instance_groups": [
        { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" }
    ]}});
    if let Some(bucket) = bucket {
        req["bucket"] = json!(bucket);
    }
    req
}

fn validation(err: EngineError) -> (ValidationKind, String) {
    let EngineError::Validation(v) = err else { panic!("not a validation error: {err:?}") };
    (v.kind, v.findings[0].field.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperpod_is_added_to_an_imported_eks_only_cluster_used_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).helm().build();
    seed_legacy(&b.sim).await;
    import_eks_only(&b, None).await;
    let ops_before = b.store.list_operations(&Default::default()).unwrap().len();

    // Refusals before anything is recorded: an unknown cluster (404), a bad spec (400 naming
    // the field, create's validator), no bucket to use (422 on `bucket`), removal of a
    // HyperPod cluster that is not there (409).
    let mut unknown = add_request(Some("is-adopted-data"));
    unknown["cluster"] = json!("nope");
    let err = b.engine.submit_checked(OperationKind::AddHyperPod, &unknown, user(), None).await.unwrap_err();
    assert!(matches!(err, EngineError::UnknownCluster(ref n) if n == "nope"), "{err:?}");
    let mut bad = add_request(Some("is-adopted-data"));
    bad["hyperpod"]["instance_groups"][0]["availability_zone"] = json!("eu-west-1a");
    let err = b.engine.submit_checked(OperationKind::AddHyperPod, &bad, user(), None).await.unwrap_err();
    assert_eq!(validation(err), (ValidationKind::Invalid, "hyperpod.instance_groups[0].availability_zone".into()));
    let err = b.engine.submit_checked(OperationKind::AddHyperPod, &add_request(None), user(), None).await.unwrap_err();
    assert_eq!(validation(err), (ValidationKind::Unprocessable, "bucket".into()));
    let remove = json!({ "cluster": "adopted" });
    let err = b.engine.submit_checked(OperationKind::RemoveHyperPod, &remove, user(), None).await.unwrap_err();
    assert!(matches!(err, EngineError::InvalidState(ref m) if m.contains("no HyperPod cluster")), "{err:?}");
    assert_eq!(b.store.list_operations(&Default::default()).unwrap().len(), ops_before, "nothing recorded");

    // The dry run: what is there is left alone, the rest is planned.
    let add = add_request(Some("is-adopted-data"));
    let dry = b.engine.dry_run_checked(OperationKind::AddHyperPod, &add).await.unwrap();
    let keys: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    for k in ["eks_cluster", "bucket", "chart:hyperpod-dependencies", "hyperpod_execution_role", "lifecycle_script"] {
        assert!(keys.contains(&k), "{k} planned: {keys:?}");
    }
    assert!(!keys.contains(&"addon:cert-manager") && !keys.contains(&"addon:vpc-cni"), "present: {keys:?}");
    assert!(!keys.contains(&"chart:keda"), "the import installed it: {keys:?}");
    assert_eq!(keys.last(), Some(&"record"));
    assert!(dry.checks.iter().any(|c| c.check == "dependency" && c.detail.contains("present, left alone")));

    let op = run(&b, OperationKind::AddHyperPod, &add).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let rec = b.store.get_cluster("adopted").unwrap().unwrap();
    assert_eq!(rec.hyperpod_cluster.as_deref(), Some("adopted-hp"));
    assert_eq!(rec.bucket.as_deref(), Some("is-adopted-data"));
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "adopted-hp").await.unwrap().unwrap();
    let eks = b.sim.describe_eks_cluster("us-east-1", "legacy").await.unwrap().unwrap();
    assert_eq!(hp.eks_cluster_arn.as_deref(), Some(eks.arn.as_str()), "orchestrated by their EKS cluster");
    assert_eq!(b.sim.calls("sagemaker:CreateCluster"), 1);
    let network = b.sim.describe_network("us-east-1", &eks.vpc_id).await.unwrap();
    assert!(
        network.subnets.iter().any(|s| s.name.as_deref() == Some("adopted-compute-us-east-1a")),
        "a compute subnet in their VPC"
    );

    // A second add is a 409.
    let err = b.engine.submit_checked(OperationKind::AddHyperPod, &add, user(), None).await.unwrap_err();
    assert!(matches!(err, EngineError::InvalidState(ref m) if m.contains("already has HyperPod")), "{err:?}");

    // Day 2 works on it: a group is added with the role and security group the add made.
    let group = json!({ "cluster": "adopted", "group": {
        "name": "extra", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" } });
    let op = run(&b, OperationKind::AddInstanceGroup, &group).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "adopted-hp").await.unwrap().unwrap();
    let extra = hp.instance_groups.iter().find(|g| g.name == "extra").expect("added");
    let workers = hp.instance_groups.iter().find(|g| g.name == "workers").unwrap();
    assert_eq!(extra.execution_role_arn, workers.execution_role_arn);
    assert_eq!(extra.security_group_ids, workers.security_group_ids);

    // Removal: the HyperPod cluster and what was made for it go; EKS, its add-ons, the bucket
    // and the claim stay; the record says EKS-only.
    let dry = b.engine.dry_run_checked(OperationKind::RemoveHyperPod, &remove).await.unwrap();
    let keys: Vec<&str> = dry.prepared.steps.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        ["hyperpod_cluster", "chart:hyperpod-dependencies", "hyperpod_execution_role", "compute_subnets", "record"]
    );
    let op = run(&b, OperationKind::RemoveHyperPod, &remove).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(b.sim.describe_hyperpod_cluster("us-east-1", "adopted-hp").await.unwrap().is_none());
    assert!(b.sim.get_role("adopted-hyperpod-exec-role").await.unwrap().is_none());
    let network = b.sim.describe_network("us-east-1", &eks.vpc_id).await.unwrap();
    assert!(network.subnets.iter().all(|s| !s.name.as_deref().unwrap_or_default().starts_with("adopted-compute-")));
    assert!(b.sim.describe_eks_cluster("us-east-1", "legacy").await.unwrap().is_some(), "EKS stays");
    for addon in ["cert-manager", "vpc-cni", "eks-pod-identity-agent", "aws-mountpoint-s3-csi-driver"] {
        assert!(b.sim.describe_addon("us-east-1", "legacy", addon).await.unwrap().is_some(), "{addon} stays");
    }
    let rec = b.store.get_cluster("adopted").unwrap().unwrap();
    assert_eq!(rec.hyperpod_cluster, None, "EKS-only again");
    assert_eq!(rec.bucket.as_deref(), Some("is-adopted-data"));

    // And HyperPod can be added again (the cluster's bucket is used without naming it).
    let op = run(&b, OperationKind::AddHyperPod, &add_request(None)).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.store.get_cluster("adopted").unwrap().unwrap().hyperpod_cluster.as_deref(), Some("adopted-hp"));

    // Forgetting the imported cluster removes the HyperPod cluster InstantStart added (and what
    // was made for it) with what the import installed; their EKS cluster stays.
    let dry = b.engine.dry_run_checked(OperationKind::DeleteCluster, &json!({ "name": "adopted" })).await.unwrap();
    let step = |key: &str| dry.prepared.steps.iter().find(|s| s.key == key).cloned();
    assert_eq!(step("chart:hyperpod-dependencies").expect("planned").depends_on, ["hyperpod_cluster"]);
    assert!(step("hyperpod_execution_role").is_some() && step("compute_subnets").is_some());
    assert!(step("access_entry").unwrap().depends_on.contains(&"hyperpod_cluster".to_string()));
    let op = run(&b, OperationKind::DeleteCluster, &json!({ "name": "adopted" })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(b.sim.describe_hyperpod_cluster("us-east-1", "adopted-hp").await.unwrap().is_none());
    assert!(b.sim.get_role("adopted-hyperpod-exec-role").await.unwrap().is_none());
    assert!(b.sim.describe_eks_cluster("us-east-1", "legacy").await.unwrap().is_some(), "EKS stays");
    assert!(b.sim.describe_addon("us-east-1", "legacy", "cert-manager").await.unwrap().is_some(), "theirs stays");
    assert!(b.store.get_cluster("adopted").unwrap().is_none());
}

/// HyperPod added to a cluster InstantStart created without one: nothing of the EKS side is
/// installed twice, the created cluster's request records the spec, and delete-cluster then
/// removes HyperPod with the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperpod_is_added_to_a_created_eks_only_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let b = Bed::sim(dir.path()).helm().build();
    let create = json!({ "name": "demo", "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"] });
    let op = run(&b, OperationKind::CreateCluster, &create).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    let addons = b.sim.calls("eks:CreateAddon");
    let add = json!({ "cluster": "demo", "hyperpod": { "instance_groups": [
        { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b" } ]}});
    let op = run(&b, OperationKind::AddHyperPod, &add).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(b.sim.calls("eks:CreateAddon"), addons, "every add-on was there");
    let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
    assert!(keys.contains(&"chart:hyperpod-dependencies") && !keys.contains(&"chart:keda"), "{keys:?}");
    let rec = b.store.get_cluster("demo").unwrap().unwrap();
    assert_eq!(rec.hyperpod_cluster.as_deref(), Some("demo-hp"));
    assert!(rec.request.as_ref().unwrap().hyperpod.is_some(), "the create request records the spec");
    let hp = b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    let network = b.sim.describe_network("us-east-1", rec.vpc_id.as_deref().unwrap()).await.unwrap();
    assert_eq!(hp.instance_groups[0].security_group_ids, vec![network.security_group_id.clone().unwrap()]);
    let op = run(&b, OperationKind::DeleteCluster, &json!({ "name": "demo" })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert!(b.sim.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().is_none());
    assert!(b.store.get_cluster("demo").unwrap().is_none());
}

/// A server killed while the HyperPod cluster's step is submitting or polling resumes without
/// creating anything twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_add_creates_nothing_twice() {
    for kill_at in [StepPhase::Submitting, StepPhase::Polling] {
        let dir = tempfile::tempdir().unwrap();
        let id = {
            let b = Bed::sim(dir.path()).helm().build();
            seed_legacy(&b.sim).await;
            import_eks_only(&b, Some("is-adopted-data")).await;
            let s = match b.engine.submit_checked(OperationKind::AddHyperPod, &add_request(None), user(), None).await {
                Ok(Outcome::Submitted(s)) => s,
                other => panic!("{other:?}"),
            };
            b.wait_for(&s.operation.id, &format!("{kill_at:?} to be reached"), |op| {
                let phase = op.step("hyperpod_cluster").unwrap().phase;
                phase == kill_at || phase == StepPhase::Succeeded
            })
            .await;
            b.kill().await;
            b.sim.flush().unwrap();
            s.operation.id
        };
        let b = Bed::sim(dir.path()).helm().build();
        b.engine.resume_all().unwrap();
        let op = b.engine.wait(&id, WAIT).await.unwrap();
        assert_eq!(op.status, OperationStatus::Succeeded, "{kill_at:?}: {op:#?}");
        assert_eq!(b.sim.calls("sagemaker:CreateCluster"), 1, "{kill_at:?}");
        // The import's S3 CSI and load balancer controller roles, then the execution role.
        assert_eq!(b.sim.calls("iam:CreateRole"), 3, "{kill_at:?}");
        // The import's two private subnets were seeded; one compute subnet.
        assert_eq!(b.sim.calls("ec2:CreateSubnet"), 1, "{kill_at:?}");
        assert_eq!(b.sim.calls("s3:PutObject"), 1, "{kill_at:?}: the lifecycle script once");
        assert_eq!(b.store.get_cluster("adopted").unwrap().unwrap().hyperpod_cluster.as_deref(), Some("adopted-hp"));
    }
}
