//! Prometheus text metrics: HTTP requests by route and status, latency, operations by status,
//! and provider calls (from the simulated cloud's counters when it is the provider).
//!
//! # Guarantees
//! - Request series are bounded whatever clients send: the method label is one of a fixed set
//!   ([`method_label`], `other` for anything else), the route label is a route of the table
//!   (the caller passes `unmatched` otherwise) and the status is a number below 1000.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
struct Series {
    count: u64,
    seconds: f64,
}

/// Request counters keyed by (method, route, status).
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), Series>>,
}

/// The label of an HTTP method: a standard method, or `other` (extension methods are
/// arbitrary tokens, so each would otherwise be a new series).
pub fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"];
    KNOWN.into_iter().find(|m| *m == method).unwrap_or("other")
}

impl Metrics {
    pub fn record(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let mut m = self.requests.lock().expect("lock");
        let s = m.entry((method_label(method).to_string(), route.to_string(), status)).or_default();
        s.count += 1;
        s.seconds += elapsed.as_secs_f64();
    }

    /// Renders the exposition text; `operations` and `provider_calls` are read at scrape time.
    pub fn render(&self, operations: &BTreeMap<String, u64>, provider_calls: &BTreeMap<String, u64>) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = String::new();
        out.push_str("# HELP instantstart_http_requests_total HTTP requests by method, route and status.\n");
        out.push_str("# TYPE instantstart_http_requests_total counter\n");
        let m = self.requests.lock().expect("lock");
        for ((method, route, status), s) in m.iter() {
            out.push_str(&format!(
                "instantstart_http_requests_total{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {}\n",
                esc(method),
                esc(route),
                s.count
            ));
        }
        out.push_str("# HELP instantstart_http_request_duration_seconds_sum Total time spent serving requests.\n");
        out.push_str("# TYPE instantstart_http_request_duration_seconds_sum counter\n");
        for ((method, route, status), s) in m.iter() {
            out.push_str(&format!(
                "instantstart_http_request_duration_seconds_sum{{method=\"{}\",route=\"{}\",status=\"{status}\"}} {:.6}\n",
                esc(method),
                esc(route),
                s.seconds
            ));
        }
        out.push_str("# HELP instantstart_operations Operations by status.\n# TYPE instantstart_operations gauge\n");
        for (status, n) in operations {
            out.push_str(&format!("instantstart_operations{{status=\"{}\"}} {n}\n", esc(status)));
        }
        out.push_str("# HELP instantstart_provider_calls_total Provider API calls by API.\n# TYPE instantstart_provider_calls_total counter\n");
        for (api, n) in provider_calls {
            out.push_str(&format!("instantstart_provider_calls_total{{api=\"{}\"}} {n}\n", esc(api)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_do_not_grow_the_series() {
        let m = Metrics::default();
        for i in 0..10_000 {
            m.record(&format!("XYZ{i}"), "unmatched", 405, Duration::ZERO);
        }
        m.record("GET", "/healthz", 200, Duration::ZERO);
        let text = m.render(&BTreeMap::new(), &BTreeMap::new());
        assert_eq!(m.requests.lock().unwrap().len(), 2);
        assert!(text.contains(r#"method="other",route="unmatched",status="405"} 10000"#), "{text}");
        assert!(!text.contains("XYZ"));
    }
}
