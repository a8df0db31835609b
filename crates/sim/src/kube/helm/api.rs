//! `HelmReleases` for [`SimCloud`] (and the release listing the API server serves): each call
//! goes through the cloud's pipeline, then the rules of [`crate::kube::helm`].

use super::*;
use crate::cloud::SimCloud;
use crate::kube::kinds::{CHART_RESOURCES, chart_kind_served};
use crate::kube::serving;
use async_trait::async_trait;

impl crate::SimCloud {
    /// The values release `namespace/release` of EKS cluster `target` was last installed or
    /// upgraded with (`None`: no such release). Not an API call: for tests.
    pub fn helm_release_values(&self, target: &KubeTarget, namespace: &str, release: &str) -> Option<Value> {
        let inner = self.lock();
        let kw = inner.world.kube.get(&crate::base::rkey(&target.region, &target.eks_cluster))?;
        kw.helm_releases.get(&release_key(namespace, release)).map(|r| r.values.clone())
    }
}

#[async_trait]
impl HelmReleases for SimCloud {
    async fn get_release(
        &self,
        target: &KubeTarget,
        namespace: &str,
        release: &str,
    ) -> Result<Option<HelmRelease>, ProviderError> {
        const API: &str = "helm:status";
        self.read(API, |w, cx| {
            let wkey = check_target(w, API, target, cx.now)?;
            Ok(w.kube
                .get(&wkey)
                .and_then(|kw| kw.helm_releases.get(&release_key(namespace, release)))
                .map(|r| view(r, cx.now)))
        })
    }

    async fn install_or_upgrade(&self, target: &KubeTarget, spec: &ReleaseSpec) -> Result<HelmRelease, ProviderError> {
        const API: &str = "helm:upgrade";
        validate_release(spec)?;
        self.write(API, |w, cx| {
            let wkey = check_target(w, API, target, cx.now)?;
            let kw = w.kube.get_mut(&wkey).ok_or_else(|| ProviderError::not_found(API, "no Kubernetes API"))?;
            let key = release_key(&spec.namespace, &spec.release);
            let previous = kw.helm_releases.get(&key).map(|r| (r.revision, view(r, cx.now).status));
            if let Some((_, status)) = &previous
                && status.is_pending()
            {
                return Err(ProviderError::new(
                    API,
                    instantstart_core::provider::ProviderErrorKind::Conflict,
                    "UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress",
                ));
            }
            let rec = HelmReleaseRec {
                name: spec.release.clone(),
                namespace: spec.namespace.clone(),
                repository: spec.chart.source.describe(),
                chart: spec.chart.chart.clone(),
                version: spec.chart.version.clone(),
                values: spec.values.clone(),
                revision: previous.as_ref().map_or(1, |(rev, _)| rev + 1),
                started_at: cx.now,
                upgrade: matches!(previous, Some((_, ReleaseStatus::Deployed))),
                fails: cx.resource_fails.clone(),
            };
            let v = view(&rec, cx.now);
            kw.helm_releases.insert(key, rec);
            kw.resource_version += 1;
            Ok(v)
        })
    }

    async fn uninstall(&self, target: &KubeTarget, namespace: &str, release: &str) -> Result<(), ProviderError> {
        const API: &str = "helm:uninstall";
        self.write(API, |w, cx| {
            let wkey = check_target(w, API, target, cx.now)?;
            let key = release_key(namespace, release);
            // The controller goes and the Services stay: their load balancers stay in the VPC.
            if let Some(kw) = w.kube.get(&wkey)
                && lb_controller_running(kw, cx.now)
                && !lb_controller_running_without(kw, cx.now, Some(&key))
            {
                crate::kube::orphan_load_balancers(w, &wkey, cx.now, true);
            }
            if let Some(kw) = w.kube.get_mut(&wkey)
                && kw.helm_releases.remove(&key).is_some()
            {
                kw.resource_version += 1;
                drop_chart_objects(kw, namespace, release, cx.now);
            }
            Ok(())
        })
    }
}

/// After `release` was uninstalled: its chart's CRDs are gone, and with them every object of
/// their kinds (a ScaledObject's Deployment keeps the replicas it had).
fn drop_chart_objects(kw: &mut KubeWorld, namespace: &str, release: &str, now: f64) {
    let kinds: Vec<(&str, &str)> = CHART_RESOURCES
        .iter()
        .filter(|(c, ..)| c.namespace == namespace && c.release == release)
        .map(|(_, api_version, kind, ..)| (*api_version, *kind))
        .filter(|(api_version, kind)| !chart_kind_served(kw, api_version, kind, now))
        .collect();
    let doomed: Vec<String> = kw
        .objects
        .iter()
        .filter(|(_, r)| {
            let at = |p: &str| r.object.pointer(p).and_then(Value::as_str).unwrap_or_default();
            kinds.contains(&(at("/apiVersion"), at("/kind")))
        })
        .map(|(k, _)| k.clone())
        .collect();
    for key in doomed {
        if let Some(removed) = kw.objects.remove(&key) {
            serving::after_delete(kw, &removed, now);
        }
    }
}
