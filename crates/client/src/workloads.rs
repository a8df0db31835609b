//! Workloads on a cluster: shared storage (and its FSx for Lustre volumes), model downloads, training jobs (with their logs),
//! inference endpoints and model pools.
//!
//! Request bodies are JSON as the API takes them (`recipes::download::ModelDownloadParams`,
//! `{"runtime": "hyperpod"|"ray", …}` job requests, `{"route": "self_managed"|"managed", …}`
//! endpoint requests): the client does not depend on the recipes crate, the CLI and the MCP
//! server build the bodies from its typed parameters. Reads return the core's read models
//! (`instantstart_core::workload::*`), the types the server answers with.

use crate::logs::{LogSource, LogStream, ReconnectPolicy, ResumingLogStream};
use crate::{Call, Client, Error, MutationOptions, Submitted};
use instantstart_core::workload::{
    DownloadSummary, EndpointDetail, EndpointSummary, JobDetail, JobSummary, PodLogs, PoolSummary, StorageListing,
    StorageSummary,
};
use reqwest::Method;
use serde_json::Value;

impl Client {
    // ----- storage and downloads -----

    /// `GET /api/clusters/{cluster}/storage`: the cluster's storage, the shared bucket (`kind:
    /// s3`, `{name, bucket, mount_path, claim, status, entries: [{key, kind, size_bytes?}]}`)
    /// and its FSx for Lustre volumes (`kind: fsx_lustre`, with `file_system`).
    pub async fn list_storage(&self, cluster: &str) -> Result<Vec<StorageSummary>, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "storage"])).await
    }

    /// `POST /api/clusters/{cluster}/storage/fsx`: create an FSx for Lustre volume (body:
    /// `FileSystemBody`, `{name, deployment_type?, storage_capacity_gib?,
    /// per_unit_storage_throughput?}`); operation `create_file_system`.
    pub async fn create_file_system(
        &self,
        cluster: &str,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "storage", "fsx"];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `DELETE /api/clusters/{cluster}/storage/fsx/{name}`: delete an FSx volume's claim,
    /// volume and file system (its data goes with it); operation `delete_file_system`.
    pub async fn delete_file_system(
        &self,
        cluster: &str,
        name: &str,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "storage", "fsx", name];
        self.submit(Call::new(Method::DELETE, &path).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/storage/objects?prefix=&cursor=`: one page of one level of
    /// the shared bucket under `prefix` (`{prefix, entries: [{key, kind: prefix|object,
    /// size_bytes?}], next_cursor?}`), from `cursor` (a previous page's `next_cursor`).
    pub async fn list_storage_objects(
        &self,
        cluster: &str,
        prefix: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<StorageListing, Error> {
        let path = ["api", "clusters", cluster, "storage", "objects"];
        self.call(Call::new(Method::GET, &path).query("prefix", prefix).query("cursor", cursor)).await
    }

    /// Every entry of one level of the shared bucket under `prefix`: the pages of
    /// [`Client::list_storage_objects`] followed to the end, in one listing without a cursor.
    pub async fn list_all_storage_objects(&self, cluster: &str, prefix: &str) -> Result<StorageListing, Error> {
        let mut all = self.list_storage_objects(cluster, Some(prefix), None).await?;
        while let Some(cursor) = all.next_cursor.take() {
            let page = self.list_storage_objects(cluster, Some(prefix), Some(&cursor)).await?;
            all.entries.extend(page.entries);
            all.next_cursor = page.next_cursor;
        }
        Ok(all)
    }

    /// `POST /api/clusters/{cluster}/downloads`: copy a Hugging Face repository into the shared
    /// bucket with a cluster Job (body: `ModelDownloadParams`). The accepted response names the
    /// real Job in `workload`.
    pub async fn download_model(
        &self,
        cluster: &str,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "downloads"];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/downloads`: model download Jobs with their phase.
    pub async fn list_downloads(&self, cluster: &str) -> Result<Vec<DownloadSummary>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters", cluster, "downloads"])).await
    }

    /// `DELETE /api/clusters/{cluster}/downloads/{download}`: delete a model download's Job and
    /// pods (a running download stops); the files it downloaded stay in the bucket.
    pub async fn delete_download(
        &self,
        cluster: &str,
        download: &str,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "downloads", download];
        self.submit(Call::new(Method::DELETE, &path).mutation(opts)).await
    }

    // ----- training jobs -----

    /// `POST /api/clusters/{cluster}/jobs`: submit a training job (`{"runtime": "hyperpod", …
    /// HyperPodJobParams}` or `{"runtime": "ray", … RayJobParams}`). A dry run shows the
    /// rendered manifests in the plan's request.
    pub async fn submit_job(&self, cluster: &str, body: &Value, opts: &MutationOptions) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "jobs"];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/jobs`: job summaries (phase, pods, recovery budget).
    pub async fn list_jobs(&self, cluster: &str) -> Result<Vec<JobSummary>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters", cluster, "jobs"])).await
    }

    /// `GET /api/clusters/{cluster}/jobs/{job}`: one job with pods, conditions, events, the
    /// recovery budget and the applied manifest.
    pub async fn get_job(&self, cluster: &str, job: &str) -> Result<JobDetail, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "jobs", job])).await
    }

    /// `DELETE /api/clusters/{cluster}/jobs/{job}`: delete the job's objects.
    pub async fn delete_job(&self, cluster: &str, job: &str, opts: &MutationOptions) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "jobs", job];
        self.submit(Call::new(Method::DELETE, &path).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/jobs/{job}/logs?pod=&tail=`: the last lines of one pod
    /// (rank 0 by default) as `{pod, lines: [..]}`.
    pub async fn job_logs(
        &self,
        cluster: &str,
        job: &str,
        pod: Option<&str>,
        tail: Option<u32>,
    ) -> Result<PodLogs, Error> {
        let path = ["api", "clusters", cluster, "jobs", job, "logs"];
        self.call(Call::new(Method::GET, &path).query("pod", pod).query("tail", tail)).await
    }

    /// WebSocket `GET /api/clusters/{cluster}/jobs/{job}/logs/stream?pod=&tail=`: the last
    /// `tail` lines, then every new line until the job's pods end (see [`LogStream`]).
    pub async fn follow_job_logs(
        &self,
        cluster: &str,
        job: &str,
        pod: Option<&str>,
        tail: Option<u32>,
    ) -> Result<LogStream, Error> {
        let mut query = vec![];
        if let Some(p) = pod {
            query.push(("pod", p.to_string()));
        }
        if let Some(t) = tail {
            query.push(("tail", t.to_string()));
        }
        let url = self.url(&["api", "clusters", cluster, "jobs", job, "logs", "stream"], &query);
        LogStream::open(self, url).await
    }

    /// [`Client::follow_job_logs`] that reconnects when the connection drops, without yielding a
    /// line twice (see [`ResumingLogStream`]). The first connection's errors are returned as
    /// they are (an unknown job is a 404, not a retry).
    pub async fn follow_job_logs_resuming(
        &self,
        cluster: &str,
        job: &str,
        pod: Option<&str>,
        tail: Option<u32>,
        policy: ReconnectPolicy,
    ) -> Result<ResumingLogStream, Error> {
        let stream = self.follow_job_logs(cluster, job, pod, tail).await?;
        let source =
            LogSource { client: self.clone(), cluster: cluster.into(), job: job.into(), pod: pod.map(str::to_string) };
        Ok(ResumingLogStream::new(source, stream, policy))
    }

    // ----- inference endpoints -----

    /// `POST /api/clusters/{cluster}/endpoints`: deploy an endpoint (`{"route":
    /// "self_managed", …}` or `{"route": "managed", …}`); the operation completes when it is
    /// ready.
    pub async fn deploy_endpoint(
        &self,
        cluster: &str,
        body: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "endpoints"];
        self.submit(Call::new(Method::POST, &path).body(body).mutation(opts)).await
    }

    /// `GET /api/clusters/{cluster}/endpoints`: endpoints with readiness, replicas, URL and pool.
    pub async fn list_endpoints(&self, cluster: &str) -> Result<Vec<EndpointSummary>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters", cluster, "endpoints"])).await
    }

    /// `GET /api/clusters/{cluster}/endpoints/{ep}`: one endpoint with pods, conditions and
    /// the applied manifest.
    pub async fn get_endpoint(&self, cluster: &str, endpoint: &str) -> Result<EndpointDetail, Error> {
        self.call(Call::new(Method::GET, &["api", "clusters", cluster, "endpoints", endpoint])).await
    }

    /// `PATCH /api/clusters/{cluster}/endpoints/{ep}` with `{replicas?, autoscaling?}` (explicit
    /// diff: only what changes); a patch matching the real state is [`Submitted::NoChange`].
    pub async fn update_endpoint(
        &self,
        cluster: &str,
        endpoint: &str,
        patch: &Value,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "endpoints", endpoint];
        self.submit(Call::new(Method::PATCH, &path).body(patch).mutation(opts)).await
    }

    /// `DELETE /api/clusters/{cluster}/endpoints/{ep}`: delete every object of the endpoint.
    pub async fn delete_endpoint(
        &self,
        cluster: &str,
        endpoint: &str,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let path = ["api", "clusters", cluster, "endpoints", endpoint];
        self.submit(Call::new(Method::DELETE, &path).mutation(opts)).await
    }

    /// `POST /api/clusters/{cluster}/endpoints/{ep}/chat`: an OpenAI chat-completions request
    /// answered by the model, through the control plane (60 s timeout, 1 MiB request, 4 MiB
    /// response).
    pub async fn chat_endpoint(&self, cluster: &str, endpoint: &str, request: &Value) -> Result<Value, Error> {
        let path = ["api", "clusters", cluster, "endpoints", endpoint, "chat"];
        self.call(Call::new(Method::POST, &path).body(request)).await
    }

    // ----- model pools -----

    /// `GET /api/clusters/{cluster}/pools`: each pool's warm workers and what they serve.
    pub async fn list_pools(&self, cluster: &str) -> Result<Vec<PoolSummary>, Error> {
        self.all(Call::new(Method::GET, &["api", "clusters", cluster, "pools"])).await
    }

    /// `PUT /api/clusters/{cluster}/pools/{pool}/workers/{pod}` with `{"serving": endpoint|null}`:
    /// move a warm worker to an endpoint (or release it) by relabelling it, without a restart.
    pub async fn assign_pool_worker(
        &self,
        cluster: &str,
        pool: &str,
        pod: &str,
        serving: Option<&str>,
        opts: &MutationOptions,
    ) -> Result<Submitted, Error> {
        let body = serde_json::json!({ "serving": serving });
        let path = ["api", "clusters", cluster, "pools", pool, "workers", pod];
        self.submit(Call::new(Method::PUT, &path).body(&body).mutation(opts)).await
    }
}
