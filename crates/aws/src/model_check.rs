//! Test support: checks the requests the SDK sends against AWS's own service models.
//!
//! The models are botocore's (`botocore/data/<service>/<api-version>/service-2.json[.gz]`, the
//! data the AWS CLI and boto3 run on), installed from PyPI at the version `xtask` pins
//! (`botocore==…` in `xtask/src/main.rs` `venv()`); the code here is ours.
//!
//! - [`Models::load`] finds the data directory: `$BOTOCORE_DATA` (what `cargo xtask test` sets),
//!   else the test venv `target/test-venv/lib/python3*/site-packages/botocore/data`; without
//!   either it fails, telling how to get them — never a silent skip. Gzipped models are read
//!   through the system `gzip -dc` (no decompression crate needed).
//! - [`Models::decode`] turns one [`Recorded`] request back into `(service, operation,
//!   parameters)`, per protocol: `json` (the `X-Amz-Target` header names the operation; the
//!   body is the input), `rest-json` and `rest-xml` (method + the `http.requestUri` template
//!   pick the operation; members come from the URI labels, the query string, headers and the
//!   body by their `location`/`locationName`; S3's virtual-hosted bucket is put back into the
//!   path), `query` (`Action=…`, `member.N` lists, `entry.N.key` maps) and `ec2` (flattened
//!   `Name.N` lists named by `queryName`, else the capitalised `locationName`). Parameters come
//!   out keyed by member name, as JSON values typed by their shapes.
//! - [`Models::validate`] checks decoded parameters against the operation's input shape:
//!   required members present, no unknown member, enum values, string length and pattern,
//!   numeric range, list and map bounds, blob/timestamp/number/boolean types, recursively. Each
//!   [`Violation`] names its path (`InstanceGroups[0].LifeCycleConfig.SourceS3Uri`).
//!
//! # Guarantees
//!
//! - Patterns are matched as AWS's Java services match them: against the whole value
//!   (`Pattern.matches`; a SageMaker name `my_cluster` is refused by `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`
//!   although a prefix matches). Java-only syntax that occurs in the models is translated
//!   (`\uXXXX`, UTF-16 surrogate ranges, `\p{Alnum}`, a leading `(?=.{m,n}$)` length look-ahead,
//!   a `(?<!-)` look-behind before the end, `(?!^[.-])` at the start, a quantified `$`); a
//!   pattern that still does not compile is a [`Violation`] naming it, not a pass.
//! - A request that cannot be decoded (unknown host, no operation matches, a body that does
//!   not parse) is an error, not a pass.

use crate::replay::Recorded;
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The variable naming botocore's data directory.
pub const DATA_ENV: &str = "BOTOCORE_DATA";

/// One finding: where, and which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub rule: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", if self.path.is_empty() { "(input)" } else { &self.path }, self.rule)
    }
}

/// A request decoded against its service model.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// botocore's service directory name (`sagemaker`, `eks`, `ec2`, `iam`, `sts`, `s3`,
    /// `service-quotas`).
    pub service: String,
    pub operation: String,
    /// The input, keyed by member name.
    pub params: Value,
    /// Findings of decoding itself (unknown query parameters, form keys, XML elements,
    /// values of the wrong type).
    pub violations: Vec<Violation>,
}

impl Decoded {
    /// `service:Operation`, e.g. `ec2:CreateVpc`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.service, self.operation)
    }
}

/// A REST operation matched by method and path: score, operation, URI labels, query literals.
type RestMatch = (usize, String, BTreeMap<String, String>, Vec<(String, String)>);

/// One service's model.
#[derive(Debug)]
pub struct Model {
    pub service: String,
    pub version: String,
    json: Value,
}

impl Model {
    pub fn protocol(&self) -> &str {
        self.json["metadata"]["protocol"].as_str().unwrap_or_default()
    }

    pub fn operation(&self, name: &str) -> Option<&Value> {
        self.json["operations"].get(name)
    }

    pub fn shape(&self, name: &str) -> &Value {
        &self.json["shapes"][name]
    }

    fn input_shape(&self, op: &str) -> Option<&str> {
        self.operation(op)?.get("input")?.get("shape")?.as_str()
    }

    fn operations(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.json["operations"].as_object().into_iter().flatten()
    }
}

/// botocore's data directory and the models read from it.
pub struct Models {
    pub dir: PathBuf,
    /// botocore's `__version__`.
    pub botocore_version: Option<String>,
    cache: Mutex<HashMap<String, Arc<Model>>>,
    patterns: Mutex<HashMap<String, Result<Pattern, String>>>,
}

