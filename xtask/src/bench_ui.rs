//! `cargo xtask bench ui-traffic`: requests and bytes per minute of one UI tab while something
//! runs, before and after conditional reads (issue #23).
//!
//! The measurement is `ui/tests/traffic_bench.py` (pytest + Selenium on Debian's headless
//! Chromium, the UI suite's fixtures): one tab on the operation page of a running
//! create-cluster pipeline and one on a running training job's page, each watched for a fixed
//! window, first against a server started with `INSTANTSTART_CONDITIONAL=off` (before: every
//! re-read carries its body), then against the default server (after: ETag + `304`), the same
//! binary in one run. HTTP reads come from the Resource Timing API, WebSocket frames from
//! Chromium's network log. This module runs it and prints the table
//! (`target/bench/bench-ui-traffic.json`).

use crate::harness::Table;
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// Seconds each tab is watched.
const WINDOW_SECS: u64 = 30;

fn kib(v: &Value) -> String {
    format!("{:.1}", v.as_f64().unwrap_or(f64::NAN) / 1024.0)
}

fn num(v: &Value) -> String {
    v.as_f64().map_or_else(|| "-".into(), |x| format!("{x:.0}"))
}

/// Runs the measurement against the server binary `bin`; the report.
pub fn ui_traffic(bin: &Path) -> Result<Value> {
    crate::ensure_chromium()?;
    let venv = crate::venv()?;
    let raw = crate::harness::target_dir().join("bench").join("ui-traffic-raw.json");
    std::fs::create_dir_all(raw.parent().expect("a directory"))?;
    let _ = std::fs::remove_file(&raw);
    crate::run(
        Command::new(venv.join("bin").join("python"))
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "ui/tests/traffic_bench.py"])
            .current_dir(crate::root())
            .env("INSTANTSTART_SERVER_BIN", bin)
            .env("INSTANTSTART_TRAFFIC_OUT", &raw)
            .env("INSTANTSTART_TRAFFIC_WINDOW", WINDOW_SECS.to_string())
            .env("PYTHONDONTWRITEBYTECODE", "1"),
    )?;
    let report: Value = serde_json::from_slice(&std::fs::read(&raw).with_context(|| format!("{}", raw.display()))?)?;
    let mut table = Table::new(
        format!(
            "One UI tab for {WINDOW_SECS} s, per minute (headless Chromium; sim speed {}; before: \
             INSTANTSTART_CONDITIONAL=off, after: ETag + 304)",
            report["sim_speed"]
        ),
        &["page", "", "requests", "304", "HTTP KiB", "bodies KiB", "WS frames", "WS KiB"],
    );
    for p in report["pages"].as_array().into_iter().flatten() {
        table.row(vec![
            p["page"].as_str().unwrap_or_default().to_string(),
            p["mode"].as_str().unwrap_or_default().to_string(),
            num(&p["requests_per_minute"]),
            num(&p["answered_304_per_minute"]),
            kib(&p["http_bytes_per_minute"]),
            kib(&p["http_body_bytes_per_minute"]),
            num(&p["ws_frames_per_minute"]),
            kib(&p["ws_bytes_per_minute"]),
        ]);
    }
    table.print();
    for p in report["pages"].as_array().into_iter().flatten() {
        println!("  {} ({}): {}", p["page"], p["mode"], p["requests_by_path_per_minute"]);
    }
    Ok(json!({ "benchmark": "ui-traffic", "window_seconds": WINDOW_SECS, "measured": report }))
}
