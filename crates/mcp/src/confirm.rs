//! Two-call confirmation of destructive tools: an agent cannot destroy by one call.
//!
//! Every tool with `destructiveHint: true` takes an optional `confirmation`. The first call
//! (without it) changes nothing: it answers the plan (the REST dry run, or for
//! `operation_cancel` the operation as REST reads it) and a confirmation token. Only a second
//! call with that token acts. The REST API itself needs no token: the UI and the CLI confirm
//! with their own prompts; this is the agent face's guard.
//!
//! # Guarantees
//!
//! - A token is bound to one tool, to its arguments (every argument as decoded, with defaults
//!   filled in and the workload cluster resolved, minus `confirmation`) and to a digest (SHA-256
//!   of the canonical JSON) of the plan it was issued with.
//! - A token is short-lived ([`TOKEN_TTL`]) and single-use: it is consumed by the first call
//!   that presents it, whether that call acts or is refused, so it can never act twice.
//! - The confirming call re-reads the plan; when the real state moved and the plan differs,
//!   nothing is done (refused as [`Refusal::PlanChanged`], with the new plan and a fresh
//!   token).
//! - Each refusal is a typed [`Refusal`] naming why: unknown token, expired, already used (with
//!   what the earlier call started), issued for another tool, other arguments (naming them),
//!   plan changed. Refusals are tool errors on the `confirmation` field; nothing is changed.
//! - Tokens live in this MCP server's memory only: a restarted MCP server knows none.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a confirmation token stays valid (5 minutes).
pub const TOKEN_TTL: Duration = Duration::from_secs(300);

/// How long a used or expired token is remembered, so a late call hears why it is refused
/// instead of "unknown".
const REMEMBER: Duration = Duration::from_secs(3600);

/// The argument that carries the token.
pub const FIELD: &str = "confirmation";

/// Why a confirming call is refused (nothing was done).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("confirmation is unknown: this MCP server never issued it (tokens live only while it runs)")]
    Unknown,
    #[error("confirmation expired: it was valid for {ttl_secs} s after {tool} answered the plan")]
    Expired { tool: String, ttl_secs: u64 },
    #[error("confirmation was already used (single-use){}", used_for.as_ref().map(|o| format!(": it confirmed {o}")).unwrap_or_default())]
    Reused { used_for: Option<String> },
    #[error("confirmation was issued for {issued_for}, not {tool}")]
    OtherTool { issued_for: String, tool: String },
    #[error("confirmation was issued for other arguments: {} differ", fields.join(", "))]
    OtherArguments { fields: Vec<String> },
    #[error("the plan changed since the confirmation was issued (the real state moved)")]
    PlanChanged,
}

impl Refusal {
    /// What the agent should do next.
    pub fn hint(&self) -> &'static str {
        match self {
            Refusal::Unknown | Refusal::Expired { .. } => {
                "Nothing was changed. Call the tool again without confirmation to get the current plan and a \
                 fresh token, show the plan to the user, and confirm only after their explicit yes."
            }
            Refusal::Reused { .. } => {
                "Nothing was changed by this call. A token confirms one call only: follow what it started with \
                 operation_wait; to act again, call the tool without confirmation for a new plan and token."
            }
            Refusal::OtherTool { .. } | Refusal::OtherArguments { .. } => {
                "Nothing was changed. A token confirms exactly the call whose plan the user saw. Call the tool \
                 with the arguments you mean, without confirmation, for their plan and token."
            }
            Refusal::PlanChanged => {
                "Nothing was changed. The plan below is the current one (new_plan) with a fresh token: show it \
                 to the user and confirm only after their explicit yes."
            }
        }
    }
}

/// A token just issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub token: String,
    pub expires_in_secs: u64,
}

/// A token that was redeemed for a tool and its arguments; the plan still has to match.
#[derive(Debug, Clone)]
pub struct Redeemed {
    token: String,
    plan: String,
}

#[derive(Debug, Clone)]
struct Pending {
    tool: String,
    args: Value,
    plan: String,
    issued: Instant,
}

#[derive(Debug, Default)]
struct Ledger {
    pending: HashMap<String, Pending>,
    /// Consumed tokens: when, and what the call they confirmed started (an operation id).
    used: HashMap<String, (Instant, Option<String>)>,
}

/// The tokens of one MCP server: issued, redeemed, remembered.
#[derive(Debug, Clone, Default)]
pub struct Confirmations {
    ledger: Arc<Mutex<Ledger>>,
}

/// SHA-256 of the canonical JSON (object keys sorted at every level) of `v`.
pub fn digest(v: &Value) -> String {
    let bytes = canonical(v).to_string();
    Sha256::digest(bytes.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// `v` with every object's keys sorted (serde_json may preserve insertion order).
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&map[k]))).collect::<Map<_, _>>())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The arguments a token binds: `args` without `confirmation` and without nulls (an absent
/// optional and a null one are the same call), keys sorted.
pub fn bound_arguments(args: &Value) -> Value {
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| k.as_str() != FIELD && !v.is_null())
                .map(|(k, v)| (k.clone(), canonical(v)))
                .collect(),
        ),
        other => canonical(other),
    }
}

