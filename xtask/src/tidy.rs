//! Tidy checks: rules about the repository itself, run as tests (`cargo test -p xtask tidy`, part
//! of `cargo test --workspace`; `cargo xtask tidy` runs only these).
//!
//! - every Rust file opens with `//!` docs saying what it is for;
//! - README.md stays a README (under [`README_MAX_BYTES`]) and ARCHITECTURE.md a map (under
//!   [`ARCHITECTURE_MAX_BYTES`]); feature detail belongs in `docs/`;
//! - `docs/rest-api-reference.md` is the route list of the served OpenAPI document (rendered
//!   from the snapshot `crates/server/tests/snapshots/api__openapi.snap`, which the server's
//!   tests compare with the served document); `UPDATE_DOCS=1` rewrites it;
//! - every relative link in the README, ARCHITECTURE.md, `docs/` and `skills/` resolves;
//! - nothing in the repository reads a path outside it (the project's machines keep reference
//!   material beside the clone; a clone from GitHub has none);
//! - the web UI is laid out by screen ([`ui_layout_violations`]): `app.js` routes to the screens
//!   in `ui/views/`, a screen's panels live in `ui/views/<screen>/`, shared widgets in
//!   `ui/components/`, shared code without widgets in `ui/lib/`; imports only point down that
//!   list, no module imports a screen but the router (or a panel's own screen), and the import
//!   graph has no cycle. Every UI module opens with a `//` comment saying what it is for;
//! - server route files translate ([`route_layering_violations`]): a file under
//!   `crates/server/src/routes/` imports no `instantstart_core::workflow` or `::workload` path
//!   (it calls `instantstart_core::api`) and calls no provider method on `state.aws` or
//!   `state.kube`;
//! - the browser tests (`ui/tests`) read an element's text with `ui.text(selector)`, one script,
//!   never `ui.css(selector).text`, two WebDriver calls between which a polling screen can
//!   re-render (a stale element: CI found one);
//! - the simulator's modules (`crates/sim/src`) import each other without a cycle
//!   ([`rust_module_graph`]; the layers are in `docs/code-map.md`);
//! - tests build their world with `instantstart-testkit` ([`hand_written_beds`]): no test file
//!   under `crates/*/tests` defines its own `struct Bed`, `fn bed(` or `fn …_bed(`; and the test
//!   files' `sleep(` calls
//!   (a wait guessed in wall time, the flakes of past CI runs) number at most
//!   [`TEST_SLEEPS`], a count that only goes down (wait with `Bed::wait_for`/`wait_until`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How many `sleep(` the test files under `crates/*/tests` hold at most (the kit's first
/// migration took them from 74 to 38; the server's and the CLI's beds to 18). Only goes down:
/// lower it when a sleep goes. One is not a wait: `replicas_on_sim`'s stalled driver blocks its
/// runtime's only thread past the lease TTL, as SIGSTOP would (the behaviour under test).
pub const TEST_SLEEPS: usize = 19;

/// The lines of a test file that define a bed of its own: `struct Bed`, or a function whose
/// name is `bed` or ends in `_bed` (`fn bed(`, `fn helm_bed(`), at any indentation.
pub fn hand_written_beds(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim_start();
        let code = code.strip_prefix("pub ").unwrap_or(code);
        let code = code.strip_prefix("async ").unwrap_or(code);
        let is_struct = code.strip_prefix("struct Bed").is_some_and(|r| r.starts_with([' ', '{', '<', ';', '(']));
        let is_fn = code.strip_prefix("fn ").and_then(|r| r.split_once('(')).is_some_and(|(name, _)| {
            let name = name.split('<').next().unwrap_or(name);
            name == "bed" || name.ends_with("_bed")
        });
        if is_struct || is_fn {
            found.push(format!("line {}: {}", i + 1, line.trim()));
        }
    }
    found
}

/// Largest README.md, in bytes.
pub const README_MAX_BYTES: usize = 15 * 1024;
/// Largest ARCHITECTURE.md, in bytes.
pub const ARCHITECTURE_MAX_BYTES: usize = 12 * 1024;

/// The generated REST reference, relative to the repository root.
pub const REST_REFERENCE: &str = "docs/rest-api-reference.md";
/// The OpenAPI snapshot it is rendered from.
pub const OPENAPI_SNAPSHOT: &str = "crates/server/tests/snapshots/api__openapi.snap";

/// Files of the repository under `dir` (relative to the root) whose name ends with `ext`,
/// skipping build output and dependencies.
pub fn files(root: &Path, dir: &str, ext: &str) -> Vec<PathBuf> {
    fn walk(path: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(path) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if p.is_dir() {
                if !matches!(name.as_str(), "target" | "node_modules" | ".git" | "__pycache__")
                    && !name.starts_with('.')
                {
                    walk(&p, ext, out);
                }
            } else if name.ends_with(ext) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root.join(dir), ext, &mut out);
    out.sort();
    out
}

