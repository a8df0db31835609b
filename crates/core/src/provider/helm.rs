//! Helm releases: the dependencies that only ship as Helm charts.
//!
//! EKS add-ons are preferred (see `workflow::create_cluster::BASE_ADDONS`); a chart is used only
//! where no add-on exists, and then always pinned ([`PINNED_CHARTS`]): an exact version from a
//! fixed chart repository ([`ChartSource::Repository`]), or a chart directory vendored into the
//! container image from a pinned commit of its git repository ([`ChartSource::Vendored`]) for
//! charts published nowhere else (the HyperPod dependencies chart). The real implementation
//! (`instantstart-k8s`) runs the `helm` binary with structured arguments (never a shell) and
//! `upgrade --install`, so installing twice is a no-op; the simulator records releases in its
//! world.

use super::{KubeTarget, ProviderError, ProviderErrorKind};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API name of Helm calls in provider errors.
pub const HELM_API: &str = "helm";

/// Where a chart comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChartSource {
    /// A chart repository: `url` is the `https://` URL of a classic repository (its
    /// `index.yaml`) or an `oci://` registry path.
    Repository { url: String },
    /// A chart directory vendored into the container image (dependencies already built, so
    /// installing needs no network for chart resolution). `path` is relative to the runner's
    /// charts directory (`/opt/instantstart/charts` in the image); the directory was fetched
    /// from `git` (a GitHub repository URL) at exactly `commit`, from its `subdir`.
    Vendored { path: String, git: String, commit: String, subdir: String },
}

impl ChartSource {
    /// One line for records and messages: the repository URL, or `git@commit:subdir`.
    pub fn describe(&self) -> String {
        match self {
            ChartSource::Repository { url } => url.clone(),
            ChartSource::Vendored { git, commit, subdir, .. } => format!("{git}@{commit}:{subdir}"),
        }
    }
}

/// A chart at an exact version from a fixed source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChartRef {
    pub source: ChartSource,
    /// The chart's name (`name` in its `Chart.yaml`).
    pub chart: String,
    /// Exact chart version (`version` in its `Chart.yaml`); never a range.
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

/// Where a pinned chart comes from ([`ChartSource`] with static strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinnedSource {
    Repository(&'static str),
    Vendored { path: &'static str, git: &'static str, commit: &'static str, subdir: &'static str },
}

impl PinnedSource {
    pub fn source(&self) -> ChartSource {
        match *self {
            PinnedSource::Repository(url) => ChartSource::Repository { url: url.into() },
            PinnedSource::Vendored { path, git, commit, subdir } => ChartSource::Vendored {
                path: path.into(),
                git: git.into(),
                commit: commit.into(),
                subdir: subdir.into(),
            },
        }
    }
}

/// A chart InstantStart installs, with everything that makes the install reproducible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedChart {
    pub release: &'static str,
    pub namespace: &'static str,
    pub source: PinnedSource,
    pub chart: &'static str,
    pub version: &'static str,
    /// What the chart provides, for step titles.
    pub provides: &'static str,
    /// Whether the HyperPod cluster step waits for this chart (AWS requires it installed before
    /// a HyperPod cluster is created on the EKS cluster).
    pub before_hyperpod: bool,
    /// Whether the install sets `global.region` to the cluster's region (charts that pick
    /// regional images and would otherwise guess the region from node labels).
    pub sets_global_region: bool,
    /// The chart values InstantStart sets, as a JSON object document (`"{}"`: the chart's
    /// defaults). A test checks every pinned chart's document parses to an object.
    pub values: &'static str,
}

impl PinnedChart {
    pub fn chart_ref(&self) -> ChartRef {
        ChartRef { source: self.source.source(), chart: self.chart.into(), version: self.version.into() }
    }

    /// The release spec with the pinned values ([`PinnedChart::values`]).
    pub fn spec(&self) -> ReleaseSpec {
        let values = serde_json::from_str::<Value>(self.values)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        ReleaseSpec { chart: self.chart_ref(), namespace: self.namespace.into(), release: self.release.into(), values }
    }

