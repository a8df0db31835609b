//! `KubeApi` for [`SimCloud`]: each call goes through the cloud's pipeline (counters, faults,
//! persistence) and then the object store rules of [`crate::kube`]; `logs` with `follow` streams
//! new lines as simulated time passes.

use super::*;
use crate::cloud::SimCloud;
use async_trait::async_trait;
use futures::StreamExt;
use instantstart_core::provider::LogStream;
use std::collections::VecDeque;

struct Follow {
    cloud: SimCloud,
    target: KubeTarget,
    namespace: String,
    pod: String,
    cursor: f64,
    buffer: VecDeque<String>,
    done: bool,
}

#[async_trait]
impl KubeApi for SimCloud {
    async fn apply(&self, target: &KubeTarget, object: &KubeObject) -> Result<KubeObject> {
        self.write("k8s:Apply", |w, cx| {
            authorize_apply(w, cx, target, object)?;
            apply(w, cx, target, object)
        })
    }

    async fn get(&self, target: &KubeTarget, object: &ObjectRef) -> Result<Option<KubeObject>> {
        const API: &str = "k8s:Get";
        self.read_recording(API, |w, cx| {
            let r = object;
            authorize(
                w,
                cx,
                API,
                target,
                "get",
                (&r.api_version, &r.kind, None),
                r.namespace.as_deref(),
                Some(&r.name),
            )?;
            get(w, cx, target, object)
        })
    }

    async fn list(&self, target: &KubeTarget, params: &ListParams) -> Result<Vec<KubeObject>> {
        const API: &str = "k8s:List";
        self.read_recording(API, |w, cx| {
            let p = params;
            if target.identity.is_some() && p.namespace.is_none() && !is_cluster_scoped(&p.kind) {
                // Every namespace: only a ClusterRoleBinding can grant it (cluster scope).
                let wkey = check_target(w, API, target, cx.now)?;
                if let Some(kw) = w.kube.get_mut(&wkey) {
                    let (group, plural) = rbac::resource_of(&p.api_version, &p.kind);
                    let access =
                        rbac::Access { verb: "list", group: &group, resource: &plural, namespace: None, name: None };
                    rbac::authorize(kw, API, target, &access)?;
                }
            } else {
                authorize(w, cx, API, target, "list", (&p.api_version, &p.kind, None), p.namespace.as_deref(), None)?;
            }
            list(w, cx, target, params)
        })
    }

    async fn delete(&self, target: &KubeTarget, object: &ObjectRef) -> Result<()> {
        const API: &str = "k8s:Delete";
        self.write(API, |w, cx| {
            let r = object;
            authorize(
                w,
                cx,
                API,
                target,
                "delete",
                (&r.api_version, &r.kind, None),
                r.namespace.as_deref(),
                Some(&r.name),
            )?;
            delete(w, cx, target, object)
        })
    }

    async fn service_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        service: &str,
        port: u16,
        path: &str,
        body: Option<&[u8]>,
        timeout: std::time::Duration,
    ) -> Result<ProxyResponse> {
        let _ = timeout; // the simulated model answers at once
        self.read_recording(PROXY_API, |w, cx| {
            let verb = if body.is_some() { "create" } else { "get" };
            authorize(
                w,
                cx,
                PROXY_API,
                target,
                verb,
                ("v1", "Service", Some("proxy")),
                Some(namespace),
                Some(service),
            )?;
            let wkey = check_target(w, PROXY_API, target, cx.now)?;
            let kw = w.kube.get(&wkey).ok_or_else(|| ProviderError::not_found(PROXY_API, "no Kubernetes API"))?;
            Ok(serving::proxy(w, kw, namespace, service, port, path, body, cx.now))
        })
    }

    async fn pod_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
        path: &str,
        timeout: std::time::Duration,
    ) -> Result<ProxyResponse> {
        let _ = timeout; // the simulated pods answer at once
        self.read_recording(POD_PROXY_API, |w, cx| {
            authorize(w, cx, POD_PROXY_API, target, "get", ("v1", "Pod", Some("proxy")), Some(namespace), Some(pod))?;
            let wkey = check_target(w, POD_PROXY_API, target, cx.now)?;
            let kw = w.kube.get(&wkey).ok_or_else(|| ProviderError::not_found(POD_PROXY_API, "no Kubernetes API"))?;
            Ok(pod_proxy_answer(w, kw, namespace, pod, port, path, cx.now))
        })
    }

    async fn logs(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        follow: bool,
        tail_lines: Option<u32>,
    ) -> Result<LogStream> {
        const API: &str = "k8s:Logs";
        let (lines, now, finished) = self.read_recording(API, |w, cx| {
            check_target(w, API, target, cx.now)?;
            authorize(w, cx, API, target, "get", ("v1", "Pod", Some("log")), Some(namespace), Some(pod))?;
            let Some((p, st)) = pod_now(w, target, namespace, pod, cx.now) else {
                return Err(ProviderError::not_found(
                    API,
                    format!("pods \"{pod}\" not found in namespace {namespace}"),
                ));
            };
            if st.started_at.is_none() {
                let reason = match (&st.unschedulable, &st.gated, &st.waiting_message) {
                    (Some(_), ..) => "PodScheduled=False (Unschedulable)".to_string(),
                    (None, Some(gate), _) => format!("PodScheduled=False (SchedulingGated: {})", gate.message),
                    (None, None, Some(why)) => format!("ContainerCreating ({why})"),
                    _ => "ContainerCreating".to_string(),
                };
                return Err(invalid(
                    API,
                    format!("container \"{}\" in pod \"{pod}\" is waiting to start: {reason}", p.container()),
                ));
            }
            let finished = st.finished_at.is_some_and(|e| e <= cx.now);
            Ok((logs::lines(&p, &st, cx.now), cx.now, finished))
        })?;
        let mut lines: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
        if let Some(n) = tail_lines {
            let skip = lines.len().saturating_sub(n as usize);
            lines.drain(..skip);
        }
        if !follow {
            return Ok(futures::stream::iter(lines.into_iter().map(Ok)).boxed());
        }
        let state = Follow {
            cloud: self.clone(),
            target: target.clone(),
            namespace: namespace.into(),
            pod: pod.into(),
            cursor: now,
            buffer: lines.into(),
            done: finished,
        };
        Ok(futures::stream::unfold(state, |mut s| async move {
            loop {
                if let Some(line) = s.buffer.pop_front() {
                    return Some((Ok(line), s));
                }
                if s.done {
                    return None;
                }
                // Poll at most every 50 ms of wall time: a follower costs the world lock 20 times a
                // second at most, whatever the speed (kubelet log follows also flush in batches).
                let wait = (1.0 / s.cloud.speed()).clamp(0.05, 0.25);
                tokio::time::sleep(std::time::Duration::from_secs_f64(wait)).await;
                let (fresh, now, ended) = {
                    let mut st = s.cloud.lock();
                    let now = st.now();
                    st.advance_world(now);
                    match pod_now(&st.world, &s.target, &s.namespace, &s.pod, now) {
                        None => (Vec::new(), now, true),
                        Some((p, pst)) => {
                            let fresh: Vec<String> =
                                logs::lines_after(&p, &pst, s.cursor, now).into_iter().map(|(_, l)| l).collect();
                            (fresh, now, pst.finished_at.is_some_and(|e| e <= now))
                        }
                    }
                };
                s.buffer.extend(fresh);
                s.cursor = now;
                s.done = ended;
            }
        })
        .boxed())
    }
}
