//! [`HelmReleases`] on the `helm` binary.
//!
//! Reproducible and shell-free by construction:
//! - `helm` is started with [`tokio::process::Command`] and an argument vector — never through a
//!   shell — with a cleared environment (only `HOME`, the `HELM_*` directories of a private
//!   temporary directory and proxy settings), so no user repository list, plugin or context
//!   leaks in.
//! - Every call gets its own kubeconfig (mode 0600, in a 0700 temporary directory removed after
//!   the call) naming exactly one cluster: the EKS endpoint and CA from `eks:DescribeCluster`
//!   and a bearer token signed in process ([`eks_token`](crate::eks_token)) — no exec plugin,
//!   no AWS CLI, no current context.
//! - Charts come from their repository URL (`--repo`) or `oci://` reference at an exact
//!   `--version`, or from a chart directory vendored into the image at a pinned commit (under
//!   [`IMAGE_CHARTS_DIR`], dependencies already built): its path is passed as the chart argument
//!   after checking its `Chart.yaml` name and version and the `<dir>.commit` file the image build
//!   writes beside it. Values are a JSON file (`--values`); installs are `upgrade --install`
//!   (idempotent) without `--wait` (the engine polls `helm status -o json`).

use crate::connector::{EksEndpoint, EksEndpointResolver};
use crate::eks_token;
use crate::error::K8sError;
use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;
use base64::Engine;
use instantstart_core::provider::{
    ChartSource, HELM_API, HelmRelease, HelmReleases, KubeTarget, ProviderError, ProviderErrorKind, ReleaseSpec,
    ReleaseStatus, valid_release_name, validate_release,
};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long one `helm` invocation may take (no `--wait`, so this covers fetching the chart and
/// sending the manifests).
pub const HELM_TIMEOUT: Duration = Duration::from_secs(300);
/// Revisions Helm keeps per release.
pub const HISTORY_MAX: u32 = 10;
/// Environment variables passed through to `helm` (proxies only).
const PASS_ENV: &[&str] = &["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy"];

/// What a kubeconfig for one call says: the API server, its CA (PEM) and a bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    pub server: String,
    /// PEM bundle; `None` only for plain-HTTP test servers.
    pub ca_pem: Option<String>,
    pub token: Option<String>,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess").field("server", &self.server).finish_non_exhaustive()
    }
}

impl ClusterAccess {
    /// Access to an EKS cluster from its endpoint and a token.
    pub fn eks(endpoint: &EksEndpoint, token: &str) -> Result<Self, K8sError> {
        endpoint.ca_der()?; // reject a CA that holds no certificate before Helm sees it
        let raw = endpoint.certificate_authority.trim();
        let pem = if raw.starts_with("-----BEGIN") {
            raw.to_string()
        } else {
            let cleaned: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(cleaned)
                .map_err(|e| K8sError::Config(format!("certificate authority is not base64: {e}")))?;
            String::from_utf8(bytes).map_err(|_| K8sError::Config("certificate authority is not a PEM text".into()))?
        };
        Ok(ClusterAccess {
            server: endpoint.endpoint.clone(),
            ca_pem: Some(pem.trim().to_string()),
            token: Some(token.to_string()),
        })
    }

    /// The kubeconfig document (JSON, which kubeconfig loaders read as YAML): one cluster, one
    /// user, one context, made current.
    pub fn kubeconfig(&self) -> String {
        let mut cluster = json!({ "server": self.server });
        if let Some(pem) = &self.ca_pem {
            cluster["certificate-authority-data"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
        }
        let mut user = json!({});
        if let Some(token) = &self.token {
            user["token"] = json!(token);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "target", "cluster": cluster }],
            "users": [{ "name": "instantstart", "user": user }],
            "contexts": [{ "name": "target", "context": { "cluster": "target", "user": "instantstart" } }],
            "current-context": "target",
        })
        .to_string()
    }
}

/// Finds how to reach a target's API server.
#[async_trait]
pub trait ClusterAccessResolver: Send + Sync {
    async fn access(&self, target: &KubeTarget) -> Result<ClusterAccess, K8sError>;
}

