//! `instantstart-mcp`: the agent face of InstantStart, an MCP server over stdio.
//!
//! Every tool is one call of the control plane's own REST API through
//! [`instantstart_client::Client`] (face `agent`), never the AWS SDK or the providers, so every
//! validation the browser gets, the agent gets too (ARCHITECTURE.md, invariant 7).
//!
//! - [`server`]: the tool surface (one tool per action, explicit MCP hints on every tool).
//! - [`args`]: the documented arguments of each tool (JSON schemas via schemars).
//! - [`confirm`]: destructive tools act only on a second call carrying the confirmation token
//!   the first call answered with its plan.
//! - [`untrusted`]: workload text (logs, model output, Kubernetes events) in results is wrapped
//!   as untrusted data with a one-line notice.
//! - [`render`]: results — mutations name their status tool; domain errors are tool results
//!   with `isError` and the server's findings (field path + rule).
//!
//! The binary resolves the server URL (`--url`, `INSTANTSTART_URL`, the CLI's config file,
//! default `http://127.0.0.1:3099`) and the token (`INSTANTSTART_TOKEN`, else the token the
//! CLI's config file holds for that URL) with [`instantstart_client::config`].

pub mod args;
pub mod confirm;
pub mod render;
pub mod server;
pub mod untrusted;

pub use server::InstantStartMcp;
