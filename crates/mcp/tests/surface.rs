//! The agent-facing contract, pinned so drift shows up in review:
//!
//! - the tool surface (names, the four MCP hints, required and optional arguments) as an insta
//!   snapshot, plus the rules every tool follows (documented arguments, mutations name their
//!   status tool and take an idempotency key and dry run, exactly the destructive tools take a
//!   confirmation token);
//! - the skills (`skills/*/SKILL.md`): front matter, the three workflow rules, and every tool
//!   name they mention outside "Planned tools (not yet available)" exists (identifiers that are
//!   step keys or tool arguments are not tool names) — while planned tools do not exist yet;
//! - the `hypd-inst-agent` configurations: auto-approve exactly the read-only tools, name only
//!   existing tools, and the installed copies equal the templates in `skills/agents/`.

use instantstart_mcp::InstantStartMcp;
use instantstart_mcp::server::DEPRECATED_TOOLS;
use rmcp::model::Tool;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Prefixes of tool-like words that are not current nouns ([`NOUNS`]): the deprecated
/// `mlflow_*` names and the nouns of planned tools the skills mention.
const OTHER_PREFIXES: &[&str] = &["mlflow", "inference", "training_plan"];

/// Prefixes of tool names; a snake_case word starting with one of these is a tool reference.
fn prefixes() -> impl Iterator<Item = &'static str> {
    NOUNS.iter().chain(OTHER_PREFIXES).copied()
}
const PLANNED_HEADING: &str = "## Planned tools (not yet available)";
const RULES: &[&str] = &["Monitor to a terminal state", "Ask only decision-level questions", "Inspect before create"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn tools() -> Vec<Tool> {
    let mut tools = InstantStartMcp::tool_router().list_all();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

fn names() -> BTreeSet<String> {
    tools().iter().map(|t| t.name.to_string()).collect()
}

/// The read-only tools under their current names (a deprecated old name is not advertised).
fn read_only() -> BTreeSet<String> {
    tools()
        .iter()
        .filter(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true))
        .filter(|t| !DEPRECATED_TOOLS.iter().any(|(old, _)| t.name == *old))
        .map(|t| t.name.to_string())
        .collect()
}

fn properties(t: &Tool) -> serde_json::Map<String, Value> {
    t.input_schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default()
}

fn required(t: &Tool) -> Vec<String> {
    let mut r: Vec<String> = t
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    r.sort();
    r
}

#[test]
fn tool_surface_is_pinned() {
    let surface: Vec<Value> = tools()
        .iter()
        .map(|t| {
            let a = t.annotations.clone().unwrap_or_default();
            let req = required(t);
            let optional: Vec<String> = properties(t).keys().filter(|k| !req.contains(k)).cloned().collect();
            json!({
                "name": t.name,
                "title": a.title,
                "read_only": a.read_only_hint,
                "destructive": a.destructive_hint,
                "idempotent": a.idempotent_hint,
                "open_world": a.open_world_hint,
                "required": req,
                "optional": optional,
            })
        })
        .collect();
    insta::assert_json_snapshot!("tool_surface", surface);
}

#[test]
fn every_tool_is_annotated_documented_and_names_its_status_tool() {
    for t in tools() {
        let name = t.name.as_ref();
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}: snake_case");
        assert!(prefixes().any(|p| name.starts_with(&format!("{p}_"))), "{name}: grouped by a known prefix");
        let a = t.annotations.clone().unwrap_or_else(|| panic!("{name}: no annotations"));
        for (hint, v) in [
            ("readOnlyHint", a.read_only_hint),
            ("destructiveHint", a.destructive_hint),
            ("idempotentHint", a.idempotent_hint),
            ("openWorldHint", a.open_world_hint),
        ] {
            assert!(v.is_some(), "{name}: {hint} must be set explicitly");
        }
        assert!(a.title.is_some(), "{name}: title");
        if a.read_only_hint == Some(true) {
            assert_eq!(a.destructive_hint, Some(false), "{name}: a read-only tool is not destructive");
        }
        assert!(t.description.as_ref().is_some_and(|d| d.len() > 60), "{name}: description");
        for (arg, schema) in properties(&t) {
            let described = schema.get("description").and_then(Value::as_str).is_some_and(|d| !d.is_empty());
            assert!(described, "{name}.{arg}: every argument has a description");
        }
        let props = properties(&t);
        if props.contains_key("idempotency_key") {
            assert!(props.contains_key("dry_run"), "{name}: idempotency_key comes with dry_run");
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.contains("operation_wait"), "{name}: a mutation names the status tool that decides completion");
        }
        if a.read_only_hint == Some(false) {
            let d = t.description.as_deref().unwrap_or_default();
            let names_status = d.contains("operation_wait") || d.contains("no operation to follow");
            assert!(names_status, "{name}: say how completion is decided");
        }
        // An agent cannot destroy by one call: exactly the destructive tools take an optional
        // confirmation token (crates/mcp/src/confirm.rs), and say so.
        let destructive = a.destructive_hint == Some(true);
        assert_eq!(props.contains_key("confirmation"), destructive, "{name}: confirmation iff destructive");
        if destructive {
            assert!(!required(&t).contains(&"confirmation".to_string()), "{name}: the first call has no token");
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.contains("confirmation"), "{name}: the description explains the two calls");
        }
    }
    // Every tool that starts an operation takes an idempotency key and a dry run.
    for name in [
        "cluster_create",
        "cluster_import",
        "cluster_delete",
        "instance_group_add",
        "instance_group_scale",
        "instance_group_delete",
        "node_reboot",
        "node_replace",
        "node_delete",
        "feature_set",
        "model_download",
        "model_delete",
        "job_submit",
        "job_delete",
        "endpoint_deploy",
        "endpoint_scale",
        "endpoint_delete",
        "pool_assign",
        "tracking_server_create",
        "tracking_server_delete",
        "storage_fsx_create",
        "storage_fsx_delete",
    ] {
        let t = tools().into_iter().find(|t| t.name == name).unwrap();
        let props = properties(&t);
        assert!(props.contains_key("idempotency_key") && props.contains_key("dry_run"), "{name}");
    }
}