/// EKS: endpoint and CA from the resolver, a fresh token signed in process.
pub struct EksAccess {
    pub credentials: SharedCredentialsProvider,
    pub resolver: Arc<dyn EksEndpointResolver>,
}

#[async_trait]
impl ClusterAccessResolver for EksAccess {
    async fn access(&self, target: &KubeTarget) -> Result<ClusterAccess, K8sError> {
        let endpoint = self.resolver.endpoint(target).await?;
        let token = eks_token::token(&self.credentials, &target.region, &target.eks_cluster).await?;
        ClusterAccess::eks(&endpoint, &token.token)
    }
}

/// The directory of a vendored chart: `path` under `charts_dir`, made to start with `/` or `./`
/// so Helm reads it as a local path (never a flag, never a repository reference).
pub fn vendored_dir(charts_dir: &Path, path: &str) -> PathBuf {
    let dir = charts_dir.join(path);
    if dir.is_absolute() { dir } else { Path::new(".").join(dir) }
}

/// The `helm upgrade --install` arguments of `spec`; vendored charts are looked up under
/// `charts_dir`.
pub fn upgrade_args(spec: &ReleaseSpec, charts_dir: &Path, kubeconfig: &Path, values: &Path) -> Vec<OsString> {
    let c = &spec.chart;
    let mut args: Vec<OsString> = vec!["upgrade".into(), "--install".into(), spec.release.clone().into()];
    match &c.source {
        ChartSource::Repository { url } if url.starts_with("oci://") => {
            args.push(format!("{}/{}", url.trim_end_matches('/'), c.chart).into());
            args.extend(["--version".into(), c.version.clone().into()]);
        }
        ChartSource::Repository { url } => {
            args.extend([c.chart.clone().into(), "--repo".into(), url.clone().into()]);
            args.extend(["--version".into(), c.version.clone().into()]);
        }
        // A local directory: Helm ignores `--version` for it; `check_vendored` compares the
        // directory's Chart.yaml and commit with the pin before Helm runs.
        ChartSource::Vendored { path, .. } => args.push(vendored_dir(charts_dir, path).into_os_string()),
    }
    args.extend([
        "--namespace".into(),
        spec.namespace.clone().into(),
        "--create-namespace".into(),
        "--values".into(),
        values.as_os_str().to_owned(),
        "--history-max".into(),
        HISTORY_MAX.to_string().into(),
        "--kubeconfig".into(),
        kubeconfig.as_os_str().to_owned(),
        "--output".into(),
        "json".into(),
    ]);
    args
}

/// The `helm status` arguments.
pub fn status_args(namespace: &str, release: &str, kubeconfig: &Path) -> Vec<OsString> {
    vec![
        "status".into(),
        release.into(),
        "--namespace".into(),
        namespace.into(),
        "--kubeconfig".into(),
        kubeconfig.as_os_str().to_owned(),
        "--output".into(),
        "json".into(),
    ]
}

/// The `helm uninstall` arguments (absent releases are not an error).
pub fn uninstall_args(namespace: &str, release: &str, kubeconfig: &Path) -> Vec<OsString> {
    vec![
        "uninstall".into(),
        release.into(),
        "--namespace".into(),
        namespace.into(),
        "--kubeconfig".into(),
        kubeconfig.as_os_str().to_owned(),
        "--ignore-not-found".into(),
    ]
}

/// The top-level `name` and `version` of a `Chart.yaml` (unindented `key: value` lines; quotes
/// removed).
pub fn chart_yaml_name_version(text: &str) -> (Option<String>, Option<String>) {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(key)?.strip_prefix(':')?;
            let v = rest.split(" #").next().unwrap_or("").trim().trim_matches(|c| c == '"' || c == '\'');
            Some(v.to_string())
        })
    };
    (field("name"), field("version"))
}

