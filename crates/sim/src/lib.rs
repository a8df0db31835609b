//! A simulated AWS + Kubernetes world implementing InstantStart's provider traits.
//!
//! [`SimCloud`] implements every AWS trait of `instantstart_core::provider` (so it is an
//! [`AwsCloud`](instantstart_core::provider::AwsCloud)) and
//! [`KubeApi`](instantstart_core::provider::KubeApi). It is the embedded default provider that lets
//! a newcomer run the whole product without an AWS account, and the bed for end-to-end tests and
//! benchmarks.
//!
//! # Time
//! Resources follow realistic state machines driven by simulated time: wall-clock time multiplied
//! by [`SimConfig::speed`] (1.0 = real AWS timings, 60 for demos, 1000+ for tests), plus any
//! explicit [`SimCloud::advance`]. Creation times are stored; states are computed on every read.
//! See [`timings`] for the durations at speed 1.
//!
//! # Persistence
//! With [`SimConfig::state_file`] the world (resources, Kubernetes objects, call counters, the
//! clock and the random state) is saved as JSON after every mutation (write a temporary file,
//! then rename) and loaded on start, so a restarted server continues the same simulated account.
//! Time keeps running while the process is down, as it does in AWS. Within one process, every
//! [`SimCloud`] created for the same state file shares one live world (a "restarted" control
//! plane finds the account as the calls of its predecessor left it, in-flight ones included);
//! two processes must not share a state file. Separate processes share a world through a
//! [`WorldStore`] ([`SimConfig::world_store`]: [`PostgresWorldStore`] for replicas on one
//! database, [`MemoryWorldStore`] in tests): every call locks the stored world, and the clock
//! is one for all (see [`cloud`], "Shared worlds").
//!
//! # Faults and counters
//! [`SimFaults`] injects throttling, transient 5xx errors and per-API failure modes
//! ([`FaultMode`]). [`SimCloud::stats`] counts the calls that reached the simulated service by
//! their real API name (`eks:CreateCluster`, `k8s:Apply`, …) and [`SimCloud::injected_faults`]
//! the injected failures, so "exactly one create per resource" holds even under fault injection.
//! Counters persist with the world. See [`faults`] for the list of names.
//!
//! # Seeding
//! [`SimCloud::add_training_plan`], [`SimCloud::set_quota`], [`SimCloud::seed_network`],
//! [`SimCloud::seed_eks_cluster`], [`SimCloud::seed_bucket`] and [`SimCloud::seed_role`] prepare
//! the account (reserved capacity, quota increases, pre-existing resources for the "existing VPC"
//! and import paths, a role left without its policies by an interrupted create) without counting
//! calls; [`SimCloud::role_policies`] shows what a role holds.
//!
//! # Layers
//! Read bottom-up; a module imports only from its layer or below and the import graph has no
//! cycle (a tidy check; the table is in `docs/code-map.md`): `base` and the static facts →
//! `world` (the persisted records, and nothing that acts on them) → rules and controllers
//! (functions over the world: `network`, `eks`, `hyperpod`, `kube`, … without their `api`
//! submodules) → [`cloud`] (the call pipeline and the tick that runs the controllers in a fixed
//! order) → the trait implementations (each service's `api` submodule, `iam`, `s3`, `identity`,
//! `quota`, `governance`, `mlflow`, `kube::apiserver`).
//!
//! # Modules
//! - `base`: lifecycles, regional keys and stable hashing (used by every layer).
//! - [`cloud`]: [`SimCloud`] itself: configuration, the call pipeline, persistence, seeding.
//! - [`faults`]: fault injection.
//! - [`timings`]: the simulated durations.
//! - `catalog`: regions, Availability Zones, instance type offerings, quotas, add-on versions;
//!   `identity` and `quota` serve them as `IdentityApi` and `QuotaApi`.
//! - `world`: the persisted state (`World` and every record it holds) and its garbage collection.
//! - [`world_store`]: where a world shared by several processes lives.
//! - `network`, `eks`, `iam`, `s3`, `hyperpod`: the AWS services (rules in the module, the trait
//!   implementation in its `api` submodule); `software_update`:
//!   HyperPod's platform software updates (releases, rolling batches, refusals).
//! - `fsx`: FSx for Lustre file systems (and when pods may mount them).
//! - `amp`: Amazon Managed Service for Prometheus workspaces (HyperPod observability writes there).
//! - `mlflow`: SageMaker managed MLflow tracking servers; runs and metrics derived from the
//!   simulated training jobs ([`training_curve`], the curve their logs print too).
//! - [`metrics`]: GPU telemetry and training throughput over time for every node and job.
//! - `kube`: the Kubernetes world (objects, workloads, pods, nodes, logs), and
//!   [`kube_apiserver`]: the same worlds served over HTTP as Kubernetes API servers
//!   ([`SimCloud::serve_kube_api`], [`SimCloud::kube_api_router`]) for kube-rs and kubectl.

mod amp;
mod base;
mod capacity;
mod catalog;
pub mod cloud;
pub mod ec2_specs;
mod eks;
pub mod faults;
mod fsx;
mod governance;
mod hyperpod;
mod hyperpod_events;
mod iam;
mod identity;
mod kube;
pub mod metrics;
mod mlflow;
mod network;
mod policy;
mod quota;
mod s3;
mod software_update;
pub mod timings;
mod world;
pub mod world_store;

#[cfg(test)]
mod tests;

pub use amp::AmpQueryServer;
pub use cloud::{SharedWorld, SimCloud, SimConfig, SimError};
pub use faults::{FaultMode, ProcessFault, SimFaults};
pub use iam::RolePolicies;
pub use kube::apiserver as kube_apiserver;
pub use kube::apiserver::KubeApiServer;
pub use kube::{DURATION_ANNOTATION, DURATION_ENV, KubeAuditEvent};
pub use kube::{LOG_RATE_ANNOTATION, LOG_RATE_ENV, MAX_LOG_RATE, parse_rate_line, rate_line};
pub use kube::{PROCESS_FAULT_API, TRAINING_STEP_SECONDS, parse_training_log_line, training_curve, training_log_line};
pub use world_store::{MemoryWorldStore, PostgresWorldStore, WorldStore, WorldStoreError};
