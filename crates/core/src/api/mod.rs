//! The front door of the domain, one module per noun the faces use: its view types, its reads
//! and its rules. Server handlers extract, call `api::<noun>::<verb>` and map the result; the
//! CLI and the MCP server read the same types through the REST client.
//!
//! Every noun the REST API serves has its module here; workflows keep their step graphs and
//! executors below. [`decode`] turns a request body into its typed request, a shape error
//! naming the field path: the server's body extractor and the simulator's fault bodies use it.

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
pub mod session;
pub mod storage;
pub mod submission;
pub mod tracking_servers;
pub mod workloads;

pub use crate::workflow::decode;
pub use error::ReadError;
