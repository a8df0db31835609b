//! Helm releases: the dependencies that only ship as Helm charts.
//!
//! EKS add-ons are preferred (see `workflow::create_cluster::BASE_ADDONS`); a chart is used only
//! where no add-on exists, and then always at a pinned version from a fixed repository
//! ([`PINNED_CHARTS`]). The real implementation (`instantstart-k8s`) runs the `helm` binary with
//! structured arguments (never a shell) and `upgrade --install`, so installing twice is a
//! no-op; the simulator records releases in its world.

use super::{KubeTarget, ProviderError, ProviderErrorKind};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API name of Helm calls in provider errors.
pub const HELM_API: &str = "helm";

/// A chart at an exact version in a chart repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChartRef {
    /// `https://` URL of a classic chart repository (its `index.yaml`) or an `oci://` registry path.
    pub repository: String,
    pub chart: String,
    /// Exact chart version; never a range.
    pub version: String,
}

/// A release to install or upgrade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseSpec {
    pub chart: ChartRef,
    pub namespace: String,
    pub release: String,
    /// Chart values (a JSON object), handed to Helm as a values file.
    pub values: Value,
}

/// A chart InstantStart installs, with everything that makes the install reproducible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedChart {
    pub release: &'static str,
    pub namespace: &'static str,
    pub repository: &'static str,
    pub chart: &'static str,
    pub version: &'static str,
    /// What the chart provides, for step titles.
    pub provides: &'static str,
}

impl PinnedChart {
    pub fn chart_ref(&self) -> ChartRef {
        ChartRef { repository: self.repository.into(), chart: self.chart.into(), version: self.version.into() }
    }

    /// The release spec with the chart's default values.
    pub fn spec(&self) -> ReleaseSpec {
        ReleaseSpec {
            chart: self.chart_ref(),
            namespace: self.namespace.into(),
            release: self.release.into(),
            values: Value::Object(Default::default()),
        }
    }
}

/// The KubeRay operator (RayJob, RayCluster, RayService CRDs and their controller). There is no
/// EKS add-on for it; the chart comes from the KubeRay project's own Helm repository.
pub const KUBERAY_OPERATOR: PinnedChart = PinnedChart {
    release: "kuberay-operator",
    namespace: "kuberay-operator",
    repository: "https://ray-project.github.io/kuberay-helm/",
    chart: "kuberay-operator",
    version: "1.4.2",
    provides: "the KubeRay operator for RayJob, RayCluster and RayService",
};

/// Every chart the create-cluster pipeline installs (`chart:<release>` steps).
pub const PINNED_CHARTS: &[PinnedChart] = &[KUBERAY_OPERATOR];

/// The pinned chart installed as `release`, if any.
pub fn pinned_chart(release: &str) -> Option<&'static PinnedChart> {
    PINNED_CHARTS.iter().find(|c| c.release == release)
}

/// Helm's status of a release (`helm status -o json`, `.info.status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseStatus {
    Deployed,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
    Uninstalling,
    Uninstalled,
    Superseded,
    Failed,
    Unknown,
}

impl ReleaseStatus {
    /// Parses Helm's status word; anything unexpected is [`ReleaseStatus::Unknown`].
    pub fn parse(word: &str) -> Self {
        match word {
            "deployed" => ReleaseStatus::Deployed,
            "pending-install" => ReleaseStatus::PendingInstall,
            "pending-upgrade" => ReleaseStatus::PendingUpgrade,
            "pending-rollback" => ReleaseStatus::PendingRollback,
            "uninstalling" => ReleaseStatus::Uninstalling,
            "uninstalled" => ReleaseStatus::Uninstalled,
            "superseded" => ReleaseStatus::Superseded,
            "failed" => ReleaseStatus::Failed,
            _ => ReleaseStatus::Unknown,
        }
    }

    /// Whether Helm is still working on the release.
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            ReleaseStatus::PendingInstall
                | ReleaseStatus::PendingUpgrade
                | ReleaseStatus::PendingRollback
                | ReleaseStatus::Uninstalling
        )
    }
}

/// An installed release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HelmRelease {
    pub name: String,
    pub namespace: String,
    /// Chart name (without version).
    pub chart: String,
    /// Chart version of the current revision.
    pub version: String,
    pub status: ReleaseStatus,
    pub revision: u32,
    /// Helm's description of the last action (the error text of a failed one).
    pub description: String,
}

