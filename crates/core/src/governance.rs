//! Task governance of a cluster as reconciled state: the spec a person or agent sends
//! ([`GovernanceSpec`]: priority classes, fair share, teams with quotas per instance type,
//! sharing strategy, borrow limit, preemption), its rules, the names it derives on both sides
//! (SageMaker entity names; the Kueue namespace, queue and priority class names the add-on
//! creates in the cluster), the real state read back ([`GovernanceState`]) and the explicit
//! diff between them ([`plan`]).
//!
//! # Guarantees
//!
//! - Every rule of a spec is checked here, for every face, before anything is read or called;
//!   each finding names its field (`teams[1].quotas[0].count`) and the rule.
//! - [`check_capacity`] refuses (422) quotas of an instance type the cluster does not have, or
//!   more instances (or accelerators) of it than the cluster's instance groups hold together.
//! - [`plan`] compares the desired spec with what SageMaker really holds; an equal state is an
//!   empty plan (no operation). Resources on the cluster that are not ours are refused, never
//!   adopted or changed.

use crate::diff::Plan;
use crate::instance_types::{InstanceSpecs, is_cluster_instance_type};
use crate::provider::{
    BORROW_LIMIT_RANGE, ComputeQuotaView, HyperPodCluster, MAX_PRIORITY_CLASSES, MAX_QUOTA_RESOURCES, PreemptTeamTasks,
    PriorityClass, QuotaConfig, QuotaResource, SchedulerConfigView, SchedulerPolicy, SharingStrategy, is_owned,
    team_name,
};
use crate::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

// The names the task governance add-on gives what it creates in the cluster, checked against
// AWS's documentation and the HyperPod CLI. AWS, "Example HyperPod task governance AWS CLI
// commands" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-cli.html):
// - "The namespace in this example, hyperpod-ns-test-team, is created in Kubernetes based on the
//   team name provided, test-team, when the compute allocation is created";
// - "they use one of the priority class names with the format priority-class-name-priority. In
//   this example, training-priority refers to the priority class named 'training'";
// - "include your queue name and priority class labels. For example, with the queue name
//   hyperpod-ns-team-name-localqueue [...] kueue.x-k8s.io/queue-name [...]
//   kueue.x-k8s.io/priority-class" (on the job object).
// The ClusterQueue `hyperpod-ns-<team>-clusterqueue`, the ResourceFlavors named after instance
// types and the labels `sagemaker.amazonaws.com/sagemaker-managed-queue: "true"` and
// `sagemaker.amazonaws.com/quota-allocation-id: <team>` of a team's namespace: aws/sagemaker-hyperpod-cli
// `src/sagemaker/hyperpod/cli/constants/command_constants.py` (`HYPERPOD_NAMESPACE_PREFIX`,
// `SAGEMAKER_MANAGED_LOCAL_QUEUE_SUFFIX`, `SAGEMAKER_MANAGED_CLUSTER_QUEUE_SUFFIX`),
// `commands/cluster.py` (finds a team's ClusterQueue by that name) and its integration tests.

/// The namespace the add-on creates for a team's workloads (`hyperpod-ns-<team>`).
pub fn team_namespace(team: &str) -> String {
    format!("hyperpod-ns-{team}")
}

/// The Kueue `LocalQueue` a team's jobs name (`kueue.x-k8s.io/queue-name`), in the team's
/// namespace.
pub fn team_queue(team: &str) -> String {
    format!("hyperpod-ns-{team}-localqueue")
}

/// The Kueue `ClusterQueue` of a team (its quota in the cluster).
pub fn team_cluster_queue(team: &str) -> String {
    format!("hyperpod-ns-{team}-clusterqueue")
}

/// The Kueue `WorkloadPriorityClass` of a priority class (`kueue.x-k8s.io/priority-class`).
pub fn priority_class_name(class: &str) -> String {
    format!("{class}-priority")
}

