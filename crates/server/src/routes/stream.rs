//! Live progress: a WebSocket that pushes every operation/step phase change, so the UI, the CLI
//! (`--wait`) and agents never poll.
//!
//! Each message is JSON `{"type": "operation", "operation": {...}}` with the whole operation
//! after the change (snapshots first, then one per change), or `{"type": "heartbeat"}`.

use super::{ApiQuery, errors};
use crate::AppState;
use crate::auth::check_origin;
use crate::error::ApiError;
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::Response;
use instantstart_core::operation::{Operation, OperationId, OperationStatus};
use instantstart_core::store::OperationFilter;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
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
        }),
    )
}

async fn stream(
    State(state): State<AppState>,
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
    Ok(ws.on_upgrade(move |socket| follow(socket, state, q)))
}

/// A WebSocket upgrade, or the reason the request is not one (answered as a 400 problem).
pub struct WsUpgrade(Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for WsUpgrade {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(WsUpgrade(WebSocketUpgrade::from_request_parts(parts, state).await))
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
    };
    let mut ops = state.store.list_operations(&filter).unwrap_or_default();
    ops.reverse();
    ops
}

async fn send(socket: &mut WebSocket, msg: &StreamMessage) -> bool {
    match serde_json::to_string(msg) {
        Ok(text) => socket.send(Message::Text(text.into())).await.is_ok(),
        Err(_) => true,
    }
}

async fn follow(mut socket: WebSocket, state: AppState, q: StreamQuery) {
    let mut events = state.engine.subscribe();
    for operation in snapshot(&state, &q) {
        if !send(&mut socket, &StreamMessage::Operation { operation: Box::new(operation) }).await {
            return;
        }
    }
    let mut heartbeat = tokio::time::interval(Duration::from_secs(15));
    heartbeat.tick().await;
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if q.matches(&ev.operation_id, &ev.target) => {
                    if let Ok(Some(operation)) = state.store.get_operation(&ev.operation_id)
                        && !send(&mut socket, &StreamMessage::Operation { operation: Box::new(operation) }).await {
                            return;
                        }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    for operation in snapshot(&state, &q) {
                        if !send(&mut socket, &StreamMessage::Operation { operation: Box::new(operation) }).await {
                            return;
                        }
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
