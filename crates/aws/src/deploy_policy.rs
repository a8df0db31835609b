//! The CloudFormation template of the management environment grants exactly the actions this
//! crate needs: every action in [`crate::actions::IAM_ACTIONS`] and nothing else, in the
//! control-plane policy of `deploy/cloudformation/management.yaml`; IAM roles only with the
//! stack's permissions boundary (`RoleBoundary`) and the managed policies the code attaches;
//! deletes of EKS, SageMaker and EC2 resources only on resources carrying our ownership tag.

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
        // Deny statements grant nothing (the boundary's guards, checked below).
        if stmt["Effect"].as_str() == Some("Deny") {
            continue;
        }
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

/// Review #21: the EKS clusters InstantStart creates admit the management instance's fixed
/// address on their public endpoint, not every address.
#[test]
fn created_clusters_admit_the_management_instances_elastic_ip() {
    let t = template();
    let r = &t["Resources"];
    assert_eq!(r["ManagementAddress"]["Type"].as_str(), Some("AWS::EC2::EIP"));
    assert_eq!(r["ManagementAddressAssociation"]["Properties"]["InstanceId"]["Ref"].as_str(), Some("Instance"));
    let user_data = r["Instance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"].as_str().expect("user data");
    assert!(
        user_data.contains("-e INSTANTSTART_EKS_PUBLIC_ACCESS_CIDRS=${ManagementAddress.PublicIp}/32"),
        "{user_data}"
    );
    // Review #26: the container (a non-root user on port 3099) needs no capability and never
    // gains privileges.
    assert!(user_data.contains("--cap-drop ALL --security-opt no-new-privileges"), "{user_data}");
    // A read-only root file system; helm's per-call home is on a tmpfs.
    assert!(user_data.contains("--read-only --tmpfs /tmp:"), "{user_data}");
}

/// Review #26: the image the instance runs is pinned by digest; a tag could be moved to other
/// contents after the stack was reviewed.
#[test]
fn the_container_image_is_pinned_by_digest() {
    let t = template();
    let pattern = t["Parameters"]["ContainerImage"]["AllowedPattern"].as_str().expect("a pattern");
    assert!(pattern.ends_with("@sha256:[a-f0-9]{64}$"), "{pattern}");
    assert!(!pattern.contains('|') && !pattern.contains("(:[A-Za-z"), "no tag alternative: {pattern}");
}

