//! Inference endpoints: their view types, the reads that build them from the cluster
//! ([`crate::workflow::endpoints`] reads the objects), the submission rules of deploy, update
//! and delete, and the bounded chat call through the API server's service proxy.
//!
//! # Guarantees
//!
//! - A deploy is the `deploy_endpoint` workload operation: the workflow validates the body
//!   (every finding, `400`) before any preflight, and its assessment runs the endpoint's own
//!   preflight (a `load_balancer` exposure needs the AWS Load Balancer Controller) with the
//!   others, so a dry run shows every check and a failing one is a `422` naming its field. Jobs
//!   and endpoints go through the same mechanism ([`super::workloads::submit`]).
//! - An update is the explicit diff of the patch against the live endpoint: an empty plan is
//!   [`Submitted::NoChange`] and nothing is recorded; a foreign endpoint is a `422`.
//! - A delete names the namespace the endpoint is in, and a replayed delete of an endpoint that
//!   is gone returns its operation ([`super::workloads::delete`]).
//! - A chat request goes to a ready endpoint in the caller's namespaces only, through the
//!   service proxy, never to a pod; it takes at most [`CHAT_TIMEOUT`] and an answer over
//!   [`CHAT_MAX_RESPONSE_BYTES`] is refused ([`ChatReply`]).

use super::error::ReadError;
use super::workloads::{Caller, DeleteTarget, Submitted};
use crate::engine::{Engine, EngineError};
use crate::kube_access::KubeAccess;
use crate::operation::OperationKind;
use crate::provider::{KubeApi, KubeTarget};
use crate::store::Store;
use crate::validate::ValidationError;
use crate::workflow::endpoints as ep;
use crate::workload::{WorkloadKind, WorkloadRequest};
use serde_json::Value;

pub use crate::workflow::endpoints::{
    AutoscalingPatch, CHAT_MAX_REQUEST_BYTES, CHAT_MAX_RESPONSE_BYTES, CHAT_TIMEOUT, EndpointAutoscaling,
    EndpointDetail, EndpointPatch, EndpointReplicas, EndpointSummary,
};

/// The cluster's Kubernetes as `access` reaches it (its identity impersonated).
pub fn target_as(store: &dyn Store, cluster: &str, access: &KubeAccess) -> Result<KubeTarget, EngineError> {
    Ok(ep::kube_target_of(store, cluster)?.acting_as(access.identity.clone()))
}

/// The endpoints of the cluster `access` may see (InstantStart's and foreign ones).
pub async fn list(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    access: &KubeAccess,
) -> Result<Vec<EndpointSummary>, ReadError> {
    Ok(ep::list_endpoints_as(kube, target, access).await?)
}

/// Endpoint `name` with its pods, conditions and objects (missing outside `access`).
pub async fn get(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    access: &KubeAccess,
) -> Result<EndpointDetail, ReadError> {
    Ok(ep::endpoint_detail_as(kube, target, name, access).await?)
}

/// Deploys endpoint `params` to `cluster` (or answers its dry run with every check).
pub async fn deploy(
    engine: &Engine,
    cluster: &str,
    params: Value,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    let request = serde_json::to_value(WorkloadRequest::new(cluster, WorkloadKind::Endpoint, params))
        .map_err(|e| EngineError::InvalidState(e.to_string()))?;
    super::workloads::submit(engine, OperationKind::DeployEndpoint, request, caller, dry, key).await
}

/// Scales endpoint `name`: the plan of `patch` against the live endpoint, then (unless it is
/// empty) the `update_endpoint` operation with that plan, or its dry run.
#[allow(clippy::too_many_arguments)]
pub async fn update(
    engine: &Engine,
    kube: &dyn KubeApi,
    target: &KubeTarget,
    cluster: &str,
    name: &str,
    patch: &EndpointPatch,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    let up = ep::plan_update(kube, target, cluster, name, patch).await?;
    if up.plan.is_noop() {
        return Ok(Submitted::NoChange(up.plan));
    }
    let request = super::workloads::with_access(up.request, &caller.access)?;
    let kind = OperationKind::UpdateEndpoint;
    if dry {
        let mut d = engine.dry_run_checked(kind, &request).await?;
        d.plan = Some(up.plan);
        return Ok(Submitted::DryRun(d));
    }
    Ok(match super::workloads::run(engine, kind, &request, caller, key).await? {
        Submitted::Accepted { mut submission, .. } => {
            submission.plan = Some(up.plan);
            Submitted::Accepted { submission, workload: None }
        }
        other => other,
    })
}