/// Label naming a workload's queue.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Label naming a workload's priority class.
pub const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// Label (`"true"`) the add-on puts on a team's namespace and queues.
pub const MANAGED_QUEUE_LABEL: &str = "sagemaker.amazonaws.com/sagemaker-managed-queue";
/// Label naming the team (compute quota) a namespace or queue belongs to.
pub const QUOTA_ALLOCATION_LABEL: &str = "sagemaker.amazonaws.com/quota-allocation-id";

/// Name of the cluster's scheduler config (one per cluster).
pub fn scheduler_config_name(cluster: &str) -> String {
    fit_entity_name(&format!("{cluster}-policy"), cluster)
}

/// Name of a team's compute quota.
pub fn quota_name(cluster: &str, team: &str) -> String {
    fit_entity_name(&format!("{cluster}-{team}"), &format!("{cluster}/{team}"))
}

/// `name` if it fits SageMaker's 63 characters, else cut and followed by a digest of `seed`.
fn fit_entity_name(name: &str, seed: &str) -> String {
    if name.len() <= crate::provider::ENTITY_NAME_MAX {
        return name.to_string();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(seed.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = crate::provider::ENTITY_NAME_MAX - 1 - hex.len();
    format!("{}-{hex}", name[..keep].trim_end_matches('-'))
}

/// One team: its guaranteed compute and how it shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeamSpec {
    /// Team name (1–40 lowercase letters, digits, hyphens); its jobs run in namespace
    /// `hyperpod-ns-<name>`.
    pub name: String,
    /// Guaranteed compute per instance type (0–15 entries, one per type).
    #[serde(default)]
    pub quotas: Vec<QuotaResource>,
    /// `LendAndBorrow` (default), `Lend` or `DontLend`.
    #[serde(default)]
    pub sharing: SharingStrategy,
    /// Percent of idle compute the team may borrow (1–500; only with `LendAndBorrow`; 50 when
    /// absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_limit: Option<u32>,
    /// `LowerPriority` (default): the team's higher-priority tasks preempt its lower ones.
    #[serde(default)]
    pub preempt_team_tasks: PreemptTeamTasks,
    /// 0–100: the team's share of idle compute when fair share is on.
    #[serde(default)]
    pub fair_share_weight: u8,
}

/// The desired task governance of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GovernanceSpec {
    /// On: the task governance add-on, the scheduler config and one quota per team. Off:
    /// every quota, the scheduler config and the add-on removed (send no teams).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Idle compute lent by fair-share weight (default) rather than first come, first served.
    #[serde(default = "yes")]
    pub fair_share: bool,
    /// Priority classes (at most 10), e.g. `{"name": "inference", "weight": 100}`.
    #[serde(default)]
    pub priority_classes: Vec<PriorityClass>,
    #[serde(default)]
    pub teams: Vec<TeamSpec>,
}

fn yes() -> bool {
    true
}

impl GovernanceSpec {
    /// Governance switched off.
    pub fn off() -> Self {
        GovernanceSpec { enabled: false, fair_share: true, priority_classes: vec![], teams: vec![] }
    }

    /// The same spec in a canonical order (classes and teams by name, quotas by type), so two
    /// equal states compare equal.
    pub fn canonical(mut self) -> Self {
        self.priority_classes.sort();
        self.teams.sort_by(|a, b| a.name.cmp(&b.name));
        for t in &mut self.teams {
            t.quotas.sort();
            if !t.sharing.borrows() {
                t.borrow_limit = None;
            }
        }
        if !self.enabled {
            self.fair_share = true;
        }
        self
    }

    pub fn team(&self, name: &str) -> Option<&TeamSpec> {
        self.teams.iter().find(|t| t.name == name)
    }

    pub fn priority_class(&self, name: &str) -> Option<&PriorityClass> {
        self.priority_classes.iter().find(|p| p.name == name)
    }

    /// The scheduler policy SageMaker is sent.
    pub fn policy(&self) -> SchedulerPolicy {
        SchedulerPolicy { priority_classes: self.priority_classes.clone(), fair_share: self.fair_share }
    }
}

