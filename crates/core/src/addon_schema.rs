//! A small JSON-schema checker for EKS add-on configuration values.
//!
//! `DescribeAddonConfiguration` returns each add-on version's configuration schema (JSON
//! Schema, draft 7 style). EKS refuses a `CreateAddon` whose `configurationValues` do not
//! satisfy it (`InvalidParameterException`); checking first turns that into a typed error that
//! names the value's path, before anything is created.
//!
//! # Guarantees
//!
//! The keywords the add-on schemas use are checked: `type` (one name or a list), `required`,
//! `properties`, `additionalProperties` (`false` or a schema), `items`, `enum`, `const`,
//! `pattern` (a Rust regex, unanchored as JSON Schema says), `minLength`/`maxLength`,
//! `minimum`/`maximum`. Every other keyword is ignored (accepted), so an unknown keyword can
//! only make the check more lenient than EKS, never stricter. Violations are reported all at
//! once, in document order, each with a JSON-pointer-like path (`/keda/enabled`; `` for the
//! root).

use serde_json::Value;
use thiserror::Error;

/// One value the schema rejects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// Path of the value (`/alb/serviceAccount/roleArn`; empty for the document itself).
    pub path: String,
    /// The rule it breaks, as a sentence fragment.
    pub rule: String,
}

/// The configuration values do not satisfy the schema.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("configuration values rejected by the add-on's schema: {}", describe(.violations))]
pub struct SchemaError {
    pub violations: Vec<SchemaViolation>,
}

fn describe(v: &[SchemaViolation]) -> String {
    v.iter()
        .map(|v| format!("{}: {}", if v.path.is_empty() { "/" } else { &v.path }, v.rule))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks `value` against `schema`. See the module docs for the keywords covered.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    let mut violations = Vec::new();
    check(schema, value, "", &mut violations);
    if violations.is_empty() { Ok(()) } else { Err(SchemaError { violations }) }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, name: &str) -> bool {
    let actual = type_name(v);
    actual == name || (name == "number" && actual == "integer")
}

