//! Helm releases in the simulated clusters ([`HelmReleases`] for [`SimCloud`]).
//!
//! A release is recorded in its cluster's [`KubeWorld`]; `install_or_upgrade` validates the spec
//! like the real provider, starts a new revision in `pending-install` / `pending-upgrade` and
//! the revision becomes `deployed` [`timings::HELM_RELEASE`] later (or `failed` under the
//! `ResourceFails` fault). Uninstalling removes the record; an absent release is not an error.
//! A pinned chart's custom resources ([`super::kinds::CHART_RESOURCES`]) are served from the first deployed
//! revision of its release until the release is uninstalled ([`crds_installed`]), which deletes
//! every object of those kinds with the CRDs (unless a CRD for them was applied separately).
//! Uninstalling the AWS Load Balancer Controller's release while `LoadBalancer` Services have
//! their load balancers leaves those in the VPC ([`super::orphan_load_balancers`]).
//! API names for faults and counters: `helm:status`, `helm:upgrade`, `helm:uninstall`.

mod api;

use super::objects::check_target;
use crate::timings;
use crate::world::{HelmReleaseRec, KubeWorld};
use instantstart_core::provider::{
    HelmRelease, HelmReleases, KubeTarget, PinnedChart, ProviderError, ReleaseSpec, ReleaseStatus, validate_release,
};
use serde_json::Value;

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
        || kw.objects.contains_key(&crate::world::obj_key(
            "apps/v1",
            "Deployment",
            Some("kube-system"),
            LB_CONTROLLER_CHART,
        ))
}