impl TeamSpec {
    /// The quota SageMaker is sent for this team.
    pub fn quota_config(&self) -> QuotaConfig {
        QuotaConfig {
            team: self.name.clone(),
            resources: self.quotas.clone(),
            strategy: self.sharing,
            borrow_limit: self.borrow_limit.filter(|_| self.sharing.borrows()),
            preempt_team_tasks: self.preempt_team_tasks,
            fair_share_weight: self.fair_share_weight,
            enabled: true,
        }
    }

    fn from_quota(q: &QuotaConfig) -> Self {
        TeamSpec {
            name: q.team.clone(),
            quotas: q.resources.clone(),
            sharing: q.strategy,
            borrow_limit: q.borrow_limit,
            preempt_team_tasks: q.preempt_team_tasks,
            fair_share_weight: q.fair_share_weight,
        }
    }
}

impl Validate for GovernanceSpec {
    fn validate(&self, f: &mut Findings) {
        if !self.enabled {
            if !self.teams.is_empty() {
                f.push("teams", "governance off removes every team; send no teams with enabled: false");
            }
            if !self.priority_classes.is_empty() {
                f.push(
                    "priority_classes",
                    "governance off removes the priority classes; send none with enabled: false",
                );
            }
            return;
        }
        if self.priority_classes.len() > MAX_PRIORITY_CLASSES {
            f.push("priority_classes", format!("at most {MAX_PRIORITY_CLASSES} priority classes (SageMaker's limit)"));
        }
        let mut seen = BTreeSet::new();
        for (i, p) in self.priority_classes.iter().enumerate() {
            f.at_index("priority_classes", i, |f| {
                if let Err(e) = team_name(&p.name) {
                    f.push("name", format!("priority class name {e}"));
                }
                if p.weight > 100 {
                    f.push("weight", "must be 0-100");
                }
                if !seen.insert(p.name.clone()) {
                    f.push("name", format!("priority class {} is named twice", p.name));
                }
            });
        }
        let mut teams = BTreeSet::new();
        for (i, t) in self.teams.iter().enumerate() {
            f.at_index("teams", i, |f| {
                if let Err(e) = team_name(&t.name) {
                    f.push("name", format!("team name {e}"));
                }
                if !teams.insert(t.name.clone()) {
                    f.push("name", format!("team {} is named twice", t.name));
                }
                if t.fair_share_weight > 100 {
                    f.push("fair_share_weight", "must be 0-100");
                }
                match (t.sharing, t.borrow_limit) {
                    (SharingStrategy::LendAndBorrow, Some(l))
                        if !(BORROW_LIMIT_RANGE.0..=BORROW_LIMIT_RANGE.1).contains(&l) =>
                    {
                        f.push(
                            "borrow_limit",
                            format!(
                                "must be {}-{} (percent of idle compute)",
                                BORROW_LIMIT_RANGE.0, BORROW_LIMIT_RANGE.1
                            ),
                        );
                    }
                    (s, Some(_)) if !s.borrows() => {
                        f.push(
                            "borrow_limit",
                            format!("a team that does not borrow ({}) has no borrow limit", s.as_str()),
                        );
                    }
                    _ => {}
                }
                if t.quotas.len() > MAX_QUOTA_RESOURCES {
                    f.push(
                        "quotas",
                        format!("at most {MAX_QUOTA_RESOURCES} instance types per team (SageMaker's limit)"),
                    );
                }
                let mut types = BTreeSet::new();
                for (j, q) in t.quotas.iter().enumerate() {
                    f.at_index("quotas", j, |f| {
                        if !is_cluster_instance_type(&q.instance_type) {
                            f.push("instance_type", format!("{} is not a HyperPod instance type", q.instance_type));
                        }
                        if !types.insert(q.instance_type.clone()) {
                            f.push("instance_type", format!("{} is named twice for this team", q.instance_type));
                        }
                        match (q.count, q.accelerators) {
                            (None, None) => f.push("count", "give count (instances) or accelerators"),
                            (Some(_), Some(_)) => {
                                f.push("accelerators", "give count (instances) or accelerators, not both")
                            }
                            (Some(0), _) | (_, Some(0)) => f.push(
                                if q.count.is_some() { "count" } else { "accelerators" },
                                "must be at least 1 (leave the instance type out instead)",
                            ),
                            _ => {}
                        }
                    });
                }
            });
        }
    }
}