fn check(schema: &Value, value: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            out.push(SchemaViolation { path: path.into(), rule: "is not allowed".into() });
        }
        return;
    };
    let mut push = |rule: String| out.push(SchemaViolation { path: path.into(), rule });
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::String(n) => vec![n.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !names.is_empty() && !names.iter().any(|n| has_type(value, n)) {
            push(format!("must be of type {} (got {})", names.join(" or "), type_name(value)));
            return; // the other keywords would only repeat the type mismatch
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        push(format!("must be one of {} (got {value})", list.join(", ")));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        push(format!("must be {c} (got {value})"));
    }
    if let Value::String(text) = value {
        let len = text.chars().count() as u64;
        if let Some(min) = s.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            push(format!("must be at least {min} characters long"));
        }
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            push(format!("must be at most {max} characters long"));
        }
        if let Some(p) = s.get("pattern").and_then(Value::as_str) {
            match regex::Regex::new(p) {
                Ok(re) if !re.is_match(text) => push(format!("must match the pattern {p} (got {text:?})")),
                Ok(_) => {}
                // A pattern we cannot compile is not held against the value (lenient, see above).
                Err(_) => {}
            }
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            push(format!("must be at least {min}"));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            push(format!("must be at most {max}"));
        }
    }
    if let Value::Object(map) = value {
        if let Some(Value::Array(required)) = s.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(key) {
                    out.push(SchemaViolation { path: format!("{path}/{key}"), rule: "is required".into() });
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (key, v) in map {
            let child = format!("{path}/{key}");
            match props.and_then(|p| p.get(key)) {
                Some(sub) => check(sub, v, &child, out),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => out.push(SchemaViolation {
                        path: child,
                        rule: "is not a property the schema allows (additionalProperties: false)".into(),
                    }),
                    Some(sub @ Value::Object(_)) => check(sub, v, &child, out),
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, s.get("items")) {
        for (i, v) in items.iter().enumerate() {
            check(item_schema, v, &format!("{path}/{i}"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["executionRoleArn", "tlsCertificateS3Bucket"],
            "properties": {
                "executionRoleArn": { "type": "string", "pattern": "^arn:aws[a-z-]*:iam::[0-9]{12}:role/", "maxLength": 2048 },
                "tlsCertificateS3Bucket": { "type": "string", "minLength": 3, "maxLength": 63 },
                "replicas": { "type": "integer", "minimum": 1, "maximum": 5 },
                "stage": { "type": "string", "enum": ["prod", "gamma"] },
                "tolerations": { "type": "array", "items": { "type": "object" } },
                "keda": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": { "enabled": { "type": "boolean" } }
                },
                "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                "anything": {}
            }
        })
    }

    const ROLE: &str = "arn:aws:iam::123456789012:role/SageMakerHyperPodInference-demo";

    /// Each case: values, then the violations as `path: rule-prefix`.
    #[test]
    fn table() {
        let cases: &[(Value, &[&str])] = &[
            (json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt" }), &[]),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "keda": { "enabled": false },
                        "labels": { "a": "b" }, "anything": [1], "replicas": 2, "stage": "prod", "tolerations": [{}] }),
                &[],
            ),
            (json!({}), &["/executionRoleArn: is required", "/tlsCertificateS3Bucket: is required"]),
            (json!([]), &["/: must be of type object (got array)"]),
            (
                json!({ "executionRoleArn": "role/x", "tlsCertificateS3Bucket": "b" }),
                &["/executionRoleArn: must match the pattern", "/tlsCertificateS3Bucket: must be at least 3"],
            ),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "keda": { "enabled": "no" } }),
                &["/keda/enabled: must be of type boolean (got string)"],
            ),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "keda": { "enable": true } }),
                &["/keda/enable: is not a property the schema allows"],
            ),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "region": "us-east-1" }),
                &["/region: is not a property the schema allows"],
            ),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "replicas": 9, "stage": "beta" }),
                &["/replicas: must be at most 5", "/stage: must be one of \"prod\", \"gamma\""],
            ),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "replicas": 1.5 }),
                &["/replicas: must be of type integer (got number)"],
            ),
            (
                json!({ "executionRoleArn": ROLE, "tlsCertificateS3Bucket": "bkt", "labels": { "a": 1 }, "tolerations": [3] }),
                &["/labels/a: must be of type string", "/tolerations/0: must be of type object"],
            ),
        ];
        for (values, expected) in cases {
            let got: Vec<String> = match validate(&schema(), values) {
                Ok(()) => vec![],
                Err(e) => e
                    .violations
                    .iter()
                    .map(|v| format!("{}: {}", if v.path.is_empty() { "/" } else { &v.path }, v.rule))
                    .collect(),
            };
            assert_eq!(got.len(), expected.len(), "{values}: {got:?}");
            for (g, e) in got.iter().zip(expected.iter()) {
                assert!(g.starts_with(e), "{values}: {g:?} does not start with {e:?}");
            }
        }
    }

    #[test]
    fn the_error_names_every_path() {
        let e = validate(&schema(), &json!({ "tlsCertificateS3Bucket": 3 })).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("/executionRoleArn: is required"), "{text}");
        assert!(text.contains("/tlsCertificateS3Bucket: must be of type string (got integer)"), "{text}");
    }

    #[test]
    fn unknown_keywords_and_empty_schemas_accept() {
        assert!(validate(&json!({}), &json!({ "x": [1, 2] })).is_ok());
        assert!(
            validate(&json!({ "$schema": "http://json-schema.org/draft-07/schema#", "oneOf": [] }), &json!(1)).is_ok()
        );
        assert!(validate(&json!({ "properties": { "x": false } }), &json!({ "x": 1 })).is_err());
    }
}