impl Confirmations {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues a token for `tool` called with `args`, bound to `plan`.
    pub fn issue(&self, tool: &str, args: &Value, plan: &Value, now: Instant) -> Issued {
        let token = format!("confirm-{}", uuid::Uuid::new_v4().simple());
        let mut ledger = self.lock();
        ledger.prune(now);
        let pending = Pending { tool: tool.to_string(), args: bound_arguments(args), plan: digest(plan), issued: now };
        ledger.pending.insert(token.clone(), pending);
        Issued { token, expires_in_secs: TOKEN_TTL.as_secs() }
    }

    /// Consumes `token` for `tool` called with `args`. Any known token is consumed here, even
    /// when refused; the caller then checks the plan with [`Confirmations::check_plan`].
    pub fn redeem(&self, token: &str, tool: &str, args: &Value, now: Instant) -> Result<Redeemed, Refusal> {
        let mut ledger = self.lock();
        ledger.prune(now);
        if let Some((_, used_for)) = ledger.used.get(token) {
            return Err(Refusal::Reused { used_for: used_for.clone() });
        }
        let Some(p) = ledger.pending.remove(token) else { return Err(Refusal::Unknown) };
        ledger.used.insert(token.to_string(), (now, None));
        if now.duration_since(p.issued) > TOKEN_TTL {
            return Err(Refusal::Expired { tool: p.tool, ttl_secs: TOKEN_TTL.as_secs() });
        }
        if p.tool != tool {
            return Err(Refusal::OtherTool { issued_for: p.tool, tool: tool.to_string() });
        }
        let args = bound_arguments(args);
        if args != p.args {
            return Err(Refusal::OtherArguments { fields: differing(&p.args, &args) });
        }
        Ok(Redeemed { token: token.to_string(), plan: p.plan })
    }

    /// Whether the plan read now is the plan the token was issued with.
    pub fn check_plan(&self, redeemed: &Redeemed, plan: &Value) -> Result<(), Refusal> {
        if digest(plan) == redeemed.plan { Ok(()) } else { Err(Refusal::PlanChanged) }
    }

    /// Records what the confirmed call started, for a later reuse of the same token.
    pub fn record(&self, redeemed: &Redeemed, outcome: String) {
        if let Some(entry) = self.lock().used.get_mut(&redeemed.token) {
            entry.1 = Some(outcome);
        }
    }
}

impl Ledger {
    /// Forgets tokens older than [`REMEMBER`] past their validity.
    fn prune(&mut self, now: Instant) {
        self.pending.retain(|_, p| now.duration_since(p.issued) <= TOKEN_TTL + REMEMBER);
        self.used.retain(|_, (at, _)| now.duration_since(*at) <= REMEMBER);
    }
}

/// The top-level argument names whose values differ between `a` and `b`, sorted.
fn differing(a: &Value, b: &Value) -> Vec<String> {
    let (empty_a, empty_b) = (Map::new(), Map::new());
    let a = a.as_object().unwrap_or(&empty_a);
    let b = b.as_object().unwrap_or(&empty_b);
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}

/// The first call's answer: the plan, the token and the exact call that confirms it.
pub fn required(tool: &str, args: &Value, plan: Value, issued: &Issued) -> Value {
    let mut arguments = bound_arguments(args);
    arguments[FIELD] = Value::String(issued.token.clone());
    json!({
        "confirmation_required": true,
        "tool": tool,
        "plan": plan,
        "confirmation": issued.token,
        "expires_in_secs": issued.expires_in_secs,
        "next_call": { "tool": tool, "arguments": arguments },
        "completion": format!(
            "Nothing was changed. {tool} is destructive: show this plan to the user and ask for an explicit yes. \
             Only then call {tool} again with the same arguments and confirmation=\"{}\" (valid {} s, once). \
             Different arguments or a changed plan need a new token.",
            issued.token, issued.expires_in_secs
        ),
    })
}