#[test]
fn an_rds_store_is_optional_its_secret_the_only_one_readable_and_nothing_comes_in() {
    let t = template();
    for p in ["StoreEndpoint", "StoreSecretArn"] {
        assert_eq!(t["Parameters"][p]["Default"].as_str(), Some(""), "{p} is optional");
    }
    assert!(t["Rules"]["StoreEndpointAndSecretGoTogether"]["Assertions"].as_sequence().is_some_and(|a| !a.is_empty()));
    // Only with the store set: one statement reading exactly that secret.
    let read = &t["Resources"]["StoreSecretRead"];
    assert_eq!(read["Condition"].as_str(), Some("UseExternalStore"));
    assert_eq!(read["Properties"]["RoleName"]["Ref"].as_str(), Some("ControlPlaneRole"));
    let statements = read["Properties"]["PolicyDocument"]["Statement"].as_sequence().expect("statements");
    assert_eq!(statements.len(), 1, "{statements:?}");
    assert_eq!(statements[0]["Action"].as_str(), Some("secretsmanager:GetSecretValue"));
    assert_eq!(statements[0]["Resource"]["Fn::Sub"].as_str(), Some("${StoreSecretArn}"));
    // Out to PostgreSQL on private addresses only; still no inbound rule anywhere.
    let egress = &t["Resources"]["StoreEgress"];
    assert_eq!(egress["Condition"].as_str(), Some("UseExternalStore"));
    assert_eq!(egress["Properties"]["FromPort"].as_u64(), Some(5432));
    assert_eq!(egress["Properties"]["ToPort"].as_u64(), Some(5432));
    assert_eq!(egress["Properties"]["CidrIp"].as_str(), Some("10.0.0.0/8"));
    let resources = t["Resources"].as_mapping().expect("resources");
    assert!(
        resources.values().all(|r| r["Type"].as_str() != Some("AWS::EC2::SecurityGroupIngress")),
        "no inbound rule"
    );
    // The container gets the URL from a root-only env file, never on a command line.
    let user_data = t["Resources"]["Instance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
        .as_str()
        .expect("user data")
        .to_string();
    assert!(user_data.contains("install -m 0600 /dev/null /etc/instantstart-store.env"), "{user_data}");
    assert!(user_data.contains("--env-file /etc/instantstart-store.env"), "{user_data}");
    assert!(user_data.contains("--secret-id \"${StoreSecretArn}\""), "{user_data}");
    // TLS to RDS, verified against AWS's RDS certificate bundle, mounted into the container.
    assert!(user_data.contains("https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"), "{user_data}");
    assert!(user_data.contains("?sslmode=require&sslrootcert=/etc/instantstart/rds-ca.pem"), "{user_data}");
    assert!(user_data.contains("-v /etc/instantstart:/etc/instantstart:ro"), "{user_data}");
}

/// Every statement of the control-plane policy.
fn control_plane_statements(t: &serde_norway::Value) -> Vec<serde_norway::Value> {
    let policies = t["Resources"]["ControlPlaneRole"]["Properties"]["Policies"].as_sequence().expect("policies");
    let control_plane = policies
        .iter()
        .find(|p| p["PolicyName"].as_str() == Some("instantstart-control-plane"))
        .expect("the instantstart-control-plane policy");
    control_plane["PolicyDocument"]["Statement"].as_sequence().expect("statements").clone()
}

fn actions_in(stmt: &serde_norway::Value) -> Vec<String> {
    match &stmt["Action"] {
        serde_norway::Value::String(a) => vec![a.clone()],
        serde_norway::Value::Sequence(list) => list.iter().filter_map(|a| a.as_str().map(str::to_string)).collect(),
        _ => vec![],
    }
}

/// `Fn::Sub: arn:${AWS::Partition}:…` → `arn:aws:…` (the partition the core's constants use).
fn sub_aws(v: &serde_norway::Value) -> String {
    v["Fn::Sub"].as_str().or(v.as_str()).expect("a string or Fn::Sub").replace("${AWS::Partition}", "aws")
}

/// IAM matches `*` in an action name against any run of characters (case-insensitive).
fn action_matches(pattern: &str, action: &str) -> bool {
    let (p, a) = (pattern.to_ascii_lowercase(), action.to_ascii_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    if parts.len() == 1 {
        return p == a;
    }
    let mut rest = a.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(at) = rest.find(part) else { return false };
            rest = &rest[at + part.len()..];
        }
    }
    true
}

/// The actions of the inline policies the core's workflows put on the roles they create (every
/// `"<service>:<Action>"` literal of `crates/core/src/workflow`, trust-policy actions included)
/// and of the vendored load balancer controller policy.
fn inline_policy_actions() -> BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src/workflow");
    let mut out = BTreeSet::new();
    let sources: Vec<String> = std::fs::read_dir(&dir)
        .expect("core workflows")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| std::fs::read_to_string(e.path()).expect("readable"))
        .collect();
    for stmt in instantstart_core::workflow::lb_controller::lb_controller_policy()["Statement"]
        .as_array()
        .expect("the load balancer controller policy's statements")
    {
        match &stmt["Action"] {
            serde_json::Value::String(a) => {
                out.insert(a.clone());
            }
            serde_json::Value::Array(list) => out.extend(list.iter().filter_map(|a| a.as_str().map(str::to_string))),
            other => panic!("unexpected Action {other:?}"),
        }
    }
    for src in &sources {
        for literal in src.split('"').skip(1).step_by(2) {
            let Some((service, action)) = literal.split_once(':') else { continue };
            // `k8s:` names Kubernetes kinds in the sources, not an AWS service; `aws:` is the
            // prefix of IAM's global condition keys (`aws:SourceArn`), not of actions.
            let service_ok = !service.is_empty()
                && !["arn", "k8s", "aws"].contains(&service)
                && service.chars().all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit());
            let action_ok = action.starts_with(|c: char| c.is_ascii_uppercase())
                && action.chars().all(|c| c.is_ascii_alphanumeric() || c == '*');
            if service_ok && action_ok {
                out.insert(literal.to_string());
            }
        }
    }
    out
}