/// Deletes endpoint `name` of `cluster` and everything it created.
#[allow(clippy::too_many_arguments)]
pub async fn delete(
    engine: &Engine,
    store: &dyn Store,
    kube: &dyn KubeApi,
    target: &KubeTarget,
    cluster: &str,
    name: &str,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, ReadError> {
    let found = ep::endpoint_namespace(kube, target, name).await.map_err(ReadError::from);
    let what = DeleteTarget { kind: OperationKind::DeleteEndpoint, workload: WorkloadKind::Endpoint, cluster, name };
    super::workloads::delete(engine, store, what, found, caller, dry, key).await
}

/// What the model answered to a chat request.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatReply {
    /// A JSON answer and the HTTP status it came with (the model's own `4xx` included).
    Answer { status: u16, body: Value },
    /// No answer within [`CHAT_TIMEOUT`].
    TimedOut,
    /// The answer is longer than [`CHAT_MAX_RESPONSE_BYTES`].
    TooLarge,
    /// The answer is not JSON: its status and its first 500 characters.
    NotJson { status: u16, text: String },
}

/// A chat request must be an OpenAI chat-completions request: `messages` is a list (`400`
/// naming `messages` otherwise).
pub fn check_chat(request: &Value) -> Result<(), ValidationError> {
    if request.get("messages").is_some_and(Value::is_array) {
        Ok(())
    } else {
        Err(ValidationError::invalid("messages", "required: a list of chat messages"))
    }
}

/// Sends chat request `body` (checked by [`check_chat`], at most [`CHAT_MAX_REQUEST_BYTES`]) to
/// endpoint `name` through the service proxy: the endpoint must be in `access`'s namespaces
/// (`403`) and ready (`409`).
pub async fn chat(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    access: &KubeAccess,
    body: &[u8],
) -> Result<ChatReply, ReadError> {
    let to = ep::chat_target(kube, target, name).await?;
    access.check_namespace(&to.namespace).map_err(|m| ReadError::Engine(EngineError::Forbidden(m)))?;
    if !to.ready {
        return Err(ReadError::NotReady(format!(
            "endpoint {name} is not ready yet; follow its deploy operation or GET it"
        )));
    }
    let call = kube.service_proxy(target, &to.namespace, &to.service, to.port, &to.path, Some(body), CHAT_TIMEOUT);
    let answer = match tokio::time::timeout(CHAT_TIMEOUT + std::time::Duration::from_secs(1), call).await {
        Err(_) => return Ok(ChatReply::TimedOut),
        Ok(Err(e)) if e.is_proxy_timeout() => return Ok(ChatReply::TimedOut),
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(a)) => a,
    };
    Ok(classify(answer.status, &answer.body))
}

/// The reply of an answer: too large, not JSON, or the JSON answer.
fn classify(status: u16, body: &[u8]) -> ChatReply {
    if body.len() > CHAT_MAX_RESPONSE_BYTES {
        return ChatReply::TooLarge;
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(body) => ChatReply::Answer { status, body },
        Err(_) => ChatReply::NotJson { status, text: String::from_utf8_lossy(body).chars().take(500).collect() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_chat_request_has_messages() {
        assert!(check_chat(&json!({ "messages": [] })).is_ok());
        for bad in [json!({}), json!({ "messages": "hi" }), json!([])] {
            assert_eq!(check_chat(&bad).unwrap_err().findings[0].field, "messages", "{bad}");
        }
    }

    #[test]
    fn answers_are_classified_by_size_then_shape() {
        let cases = [
            (200, b"{\"id\":\"x\"}".to_vec(), ChatReply::Answer { status: 200, body: json!({ "id": "x" }) }),
            (
                400,
                b"{\"message\":\"no\"}".to_vec(),
                ChatReply::Answer { status: 400, body: json!({ "message": "no" }) },
            ),
            (502, b"bad gateway".to_vec(), ChatReply::NotJson { status: 502, text: "bad gateway".into() }),
            (200, vec![b' '; CHAT_MAX_RESPONSE_BYTES + 1], ChatReply::TooLarge),
        ];
        for (status, body, want) in cases {
            assert_eq!(classify(status, &body), want);
        }
        let ChatReply::NotJson { text, .. } = classify(500, &[b'x'; 900]) else { panic!("not JSON") };
        assert_eq!(text.len(), 500);
    }
}
