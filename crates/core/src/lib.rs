//! InstantStart core: the pure domain of the control plane.
//!
//! This crate knows what a cluster, an instance group, a managed feature and an operation are,
//! which requests are valid, how to plan compute subnets and explicit diffs, and how to drive a
//! multi-step operation durably. It performs no I/O of its own: the cloud is reached through the
//! provider traits in [`provider`], state is persisted through the [`store::Store`] trait, and
//! both are implemented in other crates (`instantstart-aws`, `instantstart-k8s`,
//! `instantstart-sim`, `instantstart-store`).
//!
//! Async convention: provider and step traits use `#[async_trait]` so that they are
//! object-safe (`Arc<dyn AwsCloud>`); every future they return is `Send`. The store trait is
//! synchronous: each call is one short local transaction.

pub mod addon_schema;
pub mod amp_metrics;
pub mod api;
pub mod credentials;
pub mod diff;
pub mod engine;
pub mod governance;
pub mod instance_types;
pub mod kube_access;
pub mod labels;
pub mod lifecycle;
pub mod log_lines;
pub mod metrics_choice;
pub mod names;
pub mod operation;
pub mod page;
pub mod preflight;
pub mod prometheus_text;
pub mod provider;
pub mod spec;
pub mod store;
pub mod subnet;
pub mod validate;
pub mod workflow;
pub mod workload;

pub use validate::{Finding, ValidationError};