    /// The release spec for a cluster in `region`: the pinned values, plus `global.region`
    /// where the chart needs it.
    pub fn spec_for(&self, region: &str) -> ReleaseSpec {
        let mut spec = self.spec();
        if self.sets_global_region {
            spec.values["global"] = serde_json::json!({ "region": region });
        }
        spec
    }
}

/// The KubeRay operator (RayJob, RayCluster, RayService CRDs and their controller). There is no
/// EKS add-on for it; the chart comes from the KubeRay project's own Helm repository.
pub const KUBERAY_OPERATOR: PinnedChart = PinnedChart {
    release: "kuberay-operator",
    namespace: "kuberay-operator",
    source: PinnedSource::Repository("https://ray-project.github.io/kuberay-helm/"),
    chart: "kuberay-operator",
    version: "1.4.2",
    provides: "the KubeRay operator for RayJob, RayCluster and RayService",
    before_hyperpod: false,
    sets_global_region: false,
    values: "{}",
};

/// KEDA (the ScaledObject, ScaledJob and TriggerAuthentication CRDs, its operator and metrics
/// API server), which scales self-managed inference endpoints. There is no EKS add-on for it; the
/// chart comes from the KEDA project's own Helm repository (chart 2.21.1 = KEDA v2.21.1).
pub const KEDA: PinnedChart = PinnedChart {
    release: "keda",
    namespace: "keda",
    source: PinnedSource::Repository("https://kedacore.github.io/charts"),
    chart: "keda",
    version: "2.21.1",
    provides: "KEDA for ScaledObject autoscaling of inference endpoints",
    before_hyperpod: false,
    sets_global_region: false,
    values: "{}",
};

/// The AWS Load Balancer Controller, which turns a `LoadBalancer` Service (a `load_balancer`
/// endpoint exposure) into an NLB. AWS documents it as this chart from the EKS charts
/// repository, release `aws-load-balancer-controller` in `kube-system` (chart 3.5.0 = controller
/// v3.5.0). Its values are the cluster's (`clusterName`, `region`, `vpcId`, the service
/// account's IRSA role): `workflow::lb_controller` sets them when the step submits.
pub const AWS_LOAD_BALANCER_CONTROLLER: PinnedChart = PinnedChart {
    release: "aws-load-balancer-controller",
    namespace: "kube-system",
    source: PinnedSource::Repository("https://aws.github.io/eks-charts"),
    chart: "aws-load-balancer-controller",
    version: "3.5.0",
    provides: "the AWS Load Balancer Controller for load_balancer endpoints (NLB)",
    before_hyperpod: false,
    sets_global_region: false,
    values: "{}",
};

/// Prometheus (server only), which KEDA's default Prometheus trigger of an autoscaled endpoint
/// queries at `http://prometheus-server.monitoring.svc.cluster.local:80` (the chart names the
/// server's Service `<release>-server`, port 80). There is no EKS add-on for an in-cluster
/// Prometheus; the chart comes from the prometheus-community repository (chart 29.27.0 =
/// Prometheus v3.14.0). Its default scrape job `kubernetes-pods` scrapes pods annotated
/// `prometheus.io/scrape: "true"` at `prometheus.io/port` and `prometheus.io/path`, which the
/// serving recipes set. Minimal values: no Alertmanager, Pushgateway, node exporter or
/// kube-state-metrics; no persistent volume (the clusters have no EBS CSI driver, and the data
/// is a scaling signal, not a record) and a one-day retention.
pub const PROMETHEUS: PinnedChart = PinnedChart {
    release: "prometheus",
    namespace: "monitoring",
    source: PinnedSource::Repository("https://prometheus-community.github.io/helm-charts"),
    chart: "prometheus",
    version: "29.27.0",
    provides: "Prometheus (server only) for the KEDA triggers of autoscaled endpoints",
    before_hyperpod: false,
    sets_global_region: false,
    values: r#"{
        "alertmanager": { "enabled": false },
        "prometheus-pushgateway": { "enabled": false },
        "prometheus-node-exporter": { "enabled": false },
        "kube-state-metrics": { "enabled": false },
        "server": { "retention": "1d", "persistentVolume": { "enabled": false } }
    }"#,
};

