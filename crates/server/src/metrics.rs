//! Prometheus text metrics: HTTP requests by route and status, latency, operations by status,
//! and provider calls (from the simulated cloud's counters when it is the provider).

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

impl Metrics {
    pub fn record(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let mut m = self.requests.lock().expect("lock");
        let s = m.entry((method.to_string(), route.to_string(), status)).or_default();
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
