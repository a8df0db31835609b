//! `instantstart metrics node|job`: GPU utilization, GPU memory and training throughput over
//! time. `node NODE` shows every GPU of a Kubernetes Node (as `node capacity` names it); `job
//! NAME` the mean over a training job's GPUs with its throughput and loss. One line per series:
//! a sparkline of the window, then the lowest, highest and latest value; `-o json` gives the
//! raw series (`[unix seconds, value]` points).

use super::target::ClusterOpt;
use crate::app::Globals;
use crate::exit::Exit;
use crate::output::{self, Table};
use clap::{Args, Subcommand};
use instantstart_core::api::metrics::{MetricsQuery, MetricsView};
use instantstart_core::provider::{MetricPoint, MetricSeries};

#[derive(Subcommand, Debug)]
pub enum MetricsCommand {
    /// Per-GPU utilization and memory of a node (DCGM).
    Node {
        /// Kubernetes Node name (`instantstart node capacity` lists them).
        node: String,
        #[command(flatten)]
        cluster: ClusterOpt,
        #[command(flatten)]
        window: WindowArgs,
    },
    /// A training job's mean GPU utilization and memory, throughput and loss.
    Job {
        /// Job name.
        name: String,
        #[command(flatten)]
        cluster: ClusterOpt,
        /// The job's namespace (when several namespaces have a job of that name).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        #[command(flatten)]
        window: WindowArgs,
    },
}

#[derive(Args, Debug)]
pub struct WindowArgs {
    /// Seconds back from now, 60-86400 [default: 900].
    #[arg(long, value_name = "SECONDS")]
    pub since: Option<u32>,
    /// Seconds between points [default: about 90 points over the window].
    #[arg(long, value_name = "SECONDS")]
    pub step: Option<u32>,
}

/// A value with its unit, short.
fn value(v: f64, unit: &str) -> String {
    match unit {
        "percent" => format!("{v:.0}%"),
        "MiB" if v >= 1024.0 => format!("{:.1} GiB", v / 1024.0),
        "MiB" => format!("{v:.0} MiB"),
        "" => format!("{v:.4}"),
        u => format!("{v:.1} {u}"),
    }
}

/// The table of a view: one row per series with its sparkline.
pub fn render(v: &MetricsView) -> String {
    let what = match (&v.node, &v.job) {
        (Some(n), _) => format!("node {n}"),
        (_, Some(j)) => format!("job {}/{j}", v.namespace.as_deref().unwrap_or("default")),
        _ => "-".into(),
    };
    let mut out = format!(
        "{what} on {} ({}): {} to {}, a point every {} s\n\n",
        v.cluster,
        v.origin,
        v.start.format("%H:%M:%S"),
        v.end.format("%H:%M:%S"),
        v.step_seconds
    );
    let mut t = Table::new(&["METRIC", "GPU", "SOURCE", "POINTS", "TREND", "MIN", "MAX", "LATEST"]);
    for s in &v.series {
        t.row(row(s));
    }
    out += &t.render_or("No series: the node has no NVIDIA GPU, or the job has no pods yet.");
    out
}

fn row(s: &MetricSeries) -> Vec<String> {
    let pts: Vec<MetricPoint> =
        s.points.iter().enumerate().map(|(i, p)| MetricPoint { step: i as i64, value: p[1], timestamp: 0 }).collect();
    let (lo, hi) = s.points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(p[1]), hi.max(p[1])));
    let some = |x: f64| if s.points.is_empty() { "-".to_string() } else { value(x, &s.unit) };
    vec![
        s.metric.as_str().into(),
        s.gpu.map_or_else(|| "mean".into(), |g| g.to_string()),
        s.source.clone(),
        s.points.len().to_string(),
        super::mlflow::sparkline(&pts, 32),
        some(lo),
        some(hi),
        s.latest().map_or_else(|| "-".into(), |l| value(l, &s.unit)),
    ]
}

pub async fn run(g: &Globals, cmd: MetricsCommand) -> anyhow::Result<Exit> {
    let client = g.client()?;
    let (cluster, query) = match cmd {
        MetricsCommand::Node { node, cluster, window } => (
            cluster.resolve(&client).await?,
            MetricsQuery { node: Some(node), since: window.since, step: window.step, ..Default::default() },
        ),
        MetricsCommand::Job { name, cluster, namespace, window } => (
            cluster.resolve(&client).await?,
            MetricsQuery { job: Some(name), namespace, since: window.since, step: window.step, ..Default::default() },
        ),
    };
    let view = client.metrics(&cluster, &query).await?;
    output::emit(g.output, &view, || render(&view))?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carry_their_unit() {
        let table = [
            (93.4, "percent", "93%"),
            (20480.0, "MiB", "20.0 GiB"),
            (512.0, "MiB", "512 MiB"),
            (9123.45, "tokens/s", "9123.5 tokens/s"),
            (1.23456, "", "1.2346"),
        ];
        for (v, unit, want) in table {
            assert_eq!(value(v, unit), want);
        }
    }
}
