//! `MetricsSource` for [`SimCloud`]: reads the telemetry [`crate::metrics`] derives from the world.

use super::*;
use crate::cloud::SimCloud;
use async_trait::async_trait;

#[async_trait]
impl MetricsSource for SimCloud {
    fn origin(&self) -> &'static str {
        "simulated"
    }

    async fn node_metrics(&self, target: &KubeTarget, node: &str, window: &MetricsWindow) -> Result<SeriesSet> {
        self.read(METRICS_API, |w, cx| node_series(w, target, node, window, cx.now))
    }

    async fn job_metrics(
        &self,
        target: &KubeTarget,
        namespace: &str,
        job: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet> {
        self.read(METRICS_API, |w, cx| job_series(w, target, namespace, job, window, cx.now))
    }
}
