//! SageMaker managed MLflow tracking servers as the world persists them (the service is
//! `crate::mlflow`).

use crate::base::{Lifecycle, Phase};
use crate::timings;
use instantstart_core::provider::{Tags, TrackingServerSize};
use serde::{Deserialize, Serialize};

/// A simulated tracking server, by `region/name` in the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrackingServerRec {
    pub name: String,
    pub region: String,
    pub arn: String,
    pub artifact_store_uri: String,
    pub size: TrackingServerSize,
    pub role_arn: String,
    pub mlflow_version: String,
    pub tags: Tags,
    pub life: Lifecycle,
    /// Set by a deletion given the "resource fails" fault: it stops half-way in `DeleteFailed`.
    #[serde(default)]
    pub delete_failure: Option<String>,
}

impl TrackingServerRec {
    /// SageMaker's `TrackingServerStatus` and failure reason at `now`; `None` once it is gone.
    pub(crate) fn status(&self, now: f64) -> Option<(&'static str, Option<String>)> {
        if let (Some(d), Some(reason)) = (&self.life.deleting, &self.delete_failure)
            && now >= d.since + d.takes * timings::FAILURE_SHARE
        {
            return Some(("DeleteFailed", Some(reason.clone())));
        }
        Some(match self.life.phase(now) {
            Phase::Creating => ("Creating", None),
            Phase::Active => ("Created", None),
            Phase::Failed(reason) => ("CreateFailed", Some(reason)),
            Phase::Deleting => ("Deleting", None),
            Phase::Gone => return None,
        })
    }

    /// Whether the server still exists at `now` (`DeleteFailed` included).
    pub(crate) fn exists(&self, now: f64) -> bool {
        self.status(now).is_some()
    }
}
