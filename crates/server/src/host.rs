//! Which `Host` names the server answers for: a guard against DNS rebinding.
//!
//! A web page on an attacker's domain can make its name resolve to `127.0.0.1` and then have
//! the victim's browser send requests to this server as a "same-origin" page of that domain.
//! Cookies stay with our origin, so such a page cannot act as a logged-in user, but it could
//! read the unauthenticated routes. The server therefore answers only requests whose `Host`
//! names it: the loopback names, an IP address (rebinding needs a domain name), or a name the
//! operator lists (`--allowed-hosts`, e.g. the name of a TLS-terminating proxy in front).
//!
//! # Guarantees
//! - A request whose `Host` (port ignored, case ignored) is `localhost`, a `*.localhost` name,
//!   an IPv4 or bracketed IPv6 literal, or one of the allowed names (an entry `*.example.com`
//!   allows every name under `example.com`) is served; a request without `Host` (HTTP/1.0) too.
//! - Any other request is answered `403` problem+json naming the host and the option that
//!   allows it, before authentication or any handler runs.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The names the server answers for besides loopback and IP literals (`--allowed-hosts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    /// The rule of one `--allowed-hosts` entry: a DNS name, optionally `*.` + a DNS name.
    pub fn new(names: &[String]) -> Result<Self, String> {
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let n = n.trim().to_ascii_lowercase();
            let bare = n.strip_prefix("*.").unwrap_or(&n);
            let ok = !bare.is_empty()
                && bare.len() <= 253
                && bare.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                });
            if !ok {
                return Err(format!("{n:?} is not a host name (a DNS name, or *. and a DNS name)"));
            }
            out.push(n);
        }
        Ok(AllowedHosts(out))
    }

    /// Whether a request with `Host: host` is answered (see the module's guarantees).
    pub fn allows(&self, host: &str) -> bool {
        let name = strip_port(host).to_ascii_lowercase();
        if name == "localhost" || name.ends_with(".localhost") || is_ip_literal(&name) {
            return true;
        }
        self.0.iter().any(|allowed| match allowed.strip_prefix("*.") {
            Some(domain) => {
                name.len() > domain.len() + 1
                    && name.ends_with(domain)
                    && name[..name.len() - domain.len()].ends_with('.')
            }
            None => *allowed == name,
        })
    }
}

/// `host[:port]` or `[v6]:port` → the name or address part.
fn strip_port(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.contains(':') => name,
        _ => host,
    }
}

fn is_ip_literal(name: &str) -> bool {
    name.parse::<IpAddr>().is_ok()
}

/// Middleware: refuses a request for a host this server does not answer for.
pub async fn check_host(State(allowed): State<Arc<AllowedHosts>>, req: Request, next: Next) -> Response {
    let host = req.headers().get(header::HOST).map(|v| v.to_str().unwrap_or("\u{fffd}").to_string());
    match host {
        Some(h) if !allowed.allows(&h) => ApiError::Forbidden(format!(
            "this server does not answer for host {h:?} (a guard against DNS rebinding); reach it as localhost or \
             by address, or start it with --allowed-hosts {}",
            strip_port(&h)
        ))
        .into_response(),
        _ => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_answered_by_the_table() {
        let allowed = AllowedHosts::new(&["instantstart.example.com".into(), "*.corp.example".into()]).unwrap();
        let table: &[(&str, bool)] = &[
            ("localhost", true),
            ("localhost:3099", true),
            ("LOCALHOST:3099", true),
            ("ui.localhost:3099", true),
            ("127.0.0.1:3099", true),
            ("10.0.3.7", true),
            ("[::1]:3099", true),
            ("[fe80::1]", true),
            ("instantstart.example.com", true),
            ("instantstart.example.com:443", true),
            ("a.corp.example", true),
            ("a.b.corp.example:8443", true),
            ("corp.example", false),
            ("evilcorp.example", false),
            ("rebind.attacker.example:3099", false),
            ("localhost.attacker.example", false),
            ("127.0.0.1.nip.io", false),
            ("", false),
        ];
        for (host, ok) in table {
            assert_eq!(allowed.allows(host), *ok, "{host}");
        }
        assert!(!AllowedHosts::default().allows("instantstart.example.com"));
    }

    #[test]
    fn an_allowed_host_entry_must_be_a_name() {
        for bad in ["", "*.", "a b", "-x.example", "x_y.example", "https://x.example"] {
            assert!(AllowedHosts::new(&[bad.to_string()]).is_err(), "{bad}");
        }
        assert!(AllowedHosts::new(&["UI.Example.com".into(), "*.example.org".into()]).is_ok());
    }
}
