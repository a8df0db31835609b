//! Helm releases in the simulated clusters ([`HelmReleases`] for [`SimCloud`]).
//!
//! A release is recorded in its cluster's [`KubeWorld`]; `install_or_upgrade` validates the spec
//! like the real provider, starts a new revision in `pending-install` / `pending-upgrade` and
//! the revision becomes `deployed` [`timings::HELM_RELEASE`] later (or `failed` under the
//! `ResourceFails` fault). Uninstalling removes the record; an absent release is not an error.
//! A pinned chart's custom resources ([`CHART_RESOURCES`]) are served from the first deployed
//! revision of its release until the release is uninstalled ([`crds_installed`]), which deletes
//! every object of those kinds with the CRDs (unless a CRD for them was applied separately).
//! Uninstalling the AWS Load Balancer Controller's release while `LoadBalancer` Services have
//! their load balancers leaves those in the VPC ([`super::orphan_load_balancers`]).
//! API names for faults and counters: `helm:status`, `helm:upgrade`, `helm:uninstall`.

use super::apiserver::CHART_RESOURCES;
use super::{KubeWorld, chart_kind_served, check_target, serving};
use crate::cloud::SimCloud;
use crate::timings;
use async_trait::async_trait;
use instantstart_core::provider::{
    HelmRelease, HelmReleases, KubeTarget, PinnedChart, ProviderError, ReleaseSpec, ReleaseStatus, validate_release,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A release as the simulated Helm stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HelmReleaseRec {
    pub name: String,
    pub namespace: String,
    /// Where the chart comes from ([`ChartSource::describe`](instantstart_core::provider::ChartSource::describe)):
    /// a repository URL, or `git@commit:subdir` of a vendored chart.
    pub repository: String,
    pub chart: String,
    pub version: String,
    pub values: Value,
    pub revision: u32,
    /// Simulated time the current revision was started.
    pub started_at: f64,
    /// Whether the previous revision was deployed (the new one is an upgrade).
    pub upgrade: bool,
    /// Set by the `ResourceFails` fault: the revision fails with this reason.
    pub fails: Option<String>,
}

pub(crate) fn release_key(namespace: &str, release: &str) -> String {
    format!("{namespace}/{release}")
}

fn view(r: &HelmReleaseRec, now: f64) -> HelmRelease {
    let settled = now >= r.started_at + timings::HELM_RELEASE;
    let (status, description) = match (&r.fails, settled) {
        (Some(reason), true) => (ReleaseStatus::Failed, format!("Release \"{}\" failed: {reason}", r.name)),
        (None, true) => {
            (ReleaseStatus::Deployed, if r.upgrade { "Upgrade complete" } else { "Install complete" }.to_string())
        }
        (_, false) if r.upgrade => (ReleaseStatus::PendingUpgrade, "Preparing upgrade".to_string()),
        (_, false) => (ReleaseStatus::PendingInstall, "Initial install underway".to_string()),
    };
    HelmRelease {
        name: r.name.clone(),
        namespace: r.namespace.clone(),
        chart: r.chart.clone(),
        version: r.version.clone(),
        status,
        revision: r.revision,
        description,
    }
}

/// Whether `chart`'s CRDs are in the cluster: its release (that chart, any version) has been
/// deployed — the current revision is, or it upgrades (or failed upgrading) a deployed one.
pub(crate) fn crds_installed(kw: &KubeWorld, chart: &PinnedChart, now: f64) -> bool {
    kw.helm_releases
        .get(&release_key(chart.namespace, chart.release))
        .is_some_and(|r| r.chart == chart.chart && (r.upgrade || view(r, now).status == ReleaseStatus::Deployed))
}

/// The releases whose current revision is deployed (or which upgrade a deployed one).
pub(crate) fn deployed_releases(kw: &KubeWorld, now: f64) -> impl Iterator<Item = &HelmReleaseRec> {
    kw.helm_releases.values().filter(move |r| r.upgrade || view(r, now).status == ReleaseStatus::Deployed)
}

/// Chart `aws-load-balancer-controller` (the AWS Load Balancer Controller).
pub(crate) const LB_CONTROLLER_CHART: &str = "aws-load-balancer-controller";

/// The Deployment a deployed release of the AWS Load Balancer Controller's chart runs
/// (`<release>` in the release's namespace, two replicas available, as the chart's defaults),
/// if `namespace/name` is one. The simulator plays the chart's controller: this Deployment is
/// what the `load_balancer` preflight reads, and [`lb_controller_running`] what provisions NLBs.
pub(crate) fn chart_deployment(kw: &KubeWorld, namespace: &str, name: &str, now: f64) -> Option<Value> {
    let r = deployed_releases(kw, now)
        .find(|r| r.chart == LB_CONTROLLER_CHART && r.namespace == namespace && r.name == name)?;
    let labels = serde_json::json!({ "app.kubernetes.io/name": LB_CONTROLLER_CHART, "app.kubernetes.io/instance": r.name,
                                     "app.kubernetes.io/managed-by": "Helm" });
    Some(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": r.name, "namespace": r.namespace, "labels": labels,
                      "annotations": { "meta.helm.sh/release-name": r.name, "meta.helm.sh/release-namespace": r.namespace } },
        "spec": { "replicas": 2, "selector": { "matchLabels": labels },
                  "template": { "metadata": { "labels": labels }, "spec": { "serviceAccountName": r.values.pointer("/serviceAccount/name").cloned().unwrap_or(Value::Null),
                      "containers": [{ "name": LB_CONTROLLER_CHART, "image": format!("public.ecr.aws/eks/aws-load-balancer-controller:v{}", r.version) }] } } },
        "status": { "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2 }
    }))
}

/// Whether an AWS Load Balancer Controller runs in the cluster: a deployed release of its chart,
/// or a Deployment `kube-system/aws-load-balancer-controller` applied by hand.
pub(crate) fn lb_controller_running(kw: &KubeWorld, now: f64) -> bool {
    lb_controller_running_without(kw, now, None)
}

/// [`lb_controller_running`] once release `without` (`namespace/release`) is gone.
fn lb_controller_running_without(kw: &KubeWorld, now: f64, without: Option<&str>) -> bool {
    deployed_releases(kw, now)
        .any(|r| r.chart == LB_CONTROLLER_CHART && Some(release_key(&r.namespace, &r.name).as_str()) != without)
        || kw.objects.contains_key(&super::obj_key("apps/v1", "Deployment", Some("kube-system"), LB_CONTROLLER_CHART))
}

impl crate::SimCloud {
    /// The values release `namespace/release` of EKS cluster `target` was last installed or
    /// upgraded with (`None`: no such release). Not an API call: for tests.
    pub fn helm_release_values(&self, target: &KubeTarget, namespace: &str, release: &str) -> Option<Value> {
        let inner = self.lock();
        let kw = inner.world.kube.get(&crate::world::rkey(&target.region, &target.eks_cluster))?;
        kw.helm_releases.get(&release_key(namespace, release)).map(|r| r.values.clone())
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
                super::orphan_load_balancers(w, &wkey, cx.now, true);
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