/// Commit of `aws/sagemaker-hyperpod-cli` whose `helm_chart/HyperPodHelmChart` the container
/// image vendors (the `Dockerfile` fetches exactly this commit; a test keeps the two equal).
pub const HYPERPOD_CLI_COMMIT: &str = "067d658b2d5c3d347afbadd75e1425214e965dcb";

/// The HyperPod dependencies chart (NVIDIA, EFA and Neuron device plugins, the health-monitoring
/// agent, deep health checks, job auto-restart, the Kubeflow training and MPI operators,
/// hyperpod-patching and their permissions), which AWS requires on the EKS cluster before a
/// HyperPod cluster is created through the APIs. It is published only as a chart directory in
/// the `aws/sagemaker-hyperpod-cli` git repository (chart `hyperpod-helm-chart`, whose version
/// stays 0.1.0 across commits — the commit is the real pin), so the image vendors it with its
/// dependencies built. Release `hyperpod-dependencies` in `kube-system`, as AWS documents, with
/// the chart's default values except `global.region`.
pub const HYPERPOD_DEPENDENCIES: PinnedChart = PinnedChart {
    release: "hyperpod-dependencies",
    namespace: "kube-system",
    source: PinnedSource::Vendored {
        path: "HyperPodHelmChart",
        git: "https://github.com/aws/sagemaker-hyperpod-cli",
        commit: HYPERPOD_CLI_COMMIT,
        subdir: "helm_chart/HyperPodHelmChart",
    },
    chart: "hyperpod-helm-chart",
    version: "0.1.0",
    provides: "HyperPod dependencies (device plugins, health monitoring, training operators)",
    before_hyperpod: true,
    // Before the HyperPod nodes exist the health-monitoring agent cannot read the region from
    // node labels and would fall back to us-east-1's image registry.
    sets_global_region: true,
    values: "{}",
};

/// Every chart the create-cluster pipeline installs (`chart:<release>` steps).
pub const PINNED_CHARTS: &[PinnedChart] =
    &[KUBERAY_OPERATOR, KEDA, PROMETHEUS, AWS_LOAD_BALANCER_CONTROLLER, HYPERPOD_DEPENDENCIES];

