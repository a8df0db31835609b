//! Steps that install and remove the pinned Helm charts ([`PINNED_CHARTS`]): `chart:<release>`.
//!
//! Like every step they observe before they submit: a release already deployed at the pinned
//! chart version is adopted, a release still being worked on by Helm is waited for, anything
//! else (absent, failed, another version) is installed or upgraded with `upgrade --install`,
//! which is idempotent. A same-named release of a different chart is not touched.

use crate::engine::{Observation, Progress, StepContext, StepError, StepExecutor};
use crate::operation::ResourceRef;
use crate::provider::{HelmRelease, HelmReleases, KubeTarget, PinnedChart, ProviderErrorKind, ReleaseStatus};
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;

/// Step-key prefix of chart steps.
pub const CHART_STEP_PREFIX: &str = "chart:";

/// The step key installing or removing `chart`.
pub fn chart_step_key(chart: &PinnedChart) -> String {
    format!("{CHART_STEP_PREFIX}{}", chart.release)
}

fn resource(chart: &PinnedChart) -> ResourceRef {
    ResourceRef { kind: "helm-release".into(), id: format!("{}/{}", chart.namespace, chart.release), arn: None }
}

fn status_word(r: &HelmRelease) -> String {
    serde_json::to_value(&r.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// Ensures a pinned chart is deployed at its version.
pub struct EnsureChart {
    pub helm: Arc<dyn HelmReleases>,
    pub target: KubeTarget,
    pub chart: PinnedChart,
}

#[async_trait]
impl StepExecutor for EnsureChart {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let c = &self.chart;
        Ok(match self.helm.get_release(&self.target, c.namespace, c.release).await? {
            Some(r) if r.chart != c.chart => Observation::Foreign {
                reason: format!(
                    "Helm release {}/{} exists but installs chart {} {}, not {}; InstantStart will not replace it. \
                     Uninstall it, then retry this step",
                    c.namespace, c.release, r.chart, r.version, c.chart
                ),
            },
            Some(r) if r.is_deployed(&c.chart_ref()) || (r.status.is_pending() && r.version == c.version) => {
                Observation::Exists(resource(c))
            }
            _ => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.helm.install_or_upgrade(&self.target, &self.chart.spec_for(&self.target.region)).await?;
        Ok(resource(&self.chart))
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let c = &self.chart;
        Ok(match self.helm.get_release(&self.target, c.namespace, c.release).await? {
            None => Progress::Waiting { detail: format!("Helm release {}: not recorded yet", c.release) },
            Some(r) if r.is_deployed(&c.chart_ref()) => Progress::Done(json!({
                "release": r.name,
                "namespace": r.namespace,
                "chart": r.chart,
                "version": r.version,
                "revision": r.revision,
            })),
            Some(r) if r.status == ReleaseStatus::Failed => Progress::Failed {
                reason: format!("Helm release {} ({} {}) failed: {}", r.name, r.chart, r.version, r.description),
            },
            Some(r) => Progress::Waiting {
                detail: format!("Helm release {} ({} {}): {}", r.name, r.chart, r.version, status_word(&r)),
            },
        })
    }
}

/// Uninstalls a pinned chart's release; absent counts as done. A same-named release of another
/// chart is left alone.
pub struct RemoveChart {
    pub helm: Arc<dyn HelmReleases>,
    pub target: KubeTarget,
    pub chart: PinnedChart,
}

#[async_trait]
impl StepExecutor for RemoveChart {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let c = &self.chart;
        let found = match self.helm.get_release(&self.target, c.namespace, c.release).await {
            // No cluster (its EKS control plane is already gone): no release either.
            Err(e) if e.kind == ProviderErrorKind::NotFound => None,
            other => other?,
        };
        Ok(match found {
            None => Observation::Exists(resource(c)),
            Some(r) if r.status == ReleaseStatus::Uninstalling => Observation::Exists(resource(c)),
            Some(r) if r.chart != c.chart => Observation::Foreign {
                reason: format!(
                    "Helm release {}/{} installs chart {}, not {}; it is left alone",
                    c.namespace, c.release, r.chart, c.chart
                ),
            },
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let c = &self.chart;
        self.helm.uninstall(&self.target, c.namespace, c.release).await?;
        Ok(resource(c))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let c = &self.chart;
        Ok(match self.helm.get_release(&self.target, c.namespace, c.release).await? {
            None => Progress::Done(json!({ "removed": r.id })),
            Some(rel) => Progress::Waiting { detail: format!("Helm release {}: {}", rel.name, status_word(&rel)) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::OperationId;
    use crate::provider::{KUBERAY_OPERATOR, ProviderError, ReleaseSpec, validate_release};
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Releases in memory; every install makes a new revision, as Helm does.
    #[derive(Default)]
    struct Releases {
        map: Mutex<BTreeMap<(String, String), HelmRelease>>,
        installs: Mutex<u32>,
    }

    #[async_trait]
    impl HelmReleases for Releases {
        async fn get_release(
            &self,
            _t: &KubeTarget,
            ns: &str,
            release: &str,
        ) -> Result<Option<HelmRelease>, ProviderError> {
            Ok(self.map.lock().unwrap().get(&(ns.to_string(), release.to_string())).cloned())
        }
        async fn install_or_upgrade(&self, _t: &KubeTarget, spec: &ReleaseSpec) -> Result<HelmRelease, ProviderError> {
            validate_release(spec)?;
            *self.installs.lock().unwrap() += 1;
            let mut map = self.map.lock().unwrap();
            let key = (spec.namespace.clone(), spec.release.clone());
            let revision = map.get(&key).map_or(1, |r| r.revision + 1);
            let r = HelmRelease {
                name: spec.release.clone(),
                namespace: spec.namespace.clone(),
                chart: spec.chart.chart.clone(),
                version: spec.chart.version.clone(),
                status: ReleaseStatus::Deployed,
                revision,
                description: "Install complete".into(),
            };
            map.insert(key, r.clone());
            Ok(r)
        }
        async fn uninstall(&self, _t: &KubeTarget, ns: &str, release: &str) -> Result<(), ProviderError> {
            self.map.lock().unwrap().remove(&(ns.to_string(), release.to_string()));
            Ok(())
        }
    }

    fn target() -> KubeTarget {
        KubeTarget::new("us-west-2", "demo-eks")
    }

    async fn observe(step: &dyn StepExecutor) -> Observation {
        let id = OperationId("op-1".into());
        let (request, inputs) = (json!({}), BTreeMap::new());
        let cx = StepContext {
            operation_id: &id,
            step_key: "chart:kuberay-operator",
            idempotency_token: "tok",
            attempt: 1,
            request: &request,
            inputs: &inputs,
        };
        step.observe(&cx).await.unwrap()
    }

    async fn submit_and_poll(step: &dyn StepExecutor) -> Progress {
        let id = OperationId("op-1".into());
        let (request, inputs) = (json!({}), BTreeMap::new());
        let cx = StepContext {
            operation_id: &id,
            step_key: "k",
            idempotency_token: "t",
            attempt: 1,
            request: &request,
            inputs: &inputs,
        };
        let r = step.submit(&cx).await.unwrap();
        step.poll(&cx, &r).await.unwrap()
    }

    fn release(chart: &str, version: &str, status: ReleaseStatus) -> HelmRelease {
        HelmRelease {
            name: "kuberay-operator".into(),
            namespace: "kuberay-operator".into(),
            chart: chart.into(),
            version: version.into(),
            status,
            revision: 3,
            description: "Upgrade \"kuberay-operator\" failed: timed out".into(),
        }
    }

    fn seed(helm: &Releases, r: HelmRelease) {
        helm.map.lock().unwrap().insert((r.namespace.clone(), r.name.clone()), r);
    }

    #[tokio::test]
    async fn ensure_installs_once_then_adopts() {
        let helm = Arc::new(Releases::default());
        let step = EnsureChart { helm: helm.clone(), target: target(), chart: KUBERAY_OPERATOR };
        assert_eq!(observe(&step).await, Observation::Absent);
        let Progress::Done(out) = submit_and_poll(&step).await else { panic!("not done") };
        assert_eq!(out["version"], "1.4.2");
        assert_eq!(out["revision"], 1);
        assert!(matches!(observe(&step).await, Observation::Exists(r) if r.id == "kuberay-operator/kuberay-operator"));
        assert_eq!(*helm.installs.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn ensure_upgrades_other_versions_and_failed_releases_refuses_other_charts() {
        let helm = Arc::new(Releases::default());
        let step = EnsureChart { helm: helm.clone(), target: target(), chart: KUBERAY_OPERATOR };
        seed(&helm, release("kuberay-operator", "1.1.1", ReleaseStatus::Deployed));
        assert_eq!(observe(&step).await, Observation::Absent);
        let Progress::Done(out) = submit_and_poll(&step).await else { panic!("not done") };
        assert_eq!((out["version"].as_str(), out["revision"].as_u64()), (Some("1.4.2"), Some(4)));

        seed(&helm, release("kuberay-operator", "1.4.2", ReleaseStatus::Failed));
        assert_eq!(observe(&step).await, Observation::Absent);
        seed(&helm, release("kuberay-operator", "1.4.2", ReleaseStatus::PendingInstall));
        assert!(matches!(observe(&step).await, Observation::Exists(_)));
        seed(&helm, release("something-else", "2.0.0", ReleaseStatus::Deployed));
        assert!(matches!(observe(&step).await, Observation::Foreign { reason } if reason.contains("something-else")));
    }

    #[tokio::test]
    async fn poll_reports_failure_with_helms_description_and_waits_while_pending() {
        let helm = Arc::new(Releases::default());
        let step = EnsureChart { helm: helm.clone(), target: target(), chart: KUBERAY_OPERATOR };
        let id = OperationId("op".into());
        let (request, inputs) = (json!({}), BTreeMap::new());
        let cx = StepContext {
            operation_id: &id,
            step_key: "k",
            idempotency_token: "t",
            attempt: 1,
            request: &request,
            inputs: &inputs,
        };
        let r = resource(&KUBERAY_OPERATOR);
        assert!(matches!(step.poll(&cx, &r).await.unwrap(), Progress::Waiting { .. }));
        seed(&helm, release("kuberay-operator", "1.4.2", ReleaseStatus::PendingUpgrade));
        assert!(
            matches!(step.poll(&cx, &r).await.unwrap(), Progress::Waiting { detail } if detail.contains("pending-upgrade"))
        );
        seed(&helm, release("kuberay-operator", "1.4.2", ReleaseStatus::Failed));
        assert!(
            matches!(step.poll(&cx, &r).await.unwrap(), Progress::Failed { reason } if reason.contains("timed out"))
        );
    }

    #[tokio::test]
    async fn remove_uninstalls_and_absent_is_done() {
        let helm = Arc::new(Releases::default());
        let step = RemoveChart { helm: helm.clone(), target: target(), chart: KUBERAY_OPERATOR };
        assert!(matches!(observe(&step).await, Observation::Exists(_)));
        seed(&helm, release("kuberay-operator", "1.4.2", ReleaseStatus::Deployed));
        assert_eq!(observe(&step).await, Observation::Absent);
        assert!(matches!(submit_and_poll(&step).await, Progress::Done(_)));
        assert!(helm.map.lock().unwrap().is_empty());
        seed(&helm, release("other", "1.0.0", ReleaseStatus::Deployed));
        assert!(matches!(observe(&step).await, Observation::Foreign { .. }));
    }

    /// A cluster whose API is already gone (NotFound) has no release left to remove.
    struct NoCluster;
    #[async_trait]
    impl HelmReleases for NoCluster {
        async fn get_release(&self, _t: &KubeTarget, _n: &str, _r: &str) -> Result<Option<HelmRelease>, ProviderError> {
            Err(ProviderError::not_found("helm:status", "EKS cluster demo-eks not found"))
        }
        async fn install_or_upgrade(&self, _t: &KubeTarget, _s: &ReleaseSpec) -> Result<HelmRelease, ProviderError> {
            Err(ProviderError::not_found("helm:upgrade", "EKS cluster demo-eks not found"))
        }
        async fn uninstall(&self, _t: &KubeTarget, _n: &str, _r: &str) -> Result<(), ProviderError> {
            Err(ProviderError::not_found("helm:uninstall", "EKS cluster demo-eks not found"))
        }
    }

    #[tokio::test]
    async fn removing_from_a_deleted_cluster_is_done_and_installing_there_is_an_error() {
        let remove = RemoveChart { helm: Arc::new(NoCluster), target: target(), chart: KUBERAY_OPERATOR };
        assert!(matches!(observe(&remove).await, Observation::Exists(_)));
        let ensure = EnsureChart { helm: Arc::new(NoCluster), target: target(), chart: KUBERAY_OPERATOR };
        let id = OperationId("op".into());
        let (request, inputs) = (json!({}), BTreeMap::new());
        let cx = StepContext {
            operation_id: &id,
            step_key: "k",
            idempotency_token: "t",
            attempt: 1,
            request: &request,
            inputs: &inputs,
        };
        assert!(
            matches!(ensure.observe(&cx).await, Err(StepError::Provider(e)) if e.kind == ProviderErrorKind::NotFound)
        );
    }

    #[test]
    fn step_keys() {
        assert_eq!(chart_step_key(&KUBERAY_OPERATOR), "chart:kuberay-operator");
    }
}
