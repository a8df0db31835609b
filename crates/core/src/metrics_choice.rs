//! [`ClusterMetrics`]: where a real cluster's GPU metrics are read, chosen per cluster: its
//! Amazon Managed Service for Prometheus workspace ([`AmpMetrics`]) when HyperPod's
//! observability add-on is on and names one, else the fallback source (the DCGM exporters
//! through the pod proxy).
//!
//! # Guarantees
//!
//! - **The real state decides**: the add-on as EKS describes it (on unless `DELETING` or
//!   failed) and the workspace of its configuration values (`ampWorkspace.arn`, the value
//!   `workflow::observability` installs it with), not what InstantStart last asked for. The
//!   choice is kept [`CHOICE_TTL`] per EKS cluster, so a read costs no DescribeAddon while a
//!   UI polls.
//! - A DescribeAddon that fails (e.g. a control plane without `eks:DescribeAddon`) falls back to
//!   the exporters rather than failing the read (logged at debug).
//! - The view's `origin` says which source answered (`amp`, or the fallback's).

use crate::amp_metrics::AmpMetrics;
use crate::provider::{
    AwsCloud, EksAddon, KubeApi, KubeTarget, MetricsSource, MetricsWindow, PrometheusQuery, ProviderError,
    ResourceState, SeriesSet,
};
use crate::workflow::observability::OBSERVABILITY_ADDON;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a cluster's choice is kept.
pub const CHOICE_TTL: Duration = Duration::from_secs(60);
/// EKS clusters whose choice is kept at most (the oldest choice is dropped beyond).
const MAX_CHOICES: usize = 1024;

/// The AMP workspace an observability add-on writes to, `(region, workspace id)`, when the add-on
/// is on and its configuration names one (`ampWorkspace.arn`,
/// `arn:aws:aps:<region>:<account>:workspace/<id>`).
pub fn amp_workspace_of(addon: Option<&EksAddon>) -> Option<(String, String)> {
    let a = addon?;
    if matches!(a.state, ResourceState::Deleting | ResourceState::Failed { .. }) {
        return None;
    }
    let arn = a.configuration_values.as_ref()?.pointer("/ampWorkspace/arn")?.as_str()?;
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", _, "aps", region, _, resource] if !region.is_empty() => {
            let id = resource.strip_prefix("workspace/")?;
            (!id.is_empty()).then(|| (region.to_string(), id.to_string()))
        }
        _ => None,
    }
}

type Choice = Option<(String, String)>;

/// Picks a cluster's metrics source (see the module docs).
pub struct ClusterMetrics {
    aws: Arc<dyn AwsCloud>,
    prom: Arc<dyn PrometheusQuery>,
    kube: Arc<dyn KubeApi>,
    fallback: Arc<dyn MetricsSource>,
    choices: Mutex<HashMap<(String, String), (Instant, Choice)>>,
}

impl std::fmt::Debug for ClusterMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMetrics").finish_non_exhaustive()
    }
}

impl ClusterMetrics {
    pub fn new(
        aws: Arc<dyn AwsCloud>,
        prom: Arc<dyn PrometheusQuery>,
        kube: Arc<dyn KubeApi>,
        fallback: Arc<dyn MetricsSource>,
    ) -> Self {
        ClusterMetrics { aws, prom, kube, fallback, choices: Mutex::new(HashMap::new()) }
    }

    /// The workspace the cluster of `target` is read from, if any (kept [`CHOICE_TTL`]).
    pub async fn workspace_for(&self, target: &KubeTarget) -> Choice {
        let key = (target.region.clone(), target.eks_cluster.clone());
        let now = Instant::now();
        if let Some((at, c)) = self.lock().get(&key)
            && now.duration_since(*at) < CHOICE_TTL
        {
            return c.clone();
        }
        let choice = match self.aws.describe_addon(&target.region, &target.eks_cluster, OBSERVABILITY_ADDON).await {
            Ok(a) => amp_workspace_of(a.as_ref()),
            Err(e) => {
                tracing::debug!(error = %e, "metrics: the observability add-on could not be read; using the exporters");
                None
            }
        };
        let mut choices = self.lock();
        if choices.len() >= MAX_CHOICES && !choices.contains_key(&key) {
            let oldest = choices.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                choices.remove(&k);
            }
        }
        choices.insert(key, (now, choice.clone()));
        choice
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), (Instant, Choice)>> {
        self.choices.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn source_for(&self, target: &KubeTarget) -> Arc<dyn MetricsSource> {
        match self.workspace_for(target).await {
            Some((region, id)) => Arc::new(AmpMetrics::new(self.prom.clone(), self.kube.clone(), region, id)),
            None => self.fallback.clone(),
        }
    }
}

/// Stamps the set with the origin of the source that answered.
fn stamped(source: &dyn MetricsSource, mut set: SeriesSet) -> SeriesSet {
    set.origin.get_or_insert_with(|| source.origin().to_string());
    set
}

#[async_trait]
impl MetricsSource for ClusterMetrics {
    fn origin(&self) -> &'static str {
        self.fallback.origin()
    }

    async fn node_metrics(
        &self,
        target: &KubeTarget,
        node: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError> {
        let source = self.source_for(target).await;
        Ok(stamped(source.as_ref(), source.node_metrics(target, node, window).await?))
    }

    async fn job_metrics(
        &self,
        target: &KubeTarget,
        namespace: &str,
        job: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError> {
        let source = self.source_for(target).await;
        Ok(stamped(source.as_ref(), source.job_metrics(target, namespace, job, window).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn addon(state: ResourceState, values: Option<serde_json::Value>) -> EksAddon {
        EksAddon {
            name: OBSERVABILITY_ADDON.into(),
            version: "v1.0.0-eksbuild.1".into(),
            state,
            tags: Default::default(),
            health_issues: vec![],
            configuration_values: values,
        }
    }

    #[test]
    fn the_workspace_is_the_one_an_add_on_that_is_on_writes_to() {
        let arn = "arn:aws:aps:us-west-2:111122223333:workspace/ws-1234abcd-12ab-34cd-56ef-1234567890ab";
        let values = Some(json!({ "ampWorkspace": { "arn": arn, "prometheusEndpoint": "https://x" } }));
        let want = Some(("us-west-2".to_string(), "ws-1234abcd-12ab-34cd-56ef-1234567890ab".to_string()));
        let failed = ResourceState::Failed { reason: "x".into() };
        let table: Vec<(Option<EksAddon>, Choice)> = vec![
            (None, None),
            (Some(addon(ResourceState::Active, values.clone())), want.clone()),
            (Some(addon(ResourceState::Creating, values.clone())), want.clone()),
            (Some(addon(ResourceState::Updating, values.clone())), want),
            (Some(addon(ResourceState::Deleting, values.clone())), None),
            (Some(addon(failed, values)), None),
            (Some(addon(ResourceState::Active, None)), None),
            (Some(addon(ResourceState::Active, Some(json!({ "ampWorkspace": { "arn": "not-an-arn" } })))), None),
            (
                Some(addon(
                    ResourceState::Active,
                    Some(json!({ "ampWorkspace": { "arn": "arn:aws:aps:r:1:rulegroup/x" } })),
                )),
                None,
            ),
        ];
        for (a, want) in table {
            assert_eq!(amp_workspace_of(a.as_ref()), want, "{a:?}");
        }
    }
}
