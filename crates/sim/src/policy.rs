//! A small IAM policy evaluator over the roles the simulated account stores: does a role's
//! identity policy allow `action` on `resource`?
//!
//! Evaluated from what the role really holds ([`crate::world::RoleRec`]): its inline policies
//! and the managed policies the simulator knows the documents of ([`managed_policy`]). An
//! explicit `Deny` wins over any `Allow`; `Action`/`Resource` are matched with IAM's wildcards
//! (`*` any run of characters, `?` one character; actions case-insensitively). Conditions,
//! `NotAction`/`NotResource`, permission boundaries and SCPs are not modelled (a statement with
//! a `Condition` is treated as not applying, so it never grants more than AWS would).

use crate::world::RoleRec;
use serde_json::{Value, json};

/// IAM's wildcard match: `*` matches any run of characters, `?` exactly one.
pub(crate) fn wildcard(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = if ignore_case {
        (pattern.to_lowercase().chars().collect(), text.to_lowercase().chars().collect())
    } else {
        (pattern.chars().collect(), text.chars().collect())
    };
    // Iterative glob with backtracking to the last `*`.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

fn statements(policy: &Value) -> Vec<&Value> {
    match policy.get("Statement") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(o @ Value::Object(_)) => vec![o],
        _ => vec![],
    }
}

/// Whether `stmt` names `action` on `resource` (ignoring its effect).
fn matches(stmt: &Value, action: &str, resource: &str) -> bool {
    if stmt.get("Condition").is_some() {
        return false;
    }
    strings(stmt.get("Action")).iter().any(|a| wildcard(a, action, true))
        && strings(stmt.get("Resource")).iter().any(|r| wildcard(r, resource, false))
}

/// The documents of the AWS managed policies the simulator models, as AWS publishes them
/// (trimmed to the statements that matter here).
///
/// - `AmazonSageMakerClusterInstanceRolePolicy` (`security-iam-awsmanpol-AmazonSageMakerClusterInstanceRolePolicy`):
///   CloudWatch Logs and metrics, `s3:ListBucket`/`s3:GetObject` on `sagemaker-*` buckets only,
///   SSM messages — none of the EKS-node actions.
/// - `AmazonEKS_CNI_Policy` and `AmazonEC2ContainerRegistryReadOnly` (EKS user guide, node IAM
///   role): what the VPC CNI and kubelet's image pulls need.
pub(crate) fn managed_policy(arn: &str) -> Option<Value> {
    let name = arn.rsplit('/').next()?;
    Some(match name {
        "AmazonSageMakerClusterInstanceRolePolicy" => json!({ "Statement": [
            { "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*" },
            { "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents", "logs:CreateLogGroup"], "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/Clusters/*" },
            { "Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"], "Resource": ["arn:aws:s3:::sagemaker-*/*", "arn:aws:s3:::sagemaker-*"] },
            { "Effect": "Allow", "Action": ["ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel"], "Resource": "*" }
        ]}),
        "AmazonEKS_CNI_Policy" => json!({ "Statement": [
            { "Effect": "Allow", "Action": [
                "ec2:AssignIpv6Addresses", "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface",
                "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:DescribeInstances",
                "ec2:DescribeTags", "ec2:DescribeNetworkInterfaces", "ec2:DescribeInstanceTypes",
                "ec2:DescribeSubnets", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute",
                "ec2:UnassignPrivateIpAddresses"
            ], "Resource": "*" },
            { "Effect": "Allow", "Action": ["ec2:CreateTags"], "Resource": ["arn:aws:ec2:*:*:network-interface/*"] }
        ]}),
        "AmazonEC2ContainerRegistryReadOnly" => json!({ "Statement": [
            { "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:GetRepositoryPolicy", "ecr:DescribeRepositories", "ecr:ListImages", "ecr:DescribeImages", "ecr:BatchGetImage", "ecr:GetLifecyclePolicy", "ecr:GetLifecyclePolicyPreview", "ecr:ListTagsForResource", "ecr:DescribeImageScanFindings"], "Resource": "*" }
        ]}),
        _ => return None,
    })
}

