//! Task governance for jobs on the simulated cloud, through the REST API only: a job names a
//! team and a priority (refused with 422 naming the field while governance is off, for a team
//! without a quota or an unknown priority class), and the simulated Kueue admits, lends,
//! reclaims and preempts by the teams' quotas and priorities; the job list and view show each
//! job's admission as Kueue's `Workload` objects say it.

use super::{create_ready, run, test_app};
use axum::http::{Method, StatusCode};
use instantstart_testkit::Bed;
use serde_json::{Value, json};

const JOBS: &str = "/api/clusters/demo/jobs";

/// A one-node job of `team` at `priority` that runs far longer than the test.
fn job(name: &str, team: &str, priority: &str) -> Value {
    json!({
        "runtime": "hyperpod",
        "job": { "name": name, "namespace": format!("hyperpod-ns-{team}"), "image": "pytorch/pytorch:2.5.1",
                 "instance_type": "ml.g5.2xlarge", "nodes": 1, "team": team, "priority": priority,
                 "storage": { "claim_name": "team-data" },
                 "env": [{ "name": "SIM_DURATION_SECONDS", "value": "10000000" }] },
        "recipe": { "kind": "torch", "script": "scripts/train.py" },
    })
}

fn finding<'a>(body: &'a Value, field: &str) -> &'a str {
    body["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|x| x["field"] == field))
        .and_then(|x| x["rule"].as_str())
        .unwrap_or_else(|| panic!("no finding on {field}: {body:#}"))
}

async fn submit(app: &Bed, body: Value) {
    run(app, Method::POST, JOBS, Some(body)).await;
}

/// `name → (state, reason)` of every job that names a queue.
async fn admissions(app: &Bed) -> Vec<(String, String, String)> {
    let list = app.get(JOBS).await.body;
    let mut out: Vec<(String, String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["admission"].is_object())
        .map(|j| {
            let a = &j["admission"];
            (
                j["name"].as_str().unwrap().to_string(),
                a["state"].as_str().unwrap().to_string(),
                a["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn row(name: &str, state: &str, reason: &str) -> (String, String, String) {
    (name.into(), state.into(), reason.into())
}

#[tokio::test]
async fn jobs_queue_borrow_reclaim_and_preempt_by_team_and_priority() {
    let app = test_app(2000.0);
    create_ready(&app, "demo").await; // 2 × ml.g5.2xlarge: 2 GPUs

    // Governance off: a job naming a team is refused, naming the field.
    let r = app.send(Method::POST, JOBS, Some(job("early", "research", "training")), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert!(finding(&r.body, "job.team").contains("task governance is off"), "{:#}", r.body);
    // A team's job outside the team's namespace is a 400 before anything is read.
    let mut outside = job("outside", "research", "training");
    outside["job"]["namespace"] = json!("default");
    let r = app.send(Method::POST, JOBS, Some(outside), &[]).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:#}", r.body);
    assert!(finding(&r.body, "job.namespace").contains("hyperpod-ns-research"), "{:#}", r.body);

    // One GPU guaranteed to each team: research borrows (up to 100%), prod only lends.
    let governance = json!({
        "priority_classes": [{ "name": "inference", "weight": 100 }, { "name": "training", "weight": 50 }],
        "teams": [
            { "name": "research", "quotas": [{ "instance_type": "ml.g5.2xlarge", "count": 1 }], "borrow_limit": 100 },
            { "name": "prod", "quotas": [{ "instance_type": "ml.g5.2xlarge", "count": 1 }], "sharing": "Lend" },
        ],
    });
    run(&app, Method::PUT, "/api/clusters/demo/governance", Some(governance)).await;

    // Unknown team or priority class: 422 listing the valid ones.
    let r = app.send(Method::POST, JOBS, Some(job("nobody", "nobody", "training")), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert!(finding(&r.body, "job.team").contains("its teams: prod, research"), "{:#}", r.body);
    let r = app.send(Method::POST, JOBS, Some(job("urgent", "research", "urgent")), &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:#}", r.body);
    assert!(finding(&r.body, "job.priority").contains("inference, training"), "{:#}", r.body);

    // Research takes its GPU, then borrows prod's idle one; a third job waits for quota.
    submit(&app, job("r1", "research", "training")).await;
    submit(&app, job("r2", "research", "training")).await;
    submit(&app, job("r3", "research", "training")).await;
    assert_eq!(
        admissions(&app).await,
        [row("r1", "admitted", "Admitted"), row("r2", "admitted", "Admitted"), row("r3", "queued", "Pending")]
    );
    let r2 = app.get(&format!("{JOBS}/r2?namespace=hyperpod-ns-research")).await.body;
    assert_eq!(r2["admission"]["team"], "research", "{r2:#}");
    assert_eq!(r2["admission"]["priority"], "training");
    assert_eq!(r2["admission"]["accelerators"], 1);
    assert_eq!(r2["admission"]["team_borrowed"], 1, "{r2:#}");
    assert!(r2["admission"]["message"].as_str().unwrap().contains("borrowing 1"), "{r2:#}");
    let r3 = app.get(&format!("{JOBS}/r3")).await.body;
    let why = r3["admission"]["message"].as_str().unwrap();
    assert!(why.contains("insufficient unused quota for nvidia.com/gpu"), "{why}");
    assert_eq!(r3["pods"]["running"], 0, "a queued job's pods do not run: {r3:#}");

    // Prod wants its guaranteed GPU back: the newest borrowing research job is evicted.
    submit(&app, job("p1", "prod", "training")).await;
    assert_eq!(
        admissions(&app).await,
        [
            row("p1", "admitted", "Admitted"),
            row("r1", "admitted", "Admitted"),
            row("r2", "preempted", "InCohortReclamation"),
            row("r3", "queued", "Pending"),
        ]
    );

    // A higher-priority research job preempts research's lower-priority one.
    submit(&app, job("r4", "research", "inference")).await;
    assert_eq!(
        admissions(&app).await,
        [
            row("p1", "admitted", "Admitted"),
            row("r1", "preempted", "InClusterQueue"),
            row("r2", "preempted", "InCohortReclamation"),
            row("r3", "queued", "Pending"),
            row("r4", "admitted", "Admitted"),
        ]
    );
    let r1 = app.get(&format!("{JOBS}/r1")).await.body;
    assert!(r1["admission"]["message"].as_str().unwrap().contains("r4"), "{r1:#}");
    // The admitted jobs' pods run; the others' are held.
    let p1 = app.get_until(&format!("{JOBS}/p1"), |p1| p1["pods"]["running"] == 1).await;
    assert_eq!(p1["pods"]["running"], 1, "{p1:#}");
    assert_eq!(p1["admission"]["state"], "admitted");
    let held = app.get(&format!("{JOBS}/r1")).await.body;
    assert_eq!(held["pods"]["running"], 0, "{held:#}");
}