/// A translated pattern: the regex (anchored) and a length bound from a look-ahead.
#[derive(Debug, Clone)]
struct Pattern {
    regex: Regex,
    length: Option<(usize, usize)>,
    /// The part matched before an optional suffix must not end with `-` (`(?<!-)`).
    no_trailing_dash: Option<Regex>,
    /// The value must not start with one of these characters (`(?!^[.-])`).
    no_leading: Option<Vec<char>>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text of `path`, or of `path.gz` through the system `gzip -dc` when only that exists
/// (botocore and moto ship their data gzipped).
pub fn read_maybe_gz(path: &Path) -> Result<String, String> {
    if path.exists() {
        return std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()));
    }
    let gz = PathBuf::from(format!("{}.gz", path.display()));
    let out = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&gz)
        .output()
        .map_err(|e| format!("gzip -dc {}: {e} (gzip is needed to read botocore's models)", gz.display()))?;
    if !out.status.success() {
        return Err(format!("gzip -dc {}: {}", gz.display(), String::from_utf8_lossy(&out.stderr)));
    }
    String::from_utf8(out.stdout).map_err(|e| e.to_string())
}

/// How to get the models, for error messages.
pub const HOW_TO: &str = "the model-validation suite needs botocore's service models: run `cargo xtask test` \
     (it installs the pinned botocore into target/test-venv and sets BOTOCORE_DATA), or \
     `pip install botocore==<the pin in xtask/src/main.rs>` and set BOTOCORE_DATA=<site-packages>/botocore/data";