/// What SageMaker and EKS really hold for a cluster's task governance.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct GovernanceState {
    /// The task governance add-on is installed (not deleting or failed).
    pub addon: bool,
    /// The cluster's scheduler config, when there is one.
    pub scheduler_config: Option<SchedulerConfigView>,
    /// The cluster's compute quotas.
    pub quotas: Vec<ComputeQuotaView>,
}

impl GovernanceState {
    /// The state as a spec (governance is on when the add-on and our scheduler config are).
    pub fn spec(&self) -> GovernanceSpec {
        let Some(sc) = self.scheduler_config.as_ref().filter(|_| self.addon) else {
            let mut off = GovernanceSpec::off();
            off.teams = self.quotas.iter().map(|q| TeamSpec::from_quota(&q.config)).collect();
            return off.canonical();
        };
        GovernanceSpec {
            enabled: true,
            fair_share: sc.policy.fair_share,
            priority_classes: sc.policy.priority_classes.clone(),
            teams: self.quotas.iter().map(|q| TeamSpec::from_quota(&q.config)).collect(),
        }
        .canonical()
    }

    pub fn quota_of(&self, team: &str) -> Option<&ComputeQuotaView> {
        self.quotas.iter().find(|q| q.config.team == team)
    }
}

/// The team of a Kueue queue name (`hyperpod-ns-<team>-localqueue`), if it is one.
pub fn team_of_queue(queue: &str) -> Option<&str> {
    queue.strip_prefix("hyperpod-ns-")?.strip_suffix("-localqueue").filter(|t| !t.is_empty())
}

/// The priority class of a Kueue `WorkloadPriorityClass` name (`<class>-priority`), if it is one.
pub fn class_of_priority(label: &str) -> Option<&str> {
    label.strip_suffix("-priority").filter(|c| !c.is_empty())
}

/// What a job submission needs to know of its cluster's task governance, read from the real
/// state by the workload workflow (never taken from the client).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GovernanceFacts {
    /// The add-on and our scheduler config are there.
    pub enabled: bool,
    /// Teams with a compute quota.
    pub teams: Vec<String>,
    /// The scheduler config's priority classes.
    pub priority_classes: Vec<String>,
}

impl GovernanceFacts {
    pub fn of(state: &GovernanceState) -> Self {
        let spec = state.spec();
        GovernanceFacts {
            enabled: spec.enabled,
            teams: spec.teams.iter().map(|t| t.name.clone()).collect(),
            priority_classes: spec.priority_classes.iter().map(|p| p.name.clone()).collect(),
        }
    }
}

fn listed(names: &[String]) -> String {
    if names.is_empty() { "none".to_string() } else { names.join(", ") }
}

/// The rules of a job's `team` and `priority` that need no cluster (400): names as SageMaker
/// has them, a priority only with a team, and a team's job in the team's namespace
/// (`hyperpod-ns-<team>`, where the add-on creates its queue). Fields are `<prefix>team`,
/// `<prefix>priority` and `<prefix>namespace`.
pub fn check_job_queue_shape(
    f: &mut Findings,
    prefix: &str,
    team: Option<&str>,
    priority: Option<&str>,
    namespace: &str,
) {
    if let Some(t) = team {
        if let Err(e) = team_name(t) {
            f.push(&format!("{prefix}team"), format!("team name {e}"));
        } else if namespace != team_namespace(t) {
            f.push(
                &format!("{prefix}namespace"),
                format!(
                    "must be {} for team {t}: the task governance add-on creates the team's queue {} there",
                    team_namespace(t),
                    team_queue(t)
                ),
            );
        }
    }
    if let Some(p) = priority {
        if let Err(e) = team_name(p) {
            f.push(&format!("{prefix}priority"), format!("priority class name {e}"));
        }
        if team.is_none() {
            f.push(
                &format!("{prefix}priority"),
                "a priority orders a team's jobs in its queue: give team too (task governance)",
            );
        }
    }
}