/// Checks that the vendored chart of `spec` under `charts_dir` is the pinned one: its
/// `Chart.yaml` names the chart and version, and `<path>.commit` (written by the image build)
/// holds the pinned commit. Repository charts need no check.
pub fn check_vendored(spec: &ReleaseSpec, charts_dir: &Path) -> Result<(), ProviderError> {
    let ChartSource::Vendored { path, commit, git, subdir } = &spec.chart.source else { return Ok(()) };
    let dir = vendored_dir(charts_dir, path);
    let fail = |msg: String| Err(ProviderError::new(HELM_API, ProviderErrorKind::Failed, msg));
    let Ok(chart_yaml) = std::fs::read_to_string(dir.join("Chart.yaml")) else {
        return fail(format!(
            "the vendored chart {} is missing: {} has no Chart.yaml (the container image vendors it from \
             {git}@{commit}:{subdir}; outside the image set {CHARTS_DIR_ENV} to a directory holding it)",
            spec.chart.chart,
            dir.display()
        ));
    };
    let (name, version) = chart_yaml_name_version(&chart_yaml);
    if name.as_deref() != Some(spec.chart.chart.as_str()) || version.as_deref() != Some(spec.chart.version.as_str()) {
        return fail(format!(
            "the vendored chart at {} is {} {}, not the pinned {} {}",
            dir.display(),
            name.unwrap_or_default(),
            version.unwrap_or_default(),
            spec.chart.chart,
            spec.chart.version
        ));
    }
    let stamp = charts_dir.join(format!("{path}.commit"));
    let found = std::fs::read_to_string(&stamp).map(|s| s.trim().to_string()).unwrap_or_default();
    if found != *commit {
        return fail(format!(
            "the vendored chart at {} comes from commit {:?} ({}), but this build pins {git}@{commit}; \
             rebuild the image (or re-vendor the chart)",
            dir.display(),
            found,
            stamp.display()
        ));
    }
    Ok(())
}

/// Reads a release from `helm status -o json` / `helm upgrade -o json` output.
pub fn parse_release(output: &[u8]) -> Result<HelmRelease, ProviderError> {
    let v: Value = serde_json::from_slice(output).map_err(|e| {
        ProviderError::new(HELM_API, ProviderErrorKind::Failed, format!("unexpected helm output (not JSON): {e}"))
    })?;
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let missing = |what: &str| {
        ProviderError::new(HELM_API, ProviderErrorKind::Failed, format!("unexpected helm output: no {what}"))
    };
    Ok(HelmRelease {
        name: s("/name").ok_or_else(|| missing("name"))?,
        namespace: s("/namespace").unwrap_or_default(),
        chart: s("/chart/metadata/name").ok_or_else(|| missing("chart.metadata.name"))?,
        version: s("/chart/metadata/version").ok_or_else(|| missing("chart.metadata.version"))?,
        status: ReleaseStatus::parse(&s("/info/status").ok_or_else(|| missing("info.status"))?),
        revision: v.get("version").and_then(Value::as_u64).unwrap_or(0) as u32,
        description: s("/info/description").unwrap_or_default(),
    })
}

/// Classifies a failed `helm` call by its error text.
pub fn classify(api: &str, stderr: &str) -> ProviderError {
    let text = stderr.trim();
    let lower = text.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    let kind = if has(&["release: not found"]) {
        ProviderErrorKind::NotFound
    } else if has(&["another operation (install/upgrade/rollback) is in progress"]) {
        ProviderErrorKind::Conflict
    } else if has(&["unauthorized", "forbidden", "you must be logged in"]) {
        ProviderErrorKind::AccessDenied
    } else if has(&[
        "connection refused",
        "i/o timeout",
        "tls handshake timeout",
        "context deadline exceeded",
        "no such host",
        "connection reset",
        "eof",
        "too many requests",
        "service unavailable",
        "bad gateway",
        "internal error occurred",
    ]) {
        ProviderErrorKind::Transient
    } else if has(&["not found in", "invalid chart", "unknown flag", "error converting yaml", "values don't meet"]) {
        ProviderErrorKind::InvalidRequest
    } else {
        ProviderErrorKind::Failed
    };
    let message = text.strip_prefix("Error: ").unwrap_or(text);
    ProviderError::new(api, kind, if message.is_empty() { "helm failed without a message" } else { message })
}

