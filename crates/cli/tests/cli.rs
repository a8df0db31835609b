//! End-to-end tests of the `instantstart` binary against a real InstantStart server running
//! in-process on a free loopback port, on the simulated cloud at speed 2000.
//!
//! Each test starts its own server (own data directory and simulated world) and gives the CLI
//! its own HOME/XDG_CONFIG_HOME, so tests run in parallel without sharing state.

use assert_cmd::Command;
use instantstart_testkit::{Bed, TOKEN};
use predicates::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

const GROUP: &str = "name=workers,type=ml.g5.2xlarge,count=2,az=us-east-1a";

/// A served bed (the server on the simulated cloud at speed 2000, on its own data directory and
/// loopback port) on a runtime of its own, since the CLI runs as a blocking child process.
struct TestServer {
    url: String,
    home: tempfile::TempDir,
    data: tempfile::TempDir,
    bed: Option<Bed>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// A runtime and a served bed on `data` at `port` (0: any free one).
fn serve(data: &std::path::Path, port: u16) -> (tokio::runtime::Runtime, Bed) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let bed = runtime.block_on(async { Bed::sim(data).speed(2000.0).port(port).serve() });
    (runtime, bed)
}

impl TestServer {
    fn start() -> TestServer {
        let data = tempfile::tempdir().unwrap();
        let (runtime, bed) = serve(data.path(), 0);
        let home = tempfile::tempdir().unwrap();
        TestServer { url: bed.url().to_string(), home, data, bed: Some(bed), runtime: Some(runtime) }
    }

    fn served(&self) -> &Bed {
        self.bed.as_ref().expect("the bed runs until dropped")
    }

    /// The server's store (to archive operations as the retention sweep would).
    fn store(&self) -> &std::sync::Arc<dyn instantstart_core::store::Store> {
        &self.served().store
    }

    /// Applies `object` to the EKS cluster `eks` (us-east-1) the way another tool would:
    /// through the cluster's Kubernetes API, without InstantStart's labels.
    fn kube_apply(&self, eks: &str, object: Value) {
        let target = instantstart_core::provider::KubeTarget::new("us-east-1", eks);
        let object = instantstart_core::provider::KubeObject(object);
        let runtime = self.runtime.as_ref().expect("the runtime runs until dropped");
        runtime.block_on(self.served().state().kube.apply(&target, &object)).unwrap();
    }

    /// Stops the server as a crash does (its runtime goes, every connection with it) and
    /// serves a new one on the same port and data directory, like a restarted process.
    fn restart(&mut self) {
        let port = self.served().port();
        self.stop();
        let (runtime, bed) = serve(self.data.path(), port);
        assert_eq!(bed.url(), self.url);
        (self.runtime, self.bed) = (Some(runtime), Some(bed));
    }

    /// Drops the bed inside its runtime, then the runtime with every task still on it.
    fn stop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            let guard = runtime.enter();
            self.bed.take();
            drop(guard);
            runtime.shutdown_background();
        }
    }

    /// The CLI pointed at this server with the admin token, isolated from the user's config.
    fn cli(&self) -> Command {
        let mut c = bare_cli(&self.home);
        c.env("INSTANTSTART_URL", &self.url).env("INSTANTSTART_TOKEN", TOKEN);
        c
    }

    /// The CLI started in the background with piped stdout/stderr (for streams read while
    /// they run).
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        std::process::Command::new(env!("CARGO_BIN_EXE_instantstart"))
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path())
            .env("INSTANTSTART_URL", &self.url)
            .env("INSTANTSTART_TOKEN", TOKEN)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Creates cluster `name` (workers: 2 × ml.g5.2xlarge in us-east-1a) and waits for it.
    fn ready(&self, name: &str) {
        self.cli().args(create_args(name)).arg("--wait").assert().success();
    }

    /// How many operations the server recorded.
    fn operations(&self) -> usize {
        self.json(&["operation", "list"]).as_array().unwrap().len()
    }

    /// Runs the CLI with `-o json` and parses stdout.
    fn json(&self, args: &[&str]) -> Value {
        let out = self.cli().args(args).args(["-o", "json"]).assert().success().get_output().stdout.clone();
        serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out)))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The CLI with no server settings at all, HOME and XDG_CONFIG_HOME in `home`.
fn bare_cli(home: &tempfile::TempDir) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_instantstart"));
    c.env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env("NO_COLOR", "1")
        .env_remove("INSTANTSTART_URL")
        .env_remove("INSTANTSTART_TOKEN")
        .env_remove("INSTANTSTART_CONFIG")
        .env_remove("INSTANTSTART_FACE")
        .env_remove("INSTANTSTART_CLUSTER")
        .timeout(Duration::from_secs(120));
    c
}

fn create_args(name: &str) -> Vec<String> {
    ["cluster", "create", "--name", name, "--az", "us-east-1a", "--az", "us-east-1b", "--group", GROUP]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn stdout(c: &mut Command) -> String {
    String::from_utf8(c.assert().get_output().stdout.clone()).unwrap()
}

#[test]
fn context_quotas_training_plans_and_offerings() {
    let s = TestServer::start();
    s.ready("demo");
    let quotas = s.json(&["context", "quotas", "--type", "ml.g5.2xlarge"]);
    assert_eq!(quotas.as_array().map(Vec::len), Some(1), "{quotas:#}");
    assert_eq!(quotas[0]["in_use"], 2, "{quotas:#}");
    s.cli()
        .args(["context", "quotas"])
        .assert()
        .success()
        .stdout(predicate::str::contains("INSTANCE TYPE").and(predicate::str::contains("AVAILABLE")))
        .stdout(predicate::str::contains("ml.g5.2xlarge"));
    assert_eq!(s.json(&["context", "training-plans"]), serde_json::json!([]));
    s.cli()
        .args(["context", "training-plans"])
        .assert()
        .success()
        .stdout(predicate::str::contains("No training plans"));
    let offers = s.json(&["context", "offerings", "--type", "ml.p5.48xlarge", "--count", "2", "--hours", "24"]);
    assert!(!offers.as_array().unwrap().is_empty() && offers[0]["instance_count"] == 2, "{offers:#}");
    s.cli()
        .args(["context", "offerings", "--type", "ml.p5.48xlarge", "--count", "2", "--hours", "24"])
        .assert()
        .success()
        .stdout(predicate::str::contains("OFFERING").and(predicate::str::contains("tpo-")));
    s.cli()
        .args(["context", "offerings", "--type", "ml.g5.2xlarge", "--count", "2", "--hours", "24"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("instance_type"));
}

#[test]
fn help_documents_the_commands_and_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let help = stdout(bare_cli(&home).arg("--help"));
    insta::assert_snapshot!("help", help);
    let create = stdout(bare_cli(&home).args(["cluster", "create", "--help"]));
    insta::assert_snapshot!("cluster_create_help", create);
    for (name, args) in [
        ("instance_group_add_help", ["instance-group", "add", "--help"]),
        ("instance_group_scale_help", ["instance-group", "scale", "--help"]),
        ("node_help", ["node", "--help", ""]),
        ("node_replace_help", ["node", "replace", "--help"]),
        ("feature_set_help", ["feature", "set", "--help"]),
        ("job_submit_help", ["job", "submit", "--help"]),
        ("endpoint_deploy_help", ["endpoint", "deploy", "--help"]),
        ("context_offerings_help", ["context", "offerings", "--help"]),
    ] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        insta::assert_snapshot!(name, stdout(bare_cli(&home).args(&args)));
    }
    let hyperpod_add = stdout(bare_cli(&home).args(["cluster", "hyperpod", "add", "--help"]));
    insta::assert_snapshot!("cluster_hyperpod_add_help", hyperpod_add);
    bare_cli(&home).args(["completions", "bash"]).assert().success().stdout(predicate::str::contains("instantstart"));
    // clap usage errors are exit 2.
    bare_cli(&home).args(["cluster", "frobnicate"]).assert().code(2);
}