/// Whether `path` is a plain relative path (normal components only: no `..`, no absolute
/// path, no component starting with `-`), usable under a charts directory.
pub fn valid_vendored_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && !c.starts_with('-')
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

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
    match &spec.chart.source {
        ChartSource::Repository { url: r } => {
            if !(r.starts_with("https://") || r.starts_with("oci://")) || r.chars().any(char::is_whitespace) {
                return bad("chart.source.url", format!("{r:?} is not an https:// or oci:// URL"));
            }
        }
        ChartSource::Vendored { path, git, commit, subdir } => {
            if !valid_vendored_path(path) {
                return bad("chart.source.path", format!("{path:?} is not a plain relative path"));
            }
            if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return bad("chart.source.commit", format!("{commit:?} is not a full 40-hex git commit id"));
            }
            if !git.starts_with("https://") || git.chars().any(char::is_whitespace) {
                return bad("chart.source.git", format!("{git:?} is not an https:// URL"));
            }
            if !valid_vendored_path(subdir) {
                return bad("chart.source.subdir", format!("{subdir:?} is not a plain relative path"));
            }
        }
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
        let keda = KEDA.spec();
        assert_eq!((keda.release.as_str(), keda.namespace.as_str()), ("keda", "keda"));
        assert_eq!((keda.chart.chart.as_str(), keda.chart.version.as_str()), ("keda", "2.21.1"));
        assert_eq!(keda.chart.source.describe(), "https://kedacore.github.io/charts");
        let prom = PROMETHEUS.spec();
        assert_eq!((prom.release.as_str(), prom.namespace.as_str()), ("prometheus", "monitoring"));
        assert_eq!((prom.chart.chart.as_str(), prom.chart.version.as_str()), ("prometheus", "29.27.0"));
        assert_eq!(prom.chart.source.describe(), "https://prometheus-community.github.io/helm-charts");
        // The Service KEDA's default trigger queries: `<release>-server` in the release's namespace.
        assert_eq!(format!("{}-server.{}", prom.release, prom.namespace), "prometheus-server.monitoring");
        assert_eq!(prom.values["alertmanager"]["enabled"], false);
        assert_eq!(prom.values["prometheus-pushgateway"]["enabled"], false);
        assert_eq!(prom.values["server"]["persistentVolume"]["enabled"], false);
        assert_eq!(prom.values["server"]["retention"], "1d");
        let lbc = AWS_LOAD_BALANCER_CONTROLLER.spec();
        assert_eq!((lbc.release.as_str(), lbc.namespace.as_str()), ("aws-load-balancer-controller", "kube-system"));
        assert_eq!((lbc.chart.chart.as_str(), lbc.chart.version.as_str()), ("aws-load-balancer-controller", "3.5.0"));
        assert_eq!(lbc.chart.source.describe(), "https://aws.github.io/eks-charts");
        for c in PINNED_CHARTS {
            let parsed: Value = serde_json::from_str(c.values).expect("values parse");
            assert!(parsed.is_object(), "{}: values must be an object", c.release);
        }
        let hp = HYPERPOD_DEPENDENCIES.spec();
        assert_eq!((hp.release.as_str(), hp.namespace.as_str()), ("hyperpod-dependencies", "kube-system"));
        assert!(matches!(hp.chart.source, ChartSource::Vendored { ref commit, .. } if commit == HYPERPOD_CLI_COMMIT));
        assert_eq!(
            hp.chart.source.describe(),
            format!("https://github.com/aws/sagemaker-hyperpod-cli@{HYPERPOD_CLI_COMMIT}:helm_chart/HyperPodHelmChart")
        );
    }

    #[test]
    fn region_is_set_only_where_the_chart_needs_it() {
        assert_eq!(KUBERAY_OPERATOR.spec_for("eu-west-1").values, serde_json::json!({}));
        assert_eq!(KEDA.spec_for("eu-west-1").values, serde_json::json!({}));
        assert_eq!(HYPERPOD_DEPENDENCIES.spec_for("eu-west-1").values["global"]["region"], "eu-west-1");
        assert!(PROMETHEUS.spec_for("eu-west-1").values.get("global").is_none());
    }

    /// The image vendors exactly the pinned commit into the charts directory the runner reads.
    #[test]
    fn dockerfile_vendors_the_pinned_commit() {
        let dockerfile = include_str!("../../../../Dockerfile");
        assert!(dockerfile.contains(&format!("HYPERPOD_CLI_COMMIT={HYPERPOD_CLI_COMMIT}")), "Dockerfile pin differs");
        let PinnedSource::Vendored { path, subdir, .. } = HYPERPOD_DEPENDENCIES.source else { panic!("not vendored") };
        assert!(dockerfile.contains(&format!("/opt/instantstart/charts/{path}")));
        assert!(dockerfile.contains(subdir));
    }

    #[test]
    fn vendored_sources_are_checked() {
        let ok = HYPERPOD_DEPENDENCIES.spec();
        let with = |f: &dyn Fn(&mut ChartSource)| {
            let mut spec = ok.clone();
            f(&mut spec.chart.source);
            validate_release(&spec).unwrap_err().message
        };
        let set_path = |p: &'static str| {
            move |s: &mut ChartSource| {
                if let ChartSource::Vendored { path, .. } = s {
                    *path = p.into()
                }
            }
        };
        for bad in ["../etc", "/abs", "-x", "a//b", "", "a b"] {
            assert!(with(&set_path(bad)).starts_with("chart.source.path:"), "{bad}");
        }
        assert!(
            with(&|s| {
                if let ChartSource::Vendored { commit, .. } = s {
                    *commit = "main".into()
                }
            })
            .starts_with("chart.source.commit:")
        );
        assert!(valid_vendored_path("charts/HyperPodHelmChart"));
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
        http.chart.source = ChartSource::Repository { url: "http://example.com/charts".into() };
        assert!(field(http).starts_with("chart.source.url:"));
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
