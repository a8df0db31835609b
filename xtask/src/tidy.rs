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
//!   `state.kube`, except the files of [`ROUTES_NOT_YET_THROUGH_API`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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

/// Route files that still import `workflow`/`workload` internals or call a provider directly
/// (issue #20 moves them behind `instantstart_core::api` one noun at a time). A file that is
/// clean must leave the list: the check fails on a listed file without violations.
pub const ROUTES_NOT_YET_THROUGH_API: &[&str] = &["mod.rs", "sim.rs", "storage.rs"];

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

    /// Route files translate: no `workflow`/`workload` path, no provider call, except the files
    /// still listed (and a listed file that is clean must leave the list).
    #[test]
    fn tidy_route_files_go_through_core_api() {
        let mut errors = Vec::new();
        let mut listed_but_clean = Vec::new();
        for f in files(&root(), "crates/server/src/routes", ".rs") {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let found = route_layering_violations(&read(&f));
            let listed = ROUTES_NOT_YET_THROUGH_API.contains(&name.as_str());
            if listed && found.is_empty() {
                listed_but_clean.push(name);
            } else if !listed {
                errors.extend(found.into_iter().map(|v| format!("routes/{name} {v}")));
            }
        }
        assert!(errors.is_empty(), "route files must call instantstart_core::api: {errors:#?}");
        assert!(listed_but_clean.is_empty(), "clean now: remove from ROUTES_NOT_YET_THROUGH_API: {listed_but_clean:?}");
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