impl HelmRelease {
    /// Whether this release runs `chart` at exactly its version and is deployed.
    pub fn is_deployed(&self, chart: &ChartRef) -> bool {
        self.status == ReleaseStatus::Deployed && self.chart == chart.chart && self.version == chart.version
    }
}

/// Whether `s` is a usable release or namespace name (DNS-1123 label, at most 53 characters for
/// releases as Helm requires). Names never start with `-`, so they cannot be read as flags.
pub fn valid_release_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 53
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Checks a release spec before anything is run: names, exact version, repository scheme and a
/// JSON-object values document. The error names the field.
pub fn validate_release(spec: &ReleaseSpec) -> Result<(), ProviderError> {
    let bad = |field: &str, why: String| {
        Err(ProviderError::new(HELM_API, ProviderErrorKind::InvalidRequest, format!("{field}: {why}")))
    };
    if !valid_release_name(&spec.release) {
        return bad("release", format!("{:?} is not a DNS-1123 name of at most 53 characters", spec.release));
    }
    if !valid_release_name(&spec.namespace) {
        return bad("namespace", format!("{:?} is not a DNS-1123 name", spec.namespace));
    }
    if !valid_release_name(&spec.chart.chart) {
        return bad("chart.chart", format!("{:?} is not a chart name", spec.chart.chart));
    }
    let v = &spec.chart.version;
    let exact = !v.is_empty()
        && v.chars().next().is_some_and(|c| c.is_ascii_digit())
        && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'));
    if !exact {
        return bad("chart.version", format!("{v:?} is not an exact version (ranges and tags are not accepted)"));
    }
    let r = &spec.chart.repository;
    if !(r.starts_with("https://") || r.starts_with("oci://")) || r.chars().any(char::is_whitespace) {
        return bad("chart.repository", format!("{r:?} is not an https:// or oci:// URL"));
    }
    if !spec.values.is_object() {
        return bad("values", "must be a JSON object".into());
    }
    Ok(())
}

#[async_trait]
pub trait HelmReleases: Send + Sync {
    /// The release `release` in `namespace`, or `None` when there is none.
    async fn get_release(
        &self,
        target: &KubeTarget,
        namespace: &str,
        release: &str,
    ) -> Result<Option<HelmRelease>, ProviderError>;

    /// Installs the release or upgrades it to the spec (`helm upgrade --install`): idempotent.
    /// Does not wait for the chart's workloads; callers poll [`HelmReleases::get_release`].
    async fn install_or_upgrade(&self, target: &KubeTarget, spec: &ReleaseSpec) -> Result<HelmRelease, ProviderError>;

    /// Uninstalls the release; an absent release is not an error.
    async fn uninstall(&self, target: &KubeTarget, namespace: &str, release: &str) -> Result<(), ProviderError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_charts_are_valid_exact_versions() {
        for c in PINNED_CHARTS {
            validate_release(&c.spec()).unwrap();
            assert_eq!(pinned_chart(c.release), Some(c));
        }
        assert_eq!(KUBERAY_OPERATOR.chart_ref().version, "1.4.2");
    }

    #[test]
    fn bad_specs_name_their_field() {
        let ok = KUBERAY_OPERATOR.spec();
        let field = |spec: ReleaseSpec| validate_release(&spec).unwrap_err().message;
        assert!(field(ReleaseSpec { release: "--kubeconfig=/x".into(), ..ok.clone() }).starts_with("release:"));
        assert!(field(ReleaseSpec { namespace: "Kube System".into(), ..ok.clone() }).starts_with("namespace:"));
        let mut ranged = ok.clone();
        ranged.chart.version = "^1.4".into();
        assert!(field(ranged).starts_with("chart.version:"));
        let mut http = ok.clone();
        http.chart.repository = "http://example.com/charts".into();
        assert!(field(http).starts_with("chart.repository:"));
        assert!(field(ReleaseSpec { values: Value::Null, ..ok }).starts_with("values:"));
    }

    #[test]
    fn status_words() {
        assert_eq!(ReleaseStatus::parse("pending-upgrade"), ReleaseStatus::PendingUpgrade);
        assert!(ReleaseStatus::parse("pending-install").is_pending());
        assert_eq!(ReleaseStatus::parse("weird"), ReleaseStatus::Unknown);
        assert_eq!(serde_json::to_value(ReleaseStatus::PendingInstall).unwrap(), "pending-install");
    }
}