fn io_error(what: &str, e: std::io::Error) -> ProviderError {
    ProviderError::new(HELM_API, ProviderErrorKind::Failed, format!("{what}: {e}"))
}

/// The files of one call: a private 0700 directory holding the kubeconfig and values (0600) and
/// Helm's cache/config/data directories. Removed when dropped.
pub struct CallDir {
    dir: tempfile::TempDir,
}

impl CallDir {
    pub fn new(access: &ClusterAccess) -> Result<Self, ProviderError> {
        let dir =
            tempfile::Builder::new().prefix("instantstart-helm-").tempdir().map_err(|e| io_error("temp dir", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io_error("temp dir", e))?;
        }
        let call = CallDir { dir };
        call.write_private("kubeconfig", access.kubeconfig().as_bytes())?;
        Ok(call)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Writes `name` with mode 0600 (created new; never follows an existing file).
    pub fn write_private(&self, name: &str, contents: &[u8]) -> Result<PathBuf, ProviderError> {
        use std::io::Write;
        let path = self.dir.path().join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options.open(&path).map_err(|e| io_error("writing a helm input file", e))?;
        f.write_all(contents).map_err(|e| io_error("writing a helm input file", e))?;
        Ok(path)
    }

    /// The environment `helm` runs with.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let d = self.dir.path();
        let mut env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), d.as_os_str().to_owned()),
            ("HELM_CACHE_HOME".into(), d.join("cache").into_os_string()),
            ("HELM_CONFIG_HOME".into(), d.join("config").into_os_string()),
            ("HELM_DATA_HOME".into(), d.join("data").into_os_string()),
            ("HELM_NO_PLUGINS".into(), "1".into()),
        ];
        for k in PASS_ENV {
            if let Some(v) = std::env::var_os(k) {
                env.push(((*k).into(), v));
            }
        }
        env
    }
}

/// Environment variable naming the `helm` binary to use.
pub const HELM_ENV: &str = "INSTANTSTART_HELM";
/// Where the container image installs its pinned `helm`.
pub const IMAGE_HELM: &str = "/usr/local/bin/helm";

/// Environment variable naming the directory of vendored charts.
pub const CHARTS_DIR_ENV: &str = "INSTANTSTART_CHARTS_DIR";
/// Where the container image vendors its charts (see the `Dockerfile`'s `charts` stage).
pub const IMAGE_CHARTS_DIR: &str = "/opt/instantstart/charts";

/// The directory of vendored charts: `$INSTANTSTART_CHARTS_DIR`, else [`IMAGE_CHARTS_DIR`];
/// made absolute (helm runs in a per-call directory).
pub fn locate_charts_dir() -> PathBuf {
    let dir = std::env::var_os(CHARTS_DIR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(IMAGE_CHARTS_DIR));
    std::path::absolute(&dir).unwrap_or(dir)
}

/// The `helm` binary: `$INSTANTSTART_HELM`, else `helm` on `PATH`, else [`IMAGE_HELM`]. Resolved
/// to a path once, because `helm` itself runs with a cleared environment.
pub fn locate_helm() -> PathBuf {
    if let Some(p) = std::env::var_os(HELM_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("helm")).find(|p| p.is_file()))
        .unwrap_or_else(|| PathBuf::from(IMAGE_HELM))
}

/// [`HelmReleases`] on the `helm` binary.
pub struct HelmCli {
    binary: PathBuf,
    access: Arc<dyn ClusterAccessResolver>,
    timeout: Duration,
    charts_dir: PathBuf,
}

impl HelmCli {
    /// `binary`: the `helm` executable (the container image ships a pinned one at
    /// `/usr/local/bin/helm`). Vendored charts are read from [`locate_charts_dir`].
    pub fn new(binary: impl Into<PathBuf>, access: Arc<dyn ClusterAccessResolver>) -> Self {
        HelmCli { binary: binary.into(), access, timeout: HELM_TIMEOUT, charts_dir: locate_charts_dir() }
    }