#[test]
fn create_with_wait_then_read_in_every_format_and_delete() {
    let s = TestServer::start();
    s.cli()
        .args(create_args("demo"))
        .arg("--wait")
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded"))
        .stderr(predicate::str::contains("hyperpod_cluster").and(predicate::str::contains("operation op-")));

    let clusters = s.json(&["cluster", "list"]);
    assert_eq!(clusters[0]["name"], "demo");
    assert_eq!(clusters[0]["status"], "ready");
    assert_eq!(clusters[0]["active"], true);
    insta::assert_snapshot!("cluster_list", stdout(s.cli().args(["cluster", "list"])));
    let yaml = stdout(s.cli().args(["cluster", "list", "-o", "yaml"]));
    assert!(yaml.starts_with("- ") && yaml.contains("name: demo") && yaml.contains("status: ready"), "{yaml}");

    let detail = s.json(&["cluster", "get", "demo"]);
    assert_eq!(detail["nodes"].as_array().unwrap().len(), 2);
    let table = stdout(s.cli().args(["cluster", "get", "demo"]));
    assert!(table.contains("Name:             demo (active)") && table.contains("workers"), "{table}");

    let ops = s.json(&["operation", "list", "--cluster", "demo"]);
    let id = ops[0]["id"].as_str().unwrap().to_string();
    assert_eq!(ops[0]["actor"]["face"], "cli", "the CLI names its face");
    assert!(ops[0]["idempotency_key"].as_str().unwrap().starts_with("is-"), "a fresh key per invocation");
    let table = stdout(s.cli().args(["operation", "get", &id]));
    assert!(table.contains("Status:    succeeded") && table.contains("eks_cluster"), "{table}");
    // Waiting on a finished operation returns at once with its verdict.
    s.cli().args(["operation", "wait", &id]).assert().success();

    assert_eq!(s.json(&["audit"])[0]["actor"]["face"], "cli");
    assert_eq!(s.json(&["context"])["provider"], "sim");
    s.cli().args(["context", "zones"]).assert().success().stdout(predicate::str::contains("us-east-1a  use1-az1"));
    let types = s.json(&["context", "instance-types", "--region", "us-east-1"]);
    assert!(types.as_array().unwrap().iter().any(|t| t["instance_type"] == "ml.g5.2xlarge"));
    s.cli()
        .args(["context", "eks-clusters"])
        .assert()
        .success()
        .stdout(predicate::str::contains("demo (created)").and(predicate::str::contains("demo-hp")));

    s.cli().args(["cluster", "use", "--none"]).assert().success().stdout("No active cluster.\n");
    s.cli().args(["cluster", "use", "demo"]).assert().success().stdout("Active cluster: demo\n");
    s.cli()
        .args(["cluster", "use", "ghost"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no cluster named ghost"));

    // Deleting needs --yes when nobody can be asked.
    s.cli().args(["cluster", "delete", "demo"]).assert().code(2).stderr(predicate::str::contains("--yes"));
    s.cli().args(["cluster", "delete", "demo", "--yes", "--wait"]).assert().success();
    assert_eq!(s.json(&["cluster", "list"]), serde_json::json!([]));
    s.cli().args(["cluster", "list"]).assert().success().stdout(predicate::str::starts_with("No clusters."));
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let s = TestServer::start();
    let spec_path = s.home.path().join("spec.yaml");
    let spec = stdout(s.cli().args(create_args("demo")).arg("--print-spec"));
    assert!(spec.contains("name: demo") && spec.contains("instance_type: ml.g5.2xlarge"), "{spec}");
    std::fs::write(&spec_path, &spec).unwrap();

    let plan = stdout(s.cli().args(["cluster", "create", "--dry-run", "-f"]).arg(&spec_path));
    // The steps (the preflight checks that may follow depend on the simulated account).
    let steps = plan.split("Preflight checks:").next().unwrap();
    insta::assert_snapshot!("dry_run_plan", steps);
    let plan =
        s.json(&["cluster", "create", "--name", "demo", "--az", "us-east-1a", "--az", "us-east-1b", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert!(plan["steps"].as_array().unwrap().iter().all(|s| s["key"] != "hyperpod_cluster"), "no groups, no HyperPod");
    s.cli().args(["cluster", "delete", "nope", "--dry-run"]).assert().code(2);

    let stats = s.json(&["sim", "stats"]);
    assert!(stats.as_object().unwrap().keys().all(|k| !k.contains("Create")), "dry run called nothing: {stats}");
    assert_eq!(s.json(&["cluster", "list"]), serde_json::json!([]));
    assert_eq!(s.json(&["operation", "list"]), serde_json::json!([]));
}

#[test]
fn validation_errors_exit_2_and_name_every_field() {
    let s = TestServer::start();
    let mut args = create_args("Bad Name");
    let last = args.len() - 1;
    args[last] = "name=workers,type=ml.g5.2xlarge,count=99999,az=us-east-1a".into();
    s.cli()
        .args(&args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("name: may contain only lowercase letters"))
        .stderr(predicate::str::contains("hyperpod.instance_groups[0].count: must be at most 2048"));
    // A file is sent as is: the server names the field of a shape error.
    s.cli()
        .args(["cluster", "create", "-f", "-"])
        .write_stdin("name: x\nregion: 5\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("region: invalid type"));
    s.cli().args(["cluster", "create", "-f", "-"]).write_stdin("{ not json").assert().code(2);
    // Flags the CLI cannot parse are clap errors (exit 2).
    s.cli()
        .args(["cluster", "create", "--name", "x", "--group", "name=a,type=b"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing count="));
    s.cli().args(["cluster", "create", "--name", "x", "--vpc-cidr", "10.0.0/16"]).assert().code(2);
    s.cli().args(["operation", "get", "op-nope"]).assert().code(2).stderr(predicate::str::contains("not found"));
    s.cli().args(["operation", "wait", "op-nope"]).assert().code(2).stderr(predicate::str::contains("not found"));
    s.cli().args(["operation", "list", "--limit", "0"]).assert().code(2).stderr(predicate::str::contains("limit:"));
    s.cli().args(["context", "zones", "--region", "mars"]).assert().code(2).stderr(predicate::str::contains("region:"));
    assert_eq!(s.json(&["operation", "list"]), serde_json::json!([]), "nothing was recorded");
}

#[test]
fn auth_and_connection_errors_exit_3() {
    let s = TestServer::start();
    s.cli().args(["--token", "wrong", "cluster", "list"]).assert().code(3).stderr(
        predicate::str::contains("invalid, expired or revoked API token")
            .and(predicate::str::contains("instantstart login")),
    );
    bare_cli(&s.home)
        .args(["--url", &s.url, "cluster", "list"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("HTTP 401"));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    s.cli()
        .args(["--url", &format!("http://127.0.0.1:{port}"), "context"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("cannot reach"));
    s.cli().args(["--url", "ftp://nowhere", "context"]).assert().code(2);
}

#[test]
fn a_failed_operation_exits_1_and_retry_recovers_it() {
    let s = TestServer::start();
    let faults = r#"{"fail_apis":{"sagemaker:CreateCluster":{"mode":"fail","kind":"failed","message":"boom"}}}"#;
    s.cli().args(["sim", "faults", "set", faults]).assert().success();
    assert_eq!(s.json(&["sim", "faults", "get"])["fail_apis"]["sagemaker:CreateCluster"]["message"], "boom");
    s.cli()
        .args(create_args("demo"))
        .arg("--wait")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("boom"))
        .stderr(predicate::str::contains("instantstart operation retry"));
    let failed = s.json(&["operation", "list", "--status", "failed"]);
    let id = failed[0]["id"].as_str().unwrap().to_string();
    // Waiting on it again gives the same verdict.
    s.cli().args(["operation", "wait", &id]).assert().code(1);
    // A step that did not fail cannot be retried: 409.
    s.cli().args(["operation", "retry", &id, "eks_cluster"]).assert().code(4);

    s.cli().args(["sim", "faults", "set", "--clear"]).assert().success();
    s.cli()
        .args(["operation", "retry", &id, "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded"));
    let stats = s.json(&["sim", "stats"]);
    assert!(stats["sagemaker:CreateCluster"].as_u64().unwrap() >= 1, "{stats}");
    assert_eq!(stats["eks:CreateCluster"], 1, "the retry did not replay other steps: {stats}");
}

#[test]
fn reusing_an_idempotency_key_replays_or_conflicts() {
    let s = TestServer::start();
    let mut args = create_args("one");
    args.extend(["--idempotency-key".into(), "key-1".into()]);
    let first = s.json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let id = first["operation"]["id"].as_str().unwrap().to_string();
    assert_eq!(first["replayed"], false);
    // The same command again returns the same operation.
    s.cli()
        .args(create_args("one"))
        .args(["--idempotency-key", "key-1"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("Operation {id} already submitted")));
    // The same key with another request: 409, exit 4.
    s.cli()
        .args(create_args("two"))
        .args(["--idempotency-key", "key-1"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("idempotency key"))
        .stderr(predicate::str::contains(format!("instantstart operation get {id}")));
    s.cli().args(["operation", "wait", &id]).assert().success();
}

#[test]
fn login_saves_a_private_config_bound_to_the_server() {
    let s = TestServer::start();
    let config = s.home.path().join("instantstart").join("config.json");
    // A wrong token is refused and nothing is written.
    bare_cli(&s.home).args(["--url", &s.url, "login"]).write_stdin("wrong\n").assert().code(3);
    assert!(!config.exists());
    bare_cli(&s.home)
        .args(["--url", &s.url, "login"])
        .write_stdin(format!("{TOKEN}\n"))
        .assert()
        .success()
        .stdout(predicate::str::contains("Logged in").and(predicate::str::contains("as admin (scope operate)")));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&config).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(saved["default_url"], s.url.as_str());
    assert_eq!(saved["servers"][&s.url]["token"], TOKEN);
    // Later commands need neither --url nor a token.
    bare_cli(&s.home).args(["cluster", "list"]).assert().success();
    // The saved token is not sent to another server.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    bare_cli(&s.home).args(["--url", &format!("http://127.0.0.1:{port}"), "logout"]).assert().success();
    bare_cli(&s.home).arg("logout").assert().success().stdout(predicate::str::contains("Forgot the token"));
    bare_cli(&s.home).args(["--url", &s.url, "cluster", "list"]).assert().code(3);
}

#[test]
fn instance_groups_scale_add_delete_with_explicit_diffs() {
    let s = TestServer::start();
    s.ready("demo");
    let groups = s.json(&["instance-group", "list", "demo"]);
    assert_eq!((groups[0]["name"].as_str(), groups[0]["target_count"].as_u64()), (Some("workers"), Some(2)));
    let table = stdout(s.cli().args(["instance-group", "list", "demo"]));
    assert!(
        table.starts_with("NAME") && table.contains("workers  ml.g5.2xlarge  2/2    on_demand  standard"),
        "{table}"
    );

    // The count it already has: "already in this state", exit 0, no operation.
    let before = s.operations();
    s.cli()
        .args(["instance-group", "scale", "demo", "workers", "--count", "2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("demo/workers: already in this state"));
    let noop = s.json(&["instance-group", "scale", "demo", "workers", "--count", "2"]);
    assert_eq!(noop["no_change"], true);
    assert_eq!(s.operations(), before, "a no-op records no operation");

    // An immutable field: exit 2 naming the field, nothing recorded.
    s.cli()
        .args(["instance-group", "scale", "demo", "workers", "--capacity", "spot"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("patch.capacity: immutable"));
    s.cli()
        .args(["instance-group", "scale", "demo", "workers", "--count", "3", "--interface-mode", "efa_only"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("patch.interface_mode"));
    assert_eq!(s.operations(), before);
    // Only the flags given are sent: at least one is needed.
    s.cli().args(["instance-group", "scale", "demo", "workers"]).assert().code(2);

    // The dry run shows the diff and the quota check; then scale with --wait.
    let plan = stdout(s.cli().args(["instance-group", "scale", "demo", "workers", "--count", "3", "--dry-run"]));
    assert!(plan.contains("Changes:\n  count: 2 → 3") && plan.contains("pass  quota patch.count"), "{plan}");
    s.cli()
        .args(["instance-group", "scale", "demo", "workers", "--count", "3", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("count: 2 → 3").and(predicate::str::contains("succeeded")));
    let g = &s.json(&["instance-group", "list", "demo"])[0];
    assert_eq!((g["current_count"].as_u64(), g["target_count"].as_u64()), (Some(3), Some(3)));
    let op = &s.json(&["operation", "list", "--cluster", "demo"])[0];
    assert_eq!((op["kind"].as_str(), op["status"].as_str()), (Some("update_instance_group"), Some("succeeded")));
    let patch = op["request"]["patch"].as_object().unwrap();
    assert!(patch.iter().all(|(k, v)| if k == "count" { v == 3 } else { v.is_null() }), "only the count: {patch:?}");

    // Add: the dry run lists the preflight checks with their remedies; a failing one is exit 2.
    let big = ["instance-group", "add", "demo", "--group", "name=big,type=ml.p5.48xlarge,count=64,az=us-east-1b"];
    s.cli()
        .args(big)
        .arg("--dry-run")
        .assert()
        .code(2)
        .stdout(
            predicate::str::contains("fail  quota group.count").and(predicate::str::contains("→ request an increase")),
        )
        .stderr(predicate::str::contains("a preflight check fails"));
    s.cli()
        .args(big)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("group.count: quota").and(predicate::str::contains("Service Quotas")));
    let spot = [
        "instance-group",
        "add",
        "demo",
        "--group",
        "name=spot,type=ml.g5.2xlarge,count=1,az=us-east-1b,capacity=spot",
    ];
    let plan = stdout(s.cli().args(spot).arg("--dry-run"));
    assert!(plan.contains("placement") && plan.contains("pass  offering group.availability_zone"), "{plan}");
    s.cli().args(spot).arg("--wait").assert().success().stdout(predicate::str::contains("succeeded"));
    // From a file, sent as is: the server names the field of a shape error.
    s.cli()
        .args(["instance-group", "add", "demo", "-f", "-"])
        .write_stdin("name: x\ninstance_type: ml.g5.2xlarge\ncount: many\navailability_zone: us-east-1a\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("count"));
    let groups = s.json(&["instance-group", "list", "demo"]);
    let spot = groups.as_array().unwrap().iter().find(|g| g["name"] == "spot").unwrap();
    assert_eq!(spot["capacity"]["type"], "spot");

    // Delete: confirmation needed without a terminal; the last group cannot go.
    s.cli()
        .args(["instance-group", "delete", "demo", "spot"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--yes"));
    s.cli().args(["instance-group", "delete", "demo", "spot", "--yes", "--wait"]).assert().success();
    assert_eq!(s.json(&["instance-group", "list", "demo"]).as_array().unwrap().len(), 1);
    s.cli()
        .args(["instance-group", "delete", "demo", "workers", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("last instance group"));
}

/// HyperPod on an EKS-only cluster: `cluster hyperpod add` (dry run, then for real; a second
/// add is a conflict, exit 4), `cluster hyperpod remove` (confirmation, then EKS-only again).
#[test]
fn hyperpod_is_added_to_an_eks_only_cluster_and_removed() {
    let s = TestServer::start();
    s.cli()
        .args(["cluster", "create", "--name", "eksonly", "--az", "us-east-1a", "--az", "us-east-1b", "--wait"])
        .assert()
        .success();
    let add =
        ["cluster", "hyperpod", "add", "eksonly", "--group", "name=workers,type=ml.g5.2xlarge,count=1,az=us-east-1a"];
    let before = s.operations();
    let plan = stdout(s.cli().args(add).arg("--dry-run"));
    assert!(plan.contains("hyperpod_cluster") && plan.contains("hyperpod_execution_role"), "{plan}");
    assert_eq!(s.operations(), before, "a dry run records nothing");
    s.cli().args(add).arg("--wait").assert().success().stdout(predicate::str::contains("succeeded"));
    assert_eq!(s.json(&["cluster", "get", "eksonly"])["hyperpod_cluster"], "eksonly-hp");
    s.cli().args(add).assert().code(4).stderr(predicate::str::contains("already has HyperPod"));
    s.cli()
        .args(["cluster", "hyperpod", "remove", "eksonly"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--yes"));
    s.cli().args(["cluster", "hyperpod", "remove", "eksonly", "--yes", "--wait"]).assert().success();
    assert_eq!(s.json(&["cluster", "get", "eksonly"])["hyperpod_cluster"], Value::Null);
    s.cli().args(["cluster", "hyperpod", "remove", "eksonly", "--yes"]).assert().code(4);
}

#[test]
fn nodes_reboot_then_replace_only_with_the_acknowledgement() {
    let s = TestServer::start();
    s.ready("demo");
    let nodes = s.json(&["node", "list", "demo"]);
    let ids: Vec<String> =
        nodes.as_array().unwrap().iter().map(|n| n["instance_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(s.json(&["node", "list", "demo", "--group", "nope"]), serde_json::json!([]));
    let table = stdout(s.cli().args(["node", "list", "demo"]));
    assert!(table.starts_with("NODE") && table.contains(&ids[0]) && table.contains("Running"), "{table}");

    // Reboot (the step after investigating), followed to the end.
    s.cli()
        .args(["node", "reboot", "demo", &ids[0], "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("reboot_nodes cluster/demo"))
        .stdout(predicate::str::contains("succeeded"));
    assert_eq!(s.json(&["sim", "stats"])["sagemaker:BatchRebootClusterNodes"], 1);

    // Replace without the acknowledgement: exit 2, the flag and the ladder are named.
    let before = s.operations();
    s.cli()
        .args(["node", "replace", "demo", &ids[0]])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("acknowledge_local_data_loss"))
        .stderr(predicate::str::contains("--yes-lose-local-data"))
        .stderr(predicate::str::contains("investigate → reboot → replace"));
    s.cli().args(["node", "delete", "demo", &ids[1]]).assert().code(2);
    s.cli().args(["node", "reboot", "demo", "i-0000"]).assert().code(2).stderr(predicate::str::contains("node_ids[0]"));
    s.cli().args(["node", "reboot", "demo"]).assert().code(2);
    assert_eq!(s.operations(), before, "nothing was recorded");
    assert!(s.json(&["sim", "stats"]).get("sagemaker:BatchReplaceClusterNodes").is_none());

    s.cli()
        .args(["node", "replace", "demo", &ids[0], "--yes-lose-local-data", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded"));
    let after: Vec<String> = s
        .json(&["node", "list", "demo"])
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["instance_id"].as_str().unwrap().to_string())
        .collect();
    assert!(after.len() == 2 && !after.contains(&ids[0]), "the replaced node has a new instance id: {after:?}");
}

#[test]
fn node_get_and_cluster_events_read_hyperpod() {
    let s = TestServer::start();
    s.ready("demo");
    let nodes = s.json(&["node", "list", "demo"]);
    let id = nodes[0]["instance_id"].as_str().unwrap().to_string();
    // One node in detail, as JSON and as a table with the next step hinted.
    let d = s.json(&["node", "get", "demo", &id]);
    assert_eq!((d["instance_id"].as_str(), d["status"].as_str()), (Some(id.as_str()), Some("Running")));
    assert!(d["private_ip"].is_string(), "{d:#}");
    s.cli()
        .args(["node", "get", "demo", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains("Private IP:"))
        .stdout(predicate::str::contains("Capacity type:"))
        .stderr(predicate::str::contains(format!("instantstart cluster events demo --node {id}")));
    s.cli()
        .args(["node", "get", "demo", "i-00000000000000000"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not found"));
    s.cli().args(["node", "get", "demo", "node-1"]).assert().code(2).stderr(predicate::str::contains("node"));

    // Events: newest first, filtered, paged with the printed cursor.
    let all = s.json(&["cluster", "events", "demo", "--limit", "100"]);
    let events = all["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["description"].as_str().unwrap().ends_with("is InService")), "{all:#}");
    let mine = s.json(&["cluster", "events", "demo", "--node", &id, "--resource", "instance"]);
    assert!(mine["events"].as_array().unwrap().iter().all(|e| e["instance_id"] == id.as_str()), "{mine:#}");
    let first = s.json(&["cluster", "events", "demo", "--limit", "1"]);
    let cursor = first["next_cursor"].as_str().expect("more than one event").to_string();
    let second = s.json(&["cluster", "events", "demo", "--limit", "1", "--cursor", &cursor]);
    assert_eq!(second["events"][0], events[1]);
    s.cli()
        .args(["cluster", "events", "demo", "--limit", "1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("TIME"))
        .stderr(predicate::str::contains("--cursor"));
    s.cli()
        .args(["cluster", "events", "demo", "--limit", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("limit"));
    s.cli().args(["cluster", "events", "nope"]).assert().code(2);
}

#[test]
fn observability_switches_on_and_off() {
    let s = TestServer::start();
    s.ready("demo");
    assert_eq!(s.json(&["feature", "get", "demo"])["observability"], false);
    let plan = stdout(s.cli().args(["feature", "set", "demo", "--observability", "on", "--dry-run"]));
    assert!(
        plan.contains("observability: false → true")
            && plan.contains("prometheus_workspace")
            && plan.contains("addon:amazon-sagemaker-hyperpod-observability"),
        "{plan}"
    );
    s.cli().args(["feature", "set", "demo", "--observability", "on", "--wait"]).assert().success();
    assert_eq!(s.json(&["feature", "get", "demo"])["observability"], true);
    let table = stdout(s.cli().args(["feature", "get", "demo"]));
    assert!(table.contains("Observability:") && table.contains("on"), "{table}");
    let plan = stdout(s.cli().args(["feature", "set", "demo", "--observability", "off", "--dry-run"]));
    assert!(plan.contains("remove_observability_role") && !plan.contains("prometheus_workspace"), "{plan}");
    s.cli().args(["feature", "set", "demo", "--observability", "off", "--wait"]).assert().success();
    assert_eq!(s.json(&["feature", "get", "demo"])["observability"], false);
}

#[test]
fn features_switch_on_and_off_with_explicit_diffs() {
    let s = TestServer::start();
    s.ready("demo");
    let f = s.json(&["feature", "get", "demo"]);
    assert_eq!((f["training_operator"].as_bool(), f["managed_autoscaling"].as_bool()), (Some(false), Some(false)));
    assert!(f["autoscaling_scope"].as_str().unwrap().contains("HyperPod instance groups only"));
    let table = stdout(s.cli().args(["feature", "get", "demo"]));
    assert!(table.contains("Training operator:    off") && table.contains("Tiered checkpointing: off"), "{table}");

    // On, with the diff printed and the operation followed to the end.
    s.cli()
        .args(["feature", "set", "demo", "--training-operator", "on", "--tiered-checkpointing", "on"])
        .args(["--memory-percent", "30", "--autoscaling", "off", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("training_operator: false → true"))
        .stdout(predicate::str::contains("tiered_checkpointing: null → {\"memory_percent\":30}"))
        .stdout(predicate::str::contains("managed_autoscaling").not())
        .stdout(predicate::str::contains("set_features cluster/demo").and(predicate::str::contains("succeeded")));
    let f = s.json(&["feature", "get", "demo"]);
    assert_eq!(f["training_operator"], true);
    assert_eq!(f["tiered_checkpointing"]["memory_percent"], 30);
    let op = &s.json(&["operation", "list", "--cluster", "demo"])[0];
    assert!(op["request"]["patch"]["managed_autoscaling"].is_null(), "only real changes are recorded");

    // The same again: "already in this state", exit 0, no operation.
    let before = s.operations();
    s.cli()
        .args(["feature", "set", "demo", "--training-operator", "on", "--autoscaling", "off"])
        .assert()
        .success()
        .stdout(predicate::str::contains("demo: already in this state"));
    assert_eq!(s.json(&["feature", "set", "demo", "--training-operator", "on"])["no_change"], true);
    assert_eq!(s.operations(), before);

    // Off, the dry run showing the diff first; then autoscaling on.
    let plan = stdout(s.cli().args(["feature", "set", "demo", "--tiered-checkpointing", "off", "--dry-run"]));
    assert!(
        plan.contains("remove_checkpoint_role")
            && plan.contains("tiered_checkpointing: {\"memory_percent\":30} → null"),
        "{plan}"
    );
    s.cli().args(["feature", "set", "demo", "--tiered-checkpointing", "off", "--wait"]).assert().success();
    s.cli().args(["feature", "set", "demo", "--autoscaling", "on", "--wait"]).assert().success();
    let f = s.json(&["feature", "get", "demo"]);
    assert_eq!((f["tiered_checkpointing"].is_null(), f["managed_autoscaling"].as_bool()), (true, Some(true)));

    // Usage and validation errors: exit 2.
    s.cli().args(["feature", "set", "demo"]).assert().code(2);
    s.cli().args(["feature", "set", "demo", "--memory-percent", "30"]).assert().code(2);
    s.cli()
        .args(["feature", "set", "demo", "--tiered-checkpointing", "on", "--memory-percent", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("patch.tiered_checkpointing.memory_percent"));
    s.cli().args(["feature", "get", "ghost"]).assert().code(2);
}

#[test]
fn agent_install_writes_the_configs_and_skills_and_keeps_local_edits() {
    let dir = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let install = |client: &str, force: bool| {
        let mut c = Command::cargo_bin("instantstart").unwrap();
        c.args(["agent", "install", "--for", client]).arg(dir.path()).args(["-o", "json"]);
        if force {
            c.arg("--force");
        }
        c.assert()
    };
    install("kiro", false).success();
    for (installed, template) in [
        (".kiro/agents/hypd-inst-agent.json", ".kiro/agents/hypd-inst-agent.json"),
        (".mcp.json", ".mcp.json"),
        ("skills/create-cluster/SKILL.md", "skills/create-cluster/SKILL.md"),
        ("skills/diagnose-node-health/SKILL.md", "skills/diagnose-node-health/SKILL.md"),
    ] {
        let got = std::fs::read_to_string(dir.path().join(installed)).unwrap();
        let want = std::fs::read_to_string(repo.join(template)).unwrap();
        assert_eq!(got, want, "{installed}");
    }
    assert!(!dir.path().join("skills/agents").exists(), "templates are installed at their places, not copied");
    install("claude", false).success();
    assert!(dir.path().join(".claude/agents/hypd-inst-agent.md").exists());
    assert!(dir.path().join(".claude/settings.json").exists());
    // Running again changes nothing; a locally edited file is kept (exit 2) unless --force.
    let again: Value = serde_json::from_slice(&install("kiro", false).success().get_output().stdout).unwrap();
    assert!(again.as_array().unwrap().iter().all(|f| f["outcome"] == "unchanged"), "{again}");
    std::fs::write(dir.path().join(".mcp.json"), "{}").unwrap();
    let kept: Value = serde_json::from_slice(&install("kiro", false).code(2).get_output().stdout).unwrap();
    assert!(kept.as_array().unwrap().iter().any(|f| f["path"] == ".mcp.json" && f["outcome"] == "kept"));
    assert_eq!(std::fs::read_to_string(dir.path().join(".mcp.json")).unwrap(), "{}");
    install("kiro", true).success();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".mcp.json")).unwrap(),
        std::fs::read_to_string(repo.join(".mcp.json")).unwrap()
    );
}

// ----- workloads: storage, downloads, training jobs, endpoints -----

const TRAIN_IMAGE: &str = "public.ecr.aws/example/train:1.0";
const SERVE_IMAGE: &str = "vllm/vllm-openai:v0.10.1";

fn job_args(name: &str) -> Vec<String> {
    [
        "job",
        "submit",
        "--recipe",
        "torch",
        "--name",
        name,
        "--image",
        TRAIN_IMAGE,
        "--instance-type",
        "ml.g5.2xlarge",
        "--nodes",
        "2",
        "--script",
        "scripts/train.py",
        "--arg=--epochs=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn endpoint_args(name: &str) -> Vec<String> {
    [
        "endpoint",
        "deploy",
        "--engine",
        "vllm",
        "--name",
        name,
        "--model",
        "models/Qwen/Qwen3-0.6B",
        "--image",
        SERVE_IMAGE,
        "--instance-type",
        "ml.g5.2xlarge",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs `args` (JSON) until `done` holds, for at most 60 s.
fn eventually(s: &TestServer, args: &[&str], done: impl Fn(&Value) -> bool) -> Value {
    let last = std::cell::RefCell::new(Value::Null);
    let what = format!("{args:?} to get there");
    s.runtime.as_ref().expect("the runtime runs until dropped").block_on(instantstart_testkit::wait_until(
        Duration::from_secs(60),
        &what,
        || {
            let v = s.json(args);
            let ok = done(&v);
            if !ok {
                eprintln!("{args:?}: not there yet: {v}"); // shown when the wait fails
            }
            *last.borrow_mut() = v;
            async move { ok }
        },
    ));
    last.into_inner()
}

#[test]
fn storage_listing_and_model_download() {
    let s = TestServer::start();
    s.ready("demo");
    let storages = s.json(&["storage", "ls"]);
    let storage = &storages[0];
    assert!(storage["bucket"].as_str().is_some_and(|b| !b.is_empty()), "{storages}");
    assert!(storage["mount_path"].as_str().is_some(), "{storages}");
    let table = stdout(s.cli().args(["storage", "ls"]));
    assert!(table.contains("Bucket:") && table.contains("Mounted at:"), "{table}");
    // Attaching a file system FSx does not know: the assessment's finding names the field.
    s.cli()
        .args(["storage", "fsx", "create", "shared", "--attach", "fs-0123456789abcdef0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("file_system_id").and(predicate::str::contains("fs-0123456789abcdef0")));
    // An attached file system's type and capacity are its own: clap refuses both flags together.
    s.cli()
        .args([
            "storage",
            "fsx",
            "create",
            "shared",
            "--attach",
            "fs-0123456789abcdef0",
            "--storage-capacity-gib",
            "2400",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--attach"));
    // A link to the shared bucket: the flags become `data_repository`, whose rules the server
    // checks by field.
    s.cli()
        .args([
            "storage",
            "fsx",
            "create",
            "data",
            "--link-bucket",
            "datasets/",
            "--link-path",
            "datasets",
            "--auto-export",
            "none",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("data_repository.file_system_path"));
    s.cli()
        .args(["storage", "fsx", "create", "data", "--link-path", "/datasets"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--link-bucket"));

    // The real Job name comes back; the download is followed to the end.
    s.cli()
        .args(["model", "download", "Qwen/Qwen3-0.6B", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded"))
        .stderr(predicate::str::contains("Download job: default/"));
    let downloads = eventually(&s, &["model", "ls"], |v| v[0]["phase"] == "succeeded");
    assert_eq!(downloads[0]["repo_id"], "Qwen/Qwen3-0.6B");
    // The files land in the bucket, listed one level at a time.
    let listing = eventually(&s, &["storage", "ls", "models/Qwen/Qwen3-0.6B/"], |l| {
        l["entries"].as_array().is_some_and(|e| !e.is_empty())
    });
    assert!(listing["entries"][0]["key"].as_str().unwrap().starts_with("models/Qwen/Qwen3-0.6B/"), "{listing}");
    let top = stdout(s.cli().args(["storage", "ls"]));
    assert!(top.contains("models/") && top.contains("prefix"), "{top}");
    // A bad flag is refused by the CLI with the field; a bad value by the server with its field.
    s.cli()
        .args(["model", "download", "Qwen/Qwen3-0.6B", "--hf-token-secret", "no-key"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("SECRET/KEY"));
    s.cli().args(["model", "download", "not a repo"]).assert().code(2).stderr(predicate::str::contains("repo_id"));

    // Delete the download: confirmation first; the Job and its pods go, the files stay.
    let name = downloads[0]["name"].as_str().unwrap().to_string();
    s.cli().args(["model", "rm", &name]).assert().code(2).stderr(predicate::str::contains("--yes"));
    let plan = stdout(s.cli().args(["model", "rm", &name, "--dry-run"]));
    assert!(plan.contains("delete:Job") && plan.contains("gone"), "{plan}");
    s.cli()
        .args(["model", "rm", &name, "--yes", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("delete_download").and(predicate::str::contains("succeeded")));
    assert_eq!(s.json(&["model", "ls"]), serde_json::json!([]));
    let kept = s.json(&["storage", "ls", "models/Qwen/Qwen3-0.6B/"]);
    assert!(kept["entries"].as_array().is_some_and(|e| !e.is_empty()), "the files stay: {kept}");
    s.cli().args(["model", "rm", &name, "--yes"]).assert().code(2).stderr(predicate::str::contains("not found"));
}

#[test]
fn fsx_volumes_in_downloads_jobs_and_endpoints() {
    let s = TestServer::start();
    s.ready("demo");
    s.cli().args(["storage", "fsx", "create", "scratch", "--wait"]).assert().success();

    // A job mounts the volume at the path its flag gives, beside the bucket.
    let mut job = job_args("fsx-train");
    job.extend(["--volume".into(), "scratch:/data".into()]);
    let plan = stdout(s.cli().args(&job).arg("--dry-run"));
    assert!(plan.contains("claimName: fsx-scratch") && plan.contains("mountPath: /data"), "{plan}");
    assert!(plan.contains("mountPath: /s3"), "the bucket stays mounted: {plan}");
    // A volume the cluster does not have: the server's finding names the entry.
    let mut unknown = job_args("fsx-other");
    unknown.extend(["--volume".into(), "data".into()]);
    s.cli()
        .args(&unknown)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("job.volumes[0].name").and(predicate::str::contains("scratch")));
    // A malformed flag is refused by the CLI.
    let mut malformed = job_args("fsx-bad");
    malformed.extend(["--volume".into(), "scratch:".into()]);
    s.cli().args(&malformed).assert().code(2).stderr(predicate::str::contains("NAME:PATH"));

    // A download into the volume: the repository lands there, nothing in the bucket.
    let plan = s.json(&["model", "download", "Qwen/Qwen3-0.6B", "--volume", "scratch", "--dry-run"]).to_string();
    assert!(
        plan.contains(r#""claimName":"fsx-scratch""#) && plan.contains("/fsx/scratch/models/Qwen/Qwen3-0.6B"),
        "{plan}"
    );
    s.cli().args(["model", "download", "Qwen/Qwen3-0.6B", "--volume", "scratch", "--wait"]).assert().success();
    assert_eq!(s.json(&["storage", "ls", "models/"])["entries"], serde_json::json!([]), "nothing in the bucket");
    s.cli()
        .args(["model", "download", "Qwen/Qwen3-0.6B", "--volume", "data"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("volume"));

    // An endpoint reads its model from the volume, mounted read-only (named once, by --model-volume).
    let mut ep = endpoint_args("qwen-fsx");
    ep.extend(["--model-volume".into(), "scratch".into()]);
    let plan = stdout(s.cli().args(&ep).arg("--dry-run"));
    assert!(plan.contains("claimName: fsx-scratch") && plan.contains("/fsx/scratch/models/Qwen/Qwen3-0.6B"), "{plan}");
    assert!(plan.contains("readOnly: true"), "{plan}");
    let mut ep = endpoint_args("qwen-fsx");
    ep.extend(["--volume".into(), "scratch:/weights".into(), "--model-volume".into(), "scratch".into()]);
    let plan = stdout(s.cli().args(&ep).arg("--dry-run"));
    assert!(plan.contains("mountPath: /weights") && plan.contains("/weights/models/Qwen/Qwen3-0.6B"), "{plan}");
    s.cli().args(&ep).arg("--wait").assert().success();
}

#[test]
fn training_jobs_dry_run_submit_logs_and_delete() {
    let s = TestServer::start();
    s.ready("demo");
    let before = s.operations();

    // A dry run prints the plan and the manifests, and records nothing.
    let plan = stdout(s.cli().args(job_args("train")).arg("--dry-run"));
    assert!(plan.contains("Dry run: nothing was changed"), "{plan}");
    assert!(plan.contains("kind: HyperPodPyTorchJob") && plan.contains("name: train"), "{plan}");
    assert_eq!(s.operations(), before, "a dry run records no operation");
    // A recipe flag missing is a usage error naming the flag.
    let mut no_script = job_args("x");
    no_script.retain(|a| a != "--script" && a != "scripts/train.py");
    s.cli().args(&no_script).assert().code(2).stderr(predicate::str::contains("--script"));
    // Values the recipe refuses come back from the server field by field: what can be checked
    // offline first, then what needs EC2's specs of the instance type (its GPU count).
    s.cli().args(job_args("Bad_Name")).assert().code(2).stderr(predicate::str::contains("name:"));
    let mut too_many = job_args("gpus");
    too_many.push("--gpus-per-node=9".into());
    s.cli().args(&too_many).assert().code(2).stderr(predicate::str::contains("gpus_per_node"));

    s.cli()
        .args(job_args("train"))
        .arg("--wait")
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded"))
        .stderr(predicate::str::contains("Workload: default/train"));
    let jobs = s.json(&["job", "ls"]);
    assert_eq!((jobs[0]["name"].as_str(), jobs[0]["runtime"].as_str()), (Some("train"), Some("hyperpod")));
    let job = eventually(&s, &["job", "get", "train"], |j| j["phase"] == "succeeded");
    assert!(job["recovery"]["budget"].as_u64().unwrap() > 0, "a HyperPod job has a recovery budget: {job}");
    let table = stdout(s.cli().args(["job", "get", "train"]));
    assert!(table.contains("Recovery budget:") && table.contains("used") && table.contains("left"), "{table}");
    let listed = stdout(s.cli().args(["job", "ls"]));
    assert!(listed.contains("RECOVERY") && listed.contains("train"), "{listed}");

    // Logs: the last lines, then the stream followed to its end.
    let logs = s.json(&["job", "logs", "train"]);
    let lines = logs["lines"].as_array().unwrap();
    assert!(!lines.is_empty(), "{logs}");
    let text = stdout(s.cli().args(["job", "logs", "train", "--tail", "3"]));
    assert_eq!(text.lines().count(), 3, "{text}");
    let followed = s.cli().args(["job", "logs", "-f", "train"]).assert().success();
    let out = followed.get_output();
    assert!(!out.stdout.is_empty(), "lines were streamed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("end of log"), "{:?}", out.stderr);
    let events = stdout(s.cli().args(["job", "logs", "-f", "train", "-o", "json"]));
    let last: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    assert_eq!(last["end"], true, "{events}");

    // `| head -1`: the reader goes away; the CLI exits quietly instead of panicking.
    let mut child = s.spawn(&["job", "logs", "-f", "train"]);
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut first).unwrap();
    assert!(!first.is_empty());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{:?} {err}", out.status);

    // The finished job's checkpoint is in the shared bucket.
    let ckpt = eventually(&s, &["storage", "ls", "checkpoints/train/"], |l| {
        l["entries"].as_array().is_some_and(|e| !e.is_empty())
    });
    assert!(ckpt["entries"][0]["key"].as_str().unwrap().starts_with("checkpoints/train/step-"), "{ckpt}");

    // A process fault restarts the job in place and uses one unit of its recovery budget.
    s.cli().args(["sim", "faults", "set", r#"{"process_faults": [{"job": "faulty"}]}"#]).assert().success();
    s.cli().args(job_args("faulty")).arg("--wait").assert().success();
    let job = eventually(&s, &["job", "get", "faulty"], |j| j["phase"] == "succeeded");
    assert_eq!(job["recovery"]["used"], 1, "{job}");
    assert_eq!(job["recovery"]["remaining"], job["recovery"]["budget"].as_u64().unwrap() - 1, "{job}");
    let table = stdout(s.cli().args(["job", "get", "faulty"]));
    assert!(table.contains("1 of") && table.contains("used"), "{table}");
    let log = stdout(s.cli().args(["job", "logs", "faulty", "--tail", "5000"]));
    assert!(log.contains("restarting the training processes in place"), "{log}");

    s.cli().args(["job", "rm", "train"]).assert().code(2).stderr(predicate::str::contains("--yes"));
    s.cli().args(["job", "rm", "train", "--yes", "--wait"]).assert().success();
    s.cli().args(["job", "rm", "faulty", "--yes", "--wait"]).assert().success();
    assert_eq!(s.json(&["job", "ls"]), serde_json::json!([]));
    s.cli().args(["job", "get", "train"]).assert().code(2);
}

#[test]
fn metrics_of_a_job_and_of_its_node() {
    let s = TestServer::start();
    s.ready("demo");
    s.cli().args(job_args("train")).arg("--wait").assert().success();
    // The job's series: mean GPU use, memory, throughput and loss from its log.
    let view = eventually(&s, &["metrics", "job", "train"], |v| {
        v["series"].as_array().is_some_and(|s| {
            s.iter().any(|s| s["metric"] == "loss" && s["points"].as_array().is_some_and(|p| !p.is_empty()))
        })
    });
    assert_eq!((view["job"].as_str(), view["origin"].as_str()), (Some("train"), Some("simulated")), "{view}");
    let table = stdout(s.cli().args(["metrics", "job", "train", "--since", "600"]));
    for want in ["job default/train on demo", "TREND", "gpu_utilization", "throughput", "tokens/s", "loss"] {
        assert!(table.contains(want), "{want}: {table}");
    }
    // Its node: one row per GPU and metric.
    let job = s.json(&["job", "get", "train"]);
    let node = job["pod_list"][0]["node"].as_str().unwrap().to_string();
    let table = stdout(s.cli().args(["metrics", "node", &node]));
    assert!(table.contains(&format!("node {node} on demo")) && table.contains("DCGM_FI_DEV_GPU_UTIL"), "{table}");
    // The server's rules come back with their field (exit 2).
    s.cli()
        .args(["metrics", "node", &node, "--since", "10"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("since"));
    s.cli().args(["metrics", "job", "nope"]).assert().code(2).stderr(predicate::str::contains("not found"));
}

#[test]
fn job_logs_follow_survives_a_server_restart_without_doubling_or_losing_lines() {
    let mut s = TestServer::start();
    s.ready("demo");
    // A job writing numbered lines (0.1 per simulated second = 200 per second at speed 2000)
    // that runs far longer than the test.
    let spec = s.home.path().join("logging-job.json");
    let request = serde_json::json!({
        "runtime": "hyperpod",
        "job": {
            "name": "chatty", "namespace": "default", "image": TRAIN_IMAGE, "instance_type": "ml.g5.2xlarge", "nodes": 1,
            "env": [
                { "name": "SIM_LOG_LINES_PER_SECOND", "value": "0.1" },
                { "name": "SIM_DURATION_SECONDS", "value": "10000000" }
            ]
        },
        "recipe": { "kind": "torch", "script": "scripts/train.py" }
    });
    std::fs::write(&spec, request.to_string()).unwrap();
    s.cli().args(["job", "submit", "-f"]).arg(&spec).arg("--wait").assert().success();

    let mut child = s.spawn(&["job", "logs", "-f", "chatty", "--tail", "0"]);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let numbered = |line: &str| -> Option<u64> {
        let rest = &line[line.find("sim-log line ")? + "sim-log line ".len()..];
        rest.split(' ').next()?.parse().ok()
    };
    let mut lines = Vec::new();
    let read_until = |lines: &mut Vec<String>, k: u64| loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("the follower stopped printing");
        let done = numbered(&line).is_some_and(|n| n >= k);
        lines.push(line);
        if done {
            return;
        }
    };
    // Some lines, the restart, then lines well past the restart.
    read_until(&mut lines, 1);
    let first = lines.iter().find_map(|l| numbered(l)).unwrap();
    read_until(&mut lines, first + 50);
    s.restart();
    let at_restart = lines.iter().filter_map(|l| numbered(l)).max().unwrap();
    read_until(&mut lines, at_restart + 400);
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    reader.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);

    assert!(err.contains("reconnected to the log stream"), "{err}");
    assert!(!err.contains("may be missing"), "the new tail overlapped what was printed: {err}");
    let ks: Vec<u64> = lines.iter().filter_map(|l| numbered(l)).collect();
    let expected: Vec<u64> = (ks[0]..ks[0] + ks.len() as u64).collect();
    assert_eq!(ks, expected, "numbered lines, each once, none missing, across the restart");
    let mut unique = lines.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), lines.len(), "no line printed twice");
}

#[test]
fn endpoints_deploy_chat_scale_and_delete() {
    let s = TestServer::start();
    s.ready("demo");
    let plan = stdout(s.cli().args(endpoint_args("qwen")).arg("--dry-run"));
    assert!(plan.contains("kind: Deployment") && plan.contains("kind: Service"), "{plan}");

    s.cli().args(endpoint_args("qwen")).arg("--wait").assert().success().stdout(predicate::str::contains("succeeded"));
    let eps = s.json(&["endpoint", "ls"]);
    assert_eq!((eps[0]["name"].as_str(), eps[0]["ready"].as_bool()), (Some("qwen"), Some(true)), "{eps}");
    let table = stdout(s.cli().args(["endpoint", "ls"]));
    assert!(table.contains("qwen") && table.contains("1/1"), "{table}");

    // Chat: the answer for people, the whole response for scripts.
    let answer = stdout(s.cli().args(["endpoint", "chat", "qwen", "Say", "hello", "--max-tokens", "16"]));
    assert!(!answer.trim().is_empty(), "the simulated model answers");
    let response = s.json(&["endpoint", "chat", "qwen", "Say hello"]);
    assert!(response["choices"][0]["message"]["content"].is_string(), "{response}");
    s.cli().args(["endpoint", "chat", "nope", "hi"]).assert().code(2);

    // Scale: the diff, then "already in this state" for the same value.
    s.cli()
        .args(["endpoint", "scale", "qwen", "--replicas", "2", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("replicas"));
    eventually(&s, &["endpoint", "get", "qwen"], |e| e["replicas"]["ready"] == 2);
    s.cli()
        .args(["endpoint", "scale", "qwen", "--replicas", "2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("already in this state"));

    // KEDA autoscaling bounds: the plan adds a ScaledObject; then the endpoint reports them.
    let plan = stdout(s.cli().args(["endpoint", "scale", "qwen", "--min", "1", "--max", "3", "--dry-run"]));
    assert!(plan.contains("ScaledObject"), "{plan}");
    s.cli().args(["endpoint", "scale", "qwen", "--min", "1", "--max", "3", "--wait"]).assert().success();
    let e = s.json(&["endpoint", "get", "qwen"]);
    assert_eq!((e["autoscaling"]["min"].as_u64(), e["autoscaling"]["max"].as_u64()), (Some(1), Some(3)), "{e}");
    let table = stdout(s.cli().args(["endpoint", "get", "qwen"]));
    assert!(table.contains("Autoscaling: 1-3 replicas") && table.contains("Running"), "{table}");

    // Autoscaling off: the plan shows the fixed count the Deployment keeps (the 1 replica KEDA
    // left it at, not the 2 it had before) and removes the ScaledObject first; a second removal
    // is "already in this state".
    s.cli().args(["endpoint", "scale", "qwen", "--no-autoscaling", "--max", "4"]).assert().code(2);
    let plan = stdout(s.cli().args(["endpoint", "scale", "qwen", "--no-autoscaling", "--dry-run"]));
    assert!(plan.contains("remove:ScaledObject/qwen") && plan.contains("set by autoscaling (1 now)"), "{plan}");
    let out = stdout(s.cli().args(["endpoint", "scale", "qwen", "--no-autoscaling", "--wait"]));
    assert!(out.contains("autoscaling") && out.contains("succeeded"), "{out}");
    let e = s.json(&["endpoint", "get", "qwen"]);
    assert!(e["autoscaling"].is_null(), "{e}");
    assert_eq!(e["replicas"]["desired"], 1, "{e}");
    let table = stdout(s.cli().args(["endpoint", "get", "qwen"]));
    assert!(table.contains("Autoscaling: off"), "{table}");
    s.cli()
        .args(["endpoint", "scale", "qwen", "--no-autoscaling"])
        .assert()
        .success()
        .stdout(predicate::str::contains("already in this state"));

    // qwen gives its GPU back: the cluster's two GPUs go to the pool's two workers.
    s.cli().args(["endpoint", "rm", "qwen", "--yes", "--wait"]).assert().success();
    // A model pool: warm workers that move between endpoints by a label change.
    let mut pooled = endpoint_args("pooled");
    pooled.extend(["--pool", "warm", "--replicas", "2", "--wait"].map(String::from));
    s.cli().args(&pooled).assert().success();
    let pools = eventually(&s, &["pool", "ls"], |p| p[0]["workers"].as_array().is_some_and(|w| w.len() == 2));
    assert_eq!(pools[0]["pool"], "warm");
    assert_eq!(pools[0]["workers"][0]["serving"], "pooled", "{pools}");
    let worker = pools[0]["workers"][0]["pod"].as_str().unwrap().to_string();
    // Release it: the diff (a label), the operation, and the worker stays warm in the pool.
    let out = stdout(s.cli().args(["pool", "assign", "warm", &worker, "--release", "--wait"]));
    assert!(out.contains("instantstart.io/pool") && out.contains("succeeded"), "{out}");
    let pools = s.json(&["pool", "ls"]);
    let w = pools[0]["workers"].as_array().unwrap().iter().find(|w| w["pod"] == worker.as_str()).unwrap().clone();
    assert!(w["serving"].is_null() && w["ready"] == true, "{pools}");
    let again = stdout(s.cli().args(["pool", "assign", "warm", &worker, "--release"]));
    assert!(again.contains("already in this state"), "{again}");
    let table = stdout(s.cli().args(["pool", "ls"]));
    assert!(table.contains("SERVING") && table.contains(&worker), "{table}");
    // And back to the endpoint.
    s.cli().args(["pool", "assign", "warm", &worker, "--to", "pooled", "--wait"]).assert().success();
    let pools = s.json(&["pool", "ls"]);
    assert!(pools[0]["workers"].as_array().unwrap().iter().all(|w| w["serving"] == "pooled"), "{pools}");

    s.cli().args(["endpoint", "rm", "pooled", "--yes", "--wait"]).assert().success();
    assert_eq!(s.json(&["endpoint", "ls"]), serde_json::json!([]));
}

#[test]
fn workload_commands_need_a_cluster() {
    let s = TestServer::start();
    s.cli()
        .args(["job", "ls"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--cluster").and(predicate::str::contains("cluster use")));
    s.cli().args(["job", "ls", "-c", "nope"]).assert().code(2);
}

#[test]
fn mlflow_servers_runs_and_metrics_of_a_job_that_reports() {
    let s = TestServer::start();
    s.ready("demo");
    assert_eq!(s.json(&["mlflow", "servers"]), serde_json::json!([]));
    // Without a cluster the server needs an artifact store: the server names the field.
    s.cli().args(["mlflow", "create", "team"]).assert().code(2).stderr(predicate::str::contains("artifact_store_uri"));
    s.cli()
        .args(["mlflow", "create", "team", "--size", "Huge"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Small"));
    s.cli()
        .args(["mlflow", "create", "team", "--cluster", "demo", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded"));
    let servers = s.json(&["mlflow", "servers"]);
    assert_eq!((servers[0]["name"].as_str(), servers[0]["status"].as_str()), (Some("team"), Some("Created")));
    let arn = servers[0]["arn"].as_str().unwrap().to_string();
    let table = stdout(s.cli().args(["mlflow", "servers"]));
    assert!(
        table.contains("team") && table.contains("Created") && table.contains("experiments.sagemaker.aws"),
        "{table}"
    );

    let mut job = job_args("sft");
    job.extend(["--mlflow-arn".to_string(), arn, "--experiment".to_string(), "llama".to_string()]);
    s.cli().args(&job).arg("--wait").assert().success();
    let runs = eventually(&s, &["mlflow", "runs", "team", "--experiment", "llama"], |v| {
        v.as_array().is_some_and(|a| a.len() == 1 && a[0]["status"] == "FINISHED")
    });
    let run_id = runs[0]["run_id"].as_str().unwrap().to_string();
    let table = stdout(s.cli().args(["mlflow", "runs", "team"]));
    assert!(table.contains(&run_id) && table.contains("sft") && table.contains("FINISHED"), "{table}");

    let metrics = s.json(&["mlflow", "metrics", "team", &run_id]);
    let loss = metrics["series"]["loss"].as_array().unwrap();
    assert!(loss.len() >= 10, "{metrics}");
    let text = stdout(s.cli().args(["mlflow", "metrics", "team", &run_id, "--keys", "loss"]));
    assert!(text.starts_with("loss") && text.contains('▁') && text.contains("STEP"), "{text}");
    assert!(!text.contains("THROUGHPUT"), "only the asked keys: {text}");
    s.cli()
        .args(["mlflow", "metrics", "team", &run_id, "--keys", "loss,bad\u{7}"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("keys[1]"));
    s.cli()
        .args(["mlflow", "runs", "nope"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("tracking server nope in us-east-1 not found"));

    // Deleting needs the name typed or --yes (no terminal here); the dry run shows both steps.
    let before = s.operations();
    s.cli().args(["mlflow", "delete", "team"]).assert().code(2).stderr(predicate::str::contains("--yes"));
    let plan = stdout(s.cli().args(["mlflow", "delete", "team", "--dry-run"]));
    assert!(plan.contains("tracking_server") && plan.contains("role") && plan.contains("team-mlflow-role"), "{plan}");
    assert_eq!(s.operations(), before, "neither the refusal nor the dry run started anything");
    s.cli()
        .args(["mlflow", "delete", "team", "--yes", "--wait"])
        .assert()
        .success()
        .stdout(predicate::str::contains("succeeded").and(predicate::str::contains("delete_tracking_server")));
    assert_eq!(s.json(&["mlflow", "servers"]), serde_json::json!([]));
    s.cli().args(["mlflow", "rm", "team", "--yes"]).assert().code(2).stderr(predicate::str::contains("not found"));

    // A cluster's tracking servers go with it, unless --keep-tracking-servers.
    s.cli().args(["mlflow", "create", "kept", "--cluster", "demo", "--wait"]).assert().success();
    let plan = stdout(s.cli().args(["cluster", "delete", "demo", "--dry-run"]));
    assert!(plan.contains("mlflow:kept") && plan.contains("mlflow_role:kept"), "{plan}");
    let plan = stdout(s.cli().args(["cluster", "delete", "demo", "--keep-tracking-servers", "--dry-run"]));
    assert!(!plan.contains("mlflow") && plan.contains("eks_cluster"), "{plan}");
    s.cli().args(["cluster", "delete", "demo", "--keep-tracking-servers", "--yes", "--wait"]).assert().success();
    assert_eq!(s.json(&["cluster", "list"]), serde_json::json!([]));
    let servers = s.json(&["mlflow", "servers"]);
    assert_eq!(servers[0]["name"], "kept", "kept with --keep-tracking-servers: {servers}");
}

#[test]
fn foreign_jobs_and_endpoints_are_listed_read_only() {
    let s = TestServer::start();
    s.ready("demo");
    s.kube_apply(
        "demo",
        json!({
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": { "name": "legacy", "namespace": "default",
                          // The simulated training runs long: it is still running when read.
                          "annotations": { "sim.instantstart.io/duration-seconds": "1000000" } },
            "spec": { "replicaSpecs": [{ "name": "pods", "replicas": 1, "template": { "spec": { "containers": [
                { "name": "pytorch", "image": "pytorch/pytorch:2.5.1" }] } } }] },
        }),
    );
    s.kube_apply(
        "demo",
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "tgi", "namespace": "default" },
            "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "tgi" } },
                      "template": { "metadata": { "labels": { "app": "tgi" } }, "spec": { "containers": [
                          { "name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:2.4.0" }] } } },
        }),
    );
    let jobs = eventually(&s, &["job", "ls"], |j| {
        j.as_array().unwrap().iter().any(|x| x["name"] == "legacy" && x["pods"]["running"] == 1)
    });
    assert_eq!(jobs[0]["foreign"], true, "{jobs:#}");
    let table = stdout(s.cli().args(["job", "ls"]));
    assert!(table.lines().next().unwrap().contains("FOREIGN"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("legacy") && l.trim_end().ends_with("true")), "{table}");
    let detail = stdout(s.cli().args(["job", "get", "legacy"]));
    assert!(detail.contains("not created by InstantStart"), "{detail}");
    s.cli().args(["job", "logs", "legacy", "--tail", "3"]).assert().success();
    let eps = eventually(&s, &["endpoint", "ls"], |e| e.as_array().unwrap().iter().any(|x| x["name"] == "tgi"));
    assert_eq!(eps[0]["foreign"], true, "{eps:#}");

    // Every change is refused (exit 2, the server's reason), and nothing is recorded.
    let before = s.operations();
    for args in [
        &["job", "rm", "legacy", "--yes"][..],
        &["endpoint", "rm", "tgi", "--yes"],
        &["endpoint", "scale", "tgi", "--replicas", "2"],
    ] {
        s.cli()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("not created by InstantStart"))
            .stderr(predicate::str::contains("tool that created it"));
    }
    assert_eq!(s.operations(), before, "nothing recorded");
}

#[test]
fn tokens_are_minted_listed_and_revoked_by_the_admin() {
    let s = TestServer::start();
    let minted = s.json(&["token", "create", "viewer", "--scope", "read"]);
    let secret = minted["token"].as_str().unwrap().to_string();
    assert_eq!(minted["scope"], "read");
    let list = s.json(&["token", "list"]);
    assert_eq!(list[0]["name"], "viewer");
    assert!(!list.to_string().contains(&secret), "the list never shows secrets");
    let as_viewer = |args: &[&str]| {
        let mut c = bare_cli(&s.home);
        c.env("INSTANTSTART_URL", &s.url).env("INSTANTSTART_TOKEN", &secret).args(args);
        c
    };
    // The minted token works, but only the admin token manages tokens.
    as_viewer(&["context"]).assert().success();
    as_viewer(&["token", "list"]).assert().failure().stderr(predicate::str::contains("only the admin token"));
    s.cli().args(["token", "revoke", "viewer"]).assert().success();
    as_viewer(&["context"]).assert().failure().stderr(predicate::str::contains("revoked"));
    s.cli().args(["token", "revoke", "viewer"]).assert().failure();

    // A workloads-scoped token bound to a Kubernetes user, allowed one system namespace and
    // confined to one service account: the flags reach the binding, and the rules name the field.
    let agent = s.json(&[
        "token",
        "create",
        "agent",
        "--scope",
        "workloads",
        "--kube-user",
        "alice",
        "--namespace",
        "team-a",
        "--system-namespace",
        "monitoring",
        "--service-account",
        "trainer",
        "--cluster",
        "demo",
    ]);
    assert_eq!(agent["scope"], "workloads");
    let binding = &s.json(&["token", "list"])[0]["kube_bindings"][0];
    assert_eq!(
        (&binding["system_namespaces"], &binding["service_accounts"]),
        (&json!(["monitoring"]), &json!(["trainer"]))
    );
    s.cli()
        .args([
            "token",
            "create",
            "wrong",
            "--kube-user",
            "bob",
            "--namespace",
            "team-b",
            "--system-namespace",
            "team-c",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains("kube_bindings[0].system_namespaces[0]"));
}

/// `operation list --archived` reads the operations the retention sweep moved out of the lists:
/// one page and the cursor printed under it, or every page with `--all`; filters still apply.
#[test]
fn archived_operations_are_listed_with_archived_a_page_at_a_time_or_all() {
    let s = TestServer::start();
    s.ready("a");
    s.ready("b");
    // What the sweep does once these finished more than the retention window ago.
    let archived =
        instantstart_server::archive::archive_now(s.store().as_ref(), chrono::Utc::now(), Duration::ZERO).unwrap();
    assert_eq!(archived, 2);
    assert_eq!(s.json(&["operation", "list"]), json!([]), "archived operations leave the list");

    let all = s.json(&["operation", "list", "--archived", "--all"]);
    let targets: Vec<&str> = all.as_array().unwrap().iter().map(|o| o["target"].as_str().unwrap()).collect();
    assert_eq!(targets, ["cluster/b", "cluster/a"], "newest first: {all:#}");

    let out = s.cli().args(["operation", "list", "--archived", "--limit", "1", "-o", "json"]).assert().success();
    let out = out.get_output();
    let first: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cursor = stderr.split("--cursor ").nth(1).unwrap_or_else(|| panic!("no cursor printed: {stderr}")).trim();
    let second = s.json(&["operation", "list", "--archived", "--limit", "1", "--cursor", cursor]);
    assert_eq!((&first[0]["id"], &second[0]["id"]), (&all[0]["id"], &all[1]["id"]), "the cursor reads the next page");
    assert_eq!(second.as_array().map(Vec::len), Some(1));

    let of_a = s.json(&["operation", "list", "--archived", "--cluster", "a"]);
    assert_eq!(of_a.as_array().map(Vec::len), Some(1), "{of_a:#}");
    let table = stdout(s.cli().args(["operation", "list", "--archived"]));
    assert!(table.contains("cluster/a") && table.contains("succeeded"), "{table}");
    s.cli()
        .args(["operation", "list", "--archived", "--cluster", "nothing"])
        .assert()
        .success()
        .stdout(predicate::str::contains("No archived operations."));
}