/// A refused confirming call, as the body of a tool error on the `confirmation` field.
pub fn refused(r: &Refusal) -> Value {
    json!({
        "error": {
            "title": "Confirmation refused",
            "detail": r.to_string(),
            "findings": [{ "field": FIELD, "rule": r.to_string() }],
        },
        "hint": r.hint(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str) -> Value {
        json!({ "name": name, "delete_bucket": false, "idempotency_key": null, "dry_run": false })
    }

    /// One rule per row: what the confirming call presents, and how it ends.
    #[test]
    fn token_rules() {
        let plan = json!({ "target": "cluster/demo", "steps": [{ "key": "delete-eks" }] });
        let t0 = Instant::now();
        type Present = Box<dyn Fn(&Confirmations, &str, Instant) -> Result<(), Refusal>>;
        let plan_for_check = plan.clone();
        let rows: Vec<(&str, Present)> = vec![
            (
                "same tool, arguments and plan act",
                Box::new(move |c, t, now| {
                    let r = c.redeem(t, "cluster_delete", &args("demo"), now)?;
                    c.check_plan(&r, &plan_for_check)
                }),
            ),
            (
                "the token in the arguments is not part of them",
                Box::new(|c, t, now| {
                    let mut a = args("demo");
                    a["confirmation"] = Value::String(t.into());
                    c.redeem(t, "cluster_delete", &a, now).map(|_| ())
                }),
            ),
            ("another tool", Box::new(|c, t, now| c.redeem(t, "job_delete", &args("demo"), now).map(|_| ()))),
            ("other arguments", Box::new(|c, t, now| c.redeem(t, "cluster_delete", &args("prod"), now).map(|_| ()))),
            (
                "a changed plan",
                Box::new(|c, t, now| {
                    let r = c.redeem(t, "cluster_delete", &args("demo"), now)?;
                    c.check_plan(&r, &json!({ "target": "cluster/demo", "steps": [] }))
                }),
            ),
            (
                "expired",
                Box::new(|c, t, now| {
                    c.redeem(t, "cluster_delete", &args("demo"), now + TOKEN_TTL + Duration::from_secs(1)).map(|_| ())
                }),
            ),
            (
                "unknown",
                Box::new(|c, _, now| c.redeem("confirm-nope", "cluster_delete", &args("demo"), now).map(|_| ())),
            ),
        ];
        let expected: Vec<Result<(), Refusal>> = vec![
            Ok(()),
            Ok(()),
            Err(Refusal::OtherTool { issued_for: "cluster_delete".into(), tool: "job_delete".into() }),
            Err(Refusal::OtherArguments { fields: vec!["name".into()] }),
            Err(Refusal::PlanChanged),
            Err(Refusal::Expired { tool: "cluster_delete".into(), ttl_secs: 300 }),
            Err(Refusal::Unknown),
        ];
        for ((name, present), want) in rows.iter().zip(expected) {
            let c = Confirmations::default();
            let issued = c.issue("cluster_delete", &args("demo"), &plan, t0);
            assert_eq!(issued.expires_in_secs, 300, "{name}");
            assert_eq!(present(&c, &issued.token, t0 + Duration::from_secs(10)), want, "{name}");
        }
    }

    #[test]
    fn a_token_is_single_use_even_when_refused_and_names_what_it_started() {
        let c = Confirmations::default();
        let now = Instant::now();
        let plan = json!({ "steps": [] });
        let t = c.issue("job_delete", &args("a"), &plan, now).token;
        let r = c.redeem(&t, "job_delete", &args("a"), now).unwrap();
        c.record(&r, "operation op-1".into());
        assert_eq!(
            c.redeem(&t, "job_delete", &args("a"), now).unwrap_err(),
            Refusal::Reused { used_for: Some("operation op-1".into()) }
        );
        // A refused presentation consumes the token too.
        let t = c.issue("job_delete", &args("a"), &plan, now).token;
        assert!(matches!(c.redeem(&t, "job_delete", &args("b"), now), Err(Refusal::OtherArguments { .. })));
        assert_eq!(c.redeem(&t, "job_delete", &args("a"), now).unwrap_err(), Refusal::Reused { used_for: None });
    }

    #[test]
    fn digests_ignore_key_order_and_bound_arguments_ignore_nulls_and_the_token() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": 2, "x": [1, {"q": 1, "p": 2}]}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": {"x": [1, {"p": 2, "q": 1}], "y": 2}, "b": 1}"#).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&json!({ "b": 2 })));
        assert_eq!(
            bound_arguments(&json!({ "name": "x", "cluster": null, "confirmation": "confirm-1" })),
            json!({ "name": "x" })
        );
    }

    #[test]
    fn the_first_answer_names_the_exact_confirming_call_and_refusals_name_the_field() {
        let issued = Issued { token: "confirm-abc".into(), expires_in_secs: 300 };
        let v =
            required("endpoint_delete", &json!({ "name": "e", "cluster": "c", "dry_run": false }), json!({}), &issued);
        assert_eq!(v["confirmation_required"], true);
        assert_eq!(
            v["next_call"]["arguments"],
            json!({ "name": "e", "cluster": "c", "dry_run": false, "confirmation": "confirm-abc" })
        );
        assert!(v["completion"].as_str().unwrap().contains("explicit yes"));
        let body = refused(&Refusal::OtherArguments { fields: vec!["name".into(), "cluster".into()] });
        assert_eq!(body["error"]["findings"][0]["field"], "confirmation");
        assert!(body["error"]["detail"].as_str().unwrap().contains("name, cluster differ"));
    }
}