/// The boundary exists, allows nothing IAM-administrative, and covers every action the core's
/// inline policies grant (a role's permissions are the intersection of its policies and its
/// boundary: an action missing here would silently stop working).
#[test]
fn the_role_boundary_caps_roles_without_iam_administration_and_covers_their_policies() {
    let t = template();
    let boundary = &t["Resources"]["RoleBoundary"];
    assert_eq!(boundary["Type"].as_str(), Some("AWS::IAM::ManagedPolicy"));
    let mut allowed = Vec::new();
    let statements = boundary["Properties"]["PolicyDocument"]["Statement"].as_sequence().expect("statements");
    for stmt in statements {
        if stmt["Effect"].as_str() == Some("Allow") {
            allowed.extend(actions_in(stmt));
        }
    }
    let statement = |sid: &str| {
        statements.iter().find(|s| s["Sid"].as_str() == Some(sid)).unwrap_or_else(|| panic!("boundary statement {sid}"))
    };
    // Passing and assuming roles, and S3, never on `*`: a role someone makes with this boundary
    // reaches only InstantStart's own roles (which carry the same boundary) and buckets.
    for stmt in statements.iter().filter(|s| s["Effect"].as_str() == Some("Allow")) {
        let wide = stmt["Resource"].as_str() == Some("*");
        for a in actions_in(stmt) {
            let scoped = a == "iam:PassRole" || a.starts_with("sts:Assume") || a.starts_with("s3:");
            assert!(!(wide && scoped), "{a} on *: {stmt:?}");
        }
    }
    let own_roles = statement("OwnRolesOnly");
    let passable: Vec<String> = own_roles["Resource"].as_sequence().expect("role ARNs").iter().map(sub_aws).collect();
    let creatable: Vec<String> = control_plane_statement(&t, "IamRolesWithBoundary")["Resource"]
        .as_sequence()
        .expect("role ARNs")
        .iter()
        .map(sub_aws)
        .collect();
    assert_eq!(passable, creatable, "PassRole/AssumeRole reach exactly the roles created with the boundary");
    let buckets = statement("OwnBuckets");
    assert_eq!(buckets["Condition"]["StringEquals"]["s3:ResourceAccount"]["Ref"].as_str(), Some("AWS::AccountId"));
    for r in buckets["Resource"].as_sequence().expect("bucket ARNs").iter().map(sub_aws) {
        assert!(
            ["arn:aws:s3:::is-*", "arn:aws:s3:::${SharedBucket}", "arn:aws:s3:::sagemaker-*"]
                .iter()
                .any(|p| r.starts_with(p)),
            "{r}"
        );
    }
    let denied = actions_in(statement("NoInstanceProfiles"));
    assert_eq!(statement("NoInstanceProfiles")["Effect"].as_str(), Some("Deny"));
    for a in ["ec2:RunInstances", "ec2:AssociateIamInstanceProfile", "ec2:ReplaceIamInstanceProfileAssociation"] {
        assert!(denied.iter().any(|d| d == a), "{a} denied under the boundary");
    }
    let iam: BTreeSet<&str> = allowed.iter().filter(|a| a.starts_with("iam:")).map(String::as_str).collect();
    assert_eq!(
        iam,
        BTreeSet::from([
            "iam:CreateServiceLinkedRole",
            "iam:GetServerCertificate",
            "iam:ListServerCertificates",
            "iam:PassRole"
        ]),
        "the boundary allows no IAM administration"
    );
    assert!(!allowed.iter().any(|a| a == "*" || a.starts_with("iam:*") || a.starts_with("sts:*")), "{allowed:?}");
    let actions = inline_policy_actions();
    assert!(actions.len() > 40, "the scan found too few actions: {actions:?}");
    let uncovered: Vec<&String> = actions.iter().filter(|a| !allowed.iter().any(|p| action_matches(p, a))).collect();
    assert!(uncovered.is_empty(), "inline-policy actions the boundary does not allow: {uncovered:?}");
}