/// The markdown route list of an OpenAPI document: one table per tag (or path prefix), one row
/// per operation with its method, path and summary.
pub fn render_rest_reference(doc: &serde_json::Value) -> String {
    let mut groups: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            if !matches!(method.as_str(), "get" | "put" | "post" | "delete" | "patch") {
                continue;
            }
            let group = op["tags"][0].as_str().map(str::to_string).unwrap_or_else(|| {
                path.trim_start_matches("/api/")
                    .split('/')
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string()
            });
            let summary = op["summary"]
                .as_str()
                .or_else(|| op["description"].as_str().and_then(|d| d.lines().next()))
                .unwrap_or_default()
                .replace('|', "\\|");
            groups.entry(group).or_default().push((path.clone(), method.to_uppercase(), summary));
        }
    }
    let mut out = String::from(
        "# REST API reference\n\n\
         Every route of the REST API, generated from the OpenAPI document the server serves at\n\
         `/api/openapi.json` (the conventions are in [rest-api.md](rest-api.md)). Do not edit: a tidy\n\
         test (`xtask/src/tidy.rs`) compares this file with the document; `UPDATE_DOCS=1 cargo test -p\n\
         xtask tidy` rewrites it.\n",
    );
    for (group, mut ops) in groups {
        ops.sort();
        let _ = write!(out, "\n## {group}\n\n| method | path | summary |\n| --- | --- | --- |\n");
        for (path, method, summary) in ops {
            let _ = writeln!(out, "| {method} | `{path}` | {summary} |");
        }
    }
    out
}

/// The JSON document inside an insta snapshot file (after its `---` header).
pub fn snapshot_json(text: &str) -> Option<serde_json::Value> {
    let body = text.strip_prefix("---")?.split_once("\n---\n")?.1;
    serde_json::from_str(body).ok()
}

/// The import graph of the web UI: each module (path relative to `ui/`) with the modules it
/// imports (`import … from './x.js'`, resolved relative to the importer).
pub fn ui_import_graph(ui: &Path) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for f in files(ui, ".", ".js") {
        let rel = f.strip_prefix(ui).unwrap().to_string_lossy().replace('\\', "/");
        let rel = rel.trim_start_matches("./").to_string();
        if rel.starts_with("tests/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let imports = js_imports(&text).into_iter().map(|spec| resolve_js(&rel, &spec)).collect();
        graph.insert(rel, imports);
    }
    graph
}

/// The module specifiers of a JS module's static imports (`import … from '…';`).
pub fn js_imports(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_import = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("import ") {
            in_import = true;
        }
        if in_import && let Some(i) = line.find(" from '").or_else(|| line.starts_with("from '").then_some(0)) {
            let rest = &line[i..];
            let start = rest.find('\'').unwrap() + 1;
            if let Some(end) = rest[start..].find('\'') {
                out.push(rest[start..start + end].to_string());
            }
            in_import = false;
        }
    }
    out
}

