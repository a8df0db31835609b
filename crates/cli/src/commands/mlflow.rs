//! `instantstart mlflow servers|create|delete|runs|metrics`: training history on SageMaker
//! managed MLflow — tracking servers (created and deleted as operations; a delete asks for the
//! server's name unless `--yes`), their runs, and the loss/throughput curves of a run (a
//! sparkline per metric above the table of points; `-o json` gives the raw series).

use crate::app::Globals;
use crate::exit::Exit;
use crate::mutation::{self, MutationArgs, finish};
use crate::output::{self, Table, when};
use clap::Subcommand;
use instantstart_core::provider::{MetricPoint, TrackingServerSize};
use serde_json::{Value, json};
use std::fmt::Write as _;

#[derive(Subcommand, Debug)]
pub enum MlflowCommand {
    /// List the tracking servers of a region with status and MLflow UI URL.
    #[command(visible_alias = "ls")]
    Servers {
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
    },
    /// Create a tracking server (an IAM role for the artifact bucket, then about 20 minutes of
    /// CreateMlflowTrackingServer).
    Create {
        /// Tracking server name.
        name: String,
        /// Cluster it serves: its region, and artifacts in its shared bucket under mlflow/NAME.
        #[arg(short = 'c', long)]
        cluster: Option<String>,
        /// AWS region (without --cluster) [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
        /// s3://bucket/prefix for artifacts (required without --cluster).
        #[arg(long)]
        artifact_store_uri: Option<String>,
        /// Small, Medium or Large [default: Small].
        #[arg(long, value_parser = parse_size)]
        size: Option<TrackingServerSize>,
        /// Existing IAM role SageMaker assumes [default: InstantStart creates NAME-mlflow-role].
        #[arg(long)]
        role_arn: Option<String>,
        /// MLflow version, e.g. 3.0 [default: the service's].
        #[arg(long)]
        mlflow_version: Option<String>,
        #[command(flatten)]
        mutation: MutationArgs,
    },
    /// Delete a tracking server (it bills while it exists), then the IAM role InstantStart
    /// created for it; only servers InstantStart created. Its runs and metrics go with it.
    #[command(visible_alias = "rm")]
    Delete {
        /// Tracking server name.
        name: String,
        /// AWS region [default: the server's default region].
        #[arg(long)]
        region: Option<String>,
        /// Do not ask for confirmation.
        #[arg(short = 'y', long)]
        yes: bool,
        #[command(flatten)]
        mutation: MutationArgs,
    },
    /// List the runs of a tracking server, newest first, with their latest loss and throughput.
    Runs {
        /// Tracking server name.
        server: String,
        /// Only this experiment.
        #[arg(long)]
        experiment: Option<String>,
        /// Most runs [default: 100].
        #[arg(long)]
        max: Option<u32>,
        #[arg(long)]
        region: Option<String>,
    },
    /// Metric histories of a run: a sparkline per metric, then the points by step.
    Metrics {
        /// Tracking server name.
        server: String,
        /// Run id (from `instantstart mlflow runs`).
        run_id: String,
        /// Metric keys, comma-separated [default: loss,throughput].
        #[arg(long, value_delimiter = ',')]
        keys: Vec<String>,
        #[arg(long)]
        region: Option<String>,
    },
}

fn parse_size(s: &str) -> Result<TrackingServerSize, String> {
    TrackingServerSize::parse(s).ok_or_else(|| "must be Small, Medium or Large".into())
}

/// One character per point (at most `width`, evenly sampled), lowest ▁ to highest █.
pub fn sparkline(points: &[MetricPoint], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if points.is_empty() || width == 0 {
        return String::new();
    }
    let n = points.len().min(width);
    let sample: Vec<f64> = (0..n).map(|i| points[i * (points.len() - 1) / (n - 1).max(1)].value).collect();
    let (lo, hi) = sample.iter().fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    sample
        .iter()
        .map(|v| if hi > lo { BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize] } else { BARS[3] })
        .collect()
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 { format!("{v:.1}") } else { format!("{v:.4}") }
}

