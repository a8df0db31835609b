//! Live progress: a WebSocket that pushes every operation/step phase change, so the UI, the CLI
//! (`--wait`) and agents never poll.
//!
//! Each message is JSON `{"type": "operation", "operation": {...}}` with the whole operation
//! after the change (snapshots first, then one per change), or `{"type": "heartbeat"}`.

use super::{ApiQuery, errors};
use crate::AppState;
use crate::auth::{Principal, check_origin};
use crate::error::ApiError;
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::Response;
use chrono::{DateTime, Utc};
use instantstart_core::operation::{Operation, OperationId, OperationStatus};
use instantstart_core::store::OperationFilter;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct StreamQuery {
    /// Follow one operation.
    pub operation_id: Option<String>,
    /// Follow operations on one target, e.g. `cluster/demo`.
    pub target: Option<String>,
}

/// A message on the stream.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamMessage {
    Operation { operation: Box<Operation> },
    Heartbeat,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/api/operations/stream",
        get_with(stream, |op| {
            errors(
                op.id("operation_stream")
                    .summary("WebSocket of operation phase changes (JSON messages)")
                    .tag("operations"),
            )
            .response::<404, crate::error::ProblemJson>()
            .response::<429, crate::error::ProblemJson>()
        }),
    )
}

async fn stream(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<StreamQuery>,
    WsUpgrade(ws): WsUpgrade,
) -> Result<Response, ApiError> {
    check_origin(&headers)?;
    if let Some(id) = &q.operation_id
        && state.store.get_operation(&OperationId(id.clone()))?.is_none()
    {
        return Err(ApiError::NotFound(format!("operation {id} not found")));
    }
    let ws = ws.map_err(|_| {
        ApiError::BadRequest("this endpoint is a WebSocket: send an HTTP/1.1 Upgrade: websocket request".into())
    })?;
    let slot = ws_slot(&state, &principal)?;
    Ok(ws.on_upgrade(move |socket| async move {
        follow(socket, state, q).await;
        drop(slot);
    }))
}

/// A WebSocket slot of `principal`, or `429` when it holds its cap of open ones
/// ([`crate::ws_slots`]).
pub(crate) fn ws_slot(state: &AppState, principal: &Principal) -> Result<crate::ws_slots::WsSlot, ApiError> {
    state.ws_slots.take(&principal.name).ok_or_else(|| {
        ApiError::TooMany(format!(
            "{} already holds {} open WebSockets (operation streams and log follows); close one first",
            principal.name,
            state.ws_slots.cap()
        ))
    })
}

/// A WebSocket upgrade, or the reason the request is not one (answered as a 400 problem).
pub struct WsUpgrade(Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for WsUpgrade {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(WsUpgrade(WebSocketUpgrade::from_request_parts(parts, state).await.map(crate::limits::capped_ws)))
    }
}

impl aide::OperationInput for WsUpgrade {
    fn operation_input(ctx: &mut aide::generate::GenContext, operation: &mut aide::openapi::Operation) {
        <WebSocketUpgrade as aide::OperationInput>::operation_input(ctx, operation);
    }
}

impl StreamQuery {
    fn matches(&self, id: &OperationId, target: &str) -> bool {
        self.operation_id.as_deref().is_none_or(|o| o == id.0) && self.target.as_deref().is_none_or(|t| t == target)
    }
}

fn snapshot(state: &AppState, q: &StreamQuery) -> Vec<Operation> {
    if let Some(id) = &q.operation_id {
        return state.store.get_operation(&OperationId(id.clone())).ok().flatten().into_iter().collect();
    }
    let filter = OperationFilter {
        target: q.target.clone(),
        status: if q.target.is_some() { None } else { Some(OperationStatus::Running) },
        limit: Some(50),
        archived: Some(false),
    };
    let mut ops = state.store.list_operations(&filter).unwrap_or_default();
    ops.reverse();
    ops
}

