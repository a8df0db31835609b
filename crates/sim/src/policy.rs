//! A small IAM policy evaluator over the roles the simulated account stores: does a role's
//! identity policy allow `action` on `resource`?
//!
//! Evaluated from what the role really holds ([`crate::world::RoleRec`]): its inline policies
//! and the managed policies the simulator knows the documents of ([`managed_policy`]). An
//! explicit `Deny` wins over any `Allow`; `Action`/`Resource` are matched with IAM's wildcards
//! (`*` any run of characters, `?` one character; actions case-insensitively).
//!
//! Conditions: `StringEquals` and `StringLike` on the keys the request context carries
//! ([`RequestContext`]: `aws:PrincipalAccount` always, `s3:ResourceAccount` on S3 calls), with
//! the policy variable `${aws:PrincipalAccount}` substituted in values (IAM user guide,
//! `reference_policies_variables`). Any other operator or key makes the statement not apply,
//! so it never grants more than AWS would. `NotAction`/`NotResource`, permission boundaries and
//! SCPs are not modelled.

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

/// The condition keys of one request: what a statement's `Condition` is evaluated against.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestContext {
    keys: Vec<(&'static str, String)>,
}

impl RequestContext {
    /// `s3:ResourceAccount`: the account that owns the bucket the call names (IAM user guide,
    /// `reference_policies_condition-keys`, and S3's `amazon-s3-policy-keys`).
    pub(crate) fn s3_resource_account(account: &str) -> Self {
        RequestContext { keys: vec![("s3:ResourceAccount", account.to_string())] }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.keys.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
    }
}

/// Whether every condition of `stmt` holds in `cx` (no `Condition` = it holds).
fn conditions_hold(stmt: &Value, cx: &RequestContext) -> bool {
    let Some(cond) = stmt.get("Condition") else { return true };
    let Some(ops) = cond.as_object() else { return false };
    ops.iter().all(|(op, keys)| {
        let like = match op.as_str() {
            "StringEquals" => false,
            "StringLike" => true,
            _ => return false,
        };
        let Some(keys) = keys.as_object() else { return false };
        keys.iter().all(|(key, wanted)| {
            let Some(actual) = cx.get(key) else { return false };
            strings(Some(wanted)).iter().any(|w| {
                let w = match cx.get("aws:PrincipalAccount") {
                    Some(account) => w.replace("${aws:PrincipalAccount}", account),
                    None => w.to_string(),
                };
                if like { wildcard(&w, actual, false) } else { w == actual }
            })
        })
    })
}

/// Whether `stmt` names `action` on `resource` and its conditions hold (ignoring its effect).
fn matches(stmt: &Value, action: &str, resource: &str, cx: &RequestContext) -> bool {
    strings(stmt.get("Action")).iter().any(|a| wildcard(a, action, true))
        && strings(stmt.get("Resource")).iter().any(|r| wildcard(r, resource, false))
        && conditions_hold(stmt, cx)
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
        self.allows_in(action, resource, RequestContext::default())
    }

    /// [`RoleRec::allows`] for a request with the condition keys of `cx` (the role's own
    /// account is added as `aws:PrincipalAccount`).
    pub(crate) fn allows_in(&self, action: &str, resource: &str, mut cx: RequestContext) -> bool {
        if let Some(account) = self.arn.split(':').nth(4) {
            cx.keys.push(("aws:PrincipalAccount", account.to_string()));
        }
        let managed: Vec<Value> = self.managed_policies.iter().filter_map(|a| managed_policy(a)).collect();
        let docs: Vec<&Value> = self.inline_policies.iter().map(|(_, d)| d).chain(managed.iter()).collect();
        let stmts: Vec<&Value> = docs.iter().flat_map(|d| statements(d)).collect();
        let effect = |s: &Value| s.get("Effect").and_then(Value::as_str).unwrap_or_default().to_string();
        if stmts.iter().any(|s| effect(s) == "Deny" && matches(s, action, resource, &cx)) {
            return false;
        }
        stmts.iter().any(|s| effect(s) == "Allow" && matches(s, action, resource, &cx))
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
        assert!(!r.allows("ecr:BatchGetImage", "*"), "conditions the simulator does not model never apply");
        assert_eq!(
            r.missing(&[("ec2:CreateNetworkInterface", "*"), ("s3:GetObject", "arn:aws:s3:::sagemaker-a/b")]),
            ["ec2:CreateNetworkInterface"]
        );
    }

    /// Data-driven: the bucket-owner condition InstantStart's bucket-scoped role policies carry.
    #[test]
    fn the_resource_account_condition_holds_only_for_the_roles_own_account() {
        let r = role(
            &[],
            json!({ "Statement": [
                { "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::is-x/*",
                  "Condition": { "StringEquals": { "s3:ResourceAccount": "${aws:PrincipalAccount}" } } },
                { "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::is-x",
                  "Condition": { "StringLike": { "s3:ResourceAccount": "1234*" } } }
            ]}),
        );
        let cases: &[(&str, &str, Option<&str>, bool)] = &[
            ("s3:GetObject", "arn:aws:s3:::is-x/k", Some("123456789012"), true),
            ("s3:GetObject", "arn:aws:s3:::is-x/k", Some("999999999999"), false),
            ("s3:GetObject", "arn:aws:s3:::is-x/k", None, false),
            ("s3:ListBucket", "arn:aws:s3:::is-x", Some("123456789012"), true),
            ("s3:ListBucket", "arn:aws:s3:::is-x", Some("999999999999"), false),
        ];
        for (action, resource, account, want) in cases {
            let cx = account.map(RequestContext::s3_resource_account).unwrap_or_default();
            assert_eq!(r.allows_in(action, resource, cx), *want, "{action} {resource} {account:?}");
        }
    }
}
