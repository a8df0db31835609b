//! The PromQL the simulated AMP answers: the subset InstantStart's queries use
//! (`instantstart_core::amp_metrics`), evaluated over the simulated DCGM telemetry
//! ([`crate::metrics::telemetry`]).
//!
//! Grammar: `SELECTOR` or `AGG [by (LABEL, …)] (SELECTOR)` with `AGG` one of `max`, `min`,
//! `avg`, `sum`, and `SELECTOR` = `METRIC{LABEL OP "VALUE", …}` with `OP` one of `=`, `!=`, `=~`,
//! `!~` (regular expressions anchored at both ends, as Prometheus anchors them). Anything else is
//! Prometheus' `bad_data` error. A moment is evaluated at its exact time (the simulated
//! collector writes continuously, so Prometheus' 5-minute lookback finds the moment's value).

use regex::Regex;
use std::collections::BTreeMap;

/// A label matcher.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    Eq(String, String),
    Ne(String, String),
    Re(String, Regex),
    NotRe(String, Regex),
}

impl Matcher {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or("");
        match self {
            Matcher::Eq(k, v) => get(k) == v,
            Matcher::Ne(k, v) => get(k) != v,
            Matcher::Re(k, r) => r.is_match(get(k)),
            Matcher::NotRe(k, r) => !r.is_match(get(k)),
        }
    }
}

/// An aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agg {
    Max,
    Min,
    Avg,
    Sum,
}

/// A parsed query.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub metric: String,
    pub matchers: Vec<Matcher>,
    /// The aggregation and the labels it keeps.
    pub agg: Option<(Agg, Vec<String>)>,
}

struct Lexer<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Lexer<'a> {
    fn ws(&mut self) {
        while self.s[self.at..].starts_with(char::is_whitespace) {
            self.at += self.s[self.at..].chars().next().map_or(1, char::len_utf8);
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.at..].starts_with(t) {
            self.at += t.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &str) -> Result<(), String> {
        if self.eat(t) { Ok(()) } else { Err(format!("expected {t:?} at char {}", self.at)) }
    }

    fn ident(&mut self) -> Result<&'a str, String> {
        self.ws();
        let rest = &self.s[self.at..];
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
        if n == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("expected an identifier at char {}", self.at));
        }
        self.at += n;
        Ok(&rest[..n])
    }

    /// A double-quoted string with Go's escapes `\\`, `\"`, `\n`.
    fn string(&mut self) -> Result<String, String> {
        self.expect("\"")?;
        let mut out = String::new();
        let mut chars = self.s[self.at..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.at += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, e @ ('\\' | '"' | '\''))) => out.push(e),
                    other => return Err(format!("unknown escape {other:?} in a string")),
                },
                c => out.push(c),
            }
        }
        Err("unterminated string".into())
    }

    fn done(&mut self) -> bool {
        self.ws();
        self.at == self.s.len()
    }
}

fn anchored(k: &str, re: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{re})$")).map_err(|e| format!("invalid regular expression for {k}: {e}"))
}

fn selector(lx: &mut Lexer<'_>) -> Result<(String, Vec<Matcher>), String> {
    let metric = lx.ident()?.to_string();
    let mut matchers = Vec::new();
    if lx.eat("{") {
        while !lx.eat("}") {
            let k = lx.ident()?.to_string();
            let m = if lx.eat("=~") {
                let v = lx.string()?;
                Matcher::Re(k.clone(), anchored(&k, &v)?)
            } else if lx.eat("!~") {
                let v = lx.string()?;
                Matcher::NotRe(k.clone(), anchored(&k, &v)?)
            } else if lx.eat("!=") {
                Matcher::Ne(k, lx.string()?)
            } else {
                lx.expect("=")?;
                Matcher::Eq(k, lx.string()?)
            };
            matchers.push(m);
            if !lx.eat(",") {
                lx.expect("}")?;
                break;
            }
        }
    }
    Ok((metric, matchers))
}