pub async fn run(g: &Globals, cmd: MlflowCommand) -> anyhow::Result<Exit> {
    if let MlflowCommand::Delete { name, yes, mutation: m, .. } = &cmd {
        let confirmed = mutation::confirm_by_name(
            name,
            *yes,
            m.dry_run,
            &format!("deleting tracking server {name} needs confirmation: pass --yes (or --dry-run to see the plan)"),
            &format!("Delete MLflow tracking server {name}, its runs and the IAM role InstantStart created for it?"),
        )?;
        if !confirmed {
            return Ok(Exit::Usage);
        }
    }
    let client = g.client()?;
    match cmd {
        MlflowCommand::Servers { region } => {
            let servers = client.mlflow_servers(region.as_deref()).await?;
            output::emit(g.output, &servers, || {
                let mut t = Table::new(&["NAME", "STATUS", "SIZE", "REGION", "CREATED", "URL"]);
                for s in &servers {
                    t.row(vec![
                        s.name.clone(),
                        s.status.clone(),
                        s.size.map(|z| z.as_str().to_string()).unwrap_or_else(|| "-".into()),
                        s.region.clone(),
                        s.created_at.as_ref().map(when).unwrap_or_else(|| "-".into()),
                        s.url.clone().unwrap_or_else(|| "-".into()),
                    ]);
                }
                t.render_or(
                    "No tracking servers (create one with `instantstart mlflow create NAME --cluster CLUSTER`).",
                )
            })?;
        }
        MlflowCommand::Create {
            name,
            cluster,
            region,
            artifact_store_uri,
            size,
            role_arn,
            mlflow_version,
            mutation,
        } => {
            let mut body = json!({ "name": name });
            let fields = [
                ("cluster", cluster),
                ("region", region),
                ("artifact_store_uri", artifact_store_uri),
                ("size", size.map(|s| s.as_str().to_string())),
                ("role_arn", role_arn),
                ("mlflow_version", mlflow_version),
            ];
            for (k, v) in fields {
                if let Some(v) = v {
                    body[k] = Value::String(v);
                }
            }
            let submitted = client.create_mlflow_server(&body, &mutation.options()).await?;
            return finish(g, &client, submitted, mutation.wait).await;
        }
        MlflowCommand::Delete { name, region, mutation, .. } => {
            let submitted = client.delete_mlflow_server(&name, region.as_deref(), &mutation.options()).await?;
            return finish(g, &client, submitted, mutation.wait).await;
        }
        MlflowCommand::Runs { server, experiment, max, region } => {
            let runs = client.mlflow_runs(&server, experiment.as_deref(), max, region.as_deref()).await?;
            output::emit(g.output, &runs, || {
                let mut t = Table::new(&["RUN ID", "NAME", "EXPERIMENT", "STATUS", "STARTED", "LOSS", "THROUGHPUT"]);
                for r in &runs {
                    let metric = |k: &str| r.metrics.get(k).map(|v| num(*v)).unwrap_or_else(|| "-".into());
                    t.row(vec![
                        r.run_id.clone(),
                        r.name.clone(),
                        r.experiment.clone(),
                        r.status.clone(),
                        r.start_time.as_ref().map(when).unwrap_or_else(|| "-".into()),
                        metric("loss"),
                        metric("throughput"),
                    ]);
                }
                t.render_or(&format!("No runs on {server} yet (jobs report to it when submitted with its ARN)."))
            })?;
        }
        MlflowCommand::Metrics { server, run_id, keys, region } => {
            let metrics = client.mlflow_metrics(&server, &run_id, &keys, region.as_deref()).await?;
            output::emit(g.output, &metrics, || {
                let mut out = String::new();
                for (key, points) in &metrics.series {
                    match (points.first(), points.last()) {
                        (Some(first), Some(last)) => {
                            let _ = writeln!(
                                out,
                                "{key:<12} {}  {} → {} over steps {}-{} ({} points)",
                                sparkline(points, 48),
                                num(first.value),
                                num(last.value),
                                first.step,
                                last.step,
                                points.len()
                            );
                        }
                        _ => {
                            let _ = writeln!(out, "{key:<12} (not logged)");
                        }
                    }
                }
                let keys: Vec<&String> = metrics.series.keys().collect();
                let mut steps: Vec<i64> = metrics.series.values().flatten().map(|p| p.step).collect();
                steps.sort_unstable();
                steps.dedup();
                // A table of points: STEP, then one column per metric.
                let _ = write!(out, "\n{:>8}", "STEP");
                for k in &keys {
                    let _ = write!(out, "  {:>14}", k.to_uppercase());
                }
                out.push('\n');
                for step in steps {
                    let _ = write!(out, "{step:>8}");
                    for k in &keys {
                        let v = metrics.series[*k].iter().find(|p| p.step == step).map(|p| num(p.value));
                        let _ = write!(out, "  {:>14}", v.unwrap_or_else(|| "-".into()));
                    }
                    out.push('\n');
                }
                out
            })?;
        }
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(values: &[f64]) -> Vec<MetricPoint> {
        values.iter().enumerate().map(|(i, v)| MetricPoint { step: i as i64, value: *v, timestamp: 0 }).collect()
    }

    #[test]
    fn sparklines_scale_between_the_extremes_and_sample_long_series() {
        assert_eq!(sparkline(&pts(&[3.0, 2.0, 1.0, 0.0]), 10), "█▆▃▁");
        assert_eq!(sparkline(&pts(&[1.0, 1.0]), 10), "▄▄");
        assert_eq!(sparkline(&pts(&(0..100).map(f64::from).collect::<Vec<_>>()), 8).chars().count(), 8);
        assert_eq!(sparkline(&[], 8), "");
    }
}