/// The nouns a tool name starts with (longest first wins), the parts of a noun a tool may act
/// on, and the verbs: a name is `<noun>_[<part>_]<verb>[_<object>]`, or, for a read-only tool
/// that reads a part of its noun, `<noun>_<part>`.
const NOUNS: &[&str] = &[
    "context",
    "cluster",
    "hyperpod",
    "instance_group",
    "node",
    "health_check",
    "software_update",
    "capacity",
    "metrics",
    "feature",
    "governance",
    "storage",
    "model",
    "job",
    "endpoint",
    "pool",
    "tracking_server",
    "run",
    "operation",
    "audit",
];
const PARTS: &[&str] = &[
    "zones",
    "eks_clusters",
    "instance_types",
    "quotas",
    "training_plans",
    "training_plan_offerings",
    "sim_stats",
    "events",
    "logs",
    "fsx",
    "metrics",
];
const VERBS: &[&str] = &[
    "get", "list", "create", "import", "delete", "add", "remove", "set", "scale", "reboot", "replace", "start",
    "download", "submit", "deploy", "chat", "assign", "wait", "retry", "cancel",
];

/// Why `name` breaks the `<noun>_<verb>` rule, or `None`.
fn naming_problem(name: &str, read_only: bool) -> Option<String> {
    let Some(noun) = NOUNS.iter().filter(|n| name.starts_with(&format!("{n}_"))).max_by_key(|n| n.len()) else {
        return Some(format!("{name}: starts with no known noun"));
    };
    let rest = &name[noun.len() + 1..];
    if read_only && PARTS.contains(&rest) {
        return None;
    }
    let rest = PARTS.iter().find_map(|p| rest.strip_prefix(&format!("{p}_"))).unwrap_or(rest);
    let verb = rest.split('_').next().unwrap_or_default();
    (!VERBS.contains(&verb)).then(|| format!("{name}: `{rest}` after the noun `{noun}` does not start with a verb"))
}