/// Parses `q` (Prometheus' `bad_data` message on error).
pub(crate) fn parse(q: &str) -> Result<Query, String> {
    let mut lx = Lexer { s: q, at: 0 };
    let save = lx.at;
    let first = lx.ident()?;
    let agg = match first {
        "max" => Some(Agg::Max),
        "min" => Some(Agg::Min),
        "avg" => Some(Agg::Avg),
        "sum" => Some(Agg::Sum),
        _ => None,
    };
    let rest = lx.s[lx.at..].trim_start();
    let query = match agg {
        Some(a) if rest.starts_with("by") || rest.starts_with('(') => {
            let mut by = Vec::new();
            if lx.eat("by") {
                lx.expect("(")?;
                while !lx.eat(")") {
                    by.push(lx.ident()?.to_string());
                    if !lx.eat(",") {
                        lx.expect(")")?;
                        break;
                    }
                }
            }
            lx.expect("(")?;
            let (metric, matchers) = selector(&mut lx)?;
            lx.expect(")")?;
            Query { metric, matchers, agg: Some((a, by)) }
        }
        _ => {
            lx.at = save;
            let (metric, matchers) = selector(&mut lx)?;
            Query { metric, matchers, agg: None }
        }
    };
    if !lx.done() {
        return Err(format!("unexpected {:?} at char {}", &q[lx.at..], lx.at));
    }
    Ok(query)
}

/// Evaluates `q` at one moment over `samples` (each a series' labels, `__name__` included, and
/// its value): the resulting series' labels and values.
pub(crate) fn eval(q: &Query, samples: &[(BTreeMap<String, String>, f64)]) -> Vec<(BTreeMap<String, String>, f64)> {
    let selected = samples.iter().filter(|(l, _)| {
        l.get("__name__").map(String::as_str) == Some(q.metric.as_str()) && q.matchers.iter().all(|m| m.matches(l))
    });
    let Some((agg, by)) = &q.agg else { return selected.cloned().collect() };
    let mut groups: BTreeMap<BTreeMap<String, String>, Vec<f64>> = BTreeMap::new();
    for (l, v) in selected {
        let key = by.iter().filter_map(|k| l.get(k).map(|v| (k.clone(), v.clone()))).collect();
        groups.entry(key).or_default().push(*v);
    }
    groups
        .into_iter()
        .map(|(k, vs)| {
            let v = match agg {
                Agg::Max => vs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Agg::Min => vs.iter().copied().fold(f64::INFINITY, f64::min),
                Agg::Sum => vs.iter().sum(),
                Agg::Avg => vs.iter().sum::<f64>() / vs.len() as f64,
            };
            (k, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str, labels: &[(&str, &str)], v: f64) -> (BTreeMap<String, String>, f64) {
        let mut l: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        l.insert("__name__".into(), name.into());
        (l, v)
    }

    #[test]
    fn the_subset_parses_and_evaluates() {
        let samples = vec![
            sample("U", &[("gpu", "0"), ("Hostname", "n1"), ("namespace", "a"), ("pod", "j-0")], 90.0),
            sample("U", &[("gpu", "1"), ("Hostname", "n1"), ("namespace", "a"), ("pod", "j.1")], 80.0),
            sample("U", &[("gpu", "0"), ("Hostname", "n2")], 0.0),
            sample("M", &[("gpu", "0"), ("Hostname", "n1")], 7.0),
        ];
        let run = |q: &str| {
            let mut out: Vec<(Vec<(String, String)>, f64)> =
                eval(&parse(q).unwrap(), &samples).into_iter().map(|(l, v)| (l.into_iter().collect(), v)).collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            out
        };
        let by_gpu = run("max by (gpu) (U{Hostname=\"n1\"})");
        assert_eq!(by_gpu.iter().map(|(_, v)| *v).collect::<Vec<_>>(), [90.0, 80.0]);
        assert_eq!(by_gpu[0].0, [("gpu".to_string(), "0".to_string())]);
        assert_eq!(run("avg(U{namespace=\"a\",pod=~\"j-0|j\\\\.1\"})"), [(vec![], 85.0)]);
        // Regular expressions are anchored; an absent label is the empty string.
        assert!(run("avg(U{pod=~\"j\"})").is_empty());
        assert_eq!(run("U{namespace=\"\"}").len(), 1);
        assert_eq!(run("sum(U)"), [(vec![], 170.0)]);
        for bad in ["", "max by (gpu (U)", "U{gpu=0}", "U{gpu=\"0\"} + M", "avg(U{pod=~\"(\"})"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
