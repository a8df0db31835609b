//! A parser of the Prometheus text exposition format (version 0.0.4), the format NVIDIA's DCGM
//! exporter serves at `/metrics` (and every Prometheus exporter): one sample a line,
//! `name{label="value",…} value [timestamp]`, with `# HELP` / `# TYPE` comments.
//!
//! The format is Prometheus's "Exposition formats" page: names `[a-zA-Z_:][a-zA-Z0-9_:]*`,
//! label values in double quotes with `\\`, `\"` and `\n` escaped, values as Go floats
//! (`NaN`, `+Inf`, `-Inf` included), an optional timestamp in integer milliseconds since the
//! Unix epoch.
//!
//! # Guarantees
//!
//! - **Pure and bounded**: [`parse`] reads text already in memory and keeps at most
//!   [`MAX_SAMPLES`] samples (a larger answer is [`PromTextError::TooManySamples`], never a
//!   silent cut); only the samples `wanted` accepts are kept, so a scrape of an exporter with
//!   hundreds of families allocates for the few the caller reads.
//! - **Strict where it matters**: a malformed sample line is [`PromTextError::Line`] naming the
//!   line number and why; comments and blank lines are skipped; a trailing comma in the label
//!   set and spaces around `=` and `,` are accepted as Prometheus's own parser accepts them.

/// Most samples [`parse`] keeps from one text.
pub const MAX_SAMPLES: usize = 100_000;

/// One sample of a metric family.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Labels in the order the text gives them.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// Milliseconds since the Unix epoch, when the exporter gave one.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Why a text is not in the Prometheus text format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromTextError {
    /// A sample line that does not parse (1-based line number).
    #[error("line {line}: {reason}")]
    Line { line: usize, reason: String },
    /// More than [`MAX_SAMPLES`] wanted samples.
    #[error("more than {MAX_SAMPLES} samples")]
    TooManySamples,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A float as Prometheus writes it (Go's `strconv.ParseFloat`: `NaN`, `+Inf`, `-Inf`, exponents).
fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse::<f64>().ok(),
    }
}

