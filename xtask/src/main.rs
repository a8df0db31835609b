//! Developer automation, run as `cargo xtask <command>`.
//!
//! - `test`: the whole test suite, installing what it needs when missing (a Python venv with
//!   schemathesis, pytest, Selenium, the MCP Python SDK and moto; Chromium from apt): format check,
//!   clippy, every cargo test, the OpenAPI fuzzer against a real server on loopback, the MCP
//!   suite, then the web UI suite; PostgreSQL (for the store's tests) from apt when missing.
//!   `.ci/run` calls it.
//! - `lint`: format check and clippy only.
//! - `deploy-lint`: cfn-lint of `deploy/cloudformation/management.yaml`.
//! - `fuzz-api`: only the schemathesis runs (seeded with real objects, then unseeded); see [`fuzz`].
//! - `ui-test`: only the end-to-end web UI suite (`ui/tests`, pytest + Selenium driving Debian's
//!   headless Chromium against a real server on the simulated cloud; screenshots in
//!   `target/ui-artifacts/`). Installs `chromium` and `chromium-driver` with apt-get when missing.
//! - `mcp-test`: only the MCP suite (`crates/mcp/tests/test_mcp.py`: the official `mcp` Python
//!   SDK drives `instantstart-mcp` over stdio against a real server on the simulated cloud).
//!
//! The command line is a clap CLI: `cargo xtask help`, `cargo xtask <command> --help`.
//!
//! - `bench [all|pipeline|rest|fanout|logs|replicas|ui-traffic]`: performance numbers of the real server
//!   binary on loopback and the simulated cloud (tables + `target/bench/*.json`); see [`bench`].
//! - `chaos [--quick] [--replicas N]`: reliability properties (kill -9 at every step boundary,
//!   fault injection, conflicting mutations; replicas on one PostgreSQL killed and paused);
//!   exits non-zero when one fails; see [`chaos`]. `test` ends with `chaos --quick`.
//! - `tidy`: the repository's own rules (module docs, sizes of the README and ARCHITECTURE.md,
//!   the generated REST reference, links); see `xtask/src/tidy.rs`. They are tests, so `test` runs them.

mod bench;
mod bench_logs;
mod bench_replicas;
mod bench_scale;
mod bench_ui;
mod chaos;
mod fuzz;
mod harness;
mod hostile;
mod pg;
#[cfg(test)]
mod tidy;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {cmd:?}");
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Python venv with the test tools, created under `target/` when missing.
fn venv() -> Result<PathBuf> {
    let dir = root().join("target").join("test-venv");
    // Bump the marker when the package list changes: an existing venv then gets the new ones.
    let marker = dir.join(".ready-v8");
    if marker.exists() {
        return Ok(dir);
    }
    run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
    let pip = dir.join("bin").join("pip");
    // mlflow-skinny plus what `mlflow server` imports (about 350 MB, 30 s) instead of the full
    // mlflow package (850 MB): the AWS adapter's MLflow REST client is tested against a real server.
    let packages = [
        "schemathesis==4.*",
        "selenium==4.*",
        "pytest>=8",
        "mcp==2.*",
        "cfn-lint>=1",
        // Exact pin: the simulator's EC2 instance type specs are generated from moto's record of
        // EC2's data (crates/sim/src/ec2_specs/generated.rs; docs/instance-types.md).
        "moto[server]==5.2.5",
        // AWS's service models: the model-validation suite (crates/aws/src/model_suite.rs)
        // checks every request against them. Exact pin; see docs/botocore-models.md to bump it.
        "botocore==1.44.8",
        "mlflow-skinny==3.*",
        "flask",
        "flask-cors",
        "sqlalchemy",
        "alembic",
        "aiohttp",
        "pandas",
    ];
    run(Command::new(&pip).args(["install", "--quiet", "--disable-pip-version-check"]).args(packages))?;
    std::fs::write(&marker, packages.join("\n") + "\n")?;
    Ok(dir)
}

/// botocore's service-model directory inside the venv (`lib/python3.*/site-packages/botocore/data`).
fn botocore_data(venv: &Path) -> Result<PathBuf> {
    let lib = venv.join("lib");
    for e in std::fs::read_dir(&lib).with_context(|| format!("{}", lib.display()))?.flatten() {
        let d = e.path().join("site-packages").join("botocore").join("data");
        if d.join("sagemaker").is_dir() {
            return Ok(d);
        }
    }
    bail!("no botocore/data under {}", lib.display())
}

/// Builds the binaries the suites start (server, CLI, MCP) exactly as `cargo test --workspace`
/// builds them for its integration tests: the same feature set, so nothing is compiled twice
/// (a plain `cargo build -p …` unifies features differently and rebuilds the AWS SDK).
fn build_bins() -> Result<()> {
    run(cargo().args(["test", "--workspace", "--no-run", "--quiet"]))?;
    for (package, bin) in [("instantstart-server", "instantstart-server"), ("instantstart-mcp", "instantstart-mcp")] {
        if !root().join("target/debug").join(bin).exists() {
            run(cargo().args(["build", "--quiet", "-p", package]))?;
        }
    }
    Ok(())
}