impl Models {
    /// The shared instance (models are parsed once per test process).
    pub fn get() -> &'static Models {
        static MODELS: OnceLock<Models> = OnceLock::new();
        MODELS.get_or_init(|| Models::load().unwrap_or_else(|e| panic!("{e}")))
    }

    /// Finds the data directory: `$BOTOCORE_DATA`, else the test venv's botocore.
    pub fn load() -> Result<Models, String> {
        let dir = match std::env::var(DATA_ENV) {
            Ok(d) if !d.is_empty() => {
                let d = PathBuf::from(d);
                if !d.join("sagemaker").is_dir() {
                    return Err(format!("{DATA_ENV}={} has no sagemaker model; {HOW_TO}", d.display()));
                }
                d
            }
            _ => Self::venv_data()
                .ok_or_else(|| format!("{DATA_ENV} is not set and no test venv was found; {HOW_TO}"))?,
        };
        let init = dir.parent().map(|p| p.join("__init__.py"));
        let botocore_version = init.and_then(|p| std::fs::read_to_string(p).ok()).and_then(|s| {
            s.lines().find_map(|l| {
                let rest = l.strip_prefix("__version__")?.trim_start().strip_prefix('=')?.trim();
                Some(rest.trim_matches(['\'', '"']).to_string())
            })
        });
        Ok(Models { dir, botocore_version, cache: Mutex::default(), patterns: Mutex::default() })
    }

    fn venv_data() -> Option<PathBuf> {
        let lib = workspace_root().join("target/test-venv/lib");
        std::fs::read_dir(lib).ok()?.flatten().find_map(|e| {
            let d = e.path().join("site-packages/botocore/data");
            d.join("sagemaker").is_dir().then_some(d)
        })
    }

    /// The model of a service (its newest API version, as botocore picks it).
    pub fn model(&self, service: &str) -> Result<Arc<Model>, String> {
        if let Some(m) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(service) {
            return Ok(m.clone());
        }
        let sdir = self.dir.join(service);
        let mut versions: Vec<String> = std::fs::read_dir(&sdir)
            .map_err(|e| format!("{}: {e}", sdir.display()))?
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        versions.sort();
        let version = versions.pop().ok_or_else(|| format!("{}: no API version", sdir.display()))?;
        let base = sdir.join(&version);
        let text = read_maybe_gz(&base.join("service-2.json"))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", base.display()))?;
        let m = Arc::new(Model { service: service.to_string(), version, json });
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(service.to_string(), m.clone());
        Ok(m)
    }

    /// The botocore service a request went to, from its host.
    pub fn service_of(r: &Recorded) -> Result<&'static str, String> {
        let host = host_of(&r.url);
        let first = host.split('.').next().unwrap_or_default();
        Ok(match first {
            "sagemaker" | "api" if host.contains("sagemaker") => "sagemaker",
            "eks" => "eks",
            "ec2" => "ec2",
            "fsx" => "fsx",
            "aps" => "amp",
            "iam" => "iam",
            "sts" => "sts",
            "servicequotas" => "service-quotas",
            "s3" => "s3",
            _ if host.contains(".s3.") || host.contains(".s3-") => "s3",
            _ => return Err(format!("no botocore service for host {host} ({} {})", r.method, r.url)),
        })
    }

    /// Decodes one recorded request.
    pub fn decode(&self, r: &Recorded) -> Result<Decoded, String> {
        let service = Self::service_of(r)?;
        let model = self.model(service)?;
        let mut d = Decoder { model: &model, violations: Vec::new() };
        let (operation, params) = match model.protocol() {
            "json" => d.json(r)?,
            "rest-json" | "rest-xml" => d.rest(r)?,
            "query" | "ec2" => d.query(r)?,
            other => return Err(format!("{service}: protocol {other} is not decoded")),
        };
        Ok(Decoded { service: service.to_string(), operation, params, violations: d.violations })
    }

    /// Validates parameters against an operation's input shape.
    pub fn validate(&self, service: &str, operation: &str, params: &Value) -> Result<Vec<Violation>, String> {
        let model = self.model(service)?;
        if model.operation(operation).is_none() {
            return Err(format!("{service} has no operation {operation}"));
        }
        let mut out = Vec::new();
        if let Some(input) = model.input_shape(operation) {
            self.check(&model, input, params, "", &mut out);
        } else if params.as_object().is_some_and(|o| !o.is_empty()) {
            out.push(Violation { path: String::new(), rule: format!("{operation} takes no input") });
        }
        Ok(out)
    }

    /// Decodes and validates: every finding of both.
    pub fn check_request(&self, r: &Recorded) -> Result<(Decoded, Vec<Violation>), String> {
        let d = self.decode(r)?;
        let mut v = d.violations.clone();
        v.extend(self.validate(&d.service, &d.operation, &d.params)?);
        Ok((d, v))
    }

    fn check(&self, model: &Model, shape_name: &str, v: &Value, path: &str, out: &mut Vec<Violation>) {
        let shape = model.shape(shape_name);
        let mut bad = |rule: String| out.push(Violation { path: path.to_string(), rule });
        let ty = shape["type"].as_str().unwrap_or_default();
        let (min, max) = (shape["min"].as_f64(), shape["max"].as_f64());
        let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        match ty {
            "structure" => {
                let Some(obj) = v.as_object() else {
                    return bad(format!("expected a structure ({shape_name}), got {v}"));
                };
                let members = shape["members"].as_object().cloned().unwrap_or_default();
                for req in shape["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if !obj.contains_key(req) {
                        out.push(Violation {
                            path: join(req),
                            rule: format!("required member of {shape_name} is missing"),
                        });
                    }
                }
                for (k, val) in obj {
                    match members.get(k) {
                        None => out.push(Violation { path: join(k), rule: format!("unknown member of {shape_name}") }),
                        Some(m) => {
                            if let Some(s) = m["shape"].as_str() {
                                self.check(model, s, val, &join(k), out);
                            }
                        }
                    }
                }
                if shape["union"].as_bool() == Some(true) && obj.len() != 1 {
                    out.push(Violation {
                        path: path.to_string(),
                        rule: format!("union {shape_name} needs exactly one member, has {}", obj.len()),
                    });
                }
            }
            "list" => {
                let Some(items) = v.as_array() else { return bad(format!("expected a list ({shape_name}), got {v}")) };
                bounds(&mut bad, "list length", items.len() as f64, min, max);
                let member = shape["member"]["shape"].as_str().unwrap_or_default().to_string();
                for (i, item) in items.iter().enumerate() {
                    self.check(model, &member, item, &format!("{path}[{i}]"), out);
                }
            }
            "map" => {
                let Some(obj) = v.as_object() else { return bad(format!("expected a map ({shape_name}), got {v}")) };
                bounds(&mut bad, "map size", obj.len() as f64, min, max);
                let key = shape["key"]["shape"].as_str().unwrap_or_default().to_string();
                let value = shape["value"]["shape"].as_str().unwrap_or_default().to_string();
                for (k, val) in obj {
                    self.check(model, &key, &Value::String(k.clone()), &format!("{path}{{{k}}}(key)"), out);
                    self.check(model, &value, val, &format!("{path}{{{k}}}"), out);
                }
            }
            "string" => {
                let Some(s) = v.as_str() else { return bad(format!("expected a string ({shape_name}), got {v}")) };
                if let Some(values) = shape["enum"].as_array()
                    && !values.iter().any(|e| e.as_str() == Some(s))
                {
                    let list: Vec<&str> = values.iter().filter_map(Value::as_str).take(12).collect();
                    let more = if values.len() > list.len() {
                        format!(" and {} more", values.len() - list.len())
                    } else {
                        String::new()
                    };
                    bad(format!("{s:?} is not one of {shape_name}'s values {list:?}{more}"));
                }
                bounds(&mut bad, "string length", s.chars().count() as f64, min, max);
                if let Some(p) = shape["pattern"].as_str() {
                    match self.pattern(p) {
                        Err(e) => bad(format!("pattern {p:?} of {shape_name} cannot be checked: {e}")),
                        Ok(pat) if !pat.matches(s) => {
                            bad(format!("{s:?} does not match pattern {p:?} of {shape_name}"))
                        }
                        Ok(_) => {}
                    }
                }
            }
            "integer" | "long" => match v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)) {
                None => bad(format!("expected an integer ({shape_name}), got {v}")),
                Some(n) => bounds(&mut bad, "value", n as f64, min, max),
            },
            "float" | "double" => match v.as_f64() {
                None => bad(format!("expected a number ({shape_name}), got {v}")),
                Some(n) => bounds(&mut bad, "value", n, min, max),
            },
            "boolean" => {
                if !v.is_boolean() {
                    bad(format!("expected a boolean ({shape_name}), got {v}"))
                }
            }
            "blob" => match v.as_str() {
                None => bad(format!("expected a blob ({shape_name}), got {v}")),
                Some(s) => bounds(&mut bad, "blob length", s.len() as f64, min, max),
            },
            "timestamp" => {
                if !(v.is_number() || v.is_string()) {
                    bad(format!("expected a timestamp ({shape_name}), got {v}"))
                }
            }
            other => bad(format!("shape {shape_name} has type {other:?}, not checked")),
        }
    }

    /// Whether `value` satisfies a botocore pattern; `Err` when the pattern cannot be checked.
    pub fn validate_pattern(&self, p: &str, value: &str) -> Result<bool, String> {
        self.pattern(p).map(|pat| pat.matches(value))
    }

    fn pattern(&self, p: &str) -> Result<Pattern, String> {
        let mut cache = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
        cache.entry(p.to_string()).or_insert_with(|| translate(p)).clone()
    }
}