/// Splits `name{labels} value [ts]` into its parts.
fn sample_line(line: &str) -> Result<Sample, String> {
    let name_end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..name_end];
    if !name.starts_with(is_name_start) {
        return Err("a sample starts with a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices().peekable();
        loop {
            while chars.next_if(|(_, c)| *c == ' ' || *c == '\t').is_some() {}
            match chars.peek() {
                Some((i, '}')) => {
                    rest = &after[i + 1..];
                    break;
                }
                None => return Err("the label set is not closed with '}'".into()),
                _ => {}
            }
            let mut key = String::new();
            while let Some((_, c)) = chars.next_if(|(_, c)| is_name_char(*c)) {
                key.push(c);
            }
            if key.is_empty() || !key.starts_with(is_name_start) {
                return Err("a label name must match [a-zA-Z_][a-zA-Z0-9_]*".into());
            }
            while chars.next_if(|(_, c)| *c == ' ').is_some() {}
            if chars.next().map(|x| x.1) != Some('=') {
                return Err(format!("label {key}: '=' expected"));
            }
            while chars.next_if(|(_, c)| *c == ' ').is_some() {}
            if chars.next().map(|x| x.1) != Some('"') {
                return Err(format!("label {key}: a value in double quotes expected"));
            }
            let mut value = String::new();
            loop {
                match chars.next().map(|x| x.1) {
                    Some('"') => break,
                    Some('\\') => match chars.next().map(|x| x.1) {
                        Some('n') => value.push('\n'),
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some(c) => {
                            value.push('\\');
                            value.push(c);
                        }
                        None => return Err(format!("label {key}: unterminated value")),
                    },
                    Some(c) => value.push(c),
                    None => return Err(format!("label {key}: unterminated value")),
                }
            }
            labels.push((key, value));
            while chars.next_if(|(_, c)| *c == ' ').is_some() {}
            match chars.peek().map(|x| x.1) {
                Some(',') => {
                    chars.next();
                }
                Some('}') => {}
                None => return Err("the label set is not closed with '}'".into()),
                _ => return Err("',' or '}' expected after a label".into()),
            }
        }
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("a value expected after the metric")?;
    let value = parse_value(value).ok_or_else(|| format!("{value:?} is not a number"))?;
    let timestamp = match fields.next() {
        None => None,
        Some(t) => Some(t.parse::<i64>().map_err(|_| format!("{t:?} is not a timestamp in milliseconds"))?),
    };
    if fields.next().is_some() {
        return Err("text after the timestamp".into());
    }
    Ok(Sample { name: name.to_string(), labels, value, timestamp_ms: timestamp })
}

/// The samples of `text` whose metric name `wanted` accepts, in the order of the text.
pub fn parse(text: &str, wanted: impl Fn(&str) -> bool) -> Result<Vec<Sample>, PromTextError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
        if name_end > 0 && !wanted(&line[..name_end]) {
            continue;
        }
        let sample = sample_line(line).map_err(|reason| PromTextError::Line { line: i + 1, reason })?;
        if out.len() == MAX_SAMPLES {
            return Err(PromTextError::TooManySamples);
        }
        out.push(sample);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a DCGM exporter on Kubernetes serves (NVIDIA's "DCGM Exporter Metrics" format: the
    /// default counters, with the `Hostname` label and the pod using the GPU; GPU 1 is idle).
    const DCGM: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:10:1C.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05",container="pytorch",namespace="team-a",pod="llama-worker-0"} 1980
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:10:1C.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05",container="pytorch",namespace="team-a",pod="llama-worker-0"} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-7c2d6e0f-1b2a-4c3d-9e8f-0a1b2c3d4e5f",pci_bus_id="00000000:10:1D.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05"} 0
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:10:1C.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05",container="pytorch",namespace="team-a",pod="llama-worker-0"} 2321
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-7c2d6e0f-1b2a-4c3d-9e8f-0a1b2c3d4e5f",pci_bus_id="00000000:10:1D.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05"} 81079
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",pci_bus_id="00000000:10:1C.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05",container="pytorch",namespace="team-a",pod="llama-worker-0"} 78758
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-7c2d6e0f-1b2a-4c3d-9e8f-0a1b2c3d4e5f",pci_bus_id="00000000:10:1D.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="hyperpod-i-0abc",DCGM_FI_DRIVER_VERSION="550.127.05"} 0
"#;

    #[test]
    fn reads_a_dcgm_exporter_answer() {
        let want = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"];
        let samples = parse(DCGM, |n| want.contains(&n)).unwrap();
        let got: Vec<(&str, Option<&str>, Option<&str>, f64)> =
            samples.iter().map(|s| (s.name.as_str(), s.label("gpu"), s.label("pod"), s.value)).collect();
        assert_eq!(
            got,
            [
                ("DCGM_FI_DEV_GPU_UTIL", Some("0"), Some("llama-worker-0"), 97.0),
                ("DCGM_FI_DEV_GPU_UTIL", Some("1"), None, 0.0),
                ("DCGM_FI_DEV_FB_FREE", Some("0"), Some("llama-worker-0"), 2321.0),
                ("DCGM_FI_DEV_FB_FREE", Some("1"), None, 81079.0),
                ("DCGM_FI_DEV_FB_USED", Some("0"), Some("llama-worker-0"), 78758.0),
                ("DCGM_FI_DEV_FB_USED", Some("1"), None, 0.0),
            ]
        );
        assert_eq!(samples[0].label("Hostname"), Some("hyperpod-i-0abc"));
        assert_eq!(samples[0].label("namespace"), Some("team-a"));
        assert_eq!(samples[0].labels.len(), 10);
        assert!(samples.iter().all(|s| s.timestamp_ms.is_none()));
        assert_eq!(parse(DCGM, |_| true).unwrap().len(), 7);
    }

    #[test]
    fn sample_lines_follow_the_exposition_format() {
        // (line, name, labels, value, timestamp)
        type Row<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], f64, Option<i64>);
        let table: &[Row] = &[
            ("up 1", "up", &[], 1.0, None),
            ("up{} 1", "up", &[], 1.0, None),
            ("a:b_c{x=\"1\"} 2.5e3 1700000000123", "a:b_c", &[("x", "1")], 2500.0, Some(1_700_000_000_123)),
            ("m{x=\"a\\\"b\\\\c\\nd\"} -1", "m", &[("x", "a\"b\\c\nd")], -1.0, None),
            ("m{x=\"1\",} 3", "m", &[("x", "1")], 3.0, None),
            ("m{ x = \"1\" , y=\"{,}\" } 4", "m", &[("x", "1"), ("y", "{,}")], 4.0, None),
            ("m +Inf", "m", &[], f64::INFINITY, None),
            ("m -Inf", "m", &[], f64::NEG_INFINITY, None),
            ("   m 7   ", "m", &[], 7.0, None),
        ];
        for (line, name, labels, value, ts) in table {
            let s = parse(line, |_| true).unwrap().remove(0);
            let l: Vec<(&str, &str)> = s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(
                (s.name.as_str(), l.as_slice(), s.value, s.timestamp_ms),
                (*name, *labels, *value, *ts),
                "{line}"
            );
        }
        assert!(parse("m NaN", |_| true).unwrap()[0].value.is_nan());
    }

    #[test]
    fn malformed_lines_name_their_line() {
        let table: &[(&str, &str)] = &[
            ("ok 1\n9bad 1", "line 2: a sample starts"),
            ("m{x=1} 1", "line 1: label x: a value in double quotes"),
            ("m{x=\"1\" 1", "line 1: ',' or '}' expected"),
            ("m{x=\"1} 1", "line 1: label x: unterminated value"),
            ("m{x=\"1\"", "line 1: the label set is not closed"),
            ("m", "line 1: a value expected"),
            ("m one", "line 1: \"one\" is not a number"),
            ("m 1 soon", "line 1: \"soon\" is not a timestamp"),
            ("m 1 2 3", "line 1: text after the timestamp"),
            ("m{=\"1\"} 1", "line 1: a label name"),
        ];
        for (text, want) in table {
            let e = parse(text, |_| true).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn unwanted_families_are_skipped_unparsed_and_the_count_is_bounded() {
        // A malformed line of a family nobody asked for does not fail the read.
        assert_eq!(parse("other{broken 1\nm 2", |n| n == "m").unwrap().len(), 1);
        let many = "m 1\n".repeat(MAX_SAMPLES + 1);
        assert_eq!(parse(&many, |_| true), Err(PromTextError::TooManySamples));
        assert_eq!(parse(&many, |n| n == "other").unwrap().len(), 0);
    }
}