impl RoleRec {
    /// Whether the role's identity policies allow `action` on `resource`.
    pub(crate) fn allows(&self, action: &str, resource: &str) -> bool {
        let managed: Vec<Value> = self.managed_policies.iter().filter_map(|a| managed_policy(a)).collect();
        let docs: Vec<&Value> = self.inline_policies.iter().map(|(_, d)| d).chain(managed.iter()).collect();
        let stmts: Vec<&Value> = docs.iter().flat_map(|d| statements(d)).collect();
        let effect = |s: &Value| s.get("Effect").and_then(Value::as_str).unwrap_or_default().to_string();
        if stmts.iter().any(|s| effect(s) == "Deny" && matches(s, action, resource)) {
            return false;
        }
        stmts.iter().any(|s| effect(s) == "Allow" && matches(s, action, resource))
    }

    /// The actions of `wanted` (each on its resource) the role is not allowed.
    pub(crate) fn missing<'a>(&self, wanted: &[(&'a str, &str)]) -> Vec<&'a str> {
        wanted.iter().filter(|(a, r)| !self.allows(a, r)).map(|(a, _)| *a).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::provider::Tags;

    /// Data-driven: (pattern, text, ignore case, expected).
    #[test]
    fn wildcards() {
        let cases: &[(&str, &str, bool, bool)] = &[
            ("s3:GetObject", "s3:getobject", true, true),
            ("s3:Get*", "s3:GetObject", true, true),
            ("s3:*", "s3:PutObject", true, true),
            ("*", "ec2:CreateTags", true, true),
            ("ec2:Describe*", "ec2:CreateTags", true, false),
            ("arn:aws:s3:::sagemaker-*/*", "arn:aws:s3:::sagemaker-x/lifecycle/on_create.sh", false, true),
            ("arn:aws:s3:::sagemaker-*/*", "arn:aws:s3:::is-x/lifecycle/on_create.sh", false, false),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::b", false, false),
            ("arn:aws:s3:::B/*", "arn:aws:s3:::b/k", false, false),
            ("a?c", "abc", false, true),
            ("a?c", "ac", false, false),
            ("*a*b*", "xxaxxbxx", false, true),
            ("", "", false, true),
        ];
        for (p, t, ic, want) in cases {
            assert_eq!(wildcard(p, t, *ic), *want, "{p} vs {t}");
        }
    }

    fn role(managed: &[&str], inline: Value) -> RoleRec {
        RoleRec {
            name: "r".into(),
            arn: "arn:aws:iam::123456789012:role/r".into(),
            trust_policy: json!({}),
            managed_policies: managed.iter().map(|s| s.to_string()).collect(),
            inline_policies: vec![("p".into(), inline)],
            tags: Tags::new(),
            permissions_boundary: None,
        }
    }

    #[test]
    fn managed_and_inline_policies_are_evaluated_deny_wins() {
        let r = role(
            &["arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"],
            json!({ "Statement": [
                { "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::is-x/*" },
                { "Effect": "Deny", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::is-x/secret/*" },
                { "Effect": "Allow", "Action": "ecr:BatchGetImage", "Resource": "*", "Condition": { "Bool": { "aws:SecureTransport": "true" } } }
            ]}),
        );
        assert!(r.allows("s3:GetObject", "arn:aws:s3:::sagemaker-scripts/on_create.sh"));
        assert!(r.allows("s3:ListBucket", "arn:aws:s3:::sagemaker-scripts"));
        assert!(r.allows("s3:GetObject", "arn:aws:s3:::is-x/lifecycle/on_create.sh"));
        assert!(!r.allows("s3:GetObject", "arn:aws:s3:::is-x/secret/k"));
        assert!(!r.allows("s3:GetObject", "arn:aws:s3:::other/k"));
        assert!(!r.allows("ecr:BatchGetImage", "*"), "conditional statements are not assumed to apply");
        assert_eq!(
            r.missing(&[("ec2:CreateNetworkInterface", "*"), ("s3:GetObject", "arn:aws:s3:::sagemaker-a/b")]),
            ["ec2:CreateNetworkInterface"]
        );
    }
}
