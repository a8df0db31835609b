//! Training history: SageMaker managed MLflow tracking servers, their runs and metric
//! histories (`/api/mlflow/...`), typed with the core's provider types.

use crate::{Call, Client, Error, MutationOptions, Submitted};
use instantstart_core::provider::{MlflowRun, RunMetrics, TrackingServer};
use reqwest::Method;
use serde_json::Value;

impl Client {
    /// `GET /api/mlflow/servers?region=`: tracking servers with status and URL.
    pub async fn mlflow_servers(&self, region: Option<&str>) -> Result<Vec<TrackingServer>, Error> {
        self.all(Call::new(Method::GET, &["api", "mlflow", "servers"]).query("region", region)).await
    }

    /// `POST /api/mlflow/servers`: create a tracking server (`{name, cluster?, region?,
    /// artifact_store_uri?, size?, role_arn?, mlflow_version?}`); operation `create_tracking_server`.
    pub async fn create_mlflow_server(&self, body: &Value, opts: &MutationOptions) -> Result<Submitted, Error> {
        self.submit(Call::new(Method::POST, &["api", "mlflow", "servers"]).body(body).mutation(opts)).await
    }

    /// `DELETE /api/mlflow/servers/{name}?region=`: delete a tracking server and the IAM role
    /// InstantStart created for it; operation `delete_tracking_server`.
    pub async fn delete_mlflow_server(
        &self,
        name: &str,
        region: Option<&str>,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "mlflow", "servers", name];
        let call = Call::new(Method::DELETE, &path).query("region", region);
        self.submit(call.mutation(opts)).await
    }

    /// `GET /api/mlflow/servers/{name}/runs?experiment=&max=&region=`: runs, newest first.
    pub async fn mlflow_runs(
        &self,
        server: &str,
        experiment: Option<&str>,
        max: Option<u32>,
        region: Option<&str>,
    ) -> Result<Vec<MlflowRun>, Error> {
        let path = ["api", "mlflow", "servers", server, "runs"];
        let call =
            Call::new(Method::GET, &path).query("experiment", experiment).query("max", max).query("region", region);
        self.call(call).await
    }

    /// `GET /api/mlflow/servers/{name}/runs/{run_id}/metrics?keys=`: metric histories by key
    /// (default `loss,throughput`), ordered by step.
    pub async fn mlflow_metrics(
        &self,
        server: &str,
        run_id: &str,
        keys: &[String],
        region: Option<&str>,
    ) -> Result<RunMetrics, Error> {
        let path = ["api", "mlflow", "servers", server, "runs", run_id, "metrics"];
        let keys = (!keys.is_empty()).then(|| keys.join(","));
        self.call(Call::new(Method::GET, &path).query("keys", keys).query("region", region)).await
    }
}