/// `spec` (relative, e.g. `../lib/dom.js`) resolved against the importing module `from`.
pub fn resolve_js(from: &str, spec: &str) -> String {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for p in spec.split('/') {
        match p {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// Where a UI module sits in the layout, from the bottom up; imports may only point at the same
/// layer or lower, with the exceptions [`ui_layout_violations`] lists.
fn ui_layer(module: &str) -> Option<u8> {
    match module.split('/').collect::<Vec<_>>().as_slice() {
        ["lib", _] => Some(0),
        ["components", _] => Some(1),
        ["views", _] | ["views", _, _] => Some(2),
        ["app.js"] => Some(3),
        _ => None,
    }
}

/// What breaks the UI's layout rules in `graph` (see the module docs), one sentence each.
pub fn ui_layout_violations(graph: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (module, imports) in graph {
        let Some(layer) = ui_layer(module) else {
            out.push(format!("{module}: UI modules live in lib/, components/, views/ (or are app.js)"));
            continue;
        };
        for target in imports {
            if !graph.contains_key(target) {
                out.push(format!("{module} imports {target}, which does not exist"));
                continue;
            }
            let target_layer = ui_layer(target).unwrap_or(u8::MAX);
            let screen_of = |m: &str| {
                m.strip_prefix("views/").map(|r| r.trim_end_matches(".js").split('/').next().unwrap_or("").to_string())
            };
            let allowed = match (layer, target_layer) {
                // A screen is imported by the router only; a panel by its own screen (or a sibling panel).
                (_, 2) => {
                    let target_parts = target.split('/').count();
                    (layer == 3 && target_parts == 2)
                        || (layer == 2 && target_parts == 3 && screen_of(module) == screen_of(target))
                }
                (l, t) => t <= l,
            };
            if !allowed {
                out.push(format!("{module} imports {target}: imports point down (app → views → components → lib), and only the router imports a screen"));
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        out.push(format!("import cycle: {}", cycle.join(" → ")));
    }
    out
}

/// One cycle of `graph` (first module repeated at the end), if it has any.
pub fn find_cycle(graph: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, Vec<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(2) => return None,
            Some(1) => {
                let start = stack.iter().position(|n| n == node).unwrap();
                let mut cycle = stack[start..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    graph.keys().find_map(|n| visit(n, graph, &mut state, &mut Vec::new()))
}

// ---- The simulator's module graph (issue #20: `crates/sim` has no import cycle) ----

/// The crate whose module import graph must stay acyclic, relative to the repository root.
pub const SIM_SRC: &str = "crates/sim/src";

/// The sources of a crate's modules (test modules excluded), by module path (`kube::training`;
/// the crate root is `crate`): `src/x.rs` and `src/x/mod.rs` are `x`, `src/x/y.rs` is `x::y`;
/// `tests.rs` files and `tests/` folders are skipped.
pub fn rust_module_sources(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for f in files(src, ".", ".rs") {
        let rel = f.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
        let rel = rel.trim_start_matches("./").trim_end_matches(".rs");
        let mut parts: Vec<&str> = rel.split('/').collect();
        if parts.contains(&"tests") {
            continue;
        }
        if matches!(parts.last(), Some(&"mod")) {
            parts.pop();
        }
        let module = if parts == ["lib"] || parts == ["main"] { "crate".to_string() } else { parts.join("::") };
        out.insert(module, std::fs::read_to_string(&f).unwrap_or_default());
    }
    out
}

/// `text` with comments blanked and string and character literals emptied (their quotes kept),
/// so that only code is searched for paths.
pub fn rust_code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r'
            && (at(i + 1) == '"' || (at(i + 1) == '#' && matches!(at(i + 2), '"' | '#')))
            && !(i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // raw string r"…", r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let close: Vec<char> = close.chars().collect();
            while j < c.len() && c[j..].get(..close.len()) != Some(&close[..]) {
                j += 1;
            }
            out.push_str("\"\"");
            i = j + close.len();
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if c[i] == '\'' && (at(i + 2) == '\'' || at(i + 1) == '\\') {
            // a character literal ('x', '\n', '\u{..}'); otherwise a lifetime
            let mut j = i + 1;
            while j < c.len() && c[j] != '\'' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            out.push_str("' '");
            i = j + 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `code` (see [`rust_code_only`]) without its `#[cfg(test)] mod … { … }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        let is_mod = item.starts_with("mod ") || item.starts_with("pub mod ") || item.starts_with("pub(crate) mod ");
        let block = item.find(['{', ';']).filter(|_| is_mod);
        match block {
            Some(b) if item.as_bytes()[b] == b'{' => {
                let mut depth = 0;
                let mut end = item.len();
                for (k, ch) in item.char_indices().skip(b) {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &item[end..];
            }
            Some(b) => rest = &item[b + 1..],
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a `use` tree names (`a::{b, c::{d as e, self}}` → `a::b`, `a::c::d`, `a::c`), each
/// with the name it binds (`None` for a glob).
fn use_tree_paths(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
    fn parse(s: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        let mut path = prefix.to_vec();
        loop {
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if *i < s.len() && s[*i] == '{' {
                *i += 1;
                loop {
                    parse(s, i, &path, out);
                    while *i < s.len() && s[*i].is_whitespace() {
                        *i += 1;
                    }
                    match s.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            break;
                        }
                        _ => return,
                    }
                    while *i < s.len() && s[*i].is_whitespace() {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&'}') {
                        *i += 1;
                        break;
                    }
                }
                return;
            }
            if *i < s.len() && s[*i] == '*' {
                *i += 1;
                out.push((path, None));
                return;
            }
            let start = *i;
            while *i < s.len() && (is_ident(s[*i]) || (s[*i] == ':' && *i == start)) {
                *i += 1;
            }
            let seg: String = s[start..*i].iter().collect();
            if seg.is_empty() {
                return;
            }
            if seg == "self" && path.len() == prefix.len() && !path.is_empty() {
                let name = path.last().cloned();
                out.push((path, name));
                return;
            }
            path.push(seg);
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
                *i += 2;
                continue;
            }
            let rest: String = s[*i..].iter().take(4).collect();
            let mut name = path.last().cloned();
            if rest.starts_with("as ") {
                *i += 3;
                while *i < s.len() && s[*i].is_whitespace() {
                    *i += 1;
                }
                let start = *i;
                while *i < s.len() && is_ident(s[*i]) {
                    *i += 1;
                }
                name = Some(s[start..*i].iter().collect());
            }
            out.push((path, name));
            return;
        }
    }
    let s: Vec<char> = tree.chars().collect();
    let mut out = Vec::new();
    parse(&s, &mut 0, &[], &mut out);
    out
}

/// One `use` item of a module: whether it is a re-export (`pub`, `pub(crate)`, …) and its paths.
struct UseItem {
    public: bool,
    paths: Vec<(Vec<String>, Option<String>)>,
}

/// The `use` items of `code` and the code outside them.
fn split_uses(code: &str) -> (Vec<UseItem>, String) {
    let mut uses = Vec::new();
    let mut rest_code = String::new();
    let mut rest = code;
    loop {
        let found = rest.match_indices("use ").find(|(i, _)| {
            let before = rest[..*i].trim_end();
            !rest[..*i].ends_with(|c: char| is_ident(c))
                && (before.is_empty()
                    || before.ends_with([';', '{', '}', ']'])
                    || before.ends_with("pub")
                    || before.ends_with(')'))
        });
        let Some((i, _)) = found else { break };
        let Some(end) = rest[i..].find(';') else { break };
        let before = rest[..i].trim_end();
        let public = before.ends_with("pub") || before.ends_with("pub(crate)") || before.ends_with("pub(super)");
        rest_code.push_str(&rest[..i]);
        uses.push(UseItem { public, paths: use_tree_paths(&rest[i + 4..i + end]) });
        rest = &rest[i + end + 1..];
    }
    rest_code.push_str(rest);
    (uses, rest_code)
}

/// The module import graph of a crate from its module sources (see [`rust_module_sources`]):
/// an edge `a → b` when `a` names an item of `b` through `crate::`, `super::`, `self::`, a child
/// module or a module it imported, in a `use` or in a path in its code. Paths that name a
/// re-export (`pub use`) are followed to the module that defines the item; the re-export itself
/// is an edge of the module that makes it unless it re-exports its own descendants. The crate root is not a node (it is the crate's
/// facade; paths through its re-exports are followed too).
pub fn rust_module_graph(sources: &BTreeMap<String, String>) -> BTreeMap<String, Vec<String>> {
    let modules: Vec<&str> = sources.keys().map(String::as_str).collect();
    let abs = |module: &str, path: &[String]| -> Option<Vec<String>> {
        let mut base: Vec<String> =
            if module == "crate" { vec![] } else { module.split("::").map(str::to_string).collect() };
        let first = path.first()?;
        let mut rest = path;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            child => {
                let mut candidate = base.clone();
                candidate.push(child.to_string());
                if !sources.contains_key(&candidate.join("::")) {
                    return None;
                }
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    };
    // Pass 1: each module's uses, its re-exports and the names it binds.
    let mut reexports: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut parsed = BTreeMap::new();
    for (module, text) in sources {
        let code = without_test_modules(&rust_code_only(text));
        let (uses, body) = split_uses(&code);
        for u in uses.iter().filter(|u| u.public) {
            for (path, name) in &u.paths {
                if let (Some(a), Some(name)) = (abs(module, path), name) {
                    reexports.entry(module.clone()).or_default().insert(name.clone(), a);
                }
            }
        }
        parsed.insert(module.clone(), (uses, body));
    }
    // The module that defines what an absolute path names, following re-exports.
    let resolve = |mut path: Vec<String>| -> Option<String> {
        for _ in 0..16 {
            let k = (0..=path.len()).rev().find(|k| {
                let m = if *k == 0 { "crate".to_string() } else { path[..*k].join("::") };
                modules.contains(&m.as_str())
            })?;
            let module = if k == 0 { "crate".to_string() } else { path[..k].join("::") };
            match path.get(k).and_then(|name| reexports.get(&module)?.get(name)) {
                Some(target) => {
                    let mut next = target.clone();
                    next.extend(path[k + 1..].iter().cloned());
                    if next == path {
                        return Some(module);
                    }
                    path = next;
                }
                None => return Some(module),
            }
        }
        None
    };
    let mut graph = BTreeMap::new();
    for (module, (uses, body)) in &parsed {
        if module == "crate" {
            continue;
        }
        let mut edges = std::collections::BTreeSet::new();
        let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for u in uses {
            for (path, name) in &u.paths {
                let Some(a) = abs(module, path) else { continue };
                if let Some(name) = name
                    && modules.contains(&a.join("::").as_str())
                {
                    aliases.insert(name.clone(), a.clone());
                }
                // A module's re-export of its own descendants is the module tree, not an import.
                if let Some(target) = resolve(a)
                    && !(u.public && target.starts_with(&format!("{module}::")))
                {
                    edges.insert(target);
                }
            }
        }
        // Paths in the code: `crate::…`, `super::…`, `self::…`, `child::…`, `alias::…`.
        let chars: Vec<char> = body.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
                i += 1;
                continue;
            }
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < chars.len() && is_ident(chars[j]) {
                    j += 1;
                }
                segs.push(chars[start..j].iter().collect::<String>());
                if chars.get(j) == Some(&':')
                    && chars.get(j + 1) == Some(&':')
                    && chars.get(j + 2).is_some_and(|c| is_ident(*c))
                {
                    j += 2;
                } else {
                    break;
                }
            }
            i = j;
            if segs.len() < 2 {
                continue;
            }
            let path = match aliases.get(&segs[0]) {
                Some(a) => Some(a.iter().cloned().chain(segs[1..].iter().cloned()).collect()),
                None => abs(module, &segs),
            };
            if let Some(target) = path.and_then(&resolve) {
                edges.insert(target);
            }
        }
        edges.remove(module);
        edges.remove("crate");
        graph.insert(module.clone(), edges.into_iter().collect());
    }
    graph
}

/// The edges of `graph` inside its [`tangles`], one `a → b` line each.
pub fn tangled_edges(graph: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for comp in tangles(graph) {
        for a in &comp {
            for b in graph[a].iter().filter(|b| comp.contains(b)) {
                out.push(format!("{a} → {b}"));
            }
        }
    }
    out
}

/// The strongly connected components of `graph` with more than one module (each sorted).
pub fn tangles(graph: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, _> = graph.keys().map(|k| (k, reach(k))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for k in graph.keys() {
        if out.iter().any(|c| c.contains(k)) {
            continue;
        }
        let comp: Vec<String> =
            graph.keys().filter(|m| *m == k || (reach[k].contains(*m) && reach[*m].contains(k))).cloned().collect();
        if comp.len() > 1 {
            out.push(comp);
        }
    }
    out
}

/// Relative link targets of a markdown text (`[x](target)`, without `#fragment`), skipping
/// URLs, anchors and code blocks.
pub fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split('#').next().unwrap_or_default().trim();
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") && !target.contains(' ')
            {
                out.push(target.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

/// Core modules a route file may not name: the workflows and the workload internals are
/// reached through `instantstart_core::api`.
const ROUTE_FORBIDDEN_CORE_MODULES: [&str; 2] = ["workflow", "workload"];
/// The provider handles of the server's state, and the methods on them that are not calls to
/// the provider (handing the provider to `core::api`, or to a task).
const ROUTE_PROVIDER_HANDLES: [&str; 2] = ["state.aws.", "state.kube."];
const ROUTE_PROVIDER_PASSING: [&str; 2] = ["as_ref", "clone"];

/// What in route file `text` goes around `instantstart_core::api`, one line per finding
/// (`line N: …`): a path through `instantstart_core::workflow` or `::workload` (also inside a
/// `use instantstart_core::{…}` group), or a method call on `state.aws`/`state.kube` other than
/// `as_ref`/`clone`. Comments and the `#[cfg(test)]` module are not looked at.
pub fn route_layering_violations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // A `use` group can span lines: join the code lines, remembering where each one starts.
    let mut code = String::new();
    let mut starts = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let line = line.split("//").next().unwrap_or_default();
        starts.push(code.len());
        code.push_str(line);
        code.push('\n');
    }
    let line_of = |at: usize| starts.partition_point(|&s| s <= at);
    const CORE: &str = "instantstart_core::";
    for (at, _) in code.match_indices(CORE) {
        let rest = &code[at + CORE.len()..];
        let named: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => top_level_items(group),
            None => vec![rest],
        };
        for item in named {
            let module: String = item.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if ROUTE_FORBIDDEN_CORE_MODULES.contains(&module.as_str()) {
                out.push(format!(
                    "line {}: names instantstart_core::{module} (call instantstart_core::api instead)",
                    line_of(at)
                ));
            }
        }
    }
    for handle in ROUTE_PROVIDER_HANDLES {
        for (at, _) in code.match_indices(handle) {
            let method: String =
                code[at + handle.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !ROUTE_PROVIDER_PASSING.contains(&method.as_str()) {
                out.push(format!(
                    "line {}: calls the provider ({handle}{method}; read through instantstart_core::api instead)",
                    line_of(at)
                ));
            }
        }
    }
    out
}

/// The items of a `{…}` group (after its `{`) at its top level, up to the matching `}`.
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0usize, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        crate::root()
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn tidy_every_rust_file_has_module_docs() {
        let mut missing = Vec::new();
        for dir in ["crates", "xtask"] {
            for f in files(&root(), dir, ".rs") {
                let text = read(&f);
                let first = text.lines().find(|l| !l.trim().is_empty() && !l.starts_with("#!["));
                if !first.is_some_and(|l| l.starts_with("//!")) {
                    missing.push(f.strip_prefix(root()).unwrap().display().to_string());
                }
            }
        }
        assert!(missing.is_empty(), "files without `//!` module docs (say what the file is for): {missing:#?}");
    }

    #[test]
    fn tidy_readme_and_architecture_stay_short() {
        for (file, max) in [("README.md", README_MAX_BYTES), ("ARCHITECTURE.md", ARCHITECTURE_MAX_BYTES)] {
            let len = read(&root().join(file)).len();
            assert!(len <= max, "{file} is {len} bytes, more than {max}: move detail into docs/");
        }
    }

    #[test]
    fn tidy_rest_reference_is_generated_from_the_openapi_document() {
        let snapshot = read(&root().join(OPENAPI_SNAPSHOT));
        let doc = snapshot_json(&snapshot).expect("the OpenAPI snapshot holds a JSON document");
        let expected = render_rest_reference(&doc);
        let path = root().join(REST_REFERENCE);
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &expected).unwrap();
            return;
        }
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "{REST_REFERENCE} is not the route list of the OpenAPI document; run `UPDATE_DOCS=1 cargo test -p xtask tidy`"
        );
        // Every documented path is in it.
        for path in doc["paths"].as_object().unwrap().keys() {
            assert!(expected.contains(&format!("`{path}`")), "{path} missing");
        }
    }

    #[test]
    fn tidy_relative_links_resolve() {
        let root = root();
        let mut docs = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
        docs.extend(files(&root, "docs", ".md"));
        docs.extend(files(&root, "skills", ".md"));
        let mut broken = Vec::new();
        for doc in docs {
            let dir = doc.parent().unwrap();
            for target in relative_links(&read(&doc)) {
                if !dir.join(&target).exists() {
                    broken.push(format!("{}: {target}", doc.strip_prefix(&root).unwrap().display()));
                }
            }
        }
        assert!(broken.is_empty(), "broken relative links: {broken:#?}");
    }

    #[test]
    fn tidy_nothing_reads_outside_the_repository() {
        let root = root();
        // Built from parts, so this file does not contain the paths it looks for.
        let sibling = ["..", "shared"].join("/");
        let absolute = ["", "work", "shared"].join("/");
        let needles = [format!("{sibling}/"), absolute];
        let mut found = Vec::new();
        for (dir, ext) in [
            ("crates", ".rs"),
            ("xtask", ".rs"),
            ("crates", ".py"),
            ("ui", ".py"),
            ("ui", ".js"),
            ("deploy", ".yaml"),
            (".ci", ""),
        ] {
            for f in files(&root, dir, ext) {
                let Ok(text) = std::fs::read_to_string(&f) else { continue };
                for n in &needles {
                    if text.contains(n.as_str()) {
                        found.push(format!("{}: {n}", f.strip_prefix(&root).unwrap().display()));
                    }
                }
            }
        }
        assert!(found.is_empty(), "paths outside the repository: {found:#?}");
    }

    #[test]
    fn tidy_ui_is_laid_out_by_screen() {
        let ui = root().join("ui");
        let graph = ui_import_graph(&ui);
        assert!(graph.len() > 20, "found the UI's modules: {graph:?}");
        let violations = ui_layout_violations(&graph);
        assert!(violations.is_empty(), "UI layout (see xtask/src/tidy.rs): {violations:#?}");
        let undocumented: Vec<_> = graph.keys().filter(|m| !read(&ui.join(m)).trim_start().starts_with("//")).collect();
        assert!(undocumented.is_empty(), "UI modules without an opening `//` comment: {undocumented:?}");
    }

    /// The layout rules on small graphs: each row is (edges, how many violations).
    #[test]
    fn tidy_ui_layout_rules() {
        type Edges<'a> = &'a [(&'a str, &'a [&'a str])];
        let cases: &[(Edges, usize)] = &[
            (
                &[
                    ("app.js", &["views/a.js", "lib/x.js"]),
                    ("views/a.js", &["components/c.js"]),
                    ("components/c.js", &["lib/x.js"]),
                    ("lib/x.js", &[]),
                ],
                0,
            ),
            // a panel imported by its screen; a sibling panel
            (&[("views/a.js", &["views/a/p.js"]), ("views/a/p.js", &["views/a/q.js"]), ("views/a/q.js", &[])], 0),
            // a screen imported as a library
            (&[("views/a.js", &["views/b.js"]), ("views/b.js", &[])], 1),
            // another screen's panel
            (&[("views/a.js", &["views/b/p.js"]), ("views/b/p.js", &[])], 1),
            // lib reaching up to a component
            (&[("lib/x.js", &["components/c.js"]), ("components/c.js", &[])], 1),
            // a cycle inside lib
            (&[("lib/x.js", &["lib/y.js"]), ("lib/y.js", &["lib/x.js"])], 1),
            // a module outside the layout, an import of a missing module
            (&[("misc.js", &[]), ("lib/x.js", &["lib/gone.js"])], 2),
        ];
        for (edges, want) in cases {
            let graph = edges.iter().map(|(m, i)| (m.to_string(), i.iter().map(|s| s.to_string()).collect())).collect();
            let got = ui_layout_violations(&graph);
            assert_eq!(got.len(), *want, "{edges:?}: {got:#?}");
        }
        assert_eq!(resolve_js("views/cluster/nodes.js", "../../lib/dom.js"), "lib/dom.js");
        assert_eq!(resolve_js("app.js", "./views/jobs.js"), "views/jobs.js");
        assert_eq!(
            js_imports("import { a,\n  b } from './x.js';\nimport * as api from '../api.js';\nconst x = 1;"),
            ["./x.js", "../api.js"]
        );
    }

    #[test]
    fn tidy_sim_modules_have_no_import_cycle() {
        let graph = rust_module_graph(&rust_module_sources(&root().join(SIM_SRC)));
        assert!(graph.len() > 20 && graph.values().any(|e| !e.is_empty()), "read the simulator's modules: {graph:#?}");
        let cycle = find_cycle(&graph);
        assert!(
            cycle.is_none(),
            "{SIM_SRC} has an import cycle: {}\nThe imports among the modules that reach each other (move what the lower \
             layer needs down; the layers are in docs/code-map.md):\n{}",
            cycle.unwrap_or_default().join(" → "),
            tangled_edges(&graph).join("\n")
        );
    }

    /// The module graph of small synthetic crates: uses, paths in code, re-exports, test modules.
    #[test]
    fn tidy_rust_module_graph() {
        let crate_of = |files: &[(&str, &str)]| -> BTreeMap<String, String> {
            files.iter().map(|(m, t)| (m.to_string(), t.to_string())).collect()
        };
        let acyclic = crate_of(&[
            ("crate", "mod base; mod world; mod kube; pub use kube::api::Thing;\n"),
            (
                "base",
                "//! Leaf.\n// use crate::world::World; (a comment)\npub fn rkey() -> &'static str { \"crate::kube::x\" }\n",
            ),
            (
                "world",
                "use crate::base::{self, rkey};\npub struct World;\n#[cfg(test)]\nmod tests { use crate::kube::api::Thing; }\n",
            ),
            (
                "kube",
                "pub(crate) mod api;\nmod pods;\npub use api::Thing;\npub(crate) use pods::{start as start_pod};\n",
            ),
            ("kube::pods", "use super::super::world::World;\npub fn start(_: &World) {}\n"),
            ("kube::api", "use super::{start_pod, Thing as _};\npub struct Thing;\nfn f() { crate::base::rkey(); }\n"),
        ]);
        let graph = rust_module_graph(&acyclic);
        let edges = |m: &str| graph[m].iter().map(String::as_str).collect::<Vec<_>>();
        assert_eq!(edges("base"), Vec::<&str>::new());
        assert_eq!(edges("world"), ["base"]);
        // `kube` only re-exports its children (no edges); `kube::api` reaches `kube::pods`
        // through the re-export, and `Thing` is its own.
        assert_eq!(edges("kube"), Vec::<&str>::new());
        assert_eq!(edges("kube::api"), ["base", "kube::pods"]);
        assert_eq!(edges("kube::pods"), ["world"]);
        assert!(!graph.contains_key("crate"));
        assert_eq!(find_cycle(&graph), None);
        assert!(tangles(&graph).is_empty());

        let mut cyclic = acyclic.clone();
        cyclic.insert("world".into(), "use crate::base::rkey;\npub struct World { k: crate::kube::Thing }\n".into());
        let graph = rust_module_graph(&cyclic);
        assert_eq!(graph["world"], ["base", "kube::api"]);
        let cycle = find_cycle(&graph).expect("world → kube::api → kube::pods → world");
        assert_eq!(cycle.first(), cycle.last());
        assert_eq!(tangles(&graph), [vec!["kube::api".to_string(), "kube::pods".into(), "world".into()]]);

        assert_eq!(
            use_tree_paths("crate::a::{b, c::{d as e, self}, f::*}")
                .iter()
                .map(|(p, n)| (p.join("::"), n.clone()))
                .collect::<Vec<_>>(),
            [
                ("crate::a::b".to_string(), Some("b".to_string())),
                ("crate::a::c::d".into(), Some("e".into())),
                ("crate::a::c".into(), Some("c".into())),
                ("crate::a::f".into(), None),
            ]
        );
        assert_eq!(
            rust_code_only("let s = r#\"a \"crate::x\"\"#; // crate::y\nlet c = '{';"),
            "let s = \"\"; \nlet c = ' ';"
        );
    }

    /// The helpers themselves, on small inputs.
    #[test]
    fn tidy_helpers() {
        assert_eq!(relative_links("see [a](docs/a.md#x), [b](https://x.y) and [c](../c.md)"), ["docs/a.md", "../c.md"]);
        assert!(relative_links("```\n[a](nope.md)\n```").is_empty());
        let doc = serde_json::json!({ "paths": { "/api/x/{cluster}": {
            "get": { "summary": "Read x", "tags": ["x"] },
            "post": { "description": "Make x\nmore", "tags": ["x"] } } } });
        let md = render_rest_reference(&doc);
        assert!(md.contains("## x\n"), "{md}");
        assert!(md.contains("| GET | `/api/x/{cluster}` | Read x |"), "{md}");
        assert!(md.contains("| POST | `/api/x/{cluster}` | Make x |"), "{md}");
        assert_eq!(snapshot_json("---\nsource: a\n---\n{\"a\": 1}\n"), Some(serde_json::json!({ "a": 1 })));
    }

    /// Route files translate: no `workflow`/`workload` path, no provider call.
    #[test]
    fn tidy_route_files_go_through_core_api() {
        let mut errors = Vec::new();
        for f in files(&root(), "crates/server/src/routes", ".rs") {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            errors.extend(route_layering_violations(&read(&f)).into_iter().map(|v| format!("routes/{name} {v}")));
        }
        assert!(errors.is_empty(), "route files must call instantstart_core::api: {errors:#?}");
    }

    /// Test files under `crates/*/tests`.
    fn test_files() -> Vec<PathBuf> {
        files(&root(), "crates", ".rs")
            .into_iter()
            .filter(|f| f.strip_prefix(root()).unwrap().components().nth(2).is_some_and(|c| c.as_os_str() == "tests"))
            .collect()
    }

    /// Tests build their world with the kit: no hand-written bed.
    #[test]
    fn tidy_tests_use_the_testkit_bed() {
        let mut errors = Vec::new();
        for f in test_files() {
            let path = f.strip_prefix(root()).unwrap().display().to_string();
            errors.extend(hand_written_beds(&read(&f)).into_iter().map(|v| format!("{path} {v}")));
        }
        assert!(errors.is_empty(), "build the test bed with instantstart_testkit::Bed (docs/testing.md): {errors:#?}");
    }

    /// The test files' sleeps only go down.
    #[test]
    fn tidy_test_sleeps_only_go_down() {
        let mut per_file = Vec::new();
        for f in test_files() {
            let n = rust_code_only(&read(&f)).matches("sleep(").count();
            if n > 0 {
                per_file.push((f.strip_prefix(root()).unwrap().display().to_string(), n));
            }
        }
        let total: usize = per_file.iter().map(|(_, n)| n).sum();
        assert!(
            total <= TEST_SLEEPS,
            "{total} sleep( calls in test files, more than TEST_SLEEPS = {TEST_SLEEPS}: wait for the state with \
             instantstart_testkit's wait_for/wait_until instead: {per_file:#?}"
        );
        assert!(total >= TEST_SLEEPS, "{total} sleep( calls now: lower TEST_SLEEPS to {total}");
    }

    /// The bed rule on small inputs.
    #[test]
    fn tidy_hand_written_bed_rule() {
        let cases: [(&str, usize); 8] = [
            ("struct Bed {\n    sim: SimCloud,\n}\n", 1),
            ("fn bed(dir: &Path) -> Bed {\n", 1),
            ("    async fn helm_bed(dir: &Path, speed: f64) -> Bed {\n", 1),
            ("let b = Bed::sim(dir.path()).build();\n", 0),
            ("fn embed(x: u8) {}\nfn described<T: Describe>(v: Value) -> T {\n", 0),
            ("fn bedrock() {}\nstruct Bedside;\n", 0),
            ("// fn bed( in a comment\n", 0),
            ("use instantstart_testkit::{Bed, user};\n", 0),
        ];
        for (source, want) in cases {
            assert_eq!(hand_written_beds(source).len(), want, "{source:?}: {:?}", hand_written_beds(source));
        }
    }

    /// Browser tests read text in one script (`ui.text`), never find-then-read.
    #[test]
    fn tidy_ui_tests_read_text_in_one_script() {
        let mut found = Vec::new();
        for f in files(&root(), "ui/tests", ".py") {
            for (i, line) in read(&f).lines().enumerate() {
                let code = line.split('#').next().unwrap_or("");
                if code.contains("ui.css(") && code.contains(").text") {
                    let name = f.file_name().unwrap().to_string_lossy().to_string();
                    found.push(format!("ui/tests/{name}:{}", i + 1));
                }
            }
        }
        assert!(found.is_empty(), "read text with ui.text(selector), not ui.css(selector).text: {found:#?}");
    }

    /// The layering rule on synthetic route files: what it finds and what it lets pass.
    #[test]
    fn tidy_route_layering_rule() {
        // (source, findings)
        let cases: [(&str, &[&str]); 10] = [
            ("use instantstart_core::api::jobs::{self, JobSummary};\n", &[]),
            (
                "use instantstart_core::workflow::endpoints::EndpointPatch;\n",
                &["line 1: names instantstart_core::workflow"],
            ),
            ("use instantstart_core::workload::read;\n", &["line 1: names instantstart_core::workload"]),
            (
                "use instantstart_core::{\n    api::jobs,\n    workflow::decode,\n};\n",
                &["line 1: names instantstart_core::workflow"],
            ),
            ("let x = instantstart_core::workflow::decode(&v)?;\n", &["line 1: names instantstart_core::workflow"]),
            (
                "let s = state.aws.list_tracking_servers(&region).await?;\n",
                &["line 1: calls the provider (state.aws.list_tracking_servers"],
            ),
            (
                "\nlet d = state.kube.service_proxy(&t, ns).await;\n",
                &["line 2: calls the provider (state.kube.service_proxy"],
            ),
            ("let r = api::jobs::list(state.kube.as_ref(), &t).await?;\nlet k = state.kube.clone();\n", &[]),
            ("// state.aws.describe_x() in a comment; instantstart_core::workflow too\n", &[]),
            ("fn f() {}\n#[cfg(test)]\nmod tests { use instantstart_core::workflow::x; }\n", &[]),
        ];
        for (source, want) in cases {
            let got = route_layering_violations(source);
            assert_eq!(got.len(), want.len(), "{source:?}: {got:#?}");
            for (g, w) in got.iter().zip(want) {
                assert!(g.starts_with(w), "{source:?}: {g} does not start with {w}");
            }
        }
        assert_eq!(top_level_items("a::{b, c}, d}"), ["a::{b, c}", " d"]);
    }
}
