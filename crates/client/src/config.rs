//! Where the server is and which token to send: flags, environment, then the config file.
//!
//! - Base URL: the explicit value (`--url`), else `INSTANTSTART_URL`, else the config file's
//!   `default_url` (the server of the last `instantstart login`), else [`DEFAULT_URL`].
//! - Token: the explicit value (`--token`), else `INSTANTSTART_TOKEN`, else the token the
//!   config file holds **for that URL**. Tokens are stored per server URL, so pointing the CLI
//!   at another server never sends it a token meant for a different one.
//!
//! The config file is JSON at `$INSTANTSTART_CONFIG`, else
//! `$XDG_CONFIG_HOME/instantstart/config.json`, else `~/.config/instantstart/config.json`,
//! written atomically with mode 0600 (its directory 0700):
//!
//! ```json
//! { "default_url": "http://127.0.0.1:3099",
//!   "servers": { "http://127.0.0.1:3099": { "token": "ist_…", "name": "admin" } } }
//! ```

use crate::Error;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The server's default address (the management container's port 3099 on loopback).
pub const DEFAULT_URL: &str = "http://127.0.0.1:3099";
/// Environment variable naming the server URL.
pub const URL_ENV: &str = "INSTANTSTART_URL";
/// Environment variable holding the API token.
pub const TOKEN_ENV: &str = "INSTANTSTART_TOKEN";
/// Environment variable overriding the config file path.
pub const CONFIG_ENV: &str = "INSTANTSTART_CONFIG";

/// Contents of the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Server used when neither `--url` nor `INSTANTSTART_URL` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_url: Option<String>,
    /// Credentials by normalized server URL.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerEntry>,
}

/// Credentials for one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerEntry {
    pub token: String,
    /// Name of the token as the server reported it at login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Where the token in [`Resolved`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token` or `INSTANTSTART_TOKEN`.
    Explicit,
    /// The config file.
    ConfigFile,
    /// No token found.
    None,
}

/// The server URL and token to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub url: String,
    pub token: Option<String>,
    pub token_source: TokenSource,
}

/// Normalizes a server URL for comparison and storage (no trailing slash).
pub fn normalize_url(url: &str) -> String {
    url.trim().trim_end_matches('/').to_string()
}

/// The config file path: `$INSTANTSTART_CONFIG`, `$XDG_CONFIG_HOME/instantstart/config.json`
/// or `$HOME/.config/instantstart/config.json`.
pub fn config_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = var(CONFIG_ENV) {
        return Some(p);
    }
    let base = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|h| h.join(".config")))?;
    Some(base.join("instantstart").join("config.json"))
}

/// Resolves URL and token with the config file at [`config_path`] (a missing file is empty).
pub fn resolve(url: Option<&str>, token: Option<&str>) -> Result<Resolved, Error> {
    let config = match config_path() {
        Some(path) => Config::load(&path)?,
        None => Config::default(),
    };
    Ok(config.resolve(url, token))
}

impl Config {
    /// Reads the config file; a missing file is an empty config.
    pub fn load(path: &Path) -> Result<Config, Error> {
        let err = |message: String| Error::Config { path: path.to_path_buf(), message };
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| err(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// Writes the config file atomically, readable only by its owner (0600, directory 0700).
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        use std::io::Write;
        let err = |message: String| Error::Config { path: path.to_path_buf(), message };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).map_err(|e| err(e.to_string()))?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp).map_err(|e| err(e.to_string()))?;
        #[cfg(unix)]
        {
            // The file may have existed with wider permissions.
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(|e| err(e.to_string()))?;
        }
        f.write_all(text.as_bytes()).and_then(|_| f.write_all(b"\n")).map_err(|e| err(e.to_string()))?;
        f.sync_all().map_err(|e| err(e.to_string()))?;
        std::fs::rename(&tmp, path).map_err(|e| err(e.to_string()))
    }

    /// Records `token` for `url` and makes `url` the default server.
    pub fn set_server(&mut self, url: &str, token: String, name: Option<String>) {
        let url = normalize_url(url);
        self.servers.insert(url.clone(), ServerEntry { token, name });
        self.default_url = Some(url);
    }

    /// Forgets the token of `url`; returns whether there was one.
    pub fn remove_server(&mut self, url: &str) -> bool {
        let url = normalize_url(url);
        if self.default_url.as_deref() == Some(url.as_str()) {
            self.default_url = None;
        }
        self.servers.remove(&url).is_some()
    }

    /// Resolves URL and token from explicit values, then the environment, then this config.
    /// Empty strings count as absent.
    pub fn resolve(&self, url: Option<&str>, token: Option<&str>) -> Resolved {
        let env = |k: &str| std::env::var(k).ok();
        self.resolve_with(url, token, env)
    }

    fn resolve_with(&self, url: Option<&str>, token: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Resolved {
        let present = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let url = present(url.map(str::to_string))
            .or_else(|| present(env(URL_ENV)))
            .or_else(|| self.default_url.clone())
            .map(|u| normalize_url(&u))
            .unwrap_or_else(|| DEFAULT_URL.to_string());
        if let Some(t) = present(token.map(str::to_string)).or_else(|| present(env(TOKEN_ENV))) {
            return Resolved { url, token: Some(t.trim().to_string()), token_source: TokenSource::Explicit };
        }
        match self.servers.get(&url) {
            Some(entry) => Resolved { url, token: Some(entry.token.clone()), token_source: TokenSource::ConfigFile },
            None => Resolved { url, token: None, token_source: TokenSource::None },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_is_flag_env_config_default_and_tokens_stay_with_their_server() {
        let mut cfg = Config::default();
        let none = |_: &str| None;
        assert_eq!(
            cfg.resolve_with(None, None, none),
            Resolved { url: DEFAULT_URL.into(), token: None, token_source: TokenSource::None }
        );
        cfg.set_server("http://a:1/", "ta".into(), None);
        let r = cfg.resolve_with(None, None, none);
        assert_eq!((r.url.as_str(), r.token.as_deref()), ("http://a:1", Some("ta")));
        assert_eq!(r.token_source, TokenSource::ConfigFile);
        // Another server: the stored token is not sent there.
        let r = cfg.resolve_with(Some("http://b:2"), None, none);
        assert_eq!((r.url.as_str(), r.token), ("http://b:2", None));
        // Environment beats the config, flags beat the environment.
        let env = |k: &str| match k {
            URL_ENV => Some("http://env:3".to_string()),
            TOKEN_ENV => Some("tenv".to_string()),
            _ => None,
        };
        let r = cfg.resolve_with(None, None, env);
        assert_eq!((r.url.as_str(), r.token.as_deref()), ("http://env:3", Some("tenv")));
        let r = cfg.resolve_with(Some("http://flag:4"), Some("tflag"), env);
        assert_eq!((r.url.as_str(), r.token.as_deref()), ("http://flag:4", Some("tflag")));
        assert_eq!(r.token_source, TokenSource::Explicit);
    }

    #[test]
    fn saved_config_is_private_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("config.json");
        assert_eq!(Config::load(&path).unwrap(), Config::default());
        let mut cfg = Config::default();
        cfg.set_server("http://127.0.0.1:3099", "secret".into(), Some("admin".into()));
        cfg.save(&path).unwrap();
        assert_eq!(Config::load(&path).unwrap(), cfg);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(cfg.remove_server("http://127.0.0.1:3099/"));
        assert!(cfg.servers.is_empty() && cfg.default_url.is_none());
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(Config::load(&path), Err(Error::Config { .. })));
    }
}