    /// Reads vendored charts from `dir` instead.
    pub fn with_charts_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        self.charts_dir = std::path::absolute(&dir).unwrap_or(dir);
        self
    }

    /// For EKS clusters.
    pub fn eks(
        binary: impl Into<PathBuf>,
        credentials: SharedCredentialsProvider,
        resolver: Arc<dyn EksEndpointResolver>,
    ) -> Self {
        Self::new(binary, Arc::new(EksAccess { credentials, resolver }))
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn call_dir(&self, target: &KubeTarget) -> Result<CallDir, ProviderError> {
        let access =
            self.access.access(target).await.map_err(|e| ProviderError::new(HELM_API, e.kind(), e.to_string()))?;
        CallDir::new(&access)
    }

    /// Runs `helm args` in `dir`; the standard output on success, a classified error otherwise.
    async fn run(&self, api: &str, dir: &CallDir, args: Vec<OsString>) -> Result<Vec<u8>, ProviderError> {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.args(&args)
            .env_clear()
            .envs(dir.env())
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = match tokio::time::timeout(self.timeout, cmd.output()).await {
            Err(_) => {
                return Err(ProviderError::new(
                    api,
                    ProviderErrorKind::Transient,
                    format!("helm did not finish within {} s", self.timeout.as_secs()),
                ));
            }
            Ok(Err(e)) => return Err(io_error(&format!("cannot run {}", self.binary.display()), e)),
            Ok(Ok(out)) => out,
        };
        if out.status.success() { Ok(out.stdout) } else { Err(classify(api, &String::from_utf8_lossy(&out.stderr))) }
    }
}