/// IAM refuses an escalation: roles are created, given inline policies and given a boundary
/// only with the stack's boundary, managed policies are attached only when they are the ones
/// the code attaches, and the boundary can be neither removed nor rewritten.
#[test]
fn iam_role_changes_require_the_boundary_and_the_known_managed_policies() {
    let t = template();
    let statements = control_plane_statements(&t);
    let boundary_condition = |s: &serde_norway::Value| {
        s["Condition"]["StringEquals"]["iam:PermissionsBoundary"]["Ref"].as_str() == Some("RoleBoundary")
    };
    for action in ["iam:CreateRole", "iam:PutRolePolicy", "iam:AttachRolePolicy", "iam:PutRolePermissionsBoundary"] {
        let granting: Vec<&serde_norway::Value> = statements
            .iter()
            .filter(|s| s["Effect"].as_str() == Some("Allow") && actions_in(s).iter().any(|a| a == action))
            .collect();
        assert!(!granting.is_empty(), "{action} is granted");
        for s in granting {
            // FSx's service-linked role for S3 access (AWSServiceRoleForFSxS3Access_<fs>),
            // which FSx creates and configures as the caller when a file system is linked to a
            // bucket: only FSx can assume a service-linked role, so it escalates nothing.
            let fsx_s3_role_only = s["Resource"].as_sequence().is_some_and(|rs| {
                rs.iter().map(sub_aws).all(|r| {
                    r.starts_with("arn:aws:iam::")
                        && r.ends_with(":role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*")
                })
            });
            assert!(
                boundary_condition(s) || fsx_s3_role_only,
                "{action} without the iam:PermissionsBoundary condition: {s:?}"
            );
        }
    }
    let attach = control_plane_statement(&t, "IamAttachKnownManagedPolicies");
    let arns: BTreeSet<String> = attach["Condition"]["ArnEquals"]["iam:PolicyARN"]
        .as_sequence()
        .expect("a list of policy ARNs")
        .iter()
        .map(sub_aws)
        .collect();
    let code: BTreeSet<String> = crate::iam::ATTACHABLE_MANAGED_POLICIES.iter().map(|a| a.to_string()).collect();
    assert_eq!(arns, code, "the template's iam:PolicyARN list and ATTACHABLE_MANAGED_POLICIES");
    // Deny statements: no boundary removal, no change to the boundary policy.
    let denied: BTreeSet<String> =
        statements.iter().filter(|s| s["Effect"].as_str() == Some("Deny")).flat_map(actions_in).collect();
    for action in ["iam:DeleteRolePermissionsBoundary", "iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion"] {
        assert!(denied.contains(action), "{action} is denied: {denied:?}");
    }
    let policy_changes = control_plane_statement(&t, "DenyBoundaryPolicyChanges");
    assert_eq!(policy_changes["Resource"]["Ref"].as_str(), Some("RoleBoundary"));
    // Changes to existing roles: only ours.
    let owned = control_plane_statement(&t, "IamChangeOwnedRoles");
    assert_eq!(
        owned["Condition"]["StringEquals"]["aws:ResourceTag/instantstart:managed-by"].as_str(),
        Some(instantstart_core::provider::MANAGED_BY)
    );
    for action in ["iam:UpdateAssumeRolePolicy", "iam:DeleteRole", "iam:DetachRolePolicy", "iam:DeleteRolePolicy"] {
        assert!(actions_in(&owned).iter().any(|a| a == action), "{action} in IamChangeOwnedRoles");
    }
    // The server is told which boundary to send.
    let user_data = t["Resources"]["Instance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
        .as_str()
        .expect("user data")
        .to_string();
    assert!(user_data.contains("INSTANTSTART_ROLE_BOUNDARY_ARN=${RoleBoundary}"), "{user_data}");
}

/// Every managed policy the core's workflows attach is in `ATTACHABLE_MANAGED_POLICIES`, and
/// every entry there is attached somewhere.
#[test]
fn the_attachable_managed_policies_are_the_ones_the_core_attaches() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src/workflow");
    let mut found = BTreeSet::new();
    for e in std::fs::read_dir(&dir).expect("core workflows").filter_map(|e| e.ok()) {
        let src = std::fs::read_to_string(e.path()).unwrap_or_default();
        for literal in src.split('"').skip(1).step_by(2) {
            if literal.starts_with("arn:aws:iam::aws:policy/") {
                found.insert(literal.to_string());
            }
        }
    }
    let listed: BTreeSet<String> = crate::iam::ATTACHABLE_MANAGED_POLICIES.iter().map(|a| a.to_string()).collect();
    assert_eq!(found, listed);
}

