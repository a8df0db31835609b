//! Output formats (`-o table|json|yaml`) and plain-text tables.
//!
//! JSON output is the server's response as is (pretty-printed), so scripts and agents see the
//! same shape as the REST API; YAML is the same document in YAML. Tables are for people.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

/// Prints `value` as JSON or YAML, or the `table` rendering.
pub fn emit<T: Serialize + ?Sized>(output: Output, value: &T, table: impl FnOnce() -> String) -> anyhow::Result<()> {
    let text = match output {
        Output::Table => table(),
        Output::Json => serde_json::to_string_pretty(value)?,
        Output::Yaml => serde_norway::to_string(value)?,
    };
    if text.ends_with('\n') { write_stdout(&text) } else { write_stdout(&format!("{text}\n")) }
}

/// Names the next page of a paged list on stderr (stdout stays the page, in any format).
pub fn more(next: Option<&str>) {
    if let Some(cursor) = next {
        eprintln!("More follow: run again with --cursor {cursor}");
    }
}

/// Writes to stdout and flushes. A closed pipe (`instantstart job logs | head -1`) is an
/// `io::ErrorKind::BrokenPipe` error, which [`crate::exit::report`] turns into a quiet exit.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Parses a JSON or YAML document (JSON when it starts with `{` or `[`).
pub fn parse_document(text: &str, origin: &str) -> anyhow::Result<Value> {
    let trimmed = text.trim_start();
    let parsed = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(text).map_err(|e| crate::exit::usage(format!("{origin}: invalid JSON: {e}")))?
    } else {
        serde_norway::from_str(text).map_err(|e| crate::exit::usage(format!("{origin}: invalid YAML: {e}")))?
    };
    Ok(parsed)
}

/// Reads a document from a file, or stdin for `-`.
pub fn read_document(path: &std::path::Path) -> anyhow::Result<Value> {
    let (text, origin) = if path.as_os_str() == "-" {
        (std::io::read_to_string(std::io::stdin())?, "stdin".to_string())
    } else {
        let text = std::fs::read_to_string(path)
            .map_err(|e| crate::exit::usage(format!("cannot read {}: {e}", path.display())))?;
        (text, path.display().to_string())
    };
    parse_document(&text, &origin)
}

/// A table with a header row; columns are separated by two spaces.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Table {
        Table { headers: headers.to_vec(), rows: vec![] }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The rendered table, or `empty` when it has no rows.
    pub fn render_or(&self, empty: &str) -> String {
        if self.rows.is_empty() {
            return format!("{empty}\n");
        }
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let last = cells.len().saturating_sub(1);
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i == last {
                    text.push_str(cell);
                } else {
                    let pad = widths[i] - cell.chars().count();
                    let _ = write!(text, "{cell}{}  ", " ".repeat(pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(self.headers.clone(), &mut out);
        for row in &self.rows {
            line(row.iter().map(String::as_str).collect(), &mut out);
        }
        out
    }
}

/// `key: value` lines with aligned values.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, v) in pairs {
        let _ = writeln!(out, "{:<width$} {v}", format!("{k}:"));
    }
    out
}

/// The string at a dotted path of a JSON value, `-` when absent or null.
pub fn s(v: &Value, path: &str) -> String {
    let mut cur = v;
    for key in path.split('.') {
        cur = match cur.get(key) {
            Some(next) => next,
            None => return "-".into(),
        };
    }
    match cur {
        Value::Null => "-".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A duration in seconds, compact: `0.4s`, `12s`, `4m05s`, `1h02m`.
pub fn secs(secs: f64) -> String {
    let secs = secs.max(0.0);
    if secs < 10.0 && secs.fract() == 0.0 {
        format!("{secs}s")
    } else if secs < 10.0 {
        format!("{secs:.1}s")
    } else if secs < 60.0 {
        format!("{}s", secs.round() as u64)
    } else if secs < 3600.0 {
        let s = secs.round() as u64;
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = (secs / 60.0).round() as u64;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

/// Seconds between two instants.
pub fn between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

/// A timestamp as people read it: `2025-01-31 12:00:00Z`.
pub fn when(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_formats_are_compact() {
        let mut t = Table::new(&["NAME", "STATUS"]);
        t.row(vec!["demo".into(), "ready".into()]);
        t.row(vec!["a-longer-name".into(), "creating".into()]);
        assert_eq!(t.render_or("none"), "NAME           STATUS\ndemo           ready\na-longer-name  creating\n");
        assert_eq!(Table::new(&["X"]).render_or("No rows."), "No rows.\n");
        assert_eq!(
            (secs(0.25), secs(5.0), secs(42.4), secs(245.0), secs(3725.0)),
            ("0.2s".into(), "5s".into(), "42s".into(), "4m05s".into(), "1h02m".into())
        );
        let v = serde_json::json!({"a": {"b": "x", "n": 3, "z": null}});
        assert_eq!(
            (s(&v, "a.b"), s(&v, "a.n"), s(&v, "a.z"), s(&v, "q")),
            ("x".into(), "3".into(), "-".into(), "-".into())
        );
        assert_eq!(parse_document("name: demo\n", "t").unwrap(), serde_json::json!({"name": "demo"}));
        assert_eq!(parse_document("{\"a\": 1}", "t").unwrap(), serde_json::json!({"a": 1}));
        assert!(parse_document("{", "t").is_err());
    }
}