#[test]
fn the_naming_rule_is_checked_on_table_cases() {
    for (name, read_only, ok) in [
        ("tracking_server_list", true, true),
        ("tracking_server_create", false, true),
        ("storage_fsx_create", false, true),
        ("run_metrics_get", true, true),
        ("cluster_set_active", false, true),
        ("job_logs", true, true),
        ("job_logs", false, false),
        ("mlflow_servers", true, false),
        ("tracking_server_servers", true, false),
        ("tracking_create_server", false, false),
    ] {
        assert_eq!(naming_problem(name, read_only).is_none(), ok, "{name} (read-only: {read_only})");
    }
}

#[test]
fn every_tool_is_named_noun_then_verb_and_old_names_are_deprecated_aliases() {
    let tools = tools();
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap_or_else(|| panic!("no tool {n}"));
    let deprecated: BTreeSet<&str> = DEPRECATED_TOOLS.iter().map(|(old, _)| *old).collect();
    for t in &tools {
        let name = t.name.as_ref();
        if deprecated.contains(name) {
            continue;
        }
        let ro = t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        if let Some(problem) = naming_problem(name, ro) {
            panic!("{problem}");
        }
    }
    for (old, new) in DEPRECATED_TOOLS {
        let (o, n) = (by_name(old), by_name(new));
        assert!(naming_problem(new, true).is_none(), "{new}: the new name follows the rule");
        let d = o.description.as_deref().unwrap_or_default();
        assert!(d.starts_with("Deprecated") && d.contains(new), "{old}: says to call {new}: {d}");
        assert_eq!(o.input_schema, n.input_schema, "{old}: the same arguments as {new}");
        let (oa, na) = (o.annotations.clone().unwrap(), n.annotations.clone().unwrap());
        assert_eq!(
            (oa.read_only_hint, oa.destructive_hint, oa.idempotent_hint, oa.open_world_hint),
            (na.read_only_hint, na.destructive_hint, na.idempotent_hint, na.open_world_hint),
            "{old}: the same hints as {new}"
        );
    }
    // Docs and skills name the new tools only.
    for rel in ["docs/agent.md", "docs/training.md", "skills/training-jobs/SKILL.md", "skills/README.md"] {
        let text = read(rel);
        for (old, _) in DEPRECATED_TOOLS {
            // Only a note on the rename may name an old tool.
            assert!(!text.contains(old) || text.contains("**Renamed tools**"), "{rel} still names {old}");
        }
    }
}

/// Snake_case words of `text` that look like tool names (start with a tool prefix).
fn tool_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .filter(|w| !w.ends_with('_') && prefixes().any(|p| w.starts_with(&format!("{p}_"))))
        .map(str::to_string)
        .collect()
}

/// Identifiers with a tool prefix that are arguments of a tool, not tools (e.g. `feature_set`'s
/// `inference_operator`).
fn argument_names() -> BTreeSet<String> {
    tools().iter().flat_map(|t| properties(t).keys().cloned().collect::<Vec<_>>()).collect()
}

