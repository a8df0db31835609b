//! Validation findings: every rule broken by a request, each with a field path and the rule.
//!
//! Validation never stops at the first problem. A [`Findings`] collector is threaded through the
//! checks; the result is either `Ok` or a [`ValidationError`] listing all findings, so the UI can
//! mark every bad field at once and an agent can fix a request in one round trip.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One broken rule: where (`instance_groups[1].capacity`) and what (`immutable after creation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// Path of the offending field in the request, e.g. `hyperpod.instance_groups[0].count`.
    pub field: String,
    /// The rule that is broken, as a sentence fragment readable by people and agents.
    pub rule: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

/// What kind of problem the findings describe; maps to HTTP 400 and 422.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValidationKind {
    /// The request itself is malformed or out of range (HTTP 400).
    Invalid,
    /// The request is well-formed but cannot be applied to the current state, e.g. it changes
    /// an immutable field (HTTP 422).
    Unprocessable,
}

/// A request that broke one or more rules. Never empty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
pub struct ValidationError {
    pub kind: ValidationKind,
    pub findings: Vec<Finding>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.findings.iter().map(ToString::to_string).collect();
        write!(f, "{}", parts.join("; "))
    }
}

impl ValidationError {
    /// A single finding of kind [`ValidationKind::Invalid`].
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        ValidationError {
            kind: ValidationKind::Invalid,
            findings: vec![Finding { field: field.into(), rule: rule.into() }],
        }
    }

    /// A single finding of kind [`ValidationKind::Unprocessable`].
    pub fn unprocessable(field: impl Into<String>, rule: impl Into<String>) -> Self {
        ValidationError {
            kind: ValidationKind::Unprocessable,
            findings: vec![Finding { field: field.into(), rule: rule.into() }],
        }
    }
}

/// Collects findings while walking a request. Field paths are built with [`Findings::at`].
#[derive(Debug, Default)]
pub struct Findings {
    prefix: String,
    findings: Vec<Finding>,
    unprocessable: bool,
}

impl Findings {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `field` (relative to the current prefix) breaks `rule`.
    pub fn push(&mut self, field: &str, rule: impl Into<String>) {
        self.findings.push(Finding { field: self.path(field), rule: rule.into() });
    }

    /// Records a finding that makes the request unprocessable (HTTP 422) rather than invalid.
    pub fn push_unprocessable(&mut self, field: &str, rule: impl Into<String>) {
        self.unprocessable = true;
        self.push(field, rule);
    }

    /// Runs `f` with `segment` appended to the field prefix.
    pub fn at<R>(&mut self, segment: &str, f: impl FnOnce(&mut Findings) -> R) -> R {
        let saved = self.prefix.clone();
        self.prefix = self.path(segment);
        let r = f(self);
        self.prefix = saved;
        r
    }

    /// Like [`Findings::at`], for an element of a list: `segment[index]`.
    pub fn at_index<R>(&mut self, segment: &str, index: usize, f: impl FnOnce(&mut Findings) -> R) -> R {
        self.at(&format!("{segment}[{index}]"), f)
    }

    /// Adds findings from a nested validation (already carrying full paths below `prefix`).
    pub fn extend(&mut self, error: ValidationError) {
        if error.kind == ValidationKind::Unprocessable {
            self.unprocessable = true;
        }
        for f in error.findings {
            let field = self.path(&f.field);
            self.findings.push(Finding { field, rule: f.rule });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.findings.is_empty()
    }

    fn path(&self, field: &str) -> String {
        match (self.prefix.is_empty(), field.is_empty()) {
            (true, _) => field.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) if field.starts_with('[') => format!("{}{field}", self.prefix),
            (false, false) => format!("{}.{field}", self.prefix),
        }
    }

    /// `Ok(())` when nothing was found, otherwise the error with every finding.
    pub fn finish(self) -> Result<(), ValidationError> {
        if self.findings.is_empty() {
            Ok(())
        } else {
            let kind = if self.unprocessable { ValidationKind::Unprocessable } else { ValidationKind::Invalid };
            Err(ValidationError { kind, findings: self.findings })
        }
    }
}

/// Types that can check themselves. `validate` records findings relative to the current prefix.
pub trait Validate {
    fn validate(&self, findings: &mut Findings);

    /// Validates `self` on its own, returning every finding.
    fn check(&self) -> Result<(), ValidationError> {
        let mut f = Findings::new();
        self.validate(&mut f);
        f.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_nest_and_all_findings_are_kept() {
        let mut f = Findings::new();
        f.push("name", "must not be empty");
        f.at("hyperpod", |f| f.at_index("instance_groups", 1, |f| f.push("capacity", "immutable after creation")));
        let err = f.finish().unwrap_err();
        assert_eq!(err.kind, ValidationKind::Invalid);
        assert_eq!(
            err.to_string(),
            "name: must not be empty; hyperpod.instance_groups[1].capacity: immutable after creation"
        );
    }

    #[test]
    fn unprocessable_wins() {
        let mut f = Findings::new();
        f.push("a", "x");
        f.push_unprocessable("b", "y");
        assert_eq!(f.finish().unwrap_err().kind, ValidationKind::Unprocessable);
    }
}