/// Lints the CloudFormation template of the management environment with cfn-lint.
fn deploy_lint() -> Result<()> {
    let venv = venv()?;
    run(Command::new(venv.join("bin").join("cfn-lint")).arg(root().join("deploy/cloudformation/management.yaml")))
}

/// Debian's Chromium and its WebDriver for the UI suite, installed with apt-get when missing
/// (CI runs as root with Debian mirrors). `CHROMIUM_BIN` / `CHROMEDRIVER_BIN` point elsewhere.
fn ensure_chromium() -> Result<()> {
    let chromium = std::env::var("CHROMIUM_BIN").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let driver = std::env::var("CHROMEDRIVER_BIN").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    if Path::new(&chromium).exists() && Path::new(&driver).exists() {
        return Ok(());
    }
    eprintln!("{chromium} or {driver} is missing: installing chromium and chromium-driver with apt-get");
    let apt = |args: &[&str]| {
        run(Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive"))
            .context("installing Chromium needs root and Debian's apt; or set CHROMIUM_BIN and CHROMEDRIVER_BIN")
    };
    apt(&["update", "-qq"])?;
    apt(&["install", "-y", "-qq", "chromium", "chromium-driver"])
}

/// PostgreSQL's server binaries for the store crate's PostgreSQL tests (each test run starts a
/// private server from them), installed with apt-get when missing, like Chromium. Found in
/// `PG_BIN`, `/usr/lib/postgresql/<version>/bin` or `PATH`; nothing to do when
/// `INSTANTSTART_SKIP_POSTGRES=1` (those tests then run on SQLite only).
fn ensure_postgres() -> Result<()> {
    if std::env::var("INSTANTSTART_SKIP_POSTGRES").is_ok_and(|v| v == "1") {
        return Ok(());
    }
    let has_initdb = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let installed = std::env::var_os("PG_BIN").is_some_and(|d| has_initdb(Path::new(&d)))
        || std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| has_initdb(&e.path().join("bin")))
        || std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| has_initdb(&d)));
    if installed {
        return Ok(());
    }
    eprintln!("PostgreSQL's initdb and pg_ctl are missing: installing postgresql with apt-get");
    let apt = |args: &[&str]| {
        run(Command::new("apt-get").args(args).env("DEBIAN_FRONTEND", "noninteractive")).context(
            "installing PostgreSQL needs root and Debian's apt; or set PG_BIN, or INSTANTSTART_SKIP_POSTGRES=1",
        )
    };
    apt(&["update", "-qq"])?;
    apt(&["install", "-y", "-qq", "postgresql"])
}

/// The end-to-end web UI suite: a real server (built here) and a real headless Chromium.
fn ui_test() -> Result<()> {
    ensure_chromium()?;
    let venv = venv()?;
    build_bins()?;
    let started = Instant::now();
    run(Command::new(venv.join("bin").join("python"))
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "ui/tests"])
        .current_dir(root())
        .env("INSTANTSTART_SERVER_BIN", root().join("target/debug/instantstart-server"))
        .env("PYTHONDONTWRITEBYTECODE", "1"))?;
    eprintln!("UI suite passed in {:.0?}; screenshots in target/ui-artifacts/", started.elapsed());
    Ok(())
}

/// The MCP suite: the official MCP Python SDK drives `instantstart-mcp` over stdio; the test
/// starts (and always kills) a real server on the simulated cloud.
fn mcp_test() -> Result<()> {
    let venv = venv()?;
    build_bins()?;
    let started = Instant::now();
    run(Command::new(venv.join("bin").join("python"))
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "crates/mcp/tests/test_mcp.py"])
        .current_dir(root())
        .env("INSTANTSTART_SERVER_BIN", root().join("target/debug/instantstart-server"))
        .env("INSTANTSTART_MCP_BIN", root().join("target/debug/instantstart-mcp"))
        .env("PYTHONDONTWRITEBYTECODE", "1"))?;
    eprintln!("MCP suite passed in {:.0?}", started.elapsed());
    Ok(())
}

fn lint() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    // One clippy run over the workspace with the server's real-AWS wiring (its `aws` feature,
    // off by default) switched on: a second run for `-p instantstart-server --features aws`
    // would unify features differently and check many dependencies a second time.
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        "instantstart-server/aws",
        "--quiet",
        "--",
        "-D",
        "warnings",
    ]))
}

