//! Following an operation to a terminal status with a progress display on stderr.
//!
//! On a terminal: one live line per step (phase, elapsed time, and an ETA from the step's
//! `expected_secs` divided by the simulated cloud's speed when the provider is `sim`). Elsewhere
//! (pipes, CI, agents): one plain line per phase change. The result goes to stdout.

use crate::exit::Interrupted;
use crate::output::{between, secs};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use instantstart_client::{Client, FollowOptions};
use instantstart_core::api::context::ProviderKind;
use instantstart_core::operation::{Operation, Step, StepPhase};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

/// Speed factor of the provider: the simulated cloud's `sim_speed`, else 1.
pub async fn provider_speed(client: &Client) -> f64 {
    match client.context().await {
        Ok(ctx) if ctx.provider == ProviderKind::Sim => ctx.sim_speed.filter(|s| *s >= 1.0).unwrap_or(1.0),
        _ => 1.0,
    }
}

/// Follows operation `id` until it is terminal, showing progress on stderr; returns the final
/// state. Ctrl-C stops waiting (the operation keeps running) with [`Interrupted`].
pub async fn follow(client: &Client, id: &str) -> anyhow::Result<Operation> {
    let speed = provider_speed(client).await;
    let live = std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb");
    let mut display: Box<dyn Display> = if live { Box::new(Live::new(speed)) } else { Box::new(Log::new(speed)) };
    let mut follower = client.follow(id, FollowOptions::default());
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut last: Option<Operation> = None;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            update = follower.next() => match update {
                Some(Ok(op)) => {
                    display.update(&op);
                    last = Some(op);
                }
                Some(Err(e)) => {
                    display.finish();
                    return Err(e.into());
                }
                None => break,
            },
            _ = tick.tick(), if live => {
                if let Some(op) = &last {
                    display.update(op);
                }
            }
            _ = &mut ctrl_c => {
                display.finish();
                eprintln!("Stopped waiting; operation {id} keeps running. Follow it with: instantstart operation wait {id}");
                return Err(Interrupted.into());
            }
        }
    }
    display.finish();
    match last {
        Some(op) => Ok(op),
        None => Ok(client.get_operation(id).await?),
    }
}

trait Display {
    fn update(&mut self, op: &Operation);
    fn finish(&mut self);
}

fn elapsed(step: &Step) -> Option<f64> {
    let start = step.started_at?;
    Some(between(start, step.finished_at.unwrap_or_else(chrono::Utc::now)))
}

fn running(phase: StepPhase) -> bool {
    matches!(phase, StepPhase::Submitting | StepPhase::Submitted | StepPhase::Polling)
}

/// `eta 4s` / `~12s` for a step, from its expected duration at the provider's speed.
fn eta(step: &Step, speed: f64) -> String {
    let Some(expected) = step.expected_secs.map(|e| e as f64 / speed) else { return String::new() };
    match step.phase {
        StepPhase::Pending => format!("~{}", secs(expected)),
        p if running(p) => match elapsed(step) {
            Some(e) if expected > e => format!("eta {}", secs(expected - e)),
            Some(_) => "taking longer than expected".into(),
            None => format!("~{}", secs(expected)),
        },
        _ => String::new(),
    }
}

fn icon(phase: StepPhase) -> &'static str {
    match phase {
        StepPhase::Pending => "·",
        StepPhase::Succeeded => "✓",
        StepPhase::Failed => "✗",
        StepPhase::NeedsAttention => "!",
        StepPhase::Cancelled => "-",
        _ => "…",
    }
}

/// One live line per step (indicatif).
struct Live {
    speed: f64,
    multi: MultiProgress,
    header: Option<ProgressBar>,
    bars: HashMap<String, ProgressBar>,
    width: usize,
}

impl Live {
    fn new(speed: f64) -> Live {
        Live {
            speed,
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            header: None,
            bars: HashMap::new(),
            width: 0,
        }
    }
}