fn check_names(namespace: &str, release: &str) -> Result<(), ProviderError> {
    for (field, v) in [("namespace", namespace), ("release", release)] {
        if !valid_release_name(v) {
            return Err(ProviderError::new(
                HELM_API,
                ProviderErrorKind::InvalidRequest,
                format!("{field}: {v:?} is not a DNS-1123 name"),
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl HelmReleases for HelmCli {
    async fn get_release(
        &self,
        target: &KubeTarget,
        namespace: &str,
        release: &str,
    ) -> Result<Option<HelmRelease>, ProviderError> {
        check_names(namespace, release)?;
        let dir = self.call_dir(target).await?;
        match self.run("helm:status", &dir, status_args(namespace, release, &dir.kubeconfig())).await {
            Ok(out) => parse_release(&out).map(Some),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn install_or_upgrade(&self, target: &KubeTarget, spec: &ReleaseSpec) -> Result<HelmRelease, ProviderError> {
        validate_release(spec)?;
        check_vendored(spec, &self.charts_dir)?;
        let dir = self.call_dir(target).await?;
        let values = dir.write_private("values.json", spec.values.to_string().as_bytes())?;
        let args = upgrade_args(spec, &self.charts_dir, &dir.kubeconfig(), &values);
        let out = self.run("helm:upgrade", &dir, args).await?;
        parse_release(&out)
    }

    async fn uninstall(&self, target: &KubeTarget, namespace: &str, release: &str) -> Result<(), ProviderError> {
        check_names(namespace, release)?;
        let dir = self.call_dir(target).await?;
        self.run("helm:uninstall", &dir, uninstall_args(namespace, release, &dir.kubeconfig())).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::provider::{HYPERPOD_CLI_COMMIT, HYPERPOD_DEPENDENCIES, KEDA, KUBERAY_OPERATOR};

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUe6Q=\n-----END CERTIFICATE-----\n";

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn upgrade_argv_is_pinned_idempotent_and_wait_free() {
        let charts = Path::new("/opt/instantstart/charts");
        let args = strings(&upgrade_args(
            &KUBERAY_OPERATOR.spec(),
            charts,
            Path::new("/t/kubeconfig"),
            Path::new("/t/v.json"),
        ));
        assert_eq!(
            args,
            [
                "upgrade",
                "--install",
                "kuberay-operator",
                "kuberay-operator",
                "--repo",
                "https://ray-project.github.io/kuberay-helm/",
                "--version",
                "1.4.2",
                "--namespace",
                "kuberay-operator",
                "--create-namespace",
                "--values",
                "/t/v.json",
                "--history-max",
                "10",
                "--kubeconfig",
                "/t/kubeconfig",
                "--output",
                "json"
            ]
        );
        assert!(!args.iter().any(|a| a.starts_with("--wait")));
        let keda = strings(&upgrade_args(&KEDA.spec(), charts, Path::new("k"), Path::new("v")));
        assert_eq!(
            keda[..11],
            [
                "upgrade",
                "--install",
                "keda",
                "keda",
                "--repo",
                "https://kedacore.github.io/charts",
                "--version",
                "2.21.1",
                "--namespace",
                "keda",
                "--create-namespace"
            ]
        );
        let mut oci = KUBERAY_OPERATOR.spec();
        oci.chart.source = ChartSource::Repository { url: "oci://public.ecr.aws/charts/".into() };
        let args = strings(&upgrade_args(&oci, charts, Path::new("k"), Path::new("v")));
        assert_eq!(args[3], "oci://public.ecr.aws/charts/kuberay-operator");
        assert_eq!(args[4..6], ["--version", "1.4.2"]);
        assert!(!args.contains(&"--repo".to_string()));
    }

    #[test]
    fn vendored_argv_passes_the_local_directory() {
        let spec = HYPERPOD_DEPENDENCIES.spec_for("eu-west-1");
        let args = strings(&upgrade_args(
            &spec,
            Path::new("/opt/instantstart/charts"),
            Path::new("/t/kubeconfig"),
            Path::new("/t/v.json"),
        ));
        assert_eq!(
            args,
            [
                "upgrade",
                "--install",
                "hyperpod-dependencies",
                "/opt/instantstart/charts/HyperPodHelmChart",
                "--namespace",
                "kube-system",
                "--create-namespace",
                "--values",
                "/t/v.json",
                "--history-max",
                "10",
                "--kubeconfig",
                "/t/kubeconfig",
                "--output",
                "json"
            ]
        );
        let relative = strings(&upgrade_args(&spec, Path::new("charts"), Path::new("k"), Path::new("v")));
        assert_eq!(relative[3], "./charts/HyperPodHelmChart", "never read as a flag or a repository reference");
    }

    /// A stand-in for the vendored chart: Chart.yaml and the commit stamp the image build writes.
    fn vendor(root: &Path, name: &str, version: &str, commit: &str) {
        let dir = root.join("HyperPodHelmChart");
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(
            dir.join("Chart.yaml"),
            format!(
                "apiVersion: v2\nname: {name}\ndescription: test\ntype: application\n# comment\nversion: {version}\n\
                 appVersion: \"1.16.0\"\ndependencies:\n  - name: sub\n    version: \"0.2.0\"\n"
            ),
        )
        .unwrap();
        std::fs::write(root.join("HyperPodHelmChart.commit"), format!("{commit}\n")).unwrap();
    }

    #[test]
    fn vendored_chart_must_match_the_pin() {
        let spec = HYPERPOD_DEPENDENCIES.spec();
        let root = tempfile::tempdir().unwrap();
        let err = check_vendored(&spec, root.path()).unwrap_err();
        assert!(err.message.contains("is missing") && err.message.contains(CHARTS_DIR_ENV), "{err}");
        vendor(root.path(), "hyperpod-helm-chart", "0.1.0", HYPERPOD_CLI_COMMIT);
        check_vendored(&spec, root.path()).unwrap();
        vendor(root.path(), "hyperpod-helm-chart", "0.1.0", "0000000000000000000000000000000000000000");
        let err = check_vendored(&spec, root.path()).unwrap_err();
        assert!(err.message.contains("rebuild the image"), "{err}");
        vendor(root.path(), "hyperpod-helm-chart", "0.2.0", HYPERPOD_CLI_COMMIT);
        assert!(check_vendored(&spec, root.path()).unwrap_err().message.contains("not the pinned"));
        check_vendored(&KUBERAY_OPERATOR.spec(), root.path()).unwrap();
        assert_eq!(
            chart_yaml_name_version("name: 'x' # c\nversion: \"1.0.0\"\n  version: 9\n"),
            (Some("x".into()), Some("1.0.0".into()))
        );
    }

    #[test]
    fn status_and_uninstall_argv() {
        let kc = Path::new("/t/kc");
        assert_eq!(
            strings(&status_args("ns", "rel", kc)),
            ["status", "rel", "--namespace", "ns", "--kubeconfig", "/t/kc", "--output", "json"]
        );
        assert_eq!(
            strings(&uninstall_args("ns", "rel", kc)),
            ["uninstall", "rel", "--namespace", "ns", "--kubeconfig", "/t/kc", "--ignore-not-found"]
        );
    }

    #[test]
    fn kubeconfig_names_one_cluster_with_ca_and_token() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PEM);
        let endpoint = EksEndpoint {
            endpoint: "https://abc.gr7.us-west-2.eks.amazonaws.com".into(),
            certificate_authority: b64.clone(),
        };
        let access = ClusterAccess::eks(&endpoint, "k8s-aws-v1.abc").unwrap();
        assert_eq!(access.ca_pem.as_deref(), Some(PEM.trim()));
        let v: Value = serde_json::from_str(&access.kubeconfig()).unwrap();
        assert_eq!(v["current-context"], "target");
        assert_eq!(v["clusters"][0]["cluster"]["server"], "https://abc.gr7.us-west-2.eks.amazonaws.com");
        let ca = base64::engine::general_purpose::STANDARD
            .decode(v["clusters"][0]["cluster"]["certificate-authority-data"].as_str().unwrap())
            .unwrap();
        assert_eq!(String::from_utf8(ca).unwrap(), PEM.trim());
        assert_eq!(v["users"][0]["user"]["token"], "k8s-aws-v1.abc");
        assert!(!format!("{access:?}").contains("k8s-aws-v1.abc"), "the token stays out of Debug");
        let bad = EksEndpoint { certificate_authority: "bm90IGEgY2VydA==".into(), ..endpoint };
        assert!(ClusterAccess::eks(&bad, "t").is_err());
    }

    #[test]
    fn call_dir_is_private_and_removed() {
        let access = ClusterAccess { server: "http://127.0.0.1:1".into(), ca_pem: None, token: Some("secret".into()) };
        let dir = CallDir::new(&access).unwrap();
        let root = dir.path().to_path_buf();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&root), 0o700);
            assert_eq!(mode(&dir.kubeconfig()), 0o600);
            let values = dir.write_private("values.json", b"{}").unwrap();
            assert_eq!(mode(&values), 0o600);
        }
        assert!(dir.write_private("kubeconfig", b"again").is_err(), "never overwrites");
        let env = dir.env();
        assert!(env.iter().any(|(k, v)| k == "HELM_CONFIG_HOME" && Path::new(v).starts_with(&root)));
        assert!(!env.iter().any(|(k, _)| k == "PATH" || k == "KUBECONFIG"));
        drop(dir);
        assert!(!root.exists());
    }

    #[test]
    fn parses_helm_status_json() {
        let out = br#"{"name":"kuberay-operator","info":{"first_deployed":"2026-01-01T00:00:00Z","status":"deployed",
            "description":"Install complete"},"chart":{"metadata":{"name":"kuberay-operator","version":"1.4.2",
            "appVersion":"v1.4.2"}},"config":{},"version":2,"namespace":"kuberay-operator"}"#;
        let r = parse_release(out).unwrap();
        assert_eq!((r.chart.as_str(), r.version.as_str(), r.revision), ("kuberay-operator", "1.4.2", 2));
        assert!(r.is_deployed(&KUBERAY_OPERATOR.chart_ref()));
        assert_eq!(
            parse_release(b"{\"name\":\"x\"}").unwrap_err().message,
            "unexpected helm output: no chart.metadata.name"
        );
        assert_eq!(parse_release(b"not json").unwrap_err().kind, ProviderErrorKind::Failed);
    }

    #[test]
    fn classifies_helm_errors() {
        let kind = |s: &str| classify("helm:status", s).kind;
        assert_eq!(kind("Error: release: not found"), ProviderErrorKind::NotFound);
        assert_eq!(
            kind("Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress"),
            ProviderErrorKind::Conflict
        );
        assert_eq!(kind("Error: Kubernetes cluster unreachable: Unauthorized"), ProviderErrorKind::AccessDenied);
        assert_eq!(kind("Error: dial tcp 127.0.0.1:1: connect: connection refused"), ProviderErrorKind::Transient);
        assert_eq!(
            kind("Error: chart \"kuberay-operator\" version \"9.9.9\" not found in https://x repository"),
            ProviderErrorKind::InvalidRequest
        );
        assert_eq!(kind("Error: something else"), ProviderErrorKind::Failed);
        assert_eq!(classify("helm:status", "Error: boom\n").message, "boom");
    }

    /// A pinned static `helm` (see README: `target/tools/helm`, or `INSTANTSTART_TEST_HELM`).
    fn helm_binary() -> Option<PathBuf> {
        let p = std::env::var_os("INSTANTSTART_TEST_HELM")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/helm"));
        p.exists().then_some(p)
    }

    struct Fixed(ClusterAccess);
    #[async_trait]
    impl ClusterAccessResolver for Fixed {
        async fn access(&self, _t: &KubeTarget) -> Result<ClusterAccess, K8sError> {
            Ok(self.0.clone())
        }
    }

    /// The real binary accepts our argv and kubeconfig: against a closed port every call fails
    /// with a connection error (Transient), never with a flag or kubeconfig error.
    #[tokio::test]
    async fn real_helm_accepts_the_argv_and_kubeconfig() {
        let Some(helm) = helm_binary() else {
            eprintln!("skipped: no helm binary at target/tools/helm (see README) or INSTANTSTART_TEST_HELM");
            return;
        };
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let access = ClusterAccess {
            server: format!("https://{closed}"),
            // The connection is refused before TLS: no CA needed (a real one is covered above).
            ca_pem: None,
            token: Some("k8s-aws-v1.test".into()),
        };
        let cli = HelmCli::new(helm, Arc::new(Fixed(access))).with_timeout(Duration::from_secs(60));
        let target = KubeTarget::new("us-west-2", "demo-eks");
        let e = cli.get_release(&target, "kuberay-operator", "kuberay-operator").await.unwrap_err();
        assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
        assert!(e.message.contains("connection refused"), "{e}");
        let e = cli.uninstall(&target, "kuberay-operator", "kuberay-operator").await.unwrap_err();
        assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
        let mut spec = KUBERAY_OPERATOR.spec();
        spec.chart.source = ChartSource::Repository { url: format!("https://{closed}/charts/") };
        let e = cli.install_or_upgrade(&target, &spec).await.unwrap_err();
        assert!(!e.message.contains("unknown flag"), "{e}");
        assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
        // A vendored chart directory: helm loads it locally (no chart lookup, no network) and
        // fails only when it reaches the cluster.
        let charts = tempfile::tempdir().unwrap();
        vendor(charts.path(), "hyperpod-helm-chart", "0.1.0", HYPERPOD_CLI_COMMIT);
        let chart_yaml = charts.path().join("HyperPodHelmChart/Chart.yaml");
        let text = std::fs::read_to_string(&chart_yaml).unwrap();
        std::fs::write(&chart_yaml, text.split("dependencies:").next().unwrap()).unwrap();
        std::fs::write(
            charts.path().join("HyperPodHelmChart/templates/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t\ndata:\n  region: {{ .Values.global.region | quote }}\n",
        )
        .unwrap();
        let access =
            ClusterAccess { server: format!("https://{closed}"), ca_pem: None, token: Some("k8s-aws-v1.test".into()) };
        let cli = HelmCli::new(cli.binary.clone(), Arc::new(Fixed(access)))
            .with_timeout(Duration::from_secs(60))
            .with_charts_dir(charts.path());
        let e = cli.install_or_upgrade(&target, &HYPERPOD_DEPENDENCIES.spec_for("eu-west-1")).await.unwrap_err();
        assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
        assert!(e.message.contains("connection refused"), "{e}");
        let bad = ReleaseSpec { release: "-x".into(), ..spec };
        assert_eq!(cli.install_or_upgrade(&target, &bad).await.unwrap_err().kind, ProviderErrorKind::InvalidRequest);
    }
}
