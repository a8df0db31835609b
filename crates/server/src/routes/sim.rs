//! Simulated-cloud controls (only when the provider is the sim): per-API call counters and
//! fault injection, for tests and demos. Absent with the real provider.

use super::{ApiBody, errors};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Extension, State};
use instantstart_core::engine::audit;
use std::collections::BTreeMap;

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/sim/stats",
            get_with(stats, |op| {
                errors(
                    op.id("sim_stats")
                        .summary("Per-API call counters of the simulated cloud")
                        .tag("sim")
                        .response::<200, Json<BTreeMap<String, u64>>>(),
                )
            }),
        )
        .api_route(
            "/api/sim/clock",
            get_with(clock, |op| {
                errors(
                    op.id("sim_clock")
                        .summary("The simulated clock: seconds since the world was created, its wall time, speed")
                        .tag("sim")
                        .response::<200, Json<SimClock>>(),
                )
            }),
        )
        .api_route(
            "/api/sim/scaling-metric",
            aide::axum::routing::put_with(set_scaling_metric, |op| {
                errors(
                    op.id("sim_scaling_metric_set")
                        .summary("Set the metric behind a KEDA ScaledObject in a simulated cluster")
                        .tag("sim")
                        .response::<200, Json<serde_json::Value>>(),
                )
                // No such cluster (or ScaledObject) in the simulated world.
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/sim/faults",
            get_with(faults, |op| {
                errors(
                    op.id("sim_faults_get")
                        .summary("Fault injection settings")
                        .tag("sim")
                        .response::<200, Json<serde_json::Value>>(),
                )
            })
            .put_with(set_faults, |op| {
                errors(
                    op.id("sim_faults_set")
                        .summary("Replace fault injection settings")
                        .tag("sim")
                        .response::<200, Json<serde_json::Value>>(),
                )
            }),
        )
}

/// Body of `PUT /api/sim/scaling-metric`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScalingMetric {
    /// InstantStart cluster name.
    pub cluster: String,
    pub namespace: String,
    /// The KEDA ScaledObject (named after the Deployment it scales).
    pub scaled_object: String,
    /// The value the simulated Prometheus query returns from now on.
    pub value: f64,
}

async fn set_scaling_metric(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiBody(m, raw): ApiBody<ScalingMetric>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let sim = sim(&state)?;
    let target = instantstart_core::api::clusters::resolve(state.store.as_ref(), &m.cluster)?.kube;
    sim.set_scaling_metric(&target, &m.namespace, &m.scaled_object, m.value).map_err(|e| {
        ApiError::Validation(instantstart_core::validate::ValidationError::unprocessable(
            "scaled_object",
            e.to_string(),
        ))
    })?;
    audit(state.store.as_ref(), principal.actor(), "sim.scaling_metric.set", "sim", raw.clone())?;
    Ok(Json(raw))
}

fn sim(state: &AppState) -> Result<&instantstart_sim::SimCloud, ApiError> {
    state.sim.as_ref().ok_or_else(|| ApiError::NotFound("the provider is not the simulated cloud".into()))
}

async fn stats(State(state): State<AppState>) -> Result<Json<BTreeMap<String, u64>>, ApiError> {
    Ok(Json(sim(&state)?.stats()))
}

/// Body of `GET /api/sim/clock` (benchmarks map simulated times in logs to wall time with it).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct SimClock {
    /// Simulated seconds since the world was created (the time in `sim-log line` log lines).
    pub sim_seconds: f64,
    /// The simulated wall-clock time (creation time plus simulated seconds).
    pub time: chrono::DateTime<chrono::Utc>,
    /// Simulated seconds per wall-clock second.
    pub speed: f64,
}

async fn clock(State(state): State<AppState>) -> Result<Json<SimClock>, ApiError> {
    let sim = sim(&state)?;
    Ok(Json(SimClock { sim_seconds: sim.sim_seconds(), time: sim.sim_time(), speed: sim.speed() }))
}

async fn faults(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    serde_json::to_value(sim(&state)?.faults()).map(Json).map_err(|e| ApiError::Internal(e.to_string()))
}

async fn set_faults(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiBody(raw, _): ApiBody<serde_json::Value>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let sim = sim(&state)?;
    let faults: instantstart_sim::SimFaults = instantstart_core::api::decode(&raw)?;
    sim.set_faults(faults);
    audit(state.store.as_ref(), principal.actor(), "sim.faults.set", "sim", raw)?;
    serde_json::to_value(sim.faults()).map(Json).map_err(|e| ApiError::Internal(e.to_string()))
}