fn bounds(bad: &mut impl FnMut(String), what: &str, n: f64, min: Option<f64>, max: Option<f64>) {
    if let Some(m) = min
        && n < m
    {
        bad(format!("{what} {n} is below the minimum {m}"));
    }
    if let Some(m) = max
        && n > m
    {
        bad(format!("{what} {n} is above the maximum {m}"));
    }
}

impl Pattern {
    fn matches(&self, s: &str) -> bool {
        if let Some((lo, hi)) = self.length {
            let n = s.chars().count();
            if n < lo || n > hi {
                return false;
            }
        }
        if let Some(chars) = &self.no_leading
            && s.starts_with(chars.as_slice())
        {
            return false;
        }
        if let Some(re) = &self.no_trailing_dash {
            // The part the look-behind guards is the first capture group of `re`.
            match re.captures(s).and_then(|c| c.get(1)) {
                Some(m) if m.as_str().ends_with('-') => return false,
                _ => {}
            }
        }
        self.regex.is_match(s)
    }
}

/// Translates a botocore (Java-flavoured) pattern to a whole-value Rust regex.
fn translate(p: &str) -> Result<Pattern, String> {
    let mut s = p.to_string();
    let mut length = None;
    let mut no_leading = None;
    // `^?(?=.{m,n}$)` at the start: a length bound.
    let la = Regex::new(r"^\^?\(\?=\.\{(\d+),(\d+)\}\$\)").expect("regex");
    if let Some(c) = la.captures(&s) {
        let lo: usize = c[1].parse().map_err(|_| "bad look-ahead bound")?;
        let hi: usize = c[2].parse().map_err(|_| "bad look-ahead bound")?;
        length = Some((lo, hi));
        s = s[c[0].len()..].to_string();
    }
    // `(?!^[.-])` at the start: a forbidden first character.
    if let Some(rest) = s.strip_prefix("(?!^[")
        && let Some((chars, tail)) = rest.split_once("])")
    {
        no_leading = Some(chars.chars().filter(|c| *c != '\\').collect());
        s = tail.to_string();
    }
    // `(?!\s*$).+`: not blank.
    if s == r"(?!\s*$).+" {
        s = r".*\S.*".to_string();
    }
    // A quantified end anchor (`)${1,128}`) is just the anchor.
    let qa = Regex::new(r"\$\{\d+,\d+\}").expect("regex");
    s = qa.replace_all(&s, "$$").into_owned();
    // `\p{Alnum}` is POSIX in Java.
    s = s.replace(r"\p{Alnum}", "[:alnum:]");
    // UTF-16 escapes: surrogate ranges stand for the supplementary planes.
    s = s.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\x{10000}-\x{10FFFF}");
    s = s.replace(r"\uD800-\uDBFF\uDC00-\uDFFF", r"\x{10000}-\x{10FFFF}");
    let five = Regex::new(r"\\u([0-9A-Fa-f]{5,6})").expect("regex");
    s = five.replace_all(&s, r"\x{$1}").into_owned();
    let four = Regex::new(r"\\u([0-9A-Fa-f]{4})").expect("regex");
    s = four.replace_all(&s, r"\x{$1}").into_owned();
    // `(?<!-)` look-behind: checked on the group before it.
    let mut no_trailing_dash = None;
    if let Some(i) = s.find("(?<!-)") {
        let head = s[..i].to_string();
        let tail = s[i + "(?<!-)".len()..].to_string();
        let guard = format!("^({})(?:{})$", strip_anchors(&head), strip_anchors(&tail));
        no_trailing_dash = Some(Regex::new(&guard).map_err(|e| format!("look-behind rewrite: {e}"))?);
        let without = format!("{head}{tail}");
        s = without;
    }
    if s.contains("(?=") || s.contains("(?!") || s.contains("(?<") {
        return Err("look-around that is not translated".into());
    }
    let regex = Regex::new(&format!("^(?:{})$", s)).map_err(|e| e.to_string())?;
    Ok(Pattern { regex, length, no_trailing_dash, no_leading })
}

fn strip_anchors(s: &str) -> &str {
    let s = s.strip_prefix('^').unwrap_or(s);
    s.strip_suffix('$').unwrap_or(s)
}

fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    host.split(':').next().unwrap_or_default()
}

/// Percent-decoding (`+` stays `+`; forms decode it before calling).
fn pct(s: &str) -> String {
    crate::replay::percent_decode(s)
}

struct Decoder<'m> {
    model: &'m Model,
    violations: Vec<Violation>,
}

