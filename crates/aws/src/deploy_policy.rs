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