/// The rules of a job's `team` and `priority` against the cluster's task governance (422):
/// governance is on, the team has a quota, the priority is one of the scheduler config's
/// classes. Findings list the valid names.
pub fn check_job_queue(
    f: &mut Findings,
    prefix: &str,
    cluster: &str,
    facts: &GovernanceFacts,
    team: Option<&str>,
    priority: Option<&str>,
) {
    let Some(t) = team else { return };
    if !facts.enabled {
        f.push_unprocessable(
            &format!("{prefix}team"),
            format!(
                "task governance is off in cluster {cluster}: there are no team queues; turn it on \
                 (PUT /api/clusters/{cluster}/governance) or leave team out"
            ),
        );
        return;
    }
    if !facts.teams.iter().any(|x| x == t) {
        f.push_unprocessable(
            &format!("{prefix}team"),
            format!("cluster {cluster} has no team {t}; its teams: {}", listed(&facts.teams)),
        );
    }
    if let Some(p) = priority
        && !facts.priority_classes.iter().any(|x| x == p)
    {
        f.push_unprocessable(
            &format!("{prefix}priority"),
            format!(
                "cluster {cluster} has no priority class {p}; its priority classes: {}",
                listed(&facts.priority_classes)
            ),
        );
    }
}

/// Where a team's jobs go in the cluster (what the add-on creates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TeamPlacement {
    pub team: String,
    /// `hyperpod-ns-<team>`.
    pub namespace: String,
    /// The Kueue LocalQueue jobs name (`kueue.x-k8s.io/queue-name`).
    pub queue: String,
    /// SageMaker's status of the team's compute quota (`Created`, `Updating`, …).
    pub status: String,
}

/// Task governance as it really is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GovernanceView {
    pub cluster: String,
    /// The same shape PUT takes: send it back changed.
    pub governance: GovernanceSpec,
    /// The EKS add-on that installs Kueue (`amazon-sagemaker-hyperpod-taskgovernance`).
    pub addon: String,
    pub addon_installed: bool,
    /// SageMaker's status of the scheduler config, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_config_status: Option<String>,
    /// Whether the scheduler config and every quota are InstantStart's (false: someone else
    /// manages governance on this cluster, and PUT is refused).
    pub managed: bool,
    pub teams: Vec<TeamPlacement>,
    /// The Kueue `WorkloadPriorityClass` of each priority class (`kueue.x-k8s.io/priority-class`).
    pub priority_class_labels: Vec<String>,
}

/// The explicit diff from `actual` to `desired`: `enabled`, `fair_share`,
/// `priority_classes` and one `teams.<name>` change per team added, changed or removed.
/// Refuses (422) a scheduler config or team quota on the cluster that InstantStart does not
/// own: it would be adopted or overwritten otherwise.
pub fn plan(cluster: &str, desired: &GovernanceSpec, actual: &GovernanceState) -> Result<Plan, ValidationError> {
    let mut f = Findings::new();
    if let Some(sc) = &actual.scheduler_config
        && !is_owned(&sc.tags, cluster)
    {
        f.push_unprocessable(
            "enabled",
            format!(
                "the HyperPod cluster already has scheduler config {} that InstantStart did not create (one per cluster); \
                 delete it in SageMaker first or leave governance to whoever manages it",
                sc.name
            ),
        );
    }
    for (i, t) in desired.teams.iter().enumerate() {
        if let Some(q) = actual.quota_of(&t.name)
            && !is_owned(&q.tags, cluster)
        {
            f.push_unprocessable(
                &format!("teams[{i}].name"),
                format!("team {} already has compute quota {} that InstantStart did not create", t.name, q.name),
            );
        }
    }
    f.finish()?;
    let desired = desired.clone().canonical();
    let have = actual.spec();
    let mut plan = Plan::new(cluster);
    plan.compare("enabled", &have.enabled, &desired.enabled);
    if desired.enabled {
        plan.compare("fair_share", &have.fair_share, &desired.fair_share);
        plan.compare("priority_classes", &have.priority_classes, &desired.priority_classes);
    }
    let names: BTreeSet<&str> =
        have.teams.iter().chain(desired.teams.iter()).map(|t| t.name.as_str()).collect::<BTreeSet<_>>();
    for name in names {
        plan.compare(&format!("teams.{name}"), &have.team(name), &desired.team(name));
    }
    Ok(plan)
}

