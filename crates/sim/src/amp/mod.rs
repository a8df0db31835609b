//! Simulated Amazon Managed Service for Prometheus (AMP): the workspaces HyperPod's
//! observability add-on writes to.
//!
//! Rules, from the AMP API reference
//! (<https://docs.aws.amazon.com/prometheus/latest/APIReference/API_CreateWorkspace.html>,
//! `API_DeleteWorkspace.html`, `API_ListWorkspaces.html`, `API_WorkspaceStatus.html`):
//! - `alias` is 1-100 characters and is not unique: any number of workspaces may share one
//!   (ListWorkspaces filters by alias prefix).
//! - `clientToken` makes CreateWorkspace idempotent: the same token returns the workspace it
//!   created, whatever else the request says.
//! - A workspace is `CREATING` for [`timings::AMP_WORKSPACE_CREATE`], then `ACTIVE`; the "resource
//!   fails" fault makes it `CREATION_FAILED`. DeleteWorkspace makes it `DELETING` for
//!   [`timings::AMP_WORKSPACE_DELETE`], then it is gone. A workspace being created cannot be
//!   deleted yet (`ConflictException`, "the request would cause an inconsistent state"; retryable).
//!
//! The query API ([`http`]: `query_range` on loopback, signed for `aps`) answers PromQL
//! ([`query`]) over the simulated DCGM telemetry of the cluster whose add-on writes to the
//! workspace.
//!
//! The observability add-on's side (its collector needs the workspace `ACTIVE`, and its Pod
//! Identity) is in `eks.rs` ([`workspace_problem`] is used there).

mod api;
mod http;
mod query;

pub use http::AmpQueryServer;

use crate::base::Lifecycle;
use crate::timings;
use crate::world::{WorkspaceRec, World};
use instantstart_core::provider::{
    AmpApi, CreatePrometheusWorkspace, PrometheusWorkspace, ProviderError, ProviderErrorKind, Result,
};

fn view(r: &WorkspaceRec, now: f64, described: bool) -> PrometheusWorkspace {
    PrometheusWorkspace {
        id: r.id.clone(),
        arn: r.arn.clone(),
        alias: Some(r.alias.clone()),
        status: r.status(now).unwrap_or("DELETING").to_string(),
        prometheus_endpoint: described
            .then(|| format!("https://aps-workspaces.{}.amazonaws.com/workspaces/{}/", r.region, r.id)),
        tags: r.tags.clone(),
    }
}

fn invalid(api: &str, message: String) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

fn create(
    w: &mut World,
    req: &CreatePrometheusWorkspace,
    now: f64,
    fails: Option<&str>,
) -> Result<PrometheusWorkspace> {
    const API: &str = "aps:CreateWorkspace";
    if let Some(r) = w.prometheus_workspaces.values().find(|r| r.client_token == req.client_token) {
        return Ok(view(r, now, false));
    }
    if req.alias.is_empty() || req.alias.chars().count() > 100 {
        return Err(invalid(
            API,
            format!("ValidationException: alias must be 1-100 characters (got {})", req.alias.chars().count()),
        ));
    }
    if req.client_token.is_empty()
        || req.client_token.len() > 64
        || !req.client_token.chars().all(|c| c.is_ascii_graphic())
    {
        return Err(invalid(API, "ValidationException: clientToken must be 1-64 printable ASCII characters".into()));
    }
    let id = format!(
        "ws-{}-{}-{}-{}-{}",
        w.hex(8, false),
        w.hex(4, false),
        w.hex(4, false),
        w.hex(4, false),
        w.hex(12, false)
    );
    let mut life = Lifecycle::new(now, timings::AMP_WORKSPACE_CREATE);
    if let Some(reason) = fails {
        life.fail_after(timings::AMP_WORKSPACE_CREATE * timings::FAILURE_SHARE, reason);
    }
    let rec = WorkspaceRec {
        arn: format!("arn:aws:aps:{}:{}:workspace/{id}", req.region, w.account),
        id: id.clone(),
        region: req.region.clone(),
        alias: req.alias.clone(),
        client_token: req.client_token.clone(),
        tags: req.tags.clone(),
        life,
    };
    w.prometheus_workspaces.insert(id, rec.clone());
    Ok(view(&rec, now, false))
}

fn delete(w: &mut World, region: &str, id: &str, now: f64) -> Result<()> {
    const API: &str = "aps:DeleteWorkspace";
    let not_found =
        || ProviderError::not_found(API, format!("ResourceNotFoundException: Workspace {id} does not exist"));
    let rec = w.prometheus_workspaces.get_mut(id).filter(|r| r.region == region).ok_or_else(not_found)?;
    match rec.status(now).ok_or_else(not_found)? {
        "DELETING" => return Ok(()),
        "CREATING" => {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::Conflict,
                format!("ConflictException: workspace {id} is CREATING; the request would cause an inconsistent state"),
            ));
        }
        _ => {}
    }
    rec.life.start_deleting(now, timings::AMP_WORKSPACE_DELETE);
    Ok(())
}

/// Why the observability collector cannot write to the workspace `arn` names, or `None` when
/// it can (the workspace exists and is `ACTIVE`).
pub(crate) fn workspace_problem(w: &World, arn: &str, now: f64) -> Option<String> {
    match w.prometheus_workspaces.values().find(|r| r.arn == arn).and_then(|r| r.status(now)) {
        Some("ACTIVE") => None,
        Some(status) => Some(format!("the Prometheus workspace {arn} is {status}")),
        None => Some(format!("the Prometheus workspace {arn} does not exist")),
    }
}
