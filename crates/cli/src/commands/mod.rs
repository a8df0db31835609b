//! One module per API noun. Each exports its clap subcommand (or args) type and a `run`
//! function taking the global flags; adding a noun is one module plus one line in `main.rs`.

pub mod agent;
pub mod audit;
pub mod cluster;
pub mod completions;
pub mod context;
pub mod endpoint;
pub mod feature;
pub mod governance;
pub mod hyperpod;
pub mod instance_group;
pub mod job;
pub mod login;
pub mod metrics;
pub mod mlflow;
pub mod model;
pub mod node;
pub mod operation;
pub mod pool;
pub mod sim;
pub mod storage;
pub mod target;
pub mod token;
pub mod workload;