/// Identifiers with a tool prefix that are not tools: step keys of the workflows.
fn step_keys() -> BTreeSet<String> {
    let req: instantstart_core::spec::ClusterCreateRequest = serde_json::from_value(json!({
        "name": "demo", "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": {"instance_groups": [
            {"name": "g", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a"}]}
    }))
    .unwrap();
    instantstart_core::workflow::create_cluster::plan_steps(&req).into_iter().map(|s| s.key).collect()
}

/// Splits a skill into (the text outside the planned section, the planned section).
fn split_planned(body: &str) -> (String, String) {
    let mut outside = String::new();
    let mut planned = String::new();
    let mut in_planned = false;
    for line in body.lines() {
        if line.starts_with("## ") {
            in_planned = line.trim() == PLANNED_HEADING;
        }
        let target = if in_planned { &mut planned } else { &mut outside };
        target.push_str(line);
        target.push('\n');
    }
    (outside, planned)
}

/// The front matter fields and the body of a markdown file with YAML front matter.
fn front_matter(text: &str, what: &str) -> (Vec<(String, String)>, String) {
    let rest = text.strip_prefix("---\n").unwrap_or_else(|| panic!("{what}: starts with --- front matter"));
    let (head, body) = rest.split_once("\n---\n").unwrap_or_else(|| panic!("{what}: front matter ends with ---"));
    let fields = head
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap_or_else(|| panic!("{what}: `key: value` lines, got {l:?}"));
            // Plain YAML scalars: a ": " or " #" inside the value would change its meaning.
            assert!(!v.contains(": ") && !v.contains(" #"), "{what}: {k} must stay a plain YAML scalar");
            (k.to_string(), v.to_string())
        })
        .collect();
    (fields, body.to_string())
}

fn field<'a>(fields: &'a [(String, String)], key: &str, what: &str) -> &'a str {
    fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("{what}: no {key}"))
}

fn check_mentions(text: &str, what: &str, known: &BTreeSet<String>) {
    for word in tool_words(text) {
        assert!(
            known.contains(&word),
            "{what} mentions `{word}`, which is not a tool (list it under {PLANNED_HEADING:?})"
        );
    }
}

#[test]
fn skills_mention_only_existing_tools_and_encode_the_rules() {
    let tools = names();
    let mut known = tools.clone();
    known.extend(step_keys());
    known.extend(argument_names());
    // Nested request fields that share a tool prefix (`software_update_start`'s rolling policy,
    // a job's `mlflow.tracking_server_arn`).
    known.extend(["capacity_percentage".to_string(), "tracking_server_arn".to_string()]);
    let dir = root().join("skills");
    let mut skills = vec![];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.join("SKILL.md").is_file() {
            skills.push(path);
        }
    }
    skills.sort();
    let found: Vec<String> = skills.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for required in [
        "create-cluster",
        "instance-groups",
        "managed-features",
        "storage-and-models",
        "training-jobs",
        "inference-deployment",
        "diagnose-nccl",
        "diagnose-node-health",
        "diagnose-cluster-creation",
    ] {
        assert!(found.iter().any(|f| f == required), "skill {required} is missing");
    }
    let mut planned_total = 0;
    for (path, name) in skills.iter().zip(&found) {
        let what = format!("skills/{name}/SKILL.md");
        let text = std::fs::read_to_string(path.join("SKILL.md")).unwrap();
        let (fields, body) = front_matter(&text, &what);
        assert_eq!(field(&fields, "name", &what), name, "{what}: name is the folder name");
        assert!(field(&fields, "description", &what).len() > 60, "{what}: a description that says when to use it");
        let version = field(&fields, "version", &what);
        let parts: Vec<&str> = version.split('.').collect();
        assert!(parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()), "{what}: semver version");
        for rule in RULES {
            assert!(body.contains(rule), "{what}: encodes the rule {rule:?}");
        }
        if name.starts_with("diagnose-") {
            for phrase in ["read-only", "suggestion", "investigate → reboot → replace"] {
                assert!(body.contains(phrase), "{what}: diagnostics say {phrase:?}");
            }
        }
        let (outside, planned) = split_planned(&body);
        check_mentions(&outside, &what, &known);
        assert!(tool_words(&outside).iter().any(|w| tools.contains(w)), "{what}: uses at least one available tool");
        // Planned tools are the names heading its bullets (`- \`name\`, \`other\` — what it does`).
        let mut planned_tools = BTreeSet::new();
        for line in planned.lines().filter_map(|l| l.strip_prefix("- ")) {
            let head = line.split(" — ").next().unwrap_or_default();
            for word in tool_words(head) {
                assert!(!tools.contains(&word), "{what}: `{word}` exists now; move it out of the planned section");
                planned_tools.insert(word);
            }
        }
        planned_total += planned_tools.len();
        let mut known_or_planned = known.clone();
        known_or_planned.extend(planned_tools);
        check_mentions(&planned, &what, &known_or_planned);
    }
    assert!(planned_total > 0, "the planned sections are parsed");
    check_mentions(&read("skills/README.md"), "skills/README.md", &known);
}