/// The cluster's capacity per instance type: instances (target counts of its groups) and, where
/// the type's specs are known, accelerators.
pub fn capacity(live: &HyperPodCluster, specs: &InstanceSpecs) -> BTreeMap<String, (u32, Option<u32>)> {
    let mut out: BTreeMap<String, (u32, Option<u32>)> = BTreeMap::new();
    for g in &live.instance_groups {
        let e = out.entry(g.instance_type.clone()).or_insert((0, Some(0)));
        e.0 += g.target_count;
        e.1 = match (e.1, specs.get(&g.instance_type)) {
            (Some(a), Some(info)) => Some(a + g.target_count * info.accelerators),
            _ => None,
        };
    }
    out
}

/// Preflight: every quota names an instance type the cluster has, and the teams' guaranteed
/// compute of a type (instances, or accelerators) fits what the cluster's groups hold
/// together. Findings are 422 and name the field of the first quota that no longer fits.
pub fn check_capacity(
    spec: &GovernanceSpec,
    cluster: &str,
    capacity: &BTreeMap<String, (u32, Option<u32>)>,
) -> Result<(), ValidationError> {
    let mut f = Findings::new();
    let mut used: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for (i, t) in spec.teams.iter().enumerate() {
        for (j, q) in t.quotas.iter().enumerate() {
            let field = format!("teams[{i}].quotas[{j}]");
            let Some((instances, accelerators)) = capacity.get(&q.instance_type) else {
                f.push_unprocessable(
                    &format!("{field}.instance_type"),
                    format!("cluster {cluster} has no instance group of type {}", q.instance_type),
                );
                continue;
            };
            let u = used.entry(q.instance_type.as_str()).or_default();
            if let Some(c) = q.count {
                u.0 += c;
                if u.0 > *instances {
                    f.push_unprocessable(
                        &format!("{field}.count"),
                        format!(
                            "the teams' quotas of {} add up to {} instances; cluster {cluster} has {instances}",
                            q.instance_type, u.0
                        ),
                    );
                }
            }
            if let Some(a) = q.accelerators {
                u.1 += a;
                match accelerators {
                    Some(total) if u.1 > *total => f.push_unprocessable(
                        &format!("{field}.accelerators"),
                        format!(
                            "the teams' quotas of {} add up to {} accelerators; cluster {cluster} has {total}",
                            q.instance_type, u.1
                        ),
                    ),
                    Some(0) => f.push_unprocessable(
                        &format!("{field}.accelerators"),
                        format!("{} has no accelerators; give count (instances) instead", q.instance_type),
                    ),
                    _ => {}
                }
            }
        }
    }
    f.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ComputeQuotaView, ownership_tags};
    use serde_json::json;

    fn spec(v: serde_json::Value) -> GovernanceSpec {
        serde_json::from_value(v).unwrap()
    }

    fn two_teams() -> GovernanceSpec {
        spec(json!({
            "priority_classes": [{"name": "inference", "weight": 100}, {"name": "training", "weight": 50}],
            "teams": [
                {"name": "research", "quotas": [{"instance_type": "ml.g5.12xlarge", "count": 2}], "borrow_limit": 100},
                {"name": "prod", "quotas": [{"instance_type": "ml.g5.12xlarge", "accelerators": 4}], "sharing": "Lend"}
            ]
        }))
    }

    #[test]
    fn every_rule_names_its_field() {
        let cases: &[(serde_json::Value, &[&str])] = &[
            (json!({"teams": [{"name": "A"}]}), &["teams[0].name"]),
            (json!({"teams": [{"name": "a"}, {"name": "a"}]}), &["teams[1].name"]),
            (json!({"priority_classes": [{"name": "p", "weight": 101}]}), &["priority_classes[0].weight"]),
            (
                json!({"priority_classes": [{"name": "p", "weight": 1}, {"name": "p", "weight": 2}]}),
                &["priority_classes[1].name"],
            ),
            (json!({"teams": [{"name": "a", "sharing": "DontLend", "borrow_limit": 10}]}), &["teams[0].borrow_limit"]),
            (json!({"teams": [{"name": "a", "borrow_limit": 501}]}), &["teams[0].borrow_limit"]),
            (json!({"teams": [{"name": "a", "fair_share_weight": 101}]}), &["teams[0].fair_share_weight"]),
            (
                json!({"teams": [{"name": "a", "quotas": [{"instance_type": "ml.nope"}]}]}),
                &["teams[0].quotas[0].instance_type", "teams[0].quotas[0].count"],
            ),
            (
                json!({"teams": [{"name": "a", "quotas": [{"instance_type": "ml.g5.xlarge", "count": 1, "accelerators": 1}]}]}),
                &["teams[0].quotas[0].accelerators"],
            ),
            (
                json!({"teams": [{"name": "a", "quotas": [{"instance_type": "ml.g5.xlarge", "count": 0}]}]}),
                &["teams[0].quotas[0].count"],
            ),
            (json!({"enabled": false, "teams": [{"name": "a"}]}), &["teams"]),
        ];
        for (v, fields) in cases {
            let e = spec(v.clone()).check().unwrap_err();
            let got: Vec<&str> = e.findings.iter().map(|f| f.field.as_str()).collect();
            assert_eq!(&got, fields, "{v}");
        }
        assert!(two_teams().check().is_ok());
        assert!(GovernanceSpec::off().check().is_ok());
    }

    #[test]
    fn names_are_derived_within_sagemakers_limits() {
        assert_eq!(scheduler_config_name("demo"), "demo-policy");
        assert_eq!(quota_name("demo", "research"), "demo-research");
        let long = quota_name(&"c".repeat(40), &"t".repeat(40));
        assert!(crate::provider::entity_name(&long).is_ok(), "{long}");
        assert_ne!(long, quota_name(&"c".repeat(40), &format!("{}x", "t".repeat(39))));
        assert_eq!(team_queue("research"), "hyperpod-ns-research-localqueue");
        assert_eq!(team_namespace("research"), "hyperpod-ns-research");
        assert_eq!(priority_class_name("training"), "training-priority");
    }

    fn quota(cluster: &str, team: &TeamSpec, owned: bool) -> ComputeQuotaView {
        ComputeQuotaView {
            id: "abcdefabcdef".into(),
            arn: "arn".into(),
            name: quota_name(cluster, &team.name),
            cluster_arn: "c".into(),
            version: 1,
            status: "Created".into(),
            config: team.quota_config(),
            failure_reason: None,
            tags: if owned { ownership_tags(cluster, "op") } else { Default::default() },
        }
    }

    fn state_of(s: &GovernanceSpec, owned: bool) -> GovernanceState {
        GovernanceState {
            addon: true,
            scheduler_config: Some(SchedulerConfigView {
                id: "abcdefabcdef".into(),
                arn: "arn".into(),
                name: scheduler_config_name("demo"),
                cluster_arn: "c".into(),
                version: 1,
                status: "Created".into(),
                policy: s.policy(),
                failure_reason: None,
                tags: if owned { ownership_tags("demo", "op") } else { Default::default() },
            }),
            quotas: s.teams.iter().map(|t| quota("demo", t, owned)).collect(),
        }
    }

    #[test]
    fn the_plan_is_the_explicit_diff() {
        let want = two_teams();
        let from_nothing = plan("demo", &want, &GovernanceState::default()).unwrap();
        let fields: Vec<&str> = from_nothing.changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["enabled", "priority_classes", "teams.prod", "teams.research"]);
        let same = plan("demo", &want, &state_of(&want, true)).unwrap();
        assert!(same.is_noop(), "{}", same.render());
        let mut changed = want.clone();
        changed.teams[0].quotas[0].count = Some(1);
        changed.teams.pop();
        let p = plan("demo", &changed, &state_of(&want, true)).unwrap();
        let fields: Vec<&str> = p.changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["teams.prod", "teams.research"]);
        let off = plan("demo", &GovernanceSpec::off(), &state_of(&want, true)).unwrap();
        assert_eq!(off.changes[0].field, "enabled");
        let foreign = plan("demo", &want, &state_of(&want, false)).unwrap_err();
        assert_eq!(foreign.kind, crate::validate::ValidationKind::Unprocessable);
        assert_eq!(foreign.findings[0].field, "enabled");
        assert_eq!(foreign.findings[1].field, "teams[0].name");
    }

    /// (team, priority, namespace, fields refused).
    type ShapeCase<'a> = (Option<&'a str>, Option<&'a str>, &'a str, &'a [&'a str]);
    /// (facts, team, priority, fields refused, words of the first rule).
    type FactsCase<'a> = (&'a GovernanceFacts, Option<&'a str>, Option<&'a str>, &'a [&'a str], &'a str);

    #[test]
    fn a_jobs_team_and_priority_follow_the_clusters_governance() {
        let facts = GovernanceFacts::of(&state_of(&two_teams(), true));
        assert_eq!(facts.teams, ["prod", "research"]);
        let cases: &[ShapeCase] = &[
            (None, None, "default", &[]),
            (Some("research"), Some("training"), "hyperpod-ns-research", &[]),
            (Some("research"), None, "default", &["job.namespace"]),
            (Some("Research"), None, "hyperpod-ns-research", &["job.team"]),
            (None, Some("training"), "default", &["job.priority"]),
        ];
        for (team, priority, ns, fields) in cases {
            let mut f = Findings::new();
            check_job_queue_shape(&mut f, "job.", *team, *priority, ns);
            let got: Vec<String> =
                f.finish().err().map(|e| e.findings.iter().map(|x| x.field.clone()).collect()).unwrap_or_default();
            assert_eq!(&got, fields, "{team:?} {priority:?} {ns}");
        }
        let cases: &[FactsCase] = &[
            (&facts, Some("research"), Some("training"), &[], ""),
            (&facts, Some("nobody"), None, &["job.team"], "its teams: prod, research"),
            (&facts, Some("prod"), Some("urgent"), &["job.priority"], "its priority classes: inference, training"),
            (&GovernanceFacts::default(), Some("prod"), None, &["job.team"], "task governance is off"),
            (&GovernanceFacts::default(), None, None, &[], ""),
        ];
        for (facts, team, priority, fields, rule) in cases {
            let mut f = Findings::new();
            check_job_queue(&mut f, "job.", "demo", facts, *team, *priority);
            match f.finish() {
                Ok(()) => assert!(fields.is_empty(), "{team:?} {priority:?}"),
                Err(e) => {
                    assert_eq!(e.kind, crate::validate::ValidationKind::Unprocessable);
                    let got: Vec<&str> = e.findings.iter().map(|x| x.field.as_str()).collect();
                    assert_eq!(&got, fields);
                    assert!(e.findings[0].rule.contains(rule), "{}", e.findings[0].rule);
                }
            }
        }
        assert_eq!(team_of_queue("hyperpod-ns-research-localqueue"), Some("research"));
        assert_eq!(team_of_queue("other"), None);
        assert_eq!(class_of_priority("training-priority"), Some("training"));
    }

    #[test]
    fn quotas_must_fit_the_clusters_groups() {
        let cap = BTreeMap::from([("ml.g5.12xlarge".to_string(), (2u32, Some(8u32)))]);
        assert!(check_capacity(&two_teams(), "demo", &cap).is_ok());
        let mut over = two_teams();
        over.teams[1].quotas[0].accelerators = Some(9);
        over.teams[0].quotas[0].count = Some(3);
        over.teams[0].quotas.push(QuotaResource {
            instance_type: "ml.p5.48xlarge".into(),
            count: Some(1),
            accelerators: None,
        });
        let e = check_capacity(&over, "demo", &cap).unwrap_err();
        let fields: Vec<&str> = e.findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            ["teams[0].quotas[0].count", "teams[0].quotas[1].instance_type", "teams[1].quotas[0].accelerators"]
        );
        assert!(e.findings[0].rule.contains("3 instances; cluster demo has 2"), "{}", e.findings[0].rule);
    }
}
