//! A reflector-backed read cache for the Nodes and Pods of each target.
//!
//! Status pages and operation polls list nodes and pods often; with the cache on
//! ([`KubeAdapter::with_watch_cache`](crate::KubeAdapter::with_watch_cache)) those lists are
//! answered from a kube-runtime reflector store (one list + watch per target and kind, started
//! on first use) instead of one API request each. Everything else goes to the API server.
//!
//! Reads are eventually consistent: a pod created a moment ago may not be listed yet (callers
//! poll anyway). A store that is not ready within [`READY_TIMEOUT`], or whose watch is failing
//! (e.g. the EKS token expired, the endpoint moved), is not trusted: the list goes to the API
//! server and the watch is restarted with a fresh client.

use crate::connector::KubeConnector;
use crate::error::K8sError;
use crate::resources::{self, Resolved};
use futures::StreamExt;
use instantstart_core::provider::{KubeObject, KubeTarget, ListParams};
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a list waits for a new store's first full list before asking the server.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The `(apiVersion, kind)`s served from the cache.
pub const CACHED_KINDS: &[(&str, &str)] = &[("v1", "Node"), ("v1", "Pod")];

struct Entry {
    store: Store<DynamicObject>,
    /// False after the watch reported an error, true again after it delivered an event.
    healthy: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// Reflector stores of Nodes and Pods, per target.
pub struct WatchCache {
    connector: Arc<dyn KubeConnector>,
    entries: Mutex<HashMap<(KubeTarget, &'static str), Entry>>,
}

impl std::fmt::Debug for WatchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCache").finish_non_exhaustive()
    }
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        for e in self.entries.get_mut().unwrap_or_else(|p| p.into_inner()).values() {
            e.task.abort();
        }
    }
}

impl WatchCache {
    pub fn new(connector: Arc<dyn KubeConnector>) -> Self {
        WatchCache { connector, entries: Mutex::new(HashMap::new()) }
    }

    /// The cached kind matching `api_version`/`kind`, if it is cached.
    pub fn cached_kind(api_version: &str, kind: &str) -> Option<&'static str> {
        CACHED_KINDS.iter().find(|(a, k)| *a == api_version && *k == kind).map(|(_, k)| *k)
    }

    /// The store of `kind` on `target`, (re)starting its watch when there is none or it is failing.
    async fn store(&self, target: &KubeTarget, kind: &'static str) -> Result<Store<DynamicObject>, K8sError> {
        let key = (target.clone(), kind);
        if let Some(e) = lock(&self.entries).get(&key)
            && e.healthy.load(Ordering::Relaxed)
            && !e.task.is_finished()
        {
            return Ok(e.store.clone());
        }
        let client = self.connector.client(target).await?;
        let Resolved { resource, .. } = resources::known("v1", kind)
            .ok_or_else(|| K8sError::UnknownKind { api_version: "v1".into(), kind: kind.into() })?;
        let writer = Writer::new(resource.clone());
        let store = writer.as_reader();
        let healthy = Arc::new(AtomicBool::new(true));
        let flag = healthy.clone();
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let events = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
        let (cluster, region) = (target.eks_cluster.clone(), target.region.clone());
        let task = tokio::spawn(events.for_each(move |event| {
            match &event {
                Ok(_) => flag.store(true, Ordering::Relaxed),
                Err(e) => {
                    flag.store(false, Ordering::Relaxed);
                    tracing::debug!(%cluster, %region, kind, error = %e, "k8s: watch failed; lists go to the API server");
                }
            }
            futures::future::ready(())
        }));
        if let Some(old) = lock(&self.entries).insert(key, Entry { store: store.clone(), healthy, task }) {
            old.task.abort();
        }
        Ok(store)
    }

    /// Lists `params` from the cache; `Ok(None)` when the store cannot be trusted yet (the
    /// caller asks the API server instead).
    pub async fn list(&self, target: &KubeTarget, params: &ListParams) -> Result<Option<Vec<KubeObject>>, K8sError> {
        let Some(kind) = Self::cached_kind(&params.api_version, &params.kind) else { return Ok(None) };
        let store = self.store(target, kind).await?;
        if tokio::time::timeout(READY_TIMEOUT, store.wait_until_ready()).await.map_or(true, |r| r.is_err()) {
            return Ok(None);
        }
        let namespace = if kind == "Node" { None } else { params.namespace.as_deref() };
        let mut out: Vec<KubeObject> = store
            .state()
            .iter()
            .filter(|o| namespace.is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns)))
            .filter(|o| params.labels.iter().all(|(k, v)| o.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v)))
            .map(|o| {
                let mut v = serde_json::to_value(o.as_ref()).map_err(|e| K8sError::Decode(e.to_string()))?;
                if let Some(map) = v.as_object_mut() {
                    map.insert("apiVersion".into(), "v1".into());
                    map.insert("kind".into(), kind.into());
                }
                Ok(KubeObject(v))
            })
            .collect::<Result<_, K8sError>>()?;
        out.sort_by(|a, b| {
            let key = |o: &KubeObject| {
                let m = &o.0["metadata"];
                (
                    m["namespace"].as_str().unwrap_or_default().to_string(),
                    m["name"].as_str().unwrap_or_default().to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
        Ok(Some(out))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