/// A node of the form-parameter tree (`A.B.1.C=v`).
#[derive(Debug, Default)]
struct Node {
    value: Option<String>,
    children: BTreeMap<String, Node>,
}

impl Decoder<'_> {
    fn bad(&mut self, path: &str, rule: impl Into<String>) {
        self.violations.push(Violation { path: path.to_string(), rule: rule.into() });
    }

    // ------------------------------------------------------------ json

    fn json(&mut self, r: &Recorded) -> Result<(String, Value), String> {
        let target = r.target.as_deref().ok_or("a JSON-protocol request without X-Amz-Target")?;
        let prefix = self.model.json["metadata"]["targetPrefix"].as_str().unwrap_or_default();
        let (p, op) = target.rsplit_once('.').ok_or_else(|| format!("X-Amz-Target {target:?}"))?;
        if p != prefix {
            return Err(format!("X-Amz-Target {target:?}: prefix is not the model's {prefix:?}"));
        }
        if self.model.operation(op).is_none() {
            return Err(format!("{}: no operation {op}", self.model.service));
        }
        let params = if r.body.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_str(&r.body).map_err(|e| format!("{target}: body is not JSON: {e}"))?
        };
        Ok((op.to_string(), params))
    }

    // ------------------------------------------------------------ query / ec2

    fn query(&mut self, r: &Recorded) -> Result<(String, Value), String> {
        let mut form = r.form();
        if form.is_empty() && !r.body.is_empty() {
            return Err(format!("a query-protocol request whose body is not a form: {}", r.body));
        }
        let action = form.remove("Action").ok_or("a query-protocol request without Action")?;
        let version = form.remove("Version");
        let want = self.model.json["metadata"]["apiVersion"].as_str().unwrap_or_default();
        if version.as_deref() != Some(want) {
            self.bad("Version", format!("{version:?} is not the model's API version {want}"));
        }
        if self.model.operation(&action).is_none() {
            return Err(format!("{}: no operation {action}", self.model.service));
        }
        let mut root = Node::default();
        for (k, v) in form {
            let mut n = &mut root;
            for part in k.split('.') {
                n = n.children.entry(part.to_string()).or_default();
            }
            n.value = Some(v);
        }
        let params = match self.model.input_shape(&action) {
            Some(s) => self.form_value(s, &root, ""),
            None => Value::Object(Map::new()),
        };
        Ok((action, params))
    }

    /// The serialized name of a structure member in a form.
    fn form_name(&self, name: &str, member: &Value) -> String {
        if self.model.protocol() == "ec2" {
            if let Some(q) = member["queryName"].as_str() {
                return q.to_string();
            }
            if let Some(l) = member["locationName"].as_str() {
                let mut c = l.chars();
                return c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default();
            }
            return name.to_string();
        }
        member["locationName"].as_str().unwrap_or(name).to_string()
    }

    fn form_value(&mut self, shape_name: &str, node: &Node, path: &str) -> Value {
        let shape = self.model.shape(shape_name).clone();
        let ty = shape["type"].as_str().unwrap_or_default();
        let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        match ty {
            "structure" => {
                let mut out = Map::new();
                let members = shape["members"].as_object().cloned().unwrap_or_default();
                let mut by_wire: HashMap<String, (String, Value)> = HashMap::new();
                for (name, m) in &members {
                    by_wire.insert(self.form_name(name, m), (name.clone(), m.clone()));
                }
                for (key, child) in &node.children {
                    match by_wire.get(key) {
                        None => self.bad(&join(key), format!("unknown form parameter for {shape_name}")),
                        Some((name, m)) => {
                            let target = m["shape"].as_str().unwrap_or_default().to_string();
                            let flattened = m["flattened"].as_bool() == Some(true);
                            let v = self.form_member(&target, child, &join(name), flattened, m);
                            out.insert(name.clone(), v);
                        }
                    }
                }
                Value::Object(out)
            }
            _ => self.form_member(shape_name, node, path, false, &Value::Null),
        }
    }

    fn form_member(&mut self, shape_name: &str, node: &Node, path: &str, flat: bool, member: &Value) -> Value {
        let shape = self.model.shape(shape_name).clone();
        let ty = shape["type"].as_str().unwrap_or_default();
        match ty {
            "structure" => self.form_value(shape_name, node, path),
            "list" => {
                if node.children.is_empty() && node.value.as_deref() == Some("") {
                    return Value::Array(vec![]);
                }
                let item_shape = shape["member"]["shape"].as_str().unwrap_or_default().to_string();
                let flattened = self.model.protocol() == "ec2" || flat || shape["flattened"].as_bool() == Some(true);
                let items_node = if flattened {
                    Some(node)
                } else {
                    let wrapper = shape["member"]["locationName"].as_str().unwrap_or("member");
                    for k in node.children.keys().filter(|k| *k != wrapper) {
                        self.bad(&format!("{path}.{k}"), format!("list {shape_name} items are under `{wrapper}`"));
                    }
                    node.children.get(wrapper)
                };
                let mut items: Vec<(usize, &Node)> = Vec::new();
                for (k, n) in items_node.map(|n| &n.children).into_iter().flatten() {
                    match k.parse::<usize>() {
                        Ok(i) if i >= 1 => items.push((i, n)),
                        _ => self.bad(&format!("{path}.{k}"), format!("list {shape_name} index must be 1, 2, …")),
                    }
                }
                items.sort_by_key(|(i, _)| *i);
                for (pos, (i, _)) in items.iter().enumerate() {
                    if *i != pos + 1 {
                        self.bad(path, format!("list {shape_name} indexes are not 1..n"));
                        break;
                    }
                }
                let _ = member;
                Value::Array(
                    items
                        .into_iter()
                        .enumerate()
                        .map(|(pos, (_, n))| {
                            self.form_member(&item_shape, n, &format!("{path}[{pos}]"), false, &Value::Null)
                        })
                        .collect(),
                )
            }
            "map" => {
                let key_name = shape["key"]["locationName"].as_str().unwrap_or("key").to_string();
                let value_name = shape["value"]["locationName"].as_str().unwrap_or("value").to_string();
                let value_shape = shape["value"]["shape"].as_str().unwrap_or_default().to_string();
                let entries = if shape["flattened"].as_bool() == Some(true) || flat {
                    Some(node)
                } else {
                    node.children.get("entry")
                };
                let mut out = Map::new();
                for (_, e) in entries.map(|n| &n.children).into_iter().flatten() {
                    let k = e.children.get(&key_name).and_then(|n| n.value.clone()).unwrap_or_default();
                    let v = match e.children.get(&value_name) {
                        Some(n) => self.form_member(&value_shape, n, &format!("{path}{{{k}}}"), false, &Value::Null),
                        None => Value::Null,
                    };
                    out.insert(k, v);
                }
                Value::Object(out)
            }
            _ => {
                if !node.children.is_empty() {
                    self.bad(path, format!("{shape_name} is a scalar, the form has nested keys"));
                }
                self.scalar(shape_name, node.value.as_deref().unwrap_or_default(), path)
            }
        }
    }

    /// A string from a form, URI, query or header, typed by its shape.
    fn scalar(&mut self, shape_name: &str, s: &str, path: &str) -> Value {
        let ty = self.model.shape(shape_name)["type"].as_str().unwrap_or_default().to_string();
        match ty.as_str() {
            "integer" | "long" => match s.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => {
                    self.bad(path, format!("{s:?} is not an integer ({shape_name})"));
                    Value::Null
                }
            },
            "float" | "double" => match s.parse::<f64>() {
                Ok(n) => Value::from(n),
                Err(_) => {
                    self.bad(path, format!("{s:?} is not a number ({shape_name})"));
                    Value::Null
                }
            },
            "boolean" => match s {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => {
                    self.bad(path, format!("{s:?} is not a boolean ({shape_name})"));
                    Value::Null
                }
            },
            _ => Value::String(s.to_string()),
        }
    }

    // ------------------------------------------------------------ rest-json / rest-xml

    fn rest(&mut self, r: &Recorded) -> Result<(String, Value), String> {
        let raw_path = r.uri.split('?').next().unwrap_or_default().to_string();
        let mut path = if raw_path.is_empty() { "/".to_string() } else { raw_path };
        // S3 virtual-hosted style: the bucket is the host's first labels.
        if self.model.service == "s3" {
            let host = host_of(&r.url);
            if let Some(i) = host.find(".s3.").or_else(|| host.find(".s3-")) {
                let bucket = &host[..i];
                path = if path == "/" { format!("/{bucket}") } else { format!("/{bucket}{path}") };
            }
        }
        let query: Vec<(String, String)> = r
            .uri
            .split_once('?')
            .map(|(_, q)| {
                q.split('&')
                    .filter(|kv| !kv.is_empty())
                    .map(|kv| match kv.split_once('=') {
                        Some((k, v)) => (pct(k), pct(v)),
                        None => (pct(kv), String::new()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The operation: method and path template match, every literal query key present;
        // the most literal segments and query keys win.
        // S3's SDKs name the operation in `x-id` where two share a method and path
        // (PutObject and CopyObject: `PUT /{Bucket}/{Key+}`).
        let named = query.iter().find(|(k, _)| k == "x-id").map(|(_, v)| v.clone());
        let mut best: Option<RestMatch> = None;
        for (name, op) in self.model.operations() {
            if op["http"]["method"].as_str() != Some(r.method.as_str()) {
                continue;
            }
            if named.as_ref().is_some_and(|n| n != name) {
                continue;
            }
            let uri = op["http"]["requestUri"].as_str().unwrap_or_default();
            let (tpath, tquery) = uri.split_once('?').unwrap_or((uri, ""));
            let literals: Vec<(String, String)> = tquery
                .split('&')
                .filter(|s| !s.is_empty())
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (kv.to_string(), String::new()),
                })
                .collect();
            if !literals.iter().all(|(k, v)| query.iter().any(|(qk, qv)| qk == k && (v.is_empty() || qv == v))) {
                continue;
            }
            let Some((labels, literal_segments)) = match_template(tpath, &path) else { continue };
            let score = literal_segments * 10 + literals.len();
            if best.as_ref().is_none_or(|(s, ..)| score > *s) {
                best = Some((score, name.clone(), labels, literals));
            }
        }
        let (_, op, labels, literals) = best.ok_or_else(|| {
            format!("{} ({}): no operation for {} {}", self.model.service, self.model.version, r.method, r.uri)
        })?;
        let Some(input) = self.model.input_shape(&op).map(str::to_string) else {
            return Ok((op, Value::Object(Map::new())));
        };
        let shape = self.model.shape(&input).clone();
        let members = shape["members"].as_object().cloned().unwrap_or_default();
        let mut out = Map::new();
        // URI labels.
        for (label, value) in &labels {
            match members.iter().find(|(_, m)| m["location"] == "uri" && m["locationName"] == label.as_str()) {
                Some((name, m)) => {
                    let v = self.scalar(m["shape"].as_str().unwrap_or_default(), value, name);
                    out.insert(name.clone(), v);
                }
                None => self.bad(label, format!("URI label {{{label}}} has no member in {input}")),
            }
        }
        // Query string.
        let mut grouped: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in &query {
            if literals.iter().any(|(lk, _)| lk == k) || k == "x-id" {
                continue;
            }
            grouped.entry(k.clone()).or_default().push(v.clone());
        }
        for (k, values) in grouped {
            match members.iter().find(|(_, m)| m["location"] == "querystring" && m["locationName"] == k.as_str()) {
                Some((name, m)) => {
                    let target = m["shape"].as_str().unwrap_or_default();
                    let tshape = self.model.shape(target).clone();
                    let v = if tshape["type"] == "list" {
                        let item = tshape["member"]["shape"].as_str().unwrap_or_default();
                        Value::Array(
                            values
                                .iter()
                                .enumerate()
                                .map(|(i, s)| self.scalar(item, s, &format!("{name}[{i}]")))
                                .collect(),
                        )
                    } else {
                        if values.len() > 1 {
                            self.bad(name, "query parameter repeated".to_string());
                        }
                        self.scalar(target, &values[0], name)
                    };
                    out.insert(name.clone(), v);
                }
                None => self.bad(&format!("?{k}"), format!("unknown query parameter for {input}")),
            }
        }
        // Headers.
        for (name, m) in &members {
            let target = m["shape"].as_str().unwrap_or_default();
            match m["location"].as_str() {
                Some("header") => {
                    let h = m["locationName"].as_str().unwrap_or(name).to_ascii_lowercase();
                    if let Some(v) = r.headers.get(&h) {
                        let tshape = self.model.shape(target).clone();
                        let val = if tshape["type"] == "list" {
                            let item = tshape["member"]["shape"].as_str().unwrap_or_default();
                            Value::Array(v.split(',').map(|s| self.scalar(item, s.trim(), name)).collect())
                        } else {
                            self.scalar(target, v, name)
                        };
                        out.insert(name.clone(), val);
                    }
                }
                Some("headers") => {
                    let prefix = m["locationName"].as_str().unwrap_or_default().to_ascii_lowercase();
                    let found: Map<String, Value> = r
                        .headers
                        .iter()
                        .filter_map(|(k, v)| k.strip_prefix(&prefix).map(|s| (s.to_string(), Value::String(v.clone()))))
                        .collect();
                    if !found.is_empty() {
                        out.insert(name.clone(), Value::Object(found));
                    }
                }
                _ => {}
            }
        }
        // Body.
        let body = r.body.trim();
        let xml = self.model.protocol() == "rest-xml";
        if let Some(payload) = shape["payload"].as_str() {
            let m = &members[payload];
            let target = m["shape"].as_str().unwrap_or_default().to_string();
            let tshape = self.model.shape(&target).clone();
            if !body.is_empty() {
                let v = match tshape["type"].as_str() {
                    Some("structure") if xml => {
                        let el = parse_xml(body)?;
                        let want = m["locationName"].as_str().unwrap_or(payload);
                        if el.name != want {
                            self.bad(payload, format!("XML root <{}> is not <{want}>", el.name));
                        }
                        self.xml_value(&target, &el, payload)
                    }
                    Some("structure") => serde_json::from_str(body).map_err(|e| format!("{op}: body: {e}"))?,
                    _ => Value::String(body.to_string()),
                };
                out.insert(payload.to_string(), v);
            }
        } else if !body.is_empty() {
            if xml {
                return Err(format!("{op}: an XML body without a payload member is not decoded"));
            }
            let v: Value = serde_json::from_str(body).map_err(|e| format!("{op}: body is not JSON: {e}"))?;
            let obj = v.as_object().ok_or_else(|| format!("{op}: body is not a JSON object"))?;
            for (k, val) in obj {
                let found = members.iter().find(|(name, m)| {
                    m.get("location").is_none() && m["locationName"].as_str().unwrap_or(name.as_str()) == k
                });
                match found {
                    Some((name, _)) => {
                        out.insert(name.clone(), val.clone());
                    }
                    None => self.bad(k, format!("unknown body member of {input}")),
                }
            }
        }
        Ok((op, Value::Object(out)))
    }

    fn xml_value(&mut self, shape_name: &str, el: &Xml, path: &str) -> Value {
        let shape = self.model.shape(shape_name).clone();
        match shape["type"].as_str().unwrap_or_default() {
            "structure" => {
                let members = shape["members"].as_object().cloned().unwrap_or_default();
                let mut out = Map::new();
                let mut used = vec![false; el.children.len()];
                for (name, m) in &members {
                    let wire = m["locationName"].as_str().unwrap_or(name);
                    let target = m["shape"].as_str().unwrap_or_default().to_string();
                    let tshape = self.model.shape(&target).clone();
                    let flattened =
                        m["flattened"].as_bool() == Some(true) || tshape["flattened"].as_bool() == Some(true);
                    let sub = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                    if tshape["type"] == "list" && flattened {
                        let item = tshape["member"]["shape"].as_str().unwrap_or_default().to_string();
                        let mut items = Vec::new();
                        for (i, c) in el.children.iter().enumerate().filter(|(_, c)| c.name == wire) {
                            used[i] = true;
                            let p = format!("{sub}[{}]", items.len());
                            items.push(self.xml_value(&item, c, &p));
                        }
                        if !items.is_empty() {
                            out.insert(name.clone(), Value::Array(items));
                        }
                    } else if let Some((i, c)) = el.children.iter().enumerate().find(|(_, c)| c.name == wire) {
                        used[i] = true;
                        let v = self.xml_value(&target, c, &sub);
                        out.insert(name.clone(), v);
                    }
                }
                for (i, c) in el.children.iter().enumerate() {
                    if !used[i] {
                        let p = if path.is_empty() { c.name.clone() } else { format!("{path}.{}", c.name) };
                        self.bad(&p, format!("unknown XML element of {shape_name}"));
                    }
                }
                Value::Object(out)
            }
            "list" => {
                let item = shape["member"]["shape"].as_str().unwrap_or_default().to_string();
                let wire = shape["member"]["locationName"].as_str().unwrap_or("member").to_string();
                let mut items = Vec::new();
                for c in &el.children {
                    if c.name != wire {
                        self.bad(path, format!("list item <{}> is not <{wire}>", c.name));
                        continue;
                    }
                    let p = format!("{path}[{}]", items.len());
                    items.push(self.xml_value(&item, c, &p));
                }
                Value::Array(items)
            }
            _ => {
                if !el.children.is_empty() {
                    self.bad(path, format!("{shape_name} is a scalar, the XML has child elements"));
                }
                self.scalar(shape_name, &el.text, path)
            }
        }
    }
}

/// Matches a `requestUri` path template; the labels and the number of literal segments.
fn match_template(template: &str, path: &str) -> Option<(BTreeMap<String, String>, usize)> {
    let t: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    let p: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut labels = BTreeMap::new();
    let mut literal = 0;
    for (i, seg) in t.iter().enumerate() {
        if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if let Some(greedy) = name.strip_suffix('+') {
                let rest = p.get(i..)?.join("/");
                if rest.is_empty() {
                    return None;
                }
                labels.insert(greedy.to_string(), pct(&rest));
                return Some((labels, literal));
            }
            let v = p.get(i)?;
            if v.is_empty() {
                return None;
            }
            labels.insert(name.to_string(), pct(v));
        } else {
            if p.get(i) != Some(seg) {
                return None;
            }
            if !seg.is_empty() {
                literal += 1;
            }
        }
    }
    (p.len() == t.len()).then_some((labels, literal))
}

/// A parsed XML element (namespaces dropped).
#[derive(Debug, Default)]
struct Xml {
    name: String,
    text: String,
    children: Vec<Xml>,
}

fn parse_xml(s: &str) -> Result<Xml, String> {
    use xmlparser::{ElementEnd, Token, Tokenizer};
    let mut stack: Vec<Xml> = vec![Xml::default()];
    for tok in Tokenizer::from(s) {
        match tok.map_err(|e| format!("XML body: {e}"))? {
            Token::ElementStart { local, .. } => stack.push(Xml { name: local.to_string(), ..Xml::default() }),
            Token::ElementEnd { end: ElementEnd::Open, .. } => {}
            Token::ElementEnd { end: ElementEnd::Close(..) | ElementEnd::Empty, .. } => {
                let done = stack.pop().ok_or("XML body: unbalanced")?;
                stack.last_mut().ok_or("XML body: unbalanced")?.children.push(done);
            }
            Token::Text { text } => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&unescape(text.as_str()));
                }
            }
            Token::Cdata { text, .. } => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(text.as_str());
                }
            }
            _ => {}
        }
    }
    let mut doc = stack.pop().ok_or("XML body: empty")?;
    if !stack.is_empty() || doc.children.len() != 1 {
        return Err("XML body: not one root element".into());
    }
    let mut root = doc.children.remove(0);
    trim(&mut root);
    Ok(root)
}

fn trim(x: &mut Xml) {
    if !x.children.is_empty() {
        x.text.clear();
    }
    for c in &mut x.children {
        trim(c);
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}
