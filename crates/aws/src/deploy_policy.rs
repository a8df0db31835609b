//! The CloudFormation template of the management environment grants exactly the actions this
//! crate needs: every action in [`crate::actions::IAM_ACTIONS`] and nothing else, in the
//! control-plane policy of `deploy/cloudformation/management.yaml`.

use crate::actions::IAM_ACTIONS;
use std::collections::BTreeSet;

fn template() -> serde_norway::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/cloudformation/management.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).expect("the template is YAML without short-form tags")
}

fn actions_of(policy: &serde_norway::Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for stmt in policy["PolicyDocument"]["Statement"].as_sequence().expect("statements") {
        assert_eq!(stmt["Effect"].as_str(), Some("Allow"), "{stmt:?}");
        match &stmt["Action"] {
            serde_norway::Value::String(a) => {
                out.insert(a.clone());
            }
            serde_norway::Value::Sequence(list) => {
                out.extend(list.iter().filter_map(|a| a.as_str().map(str::to_string)))
            }
            other => panic!("unexpected Action {other:?}"),
        }
    }
    out
}

#[test]
fn the_control_plane_policy_grants_exactly_the_actions_the_adapter_calls() {
    let t = template();
    let policies = t["Resources"]["ControlPlaneRole"]["Properties"]["Policies"].as_sequence().expect("policies");
    let control_plane = policies
        .iter()
        .find(|p| p["PolicyName"].as_str() == Some("instantstart-control-plane"))
        .expect("the instantstart-control-plane policy");
    let granted = actions_of(control_plane);
    let needed: BTreeSet<String> = IAM_ACTIONS.iter().map(|a| a.to_string()).collect();
    let missing: Vec<_> = needed.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&needed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing from the template: {missing:?}; not called by the adapter: {extra:?}"
    );
    // Least privilege: no wildcard actions, no AdministratorAccess.
    assert!(granted.iter().all(|a| !a.contains('*')), "{granted:?}");
    let managed =
        serde_norway::to_string(&t["Resources"]["ControlPlaneRole"]["Properties"]["ManagedPolicyArns"]).unwrap();
    assert!(!managed.contains("policy/AdministratorAccess"), "{managed}");
    assert!(!managed.contains("FullAccess"), "{managed}");
}

#[test]
fn the_management_instance_accepts_no_inbound_traffic() {
    let t = template();
    let sg = &t["Resources"]["InstanceSecurityGroup"]["Properties"];
    assert!(sg.get("SecurityGroupIngress").is_none(), "the UI is reached only through SSM port forwarding");
    let bucket = &t["Resources"]["SharedBucket"]["Properties"]["PublicAccessBlockConfiguration"];
    for key in ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"] {
        assert_eq!(bucket[key].as_bool(), Some(true), "{key}");
    }
}

fn control_plane_statement(t: &serde_norway::Value, sid: &str) -> serde_norway::Value {
    let policies = t["Resources"]["ControlPlaneRole"]["Properties"]["Policies"].as_sequence().expect("policies");
    let control_plane = policies
        .iter()
        .find(|p| p["PolicyName"].as_str() == Some("instantstart-control-plane"))
        .expect("the instantstart-control-plane policy");
    control_plane["PolicyDocument"]["Statement"]
        .as_sequence()
        .expect("statements")
        .iter()
        .find(|s| s["Sid"].as_str() == Some(sid))
        .unwrap_or_else(|| panic!("statement {sid}"))
        .clone()
}

/// HyperPod creates `AWSServiceRoleForSageMakerHyperPod` on an account's first CreateCluster,
/// as the caller (SageMaker developer guide, `security-iam-awsmanpol-hyperpod`).
#[test]
fn the_service_linked_roles_include_hyperpods() {
    let t = template();
    let slr = control_plane_statement(&t, "IamServiceLinkedRoles");
    assert_eq!(slr["Action"].as_sequence().map(|a| a.len()), Some(1), "{slr:?}");
    let services: BTreeSet<&str> = slr["Condition"]["StringEquals"]["iam:AWSServiceName"]
        .as_sequence()
        .expect("a list of service names")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for service in ["eks.amazonaws.com", "sagemaker.amazonaws.com", "hyperpod.sagemaker.amazonaws.com"] {
        assert!(services.contains(service), "{service} missing from {services:?}");
    }
}

/// The bucket rule of `instantstart_core::spec::check_bucket_covered` and the policy agree: the
/// policy covers `is-*` and the stack's shared bucket, nothing else.
#[test]
fn cluster_buckets_are_the_prefix_core_accepts_and_the_shared_bucket() {
    let t = template();
    let s3 = control_plane_statement(&t, "S3ClusterBuckets");
    let resources = serde_norway::to_string(&s3["Resource"]).unwrap();
    let prefix = instantstart_core::names::CLUSTER_BUCKET_PREFIX;
    assert!(resources.contains(&format!("arn:${{AWS::Partition}}:s3:::{prefix}*")), "{resources}");
    assert!(resources.contains("arn:${AWS::Partition}:s3:::${SharedBucket}"), "{resources}");
    assert_eq!(s3["Resource"].as_sequence().map(|r| r.len()), Some(2), "{resources}");
}

/// The management instance passes the shared bucket to the server (`--shared-bucket` reads
/// `INSTANTSTART_SHARED_BUCKET`) and mounts it with Mountpoint at the pods' mount path, which
/// the container sees at the same path.
#[test]
fn the_instance_mounts_the_shared_bucket_where_the_pods_do() {
    let t = template();
    let user_data = t["Resources"]["Instance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
        .as_str()
        .expect("user data: Fn::Base64 of Fn::Sub")
        .to_string();
    let path = instantstart_core::spec::DEFAULT_MOUNT_PATH;
    assert!(user_data.contains("INSTANTSTART_SHARED_BUCKET=${SharedBucket}"), "{user_data}");
    assert!(user_data.contains(&format!("${{SharedBucket}} {path}")), "mount-s3 <bucket> {path}: {user_data}");
    assert!(user_data.contains(&format!("-v {path}:{path}")), "docker -v {path}:{path}: {user_data}");
    assert!(user_data.contains("mount-s3"), "{user_data}");
}
