//! The reads of a create request's assessment (preflight: offerings, training plans, quotas;
//! the VPC of an existing network) under throttling and 5xx from the simulated cloud: they are
//! retried with the engine's backoff, so the request is answered (recorded, or its dry run
//! returned) instead of failing with a provider error; a read that never recovers still fails,
//! within the retry budget, and records nothing.

use instantstart_core::engine::reads::ReadRetries;
use instantstart_core::engine::{EngineConfig, EngineError, Outcome};
use instantstart_core::operation::{Actor, Face, OperationKind};
use instantstart_core::provider::ProviderErrorKind;
use instantstart_core::store::OperationFilter;
use instantstart_core::workflow::create_cluster::CreateClusterWorkflow;
use instantstart_sim::{FaultMode, SimCloud, SimFaults};
use instantstart_testkit::Bed;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SPEED: f64 = 1000.0;

/// The create-cluster workflow alone, on a world and a store in memory.
fn create_only() -> Bed {
    Bed::in_memory()
        .speed(SPEED)
        .seed(11)
        .workflows(|sim, store| {
            vec![Arc::new(CreateClusterWorkflow::new(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone()))]
        })
        .build()
}

fn request(name: &str) -> Value {
    json!({
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            { "name": "workers", "instance_type": "ml.g5.2xlarge", "count": 2, "availability_zone": "us-east-1a" },
            { "name": "spot", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1b", "capacity": { "type": "spot" } }
        ]}
    })
}

fn actor() -> Actor {
    Actor { face: Face::Api, principal: "test".into() }
}

fn injected(sim: &SimCloud) -> u64 {
    sim.injected_faults().values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_requests_are_answered_under_30_percent_throttling_and_10_percent_5xx() {
    let b = create_only();
    b.sim.set_faults(SimFaults { throttle_rate: 0.3, error_rate: 0.1, ..Default::default() });
    for i in 0..25 {
        let name = format!("faulty{i}");
        let dry = b.engine.dry_run_checked(OperationKind::CreateCluster, &request(&name)).await;
        let dry = dry.unwrap_or_else(|e| panic!("dry run {i}: {e}"));
        assert!(dry.checks.iter().any(|c| c.check == "quota"), "{:?}", dry.checks);
        let outcome = b.engine.submit_checked(OperationKind::CreateCluster, &request(&name), actor(), None).await;
        match outcome {
            Ok(Outcome::Submitted(s)) => assert!(s.created, "{name}"),
            other => panic!("request {i}: {other:?}"),
        }
    }
    let faults = b.sim.injected_faults();
    let on_reads: u64 = ["ec2:DescribeInstanceTypeOfferings", "servicequotas:GetServiceQuota"]
        .iter()
        .map(|api| faults.get(*api).copied().unwrap_or(0))
        .sum();
    assert!(on_reads >= 10, "the preflight reads met faults and were retried: {faults:?}");
    b.engine.abort_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_preflight_read_is_retried_and_the_operation_recorded() {
    let b = create_only();
    for (api, kind) in [
        ("ec2:DescribeInstanceTypeOfferings", ProviderErrorKind::Throttled),
        ("servicequotas:GetServiceQuota", ProviderErrorKind::Transient),
    ] {
        b.sim.set_faults(SimFaults::none().with(api, FaultMode::fail_once(kind, "Rate exceeded")));
        let before = injected(&b.sim);
        let name = format!("once-{}", api.replace([':', '.'], "-").to_lowercase());
        let outcome = b.engine.submit_checked(OperationKind::CreateCluster, &request(&name), actor(), None).await;
        assert!(matches!(outcome, Ok(Outcome::Submitted(_))), "{api}: {outcome:?}");
        assert_eq!(injected(&b.sim), before + 1, "{api}: one injected failure, then the retry");
    }
    b.engine.abort_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_stays_throttled_fails_within_the_budget_and_records_nothing() {
    let b = create_only();
    let api = "ec2:DescribeInstanceTypeOfferings";
    b.sim.set_faults(
        SimFaults::none()
            .with(api, FaultMode::Fail { kind: ProviderErrorKind::Throttled, message: "Rate exceeded".into() }),
    );
    let started = Instant::now();
    let outcome = b.engine.submit_checked(OperationKind::CreateCluster, &request("stuck"), actor(), None).await;
    let elapsed = started.elapsed();
    match outcome {
        Err(EngineError::Provider(e)) => assert_eq!((e.api.as_str(), e.kind), (api, ProviderErrorKind::Throttled)),
        other => panic!("expected the throttled read's error, got {other:?}"),
    }
    let config = EngineConfig::scaled(SPEED);
    let attempts = b.sim.injected_faults().get(api).copied().unwrap_or(0);
    assert!(attempts > 1 && u64::from(config.max_retries) + 1 >= attempts, "{attempts} attempts");
    assert!(elapsed < ReadRetries::budget(&config) + Duration::from_secs(2), "{elapsed:?}");
    assert!(b.store.list_operations(&OperationFilter::default()).unwrap().is_empty(), "nothing recorded");
    // A permanent error is not retried.
    b.sim.set_faults(SimFaults::none().with(api, FaultMode::fail("AccessDenied (simulated)")));
    let before = injected(&b.sim);
    let outcome = b.engine.dry_run_checked(OperationKind::CreateCluster, &request("denied")).await;
    assert!(matches!(outcome, Err(EngineError::Provider(ref e)) if e.kind == ProviderErrorKind::Failed), "{outcome:?}");
    assert_eq!(injected(&b.sim), before + 1);
}
