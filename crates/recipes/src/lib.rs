//! # instantstart-recipes — typed Kubernetes manifests
//!
//! Every object InstantStart applies to a cluster is built here, from a typed, validated
//! parameter struct, as a structured JSON value (`serde_json::Value`) — never by filling a
//! text template. Each parameter struct is `serde` (with `deny_unknown_fields`) and
//! `schemars::JsonSchema`, so the REST API, the CLI and the MCP tools share one wire shape,
//! and implements [`instantstart_core::validate::Validate`]: a builder returns every broken
//! rule at once, each with its field path, before it builds anything.
//!
//! | module | builds |
//! | --- | --- |
//! | [`storage`] | the shared S3 bucket as a Mountpoint S3 CSI PersistentVolume + claim, and the helper that mounts it in any PodSpec |
//! | [`volumes`] | FSx for Lustre volumes of the cluster a workload mounts by name (`volumes`), checked against the cluster's volumes |
//! | [`download`] | the Hugging Face → bucket download Job, with a deterministic name |
//! | [`training::hyperpod`] | `HyperPodPyTorchJob` with process-level recovery, log-pattern hang detection and a recovery budget; recipes: PyTorch script, LLaMA-Factory, MS-Swift |
//! | [`training::ray`] | KubeRay `RayJob`; recipe: VERL |
//! | [`render`] | [`WorkloadRenderer`]: requests of the durable workload workflows → objects + ready rules |
//! | [`autoscaling`] | HyperPod managed Karpenter: `HyperpodNodeClass` + `NodePool` (builders shared with the core's feature steps) |
//! | [`inference`] | vLLM / SGLang / custom Deployments; Services ([`inference::service`]); the SGLang router ([`inference::router`]); KEDA autoscaling ([`inference::autoscale`]); the managed `InferenceEndpointConfig` ([`inference::managed`]) |
//!
//! ## Conventions
//!
//! * Objects carry `app.kubernetes.io/managed-by=instantstart` plus `name`, `instance` and
//!   `component` labels ([`common`]); selectors use only labels that never change.
//! * Commands are argv arrays. User text is never interpreted by a shell — with one exception
//!   the RayJob API forces (its entrypoint is a shell string), handled by admitting only
//!   shell-inert words ([`training::ray::shell_inert`]).
//! * Secrets are referenced (`secretKeyRef`), never inlined.
//! * Paths users give are relative to the shared bucket and resolved under its mount path, the
//!   same in every pod.
//! * Images must pin a tag or digest; GPU counts are checked against the instance type table
//!   of `instantstart_core::spec`.
//!
//! ## Why `serde_json::Value` and not `k8s-openapi`
//!
//! `k8s-openapi` must have exactly one Kubernetes-version feature enabled in the whole build,
//! and library crates must not pick it; a library building typed objects would couple every
//! binary of the workspace to that choice. Building `Value`s keeps this crate neutral, covers
//! the custom resources (which `k8s-openapi` lacks anyway) uniformly, and the tests validate
//! every generated object against the upstream Kubernetes 1.35 OpenAPI documents and CRD
//! schemas with unknown fields rejected — the same check the API server's strict field
//! validation applies.

pub mod autoscaling;
pub mod common;
pub mod download;
pub mod inference;
pub mod render;
pub mod storage;
pub mod training;
pub mod volumes;

pub use common::ManifestSet;
pub use render::{TrainingJobRequest, WorkloadRenderer};
