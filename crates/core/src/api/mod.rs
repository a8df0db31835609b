//! The front door of the domain, one module per noun the faces use: its view types, its reads
//! and its rules. Server handlers extract, call `api::<noun>::<verb>` and map the result; the
//! CLI and the MCP server read the same types through the REST client.
//!
//! Nouns move here one at a time (issue #20); the others still live in `workflow` and
//! `workload`.

pub mod capacity;
pub mod clusters;
pub mod context;
pub mod downloads;
pub mod endpoints;
pub mod error;
pub mod features;
pub mod governance;
pub mod hyperpod;
pub mod instance_groups;
pub mod jobs;
pub mod live;
pub mod metrics;
pub mod nodes;
pub mod pods;
pub mod pools;
pub mod storage;
pub mod submission;
pub mod tracking_servers;
pub mod workloads;

pub use error::ReadError;