#[test]
fn agent_configs_auto_approve_only_read_only_tools() {
    let tools = names();
    let read_only = read_only();
    assert!(read_only.contains("operation_wait") && !read_only.contains("cluster_create"));

    // Installed copies equal the templates.
    for (installed, template) in [
        (".kiro/agents/hypd-inst-agent.json", "skills/agents/kiro/hypd-inst-agent.json"),
        (".claude/agents/hypd-inst-agent.md", "skills/agents/claude/hypd-inst-agent.md"),
        (".claude/settings.json", "skills/agents/claude/settings.json"),
        (".mcp.json", "skills/agents/mcp.json"),
    ] {
        assert_eq!(read(installed), read(template), "{installed} differs from its template {template}");
    }

    // Kiro CLI.
    let kiro: Value = serde_json::from_str(&read("skills/agents/kiro/hypd-inst-agent.json")).unwrap();
    assert_eq!(kiro["name"], "hypd-inst-agent");
    assert_eq!(kiro["mcpServers"]["instantstart"]["command"], "instantstart-mcp");
    let timeout = kiro["mcpServers"]["instantstart"]["timeout"].as_u64().unwrap();
    assert!(timeout > 900_000, "the request timeout outlasts operation_wait's longest wait");
    assert!(kiro["tools"].as_array().unwrap().contains(&json!("@instantstart")));
    let mut allowed = BTreeSet::new();
    for t in kiro["allowedTools"].as_array().unwrap() {
        let t = t.as_str().unwrap();
        match t.strip_prefix("@instantstart/") {
            Some(tool) => {
                assert!(read_only.contains(tool), "Kiro auto-approves {tool}, which is not read-only");
                allowed.insert(tool.to_string());
            }
            None => assert_eq!(t, "fs_read", "Kiro auto-approves only read-only tools"),
        }
    }
    assert_eq!(allowed, read_only, "Kiro auto-approves every read-only tool");
    let prompt = kiro["prompt"].as_str().unwrap();
    check_mentions(prompt, "the Kiro prompt", &tools);
    for rule in RULES {
        assert!(prompt.contains(rule), "the agent prompt encodes {rule:?}");
    }

    // Claude Code.
    let md = read("skills/agents/claude/hypd-inst-agent.md");
    let (fields, body) = front_matter(&md, "claude agent");
    assert_eq!(field(&fields, "name", "claude agent"), "hypd-inst-agent");
    assert_eq!(body, prompt, "Claude Code and Kiro share one prompt");
    let listed: BTreeSet<String> = field(&fields, "tools", "claude agent")
        .split(", ")
        .filter_map(|t| t.strip_prefix("mcp__instantstart__"))
        .map(str::to_string)
        .collect();
    let current: BTreeSet<String> =
        tools.iter().filter(|t| !DEPRECATED_TOOLS.iter().any(|(old, _)| t == old)).cloned().collect();
    assert_eq!(listed, current, "the Claude agent can use every tool (by its current name)");
    let settings: Value = serde_json::from_str(&read("skills/agents/claude/settings.json")).unwrap();
    let allow: BTreeSet<String> = settings["permissions"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().strip_prefix("mcp__instantstart__").expect("only our tools").to_string())
        .collect();
    assert_eq!(allow, read_only, "Claude Code auto-approves exactly the read-only tools");

    // Plain .mcp.json.
    let mcp: Value = serde_json::from_str(&read("skills/agents/mcp.json")).unwrap();
    assert_eq!(mcp["mcpServers"]["instantstart"]["command"], "instantstart-mcp");
    let auto: BTreeSet<String> = mcp["mcpServers"]["instantstart"]["autoApprove"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(auto, read_only, ".mcp.json auto-approves exactly the read-only tools");
}