/// Deletes of EKS, SageMaker and EC2 resources, and changes to existing EC2 network pieces,
/// apply only to resources carrying our ownership tag; creates must carry it.
#[test]
fn deletes_are_scoped_by_our_ownership_tag_and_creates_carry_it() {
    let t = template();
    let statements = control_plane_statements(&t);
    let tag_key = format!("aws:ResourceTag/{}", instantstart_core::provider::TAG_MANAGED_BY);
    let request_tag = format!("aws:RequestTag/{}", instantstart_core::provider::TAG_MANAGED_BY);
    let scoped = |s: &serde_norway::Value, key: &str| {
        s["Condition"]["StringEquals"][key].as_str() == Some(instantstart_core::provider::MANAGED_BY)
    };
    let allows = |action: &str| -> Vec<serde_norway::Value> {
        statements
            .iter()
            .filter(|s| s["Effect"].as_str() == Some("Allow") && actions_in(s).iter().any(|a| a == action))
            .cloned()
            .collect()
    };
    let mut deletes: Vec<&str> = IAM_ACTIONS
        .iter()
        .copied()
        .filter(|a| {
            let (service, op) = a.split_once(':').unwrap();
            ["ec2", "eks", "sagemaker", "fsx", "aps"].contains(&service)
                && (op.starts_with("Delete") || op.starts_with("Detach"))
        })
        .collect();
    deletes.extend([
        "ec2:ReplaceRoute",
        "ec2:ModifyVpcAttribute",
        "ec2:ModifySubnetAttribute",
        "ec2:AttachInternetGateway",
        "ec2:CreateRoute",
        "ec2:ReleaseAddress",
    ]);
    for action in deletes {
        let granting = allows(action);
        assert!(!granting.is_empty(), "{action} is granted");
        for s in granting {
            assert!(scoped(&s, &tag_key), "{action} without the {tag_key} condition: {s:?}");
        }
    }
    for action in [
        "ec2:CreateVpc",
        "ec2:CreateSubnet",
        "eks:CreateCluster",
        "sagemaker:CreateCluster",
        "iam:TagRole",
        "fsx:CreateFileSystem",
        "aps:CreateWorkspace",
    ] {
        let granting = allows(action);
        assert!(!granting.is_empty(), "{action} is granted");
        for s in granting {
            assert!(scoped(&s, &request_tag), "{action} without the {request_tag} condition: {s:?}");
        }
    }
    // CreateTags: as part of a create, or on what is ours already.
    for s in allows("ec2:CreateTags") {
        let on_create = s["Condition"]["StringEquals"]["ec2:CreateAction"].as_sequence().is_some();
        assert!(on_create || scoped(&s, &tag_key), "ec2:CreateTags unscoped: {s:?}");
    }
}

/// The control plane can make itself an administrator only of clusters whose owner tagged
/// them `instantstart:import=allowed`, for its own role only, with the one policy the import
/// asks for; it cannot set that tag itself; and nothing else grants access entries.
#[test]
fn access_entries_need_the_owners_consent_and_name_only_the_control_plane() {
    use instantstart_core::provider::{IMPORT_ALLOWED, TAG_CLUSTER, TAG_IMPORT, TAG_MANAGED_BY, TAG_OPERATION};
    let t = template();
    let statements = control_plane_statements(&t);
    let granting = |action: &str| -> Vec<String> {
        statements
            .iter()
            .filter(|s| s["Effect"].as_str() == Some("Allow") && actions_in(s).iter().any(|a| a == action))
            .map(|s| s["Sid"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(granting("eks:CreateAccessEntry"), ["EksImportAccessEntry"]);
    assert_eq!(granting("eks:AssociateAccessPolicy"), ["EksImportAccessPolicy"]);
    let entry = control_plane_statement(&t, "EksImportAccessEntry");
    assert_eq!(
        entry["Condition"]["StringEquals"][format!("aws:ResourceTag/{TAG_IMPORT}").as_str()].as_str(),
        Some(IMPORT_ALLOWED)
    );
    assert_eq!(entry["Condition"]["ArnEquals"]["eks:principalArn"].as_str(), Some("${aws:PrincipalArn}"));
    let policy = control_plane_statement(&t, "EksImportAccessPolicy");
    assert_eq!(
        sub_aws(&policy["Condition"]["ArnEquals"]["eks:policyArn"]),
        instantstart_core::provider::CLUSTER_ADMIN_POLICY
    );
    assert_eq!(
        policy["Condition"]["StringEquals"][format!("aws:ResourceTag/{TAG_MANAGED_BY}").as_str()].as_str(),
        Some(instantstart_core::provider::MANAGED_BY)
    );
    // Tagging: our ownership keys only, so never the owner's consent tag.
    for sid in ["eks:TagResource", "aps:TagResource"].into_iter().flat_map(granting) {
        let stmt = control_plane_statement(&t, &sid);
        let keys: BTreeSet<&str> = stmt["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"]
            .as_sequence()
            .unwrap_or_else(|| panic!("{sid}: tagging without an aws:TagKeys list"))
            .iter()
            .filter_map(|k| k.as_str())
            .collect();
        assert_eq!(keys, BTreeSet::from([TAG_MANAGED_BY, TAG_CLUSTER, TAG_OPERATION]), "{sid}");
    }
}
