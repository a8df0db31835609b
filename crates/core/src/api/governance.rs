//! Task governance of a cluster: what SageMaker and EKS really hold (the add-on, the scheduler
//! config, the teams' quotas) as the same spec a change takes, with the Kueue names jobs use,
//! and the submission that sets the whole desired state. The rules and the diff live in
//! [`crate::governance`].
//!
//! # Guarantees
//!
//! - An unknown cluster is a `404` ([`super::clusters::resolve`]), a cluster without HyperPod a
//!   `422` on `cluster`.
//! - `managed` is true only when the scheduler config and every quota carry InstantStart's
//!   ownership tags for this cluster (a change is refused otherwise).

use super::clusters::resolve;
use super::submission::Submission;
use crate::engine::EngineError;
use crate::governance::{
    GovernanceSpec, GovernanceView, TeamPlacement, priority_class_name, team_namespace, team_queue,
};
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, TASK_GOVERNANCE_ADDON, is_owned};
use crate::store::Store;
use crate::workflow::day2::live_cluster;
use crate::workflow::governance::{SetGovernanceRequest, read_governance};

/// Task governance of `cluster` as it really is.
pub async fn get(store: &dyn Store, aws: &dyn AwsCloud, cluster: &str) -> Result<GovernanceView, EngineError> {
    let c = resolve(store, cluster)?;
    let rec = &c.record;
    let live = live_cluster(aws, rec, c.hyperpod()?).await?;
    let actual = read_governance(aws, rec, &live.arn).await?;
    let spec = actual.spec();
    let managed = actual.scheduler_config.iter().all(|s| is_owned(&s.tags, &rec.name))
        && actual.quotas.iter().all(|q| is_owned(&q.tags, &rec.name));
    Ok(GovernanceView {
        cluster: rec.name.clone(),
        addon: TASK_GOVERNANCE_ADDON.into(),
        addon_installed: actual.addon,
        scheduler_config_status: actual.scheduler_config.as_ref().map(|s| s.status.clone()),
        managed,
        teams: spec
            .teams
            .iter()
            .map(|t| TeamPlacement {
                team: t.name.clone(),
                namespace: team_namespace(&t.name),
                queue: team_queue(&t.name),
                status: actual.quota_of(&t.name).map(|q| q.status.clone()).unwrap_or_default(),
            })
            .collect(),
        priority_class_labels: spec.priority_classes.iter().map(|c| priority_class_name(&c.name)).collect(),
        governance: spec,
    })
}

/// Set the whole task governance of `cluster` to `governance`.
pub fn set(cluster: String, governance: GovernanceSpec) -> Submission {
    Submission::new(OperationKind::SetGovernance, &SetGovernanceRequest { cluster, governance, changes: None })
}