/// The text of a [`StreamMessage::Operation`] around an operation's JSON (built once per
/// change and shared by every follower).
fn operation_text(operation_json: &str) -> String {
    format!(r#"{{"type":"operation","operation":{operation_json}}}"#)
}

async fn send(socket: &mut WebSocket, msg: &StreamMessage) -> bool {
    match serde_json::to_string(msg) {
        Ok(text) => socket.send(Message::Text(text.into())).await.is_ok(),
        Err(_) => true,
    }
}

/// What one follower has sent: the newest `updated_at` of each operation, so a snapshot that
/// reaches this follower after a newer one (steps persist concurrently) is not sent.
#[derive(Default)]
struct Sent(HashMap<OperationId, DateTime<Utc>>);

impl Sent {
    /// Records `op` as sent unless a newer state of it already was; false when it is stale.
    fn fresh(&mut self, op: &Operation) -> bool {
        match self.0.get(&op.id) {
            Some(seen) if op.updated_at < *seen => false,
            _ => {
                self.0.insert(op.id.clone(), op.updated_at);
                true
            }
        }
    }
}

async fn send_snapshot(socket: &mut WebSocket, state: &AppState, q: &StreamQuery, sent: &mut Sent) -> bool {
    for operation in snapshot(state, q) {
        sent.fresh(&operation);
        if !send(socket, &StreamMessage::Operation { operation: Box::new(operation) }).await {
            return false;
        }
    }
    true
}

async fn follow(mut socket: WebSocket, state: AppState, q: StreamQuery) {
    let mut events = state.engine.subscribe();
    let mut sent = Sent::default();
    if !send_snapshot(&mut socket, &state, &q, &mut sent).await {
        return;
    }
    let mut heartbeat = tokio::time::interval(Duration::from_secs(15));
    heartbeat.tick().await;
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if q.matches(&ev.operation_id, &ev.target) => {
                    // The engine read the operation once for this change; every follower shares
                    // that snapshot and its JSON (no store read, no serialization per follower).
                    let text = match &ev.snapshot {
                        Some(snap) if sent.fresh(&snap.operation) => operation_text(&snap.json()),
                        Some(_) => continue,
                        None => match state.store.get_operation(&ev.operation_id) {
                            Ok(Some(op)) if sent.fresh(&op) => {
                                match serde_json::to_string(&StreamMessage::Operation { operation: Box::new(op) }) {
                                    Ok(text) => text,
                                    Err(_) => continue,
                                }
                            }
                            _ => continue,
                        },
                    };
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    if !send_snapshot(&mut socket, &state, &q, &mut sent).await {
                        return;
                    }
                }
                Err(RecvError::Closed) => return,
            },
            _ = heartbeat.tick() => {
                if !send(&mut socket, &StreamMessage::Heartbeat).await {
                    return;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::engine::OperationSnapshot;
    use instantstart_core::operation::{Actor, OperationKind};

    fn operation(updated_secs: i64) -> Operation {
        let at = DateTime::<Utc>::from_timestamp(1_750_000_000 + updated_secs, 0).expect("time");
        Operation {
            id: OperationId("op-1".into()),
            kind: OperationKind::CreateCluster,
            target: "cluster/demo".into(),
            status: OperationStatus::Running,
            actor: Actor::system(),
            request: serde_json::json!({ "name": "demo" }),
            idempotency_key: None,
            request_hash: "h".into(),
            steps: vec![],
            error: None,
            created_at: at,
            updated_at: at,
            finished_at: None,
        }
    }

    #[test]
    fn the_shared_text_is_the_stream_message() {
        let op = operation(0);
        let shared = operation_text(&OperationSnapshot::new(op.clone()).json());
        let own = serde_json::to_string(&StreamMessage::Operation { operation: Box::new(op) }).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shared).unwrap(),
            serde_json::from_str::<serde_json::Value>(&own).unwrap()
        );
    }

    #[test]
    fn an_older_snapshot_after_a_newer_one_is_not_sent() {
        let mut sent = Sent::default();
        assert!(sent.fresh(&operation(2)));
        assert!(!sent.fresh(&operation(1)), "older than what was sent");
        assert!(sent.fresh(&operation(2)), "the same state again is harmless");
        assert!(sent.fresh(&operation(3)));
    }
}