impl Display for Live {
    fn update(&mut self, op: &Operation) {
        if self.header.is_none() {
            let header = self.multi.add(ProgressBar::new_spinner());
            header.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
            header.enable_steady_tick(Duration::from_millis(120));
            self.header = Some(header);
            self.width = op.steps.iter().map(|s| s.key.chars().count()).max().unwrap_or(0);
        }
        if let Some(h) = &self.header {
            let total = op.steps.len();
            let done = op.steps.iter().filter(|s| s.phase == StepPhase::Succeeded).count();
            let took = between(op.created_at, op.finished_at.unwrap_or_else(chrono::Utc::now));
            h.set_message(format!(
                "{} {} {} — {}/{total} steps, {}",
                op.kind.as_str(),
                op.target,
                op.status.as_str(),
                done,
                secs(took)
            ));
        }
        let width = self.width;
        for step in &op.steps {
            let bar = self.bars.entry(step.key.clone()).or_insert_with(|| {
                let bar = self.multi.add(ProgressBar::new_spinner());
                bar.set_style(ProgressStyle::with_template("  {prefix} {msg}").expect("valid template"));
                bar
            });
            bar.set_prefix(icon(step.phase));
            let note = step.error.as_deref().or(step.detail.as_deref()).unwrap_or_default();
            bar.set_message(format!(
                "{:<width$}  {:<15} {:>7}  {:<14} {}",
                step.key,
                step.phase.as_str(),
                elapsed(step).map(secs).unwrap_or_default(),
                eta(step, self.speed),
                note
            ));
        }
        if op.status.is_terminal()
            && let Some(h) = &self.header
        {
            h.disable_steady_tick();
            let mark =
                if op.status == instantstart_core::operation::OperationStatus::Succeeded { "✓" } else { "✗" };
            h.set_style(ProgressStyle::with_template("{prefix} {msg}").expect("valid template"));
            h.set_prefix(mark);
        }
    }

    fn finish(&mut self) {
        if let Some(h) = &self.header {
            h.finish();
        }
        for bar in self.bars.values() {
            bar.finish();
        }
    }
}

/// One line per phase change, for logs and agents.
struct Log {
    speed: f64,
    phases: HashMap<String, StepPhase>,
    /// When following started (local clock): line prefixes are relative to it.
    started: std::time::Instant,
    announced: bool,
}

impl Log {
    fn new(speed: f64) -> Log {
        Log { speed, phases: HashMap::new(), started: std::time::Instant::now(), announced: false }
    }
}

impl Display for Log {
    fn update(&mut self, op: &Operation) {
        if !self.announced {
            self.announced = true;
            eprintln!("Following operation {} ({} {}, {} steps)", op.id, op.kind.as_str(), op.target, op.steps.len());
        }
        let at = secs(self.started.elapsed().as_secs_f64());
        for step in &op.steps {
            if self.phases.get(&step.key) == Some(&step.phase) {
                continue;
            }
            let first_seen = !self.phases.contains_key(&step.key);
            self.phases.insert(step.key.clone(), step.phase);
            if first_seen && step.phase == StepPhase::Pending {
                continue;
            }
            let mut line = format!("[{at:>6}] {} {}: {}", icon(step.phase), step.key, step.phase.as_str());
            if let Some(e) = elapsed(step).filter(|_| step.phase.is_terminal()) {
                line.push_str(&format!(" in {}", secs(e)));
            }
            let eta = eta(step, self.speed);
            if !eta.is_empty() {
                line.push_str(&format!(" ({eta})"));
            }
            if let Some(err) = &step.error {
                line.push_str(&format!(" — {err}"));
            }
            eprintln!("{line}");
        }
        if op.status.is_terminal() {
            eprintln!("[{at:>6}] operation {}: {}", op.id, op.status.as_str());
        }
    }

    fn finish(&mut self) {}
}