/// The wall time of each phase of `cargo xtask test`.
#[derive(Default)]
struct Phases(Vec<(&'static str, Duration)>);

impl Phases {
    fn run<T>(&mut self, name: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let started = Instant::now();
        let result = f();
        let took = started.elapsed();
        eprintln!("phase {name}: {} in {took:.0?}", if result.is_ok() { "passed" } else { "FAILED" });
        self.0.push((name, took));
        if result.is_err() {
            self.report();
        }
        result
    }

    fn report(&self) {
        eprintln!("phase times:");
        for (name, took) in &self.0 {
            eprintln!("  {name:<14} {:>6.0}s", took.as_secs_f64());
        }
    }
}

/// Developer automation for InstantStart.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// The whole suite: lint, every cargo test, fuzz-api, deploy-lint, mcp-test, ui-test and
    /// chaos --quick, installing the tools it needs (20+ minutes).
    Test,
    /// Format check and clippy (the server with and without its `aws` feature).
    Lint,
    /// Schemathesis against a real server on loopback, from the served OpenAPI document.
    FuzzApi {
        /// Examples per operation.
        #[arg(default_value_t = 120)]
        examples: u32,
    },
    /// The end-to-end web UI suite (pytest + Selenium on headless Chromium).
    UiTest,
    /// The MCP suite (the official Python SDK drives instantstart-mcp over stdio).
    McpTest,
    /// cfn-lint of the CloudFormation management environment.
    DeployLint,
    /// Performance numbers of the real server binary on loopback and the simulated cloud.
    Bench(bench::BenchArgs),
    /// Reliability properties: kill -9 at every step boundary, fault injection, conflicts.
    Chaos(chaos::ChaosArgs),
    /// Tidy checks of the repository itself (module docs, README/ARCHITECTURE sizes, the
    /// generated REST reference, links); also part of `cargo test --workspace`.
    Tidy,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let started = Instant::now();
    match cli.command {
        Task::Test => {
            // Each phase's wall time is printed as it ends and again at the end, so a CI log
            // says which phase grew.
            let mut phases = Phases::default();
            phases.run("lint", lint)?;
            // The AWS adapter's integration tests start moto_server from the venv; its
            // model-validation suite reads botocore's service models from it.
            let venv = phases.run("venv", venv)?;
            // The store's tests start a private PostgreSQL server.
            phases.run("postgres", ensure_postgres)?;
            phases.run("cargo test", || {
                run(cargo()
                    .args(["test", "--workspace"])
                    .env("MOTO_SERVER", venv.join("bin").join("moto_server"))
                    .env("BOTOCORE_DATA", botocore_data(&venv)?))
            })?;
            phases.run("fuzz-api", || fuzz::fuzz_api(120))?;
            phases.run("deploy-lint", deploy_lint)?;
            phases.run("mcp-test", mcp_test)?;
            phases.run("ui-test", ui_test)?;
            phases.run("chaos --quick", || chaos::main(chaos::ChaosArgs::quick()))?;
            phases.report();
            eprintln!("all suites passed in {:.0?}", started.elapsed());
        }
        Task::Lint => lint()?,
        Task::FuzzApi { examples } => fuzz::fuzz_api(examples)?,
        Task::UiTest => ui_test()?,
        Task::McpTest => mcp_test()?,
        Task::DeployLint => deploy_lint()?,
        Task::Bench(args) => bench::main(args)?,
        Task::Chaos(args) => chaos::main(args)?,
        Task::Tidy => run(cargo().args(["test", "-p", "xtask", "--", "tidy"]))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_consistent_and_takes_every_documented_invocation() {
        Cli::command().debug_assert();
        let parse = |args: &[&str]| Cli::try_parse_from(std::iter::once("xtask").chain(args.iter().copied()));
        for ok in [
            &["test"][..],
            &["lint"],
            &["fuzz-api"],
            &["fuzz-api", "120"],
            &["ui-test"],
            &["mcp-test"],
            &["deploy-lint"],
            &["bench"],
            &["bench", "--debug"],
            &["bench", "logs", "--debug", "--duration", "5", "--followers", "10", "--log-rate", "500"],
            &["bench", "rest", "--connections", "8"],
            &["bench", "replicas", "--debug", "--duration", "5"],
            &["bench", "ui-traffic", "--debug"],
            &["chaos"],
            &["chaos", "--quick"],
            &["chaos", "--jobs", "2", "--speed", "500"],
            &["chaos", "--replicas", "3", "--lease-ttl-ms", "1500", "--seed", "7"],
        ] {
            assert!(parse(ok).is_ok(), "{ok:?}: {}", parse(ok).unwrap_err());
        }
        match parse(&["bench", "logs", "--debug", "--duration", "5"]).unwrap().command {
            Task::Bench(b) => assert_eq!((b.what.as_str(), b.debug, b.duration), ("logs", true, 5)),
            other => panic!("{other:?}"),
        }
        match parse(&["chaos", "--quick"]).unwrap().command {
            Task::Chaos(c) => assert_eq!((c.quick, c.jobs, c.speed), (true, 3, 1000.0)),
            other => panic!("{other:?}"),
        }
        // Help is help (exit 0 on stdout), not an error.
        for help in [&["help"][..], &["--help"], &["bench", "--help"], &["help", "chaos"]] {
            let e = parse(help).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{help:?}");
            assert!(e.to_string().contains("Usage: cargo xtask"), "{help:?}: {e}");
        }
        for bad in [
            &["bench", "everything"][..],
            &["chaos", "--jobs", "x"],
            &["chaos", "--replicas", "1"],
            &["nope"],
            &["fuzz-api", "many"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
