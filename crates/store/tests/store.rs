//! Integration tests of the `Store` trait contract, each run on every backend (SQLite in memory
//! and in a file, PostgreSQL: see `common`), plus each backend's own durability and schema
//! tests, including a crash test that kills a SQLite writer process with SIGKILL at random
//! points and checks that nothing it reported as committed was lost.

mod common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use common::{backends, pg_server, shared_backends};
use instantstart_core::engine::step_token;
use instantstart_core::operation::{
    Actor, AuditEntry, Face, NewOperation, OperationId, OperationKind, OperationStatus, ResourceRef, Step, StepPhase,
    StepSpec, StepUpdate, request_hash,
};
use instantstart_core::spec::ClusterCreateRequest;
use instantstart_core::store::{
    ACTIVE_CLUSTER, ClusterRecord, ClusterSource, Inserted, Lease, OperationFilter, OperationHead, Store, StoreError,
};
use instantstart_store::{PostgresStore, SCHEMA_VERSION, SqliteStore, StoreBackend};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration as StdDuration;

// ---------------------------------------------------------------------------------------------
// Helpers

fn alice() -> Actor {
    Actor { face: Face::Cli, principal: "alice".into() }
}

fn steps() -> Vec<StepSpec> {
    vec![
        StepSpec { key: "network".into(), title: "Create the VPC".into(), depends_on: vec![], expected_secs: Some(90) },
        StepSpec {
            key: "eks_cluster".into(),
            title: "Create the EKS cluster".into(),
            depends_on: vec!["network".into()],
            expected_secs: Some(600),
        },
        StepSpec {
            key: "compute_subnet:us-east-1a".into(),
            title: "Create a compute subnet".into(),
            depends_on: vec!["network".into(), "eks_cluster".into()],
            expected_secs: None,
        },
    ]
}

fn new_op(target: &str, key: Option<&str>, request: Value) -> NewOperation {
    let kind = OperationKind::CreateCluster;
    NewOperation {
        id: OperationId::generate(),
        kind,
        target: target.into(),
        actor: alice(),
        request_hash: request_hash(kind, target, &request),
        request,
        idempotency_key: key.map(str::to_string),
        steps: steps(),
    }
}

fn insert_new(store: &dyn Store, op: NewOperation) -> instantstart_core::operation::Operation {
    match store.insert_operation(op) {
        Ok(Inserted::New(op)) => op,
        other => panic!("expected a new operation, got {other:?}"),
    }
}

fn cluster_request(name: &str) -> ClusterCreateRequest {
    serde_json::from_value(json!({
        "name": name,
        "region": "us-east-1",
        "availability_zones": ["us-east-1a", "us-east-1b"],
    }))
    .expect("request")
}

fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_750_000_000 + secs, nanos).single().expect("time")
}

// ---------------------------------------------------------------------------------------------
// Operations

#[test]
fn insert_records_the_operation_its_steps_and_an_audit_entry() {
    for (name, store, _dir) in backends() {
        let store = &*store;
        let request = json!({"name": "demo", "nested": {"b": [1, 2.5, null], "a": "x"}});
        let new = new_op("cluster/demo", Some("key-1"), request.clone());
        let before = Utc::now();
        let op = insert_new(store, new.clone());
        assert_eq!(op.id, new.id, "{name}");
        assert_eq!(op.kind, OperationKind::CreateCluster);
        assert_eq!(op.target, "cluster/demo");
        assert_eq!(op.status, OperationStatus::Running);
        assert_eq!(op.actor, alice());
        assert_eq!(op.request, request);
        assert_eq!(op.idempotency_key.as_deref(), Some("key-1"));
        assert_eq!(op.request_hash, new.request_hash);
        assert_eq!((op.error.as_deref(), op.finished_at), (None, None));
        assert!(op.created_at >= before && op.updated_at == op.created_at, "{name}");

        // Steps in their given order, pending, with the engine's deterministic token.
        let keys: Vec<&str> = op.steps.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["network", "eks_cluster", "compute_subnet:us-east-1a"], "{name}");
        for (step, spec) in op.steps.iter().zip(steps()) {
            assert_eq!(step.title, spec.title);
            assert_eq!(step.depends_on, spec.depends_on);
            assert_eq!(step.expected_secs, spec.expected_secs);
            assert_eq!(step.phase, StepPhase::Pending);
            assert_eq!(step.attempts, 0);
            assert_eq!(step.idempotency_token, step_token(&op.id, &spec.key));
            assert_eq!(step.outputs, Value::Null);
            assert_eq!((&step.resource, &step.detail, &step.error), (&None, &None, &None));
            assert_eq!((step.started_at, step.finished_at), (None, None));
            assert_eq!(step.updated_at, op.created_at);
        }

        // What insert returned is what is stored.
        assert_eq!(store.get_operation(&op.id).unwrap().as_ref(), Some(&op), "{name}");
        assert_eq!(store.get_operation(&OperationId("op-missing".into())).unwrap(), None);

        let audit = store.list_audit(None, 10).unwrap();
        assert_eq!(
            audit,
            vec![AuditEntry {
                at: op.created_at,
                actor: alice(),
                action: "operation.create".into(),
                target: "cluster/demo".into(),
                operation_id: Some(op.id.clone()),
                detail: request,
            }],
            "{name}"
        );
    }
}

#[test]
fn idempotency_keys_return_the_same_operation_or_refuse_a_different_request() {
    struct Case {
        name: &'static str,
        key: Option<&'static str>,
        target: &'static str,
        request: Value,
        expect: &'static str, // "existing", "mismatch", "new"
    }
    let cases = [
        Case {
            name: "same key, same request",
            key: Some("k1"),
            target: "cluster/a",
            request: json!({"n": 1}),
            expect: "existing",
        },
        Case {
            name: "same key, different request",
            key: Some("k1"),
            target: "cluster/a",
            request: json!({"n": 2}),
            expect: "mismatch",
        },
        Case {
            name: "same key, same request on another target",
            key: Some("k1"),
            target: "cluster/b",
            request: json!({"n": 1}),
            expect: "mismatch",
        },
        Case { name: "another key", key: Some("k2"), target: "cluster/c", request: json!({"n": 1}), expect: "new" },
        Case { name: "no key", key: None, target: "cluster/d", request: json!({"n": 1}), expect: "new" },
    ];
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let first = insert_new(store, new_op("cluster/a", Some("k1"), json!({"n": 1})));
        // Also once the first operation has finished, and with its state changed.
        store.set_operation_status(&first.id, OperationStatus::Succeeded, None).unwrap();
        let first = store.get_operation(&first.id).unwrap().unwrap();
        for c in &cases {
            let new = new_op(c.target, c.key, c.request.clone());
            let got = store.insert_operation(new.clone());
            let label = format!("{backend}: {}", c.name);
            match c.expect {
                "existing" => assert_eq!(got, Ok(Inserted::Existing(first.clone())), "{label}"),
                "mismatch" => assert_eq!(
                    got,
                    Err(StoreError::IdempotencyMismatch { key: "k1".into(), operation: first.id.clone() }),
                    "{label}"
                ),
                _ => {
                    let op = got.expect(&label).into_operation();
                    assert_eq!(op.id, new.id, "{label}");
                }
            }
            if c.expect != "new" {
                assert_eq!(store.get_operation(&new.id).unwrap(), None, "{label}: nothing recorded");
            }
        }
        // Only the operations actually created left an audit entry.
        assert_eq!(store.list_audit(None, 100).unwrap().len(), 3, "{backend}");
    }
}

#[test]
fn a_running_operation_holds_its_target_until_it_finishes() {
    for (name, store, _dir) in backends() {
        let store = &*store;
        let first = insert_new(store, new_op("cluster/demo", None, json!({})));
        let second = new_op("cluster/demo", Some("k"), json!({"x": 1}));
        assert_eq!(
            store.insert_operation(second.clone()),
            Err(StoreError::Conflict { target: "cluster/demo".into(), running: first.id.clone() }),
            "{name}"
        );
        assert_eq!(store.get_operation(&second.id).unwrap(), None);
        // Another target is free.
        insert_new(store, new_op("cluster/other", None, json!({})));
        // Once the first is terminal, the target is free again, and the key was not consumed.
        store.set_operation_status(&first.id, OperationStatus::Failed, Some("boom")).unwrap();
        let op = insert_new(store, second);
        assert_eq!(op.idempotency_key.as_deref(), Some("k"));
    }
}

#[test]
fn concurrent_inserts_on_one_target_from_two_connections_admit_exactly_one() {
    for (backend, stores, _guard) in shared_backends() {
        const THREADS: usize = 8;
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let store = stores[i % 2].clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    store.insert_operation(new_op("cluster/race", None, json!({ "thread": i })))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("thread")).collect();
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "{backend}: {results:?}");
        let winner = winners[0].operation().id.clone();
        for r in &results {
            if let Err(e) = r {
                let want = StoreError::Conflict { target: "cluster/race".into(), running: winner.clone() };
                assert_eq!(e, &want, "{backend}");
            }
        }
        for store in &stores {
            assert_eq!(store.running_operations().unwrap().len(), 1, "{backend}: both handles see one");
        }
    }
}

#[test]
fn concurrent_idempotent_inserts_from_two_connections_record_one_operation() {
    for (backend, stores, _guard) in shared_backends() {
        const THREADS: usize = 6;
        let barrier = Arc::new(Barrier::new(THREADS));
        let new = new_op("cluster/idem", Some("same-key"), json!({}));
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (store, barrier, new) = (stores[i % 2].clone(), barrier.clone(), new.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.insert_operation(new).expect("insert")
                })
            })
            .collect();
        let results: Vec<Inserted> = handles.into_iter().map(|h| h.join().expect("thread")).collect();
        let fresh = results.iter().filter(|r| matches!(r, Inserted::New(_))).count();
        assert_eq!(fresh, 1, "{backend}: exactly one insert is new");
        assert!(results.iter().all(|r| r.operation().id == new.id), "{backend}");
        assert_eq!(stores[1].list_audit(None, 10).unwrap().len(), 1, "{backend}: one audit entry");
    }
}

#[test]
fn a_failed_insert_records_nothing() {
    for (name, store, _dir) in backends() {
        let store = &*store;
        let mut new = new_op("cluster/demo", Some("k"), json!({}));
        new.steps.push(new.steps[0].clone()); // duplicate step key
        let err = store.insert_operation(new.clone()).unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{name}: {err:?}");
        assert_eq!(store.get_operation(&new.id).unwrap(), None, "{name}");
        assert_eq!(store.list_audit(None, 10).unwrap(), vec![], "{name}");
        assert_eq!(store.running_operations().unwrap(), vec![], "{name}");
        // Neither the target nor the key is held.
        insert_new(store, new_op("cluster/demo", Some("k"), json!({})));
    }
}

#[test]
fn set_operation_status_sets_error_and_finished_at() {
    let cases: [(OperationStatus, Option<&str>); 6] = [
        (OperationStatus::Succeeded, None),
        (OperationStatus::Failed, Some("network: quota exceeded")),
        (OperationStatus::NeedsAttention, Some("vpc is not ours")),
        (OperationStatus::Cancelled, Some("cancelled")),
        (OperationStatus::Running, None),
        (OperationStatus::Running, Some("still going")),
    ];
    for (name, store, _dir) in backends() {
        let store = &*store;
        let op = insert_new(store, new_op("cluster/demo", None, json!({})));
        for (status, error) in cases {
            let before = Utc::now();
            store.set_operation_status(&op.id, status, error).unwrap();
            let got = store.get_operation(&op.id).unwrap().unwrap();
            let label = format!("{name}: {status:?}");
            assert_eq!(got.status, status, "{label}");
            assert_eq!(got.error.as_deref(), error, "{label}");
            assert!(got.updated_at >= before, "{label}");
            if status.is_terminal() {
                assert!(got.finished_at.is_some_and(|f| f >= before), "{label}");
            } else {
                assert_eq!(got.finished_at, None, "{label}");
            }
            assert_eq!(got.steps, op.steps, "{label}: steps untouched");
        }
        assert!(matches!(
            store.set_operation_status(&OperationId("op-missing".into()), OperationStatus::Failed, None),
            Err(StoreError::NotFound { .. })
        ));
    }
}

#[test]
fn set_operation_status_to_running_respects_the_target_lock() {
    for (backend, store, _guard) in backends() {
        let store = &*store;
        let a = insert_new(store, new_op("cluster/demo", None, json!({})));
        store.set_operation_status(&a.id, OperationStatus::Failed, Some("x")).unwrap();
        let b = insert_new(store, new_op("cluster/demo", None, json!({})));
        assert_eq!(
            store.set_operation_status(&a.id, OperationStatus::Running, None),
            Err(StoreError::Conflict { target: "cluster/demo".into(), running: b.id.clone() }),
            "{backend}"
        );
        assert_eq!(store.get_operation(&a.id).unwrap().unwrap().status, OperationStatus::Failed, "{backend}");
    }
}

#[test]
fn reopen_moves_a_terminal_operation_back_to_running_unless_the_target_is_held() {
    for (name, store, _dir) in backends() {
        let store = &*store;
        let a = insert_new(store, new_op("cluster/demo", None, json!({})));
        store.set_operation_status(&a.id, OperationStatus::Failed, Some("eks_cluster: boom")).unwrap();
        let b = insert_new(store, new_op("cluster/demo", None, json!({})));
        assert_eq!(
            store.reopen_operation(&a.id),
            Err(StoreError::Conflict { target: "cluster/demo".into(), running: b.id.clone() }),
            "{name}"
        );
        let still = store.get_operation(&a.id).unwrap().unwrap();
        assert_eq!((still.status, still.error.as_deref()), (OperationStatus::Failed, Some("eks_cluster: boom")));

        store.set_operation_status(&b.id, OperationStatus::Cancelled, Some("cancelled")).unwrap();
        store.reopen_operation(&a.id).unwrap();
        let reopened = store.get_operation(&a.id).unwrap().unwrap();
        assert_eq!(reopened.status, OperationStatus::Running, "{name}");
        assert_eq!((reopened.error.as_deref(), reopened.finished_at), (None, None), "{name}");
        assert_eq!(store.running_operations().unwrap(), vec![reopened], "{name}");
        // Reopening the running holder itself is not a conflict.
        store.reopen_operation(&a.id).unwrap();
        assert!(matches!(store.reopen_operation(&OperationId("op-missing".into())), Err(StoreError::NotFound { .. })));
    }
}

#[test]
fn update_step_applies_exactly_the_given_fields() {
    let t1 = at(1, 123_456_789);
    let t2 = at(2, 1);
    let resource =
        ResourceRef { kind: "vpc".into(), id: "vpc-123".into(), arn: Some("arn:aws:ec2:vpc/vpc-123".into()) };
    type Expect = Box<dyn Fn(&mut Step)>;
    let r2 = resource.clone();
    let cases: Vec<(&str, StepUpdate, Expect)> = vec![
        ("nothing", StepUpdate::default(), Box::new(|_| {})),
        (
            "phase",
            StepUpdate { phase: Some(StepPhase::Submitting), ..Default::default() },
            Box::new(|s| s.phase = StepPhase::Submitting),
        ),
        ("attempts", StepUpdate { attempts: Some(3), ..Default::default() }, Box::new(|s| s.attempts = 3)),
        (
            "resource",
            StepUpdate { resource: Some(resource.clone()), ..Default::default() },
            Box::new(move |s| s.resource = Some(r2.clone())),
        ),
        (
            "outputs",
            StepUpdate { outputs: Some(json!({"vpc_id": "vpc-123", "subnets": ["a", "b"]})), ..Default::default() },
            Box::new(|s| s.outputs = json!({"vpc_id": "vpc-123", "subnets": ["a", "b"]})),
        ),
        (
            "set detail",
            StepUpdate { detail: Some(Some("creating".into())), ..Default::default() },
            Box::new(|s| s.detail = Some("creating".into())),
        ),
        (
            "set error",
            StepUpdate { error: Some(Some("throttled".into())), ..Default::default() },
            Box::new(|s| s.error = Some("throttled".into())),
        ),
        (
            "started_at",
            StepUpdate { started_at: Some(t1), ..Default::default() },
            Box::new(move |s| s.started_at = Some(t1)),
        ),
        (
            "set finished_at",
            StepUpdate { finished_at: Some(Some(t2)), ..Default::default() },
            Box::new(move |s| s.finished_at = Some(t2)),
        ),
        ("clear detail", StepUpdate { detail: Some(None), ..Default::default() }, Box::new(|s| s.detail = None)),
        ("clear error", StepUpdate { error: Some(None), ..Default::default() }, Box::new(|s| s.error = None)),
        (
            "clear finished_at",
            StepUpdate { finished_at: Some(None), ..Default::default() },
            Box::new(|s| s.finished_at = None),
        ),
        (
            "several at once",
            StepUpdate {
                phase: Some(StepPhase::Failed),
                error: Some(Some("quota".into())),
                finished_at: Some(Some(t2)),
                detail: Some(None),
                ..Default::default()
            },
            Box::new(move |s| {
                s.phase = StepPhase::Failed;
                s.error = Some("quota".into());
                s.finished_at = Some(t2);
                s.detail = None;
            }),
        ),
    ];
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let op = insert_new(store, new_op("cluster/demo", None, json!({})));
        for (name, update, expect) in &cases {
            let label = format!("{backend}: {name}");
            let before = store.get_operation(&op.id).unwrap().unwrap();
            let got = store.update_step(&op.id, "eks_cluster", update).expect(&label);
            let mut want = before.step("eks_cluster").unwrap().clone();
            expect(&mut want);
            assert!(got.updated_at >= want.updated_at, "{label}: updated_at moves forward");
            want.updated_at = got.updated_at;
            assert_eq!(got, want, "{label}");
            let after = store.get_operation(&op.id).unwrap().unwrap();
            assert_eq!(after.step("eks_cluster"), Some(&got), "{label}: returned step is the stored one");
            assert_eq!(after.updated_at, got.updated_at, "{label}: the operation is touched");
            for key in ["network", "compute_subnet:us-east-1a"] {
                assert_eq!(after.step(key), before.step(key), "{label}: other steps untouched");
            }
        }
    }
}

#[test]
fn update_step_of_a_missing_operation_or_step_is_not_found() {
    for (backend, store, _guard) in backends() {
        let store = &*store;
        let op = insert_new(store, new_op("cluster/demo", None, json!({})));
        let update = StepUpdate { phase: Some(StepPhase::Submitting), ..Default::default() };
        for (id, key) in [(OperationId("op-missing".into()), "network"), (op.id.clone(), "no_such_step")] {
            match store.update_step(&id, key, &update) {
                Err(StoreError::NotFound { what }) => {
                    assert!(
                        what.contains(if key == "network" { "op-missing" } else { "no_such_step" }),
                        "{backend}: {what}"
                    )
                }
                other => panic!("{backend}: expected NotFound, got {other:?}"),
            }
        }
    }
}

#[test]
fn list_operations_filters_and_orders_newest_first() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let a = insert_new(store, new_op("cluster/a", None, json!({})));
        store.set_operation_status(&a.id, OperationStatus::Succeeded, None).unwrap();
        let b = insert_new(store, new_op("cluster/b", None, json!({})));
        let c = insert_new(store, new_op("cluster/a", None, json!({})));
        let (a, b, c) = (a.id, b.id, c.id);
        let filter = |target: Option<&str>, status: Option<OperationStatus>, limit: Option<u32>| OperationFilter {
            target: target.map(str::to_string),
            status,
            limit,
            archived: None,
        };
        let cases = [
            ("all", filter(None, None, None), vec![&c, &b, &a]),
            ("target", filter(Some("cluster/a"), None, None), vec![&c, &a]),
            ("status", filter(None, Some(OperationStatus::Running), None), vec![&c, &b]),
            ("target and status", filter(Some("cluster/a"), Some(OperationStatus::Running), None), vec![&c]),
            ("succeeded", filter(None, Some(OperationStatus::Succeeded), None), vec![&a]),
            ("limit", filter(None, None, Some(2)), vec![&c, &b]),
            ("limit 0", filter(None, None, Some(0)), vec![]),
            ("target and limit", filter(Some("cluster/a"), None, Some(1)), vec![&c]),
            ("no match", filter(Some("cluster/z"), None, None), vec![]),
            ("failed", filter(None, Some(OperationStatus::Failed), None), vec![]),
        ];
        for (name, f, want) in cases {
            let got = store.list_operations(&f).unwrap();
            let ids: Vec<&OperationId> = got.iter().map(|o| &o.id).collect();
            assert_eq!(ids, want, "{backend}: {name}");
            assert!(got.iter().all(|o| o.steps.len() == 3), "{backend}: {name}: steps loaded");
        }
        let running: Vec<OperationId> = store.running_operations().unwrap().into_iter().map(|o| o.id).collect();
        assert_eq!(running, vec![b, c], "{backend}: running oldest first");
    }
}

/// The trait's default `latest_operations`/`count_operations` (one read per target, every
/// operation read) over a store: the reference the one-query versions must agree with.
struct PerTarget<'a>(&'a dyn Store);

impl Store for PerTarget<'_> {
    fn insert_operation(&self, op: NewOperation) -> Result<Inserted, StoreError> {
        self.0.insert_operation(op)
    }
    fn get_operation(&self, id: &OperationId) -> Result<Option<instantstart_core::operation::Operation>, StoreError> {
        self.0.get_operation(id)
    }
    fn find_by_idempotency_key(
        &self,
        key: &str,
    ) -> Result<Option<instantstart_core::operation::Operation>, StoreError> {
        self.0.find_by_idempotency_key(key)
    }
    fn list_operations(&self, f: &OperationFilter) -> Result<Vec<instantstart_core::operation::Operation>, StoreError> {
        self.0.list_operations(f)
    }
    fn running_operations(&self) -> Result<Vec<instantstart_core::operation::Operation>, StoreError> {
        self.0.running_operations()
    }
    fn update_step(&self, id: &OperationId, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        self.0.update_step(id, key, update)
    }
    fn set_operation_status(&self, id: &OperationId, s: OperationStatus, e: Option<&str>) -> Result<(), StoreError> {
        self.0.set_operation_status(id, s, e)
    }
    fn reopen_operation(&self, id: &OperationId) -> Result<(), StoreError> {
        self.0.reopen_operation(id)
    }
    fn archive_operations(&self, before: chrono::DateTime<chrono::Utc>, limit: u32) -> Result<u64, StoreError> {
        self.0.archive_operations(before, limit)
    }
    fn append_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        self.0.append_audit(entry)
    }
    fn list_audit(&self, target: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.0.list_audit(target, limit)
    }
    fn put_cluster(&self, record: &ClusterRecord) -> Result<(), StoreError> {
        self.0.put_cluster(record)
    }
    fn get_cluster(&self, name: &str) -> Result<Option<ClusterRecord>, StoreError> {
        self.0.get_cluster(name)
    }
    fn list_clusters(&self) -> Result<Vec<ClusterRecord>, StoreError> {
        self.0.list_clusters()
    }
    fn delete_cluster(&self, name: &str) -> Result<(), StoreError> {
        self.0.delete_cluster(name)
    }
    fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.0.get_setting(key)
    }
    fn set_setting(&self, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        self.0.set_setting(key, value)
    }
    fn acquire_lease(&self, id: &OperationId, replica: &str, ttl: StdDuration) -> Result<Option<Lease>, StoreError> {
        self.0.acquire_lease(id, replica, ttl)
    }
    fn renew_lease(&self, lease: &Lease, ttl: StdDuration) -> Result<Lease, StoreError> {
        self.0.renew_lease(lease, ttl)
    }
    fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        self.0.release_lease(lease)
    }
    fn get_lease(&self, id: &OperationId) -> Result<Option<Lease>, StoreError> {
        self.0.get_lease(id)
    }
    fn unleased_running_operations(&self) -> Result<Vec<OperationId>, StoreError> {
        self.0.unleased_running_operations()
    }
    fn update_step_fenced(&self, lease: &Lease, key: &str, update: &StepUpdate) -> Result<Step, StoreError> {
        self.0.update_step_fenced(lease, key, update)
    }
    fn set_operation_status_fenced(&self, l: &Lease, s: OperationStatus, e: Option<&str>) -> Result<(), StoreError> {
        self.0.set_operation_status_fenced(l, s, e)
    }
}

// ---------------------------------------------------------------------------------------------
// Leases and fencing

const TTL: StdDuration = StdDuration::from_secs(30);

fn fenced<T: std::fmt::Debug>(r: Result<T, StoreError>) -> String {
    match r {
        Err(StoreError::Fenced { reason, .. }) => reason,
        other => panic!("expected Fenced, got {other:?}"),
    }
}

fn detail(d: &str) -> StepUpdate {
    StepUpdate { detail: Some(Some(d.into())), ..Default::default() }
}

#[test]
fn a_lease_is_held_by_one_replica_and_its_token_grows_with_every_acquisition() {
    for (name, store, _dir) in backends() {
        let store = &*store;
        let op = insert_new(store, new_op("cluster/lease", None, json!({})));
        assert_eq!(store.get_lease(&op.id).unwrap(), None, "{name}: no lease before the first acquisition");
        assert_eq!(store.unleased_running_operations().unwrap(), vec![op.id.clone()], "{name}");
        let a = store.acquire_lease(&op.id, "replica-a", TTL).unwrap().expect("free lease");
        assert_eq!((a.replica.as_str(), a.token), ("replica-a", 1), "{name}");
        assert!(a.expires_at > Utc::now() + Duration::seconds(25), "{name}: expires after the TTL");
        assert_eq!(store.get_lease(&op.id).unwrap(), Some(a.clone()), "{name}");
        assert!(store.unleased_running_operations().unwrap().is_empty(), "{name}: driven");
        // Another replica cannot take a live lease; the holder itself re-acquires (a restart).
        assert_eq!(store.acquire_lease(&op.id, "replica-b", TTL).unwrap(), None, "{name}");
        let again = store.acquire_lease(&op.id, "replica-a", TTL).unwrap().expect("own lease");
        assert_eq!(again.token, 2, "{name}: a re-acquisition is a new token");
        assert!(fenced(store.update_step_fenced(&a, "network", &detail("stale"))).contains("token 2 replaces 1"));
        // Renewal extends; release frees it for anyone, and the token keeps growing.
        let renewed = store.renew_lease(&again, TTL).unwrap();
        assert_eq!(renewed.token, 2);
        assert!(renewed.expires_at >= again.expires_at, "{name}");
        store.release_lease(&renewed).unwrap();
        assert_eq!(store.unleased_running_operations().unwrap(), vec![op.id.clone()], "{name}: released");
        assert!(fenced(store.renew_lease(&renewed, TTL)).contains("released"), "{name}");
        let b = store.acquire_lease(&op.id, "replica-b", TTL).unwrap().expect("released lease");
        assert_eq!((b.replica.as_str(), b.token), ("replica-b", 3), "{name}");
        // Releasing a lease that moved on changes nothing.
        store.release_lease(&renewed).unwrap();
        assert_eq!(store.get_lease(&op.id).unwrap(), Some(b), "{name}");
        // A finished operation has no lease to take; an unknown one is NotFound.
        store.set_operation_status(&op.id, OperationStatus::Succeeded, None).unwrap();
        assert_eq!(store.acquire_lease(&op.id, "replica-c", TTL).unwrap(), None, "{name}");
        assert!(store.unleased_running_operations().unwrap().is_empty(), "{name}");
        let unknown = OperationId("op-unknown".into());
        assert!(matches!(store.acquire_lease(&unknown, "a", TTL), Err(StoreError::NotFound { .. })), "{name}");
    }
}

#[test]
fn fenced_writes_pass_with_the_live_lease_and_are_refused_once_it_moved_on() {
    for (name, store, _dir) in backends() {
        let store = &*store;
        let op = insert_new(store, new_op("cluster/fence", None, json!({})));
        let a = store.acquire_lease(&op.id, "replica-a", StdDuration::from_millis(300)).unwrap().unwrap();
        let step = store.update_step_fenced(&a, "network", &detail("by a")).unwrap();
        assert_eq!(step.detail.as_deref(), Some("by a"), "{name}");
        // A pauses past the TTL: its lease expires, B takes over.
        std::thread::sleep(StdDuration::from_millis(400));
        assert!(fenced(store.update_step_fenced(&a, "network", &detail("late"))).contains("expired"), "{name}");
        assert_eq!(store.unleased_running_operations().unwrap(), vec![op.id.clone()], "{name}: expired");
        let b = store.acquire_lease(&op.id, "replica-b", TTL).unwrap().expect("expired lease");
        assert_eq!(b.token, 2, "{name}");
        // A wakes up: every write and its renewal are refused, and nothing it sent is stored.
        let reason = fenced(store.update_step_fenced(&a, "network", &detail("stale")));
        assert!(reason.contains("moved on to replica replica-b"), "{name}: {reason}");
        fenced(store.set_operation_status_fenced(&a, OperationStatus::Failed, Some("stale")));
        fenced(store.renew_lease(&a, TTL));
        let now = store.get_operation(&op.id).unwrap().unwrap();
        assert_eq!(now.status, OperationStatus::Running, "{name}");
        assert_eq!(
            now.step("network").unwrap().detail.as_deref(),
            Some("by a"),
            "{name}: the stale write left no trace"
        );
        // B writes, finishes; after a cancellation made elsewhere, even B is fenced.
        store.update_step_fenced(&b, "network", &detail("by b")).unwrap();
        store.set_operation_status(&op.id, OperationStatus::Cancelled, Some("cancelled")).unwrap();
        assert!(fenced(store.update_step_fenced(&b, "network", &detail("after"))).contains("cancelled"), "{name}");
        fenced(store.set_operation_status_fenced(&b, OperationStatus::Succeeded, None));
        assert_eq!(store.get_operation(&op.id).unwrap().unwrap().status, OperationStatus::Cancelled, "{name}");
    }
}

#[test]
fn the_change_feed_is_read_back_in_order_by_every_handle_from_any_point() {
    for (name, handles, _guard) in shared_backends() {
        let (a, b) = (handles[0].as_ref(), handles[1].as_ref());
        assert_eq!(b.latest_change_seq().unwrap(), 0, "{name}: empty feed");
        let op = insert_new(a, new_op("cluster/feed", None, json!({})));
        let mut published = Vec::new();
        for (i, replica) in ["replica-a", "replica-b", "replica-a"].iter().enumerate() {
            let handle = if *replica == "replica-a" { a } else { b };
            let after = handle.update_step(&op.id, "network", &detail(&format!("change {i}"))).unwrap();
            let mut now = handle.get_operation(&op.id).unwrap().unwrap();
            assert_eq!(now.step("network").unwrap(), &after);
            now.error = Some(format!("marker {i}"));
            published.push((handle.publish_change(replica, &now).unwrap(), replica.to_string(), now));
        }
        let seqs: Vec<u64> = published.iter().map(|p| p.0).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{name}: sequence numbers grow: {seqs:?}");
        assert_eq!(a.latest_change_seq().unwrap(), seqs[2], "{name}");
        // Every handle reads the same changes, whole and in order, from any point, in pages.
        for handle in [a, b] {
            let all = handle.changes_since(0, 100).unwrap();
            let got: Vec<(u64, String, _)> = all.into_iter().map(|c| (c.seq, c.replica, c.operation)).collect();
            assert_eq!(got, published, "{name}");
            let page = handle.changes_since(seqs[0], 1).unwrap();
            assert_eq!(page.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![seqs[1]], "{name}: one page");
            assert!(handle.changes_since(seqs[2], 100).unwrap().is_empty(), "{name}: nothing newer");
        }
    }
}

#[test]
fn a_fenced_publication_passes_for_the_newest_grant_and_is_refused_once_another_replica_took_it() {
    for (name, handles, _guard) in shared_backends() {
        let (a, b) = (handles[0].as_ref(), handles[1].as_ref());
        let op = insert_new(a, new_op("cluster/feed-fence", None, json!({})));
        let held = a.acquire_lease(&op.id, "replica-a", StdDuration::from_millis(300)).unwrap().unwrap();
        let state = a.get_operation(&op.id).unwrap().unwrap();
        let first = a.publish_change_fenced(&held, &state).unwrap();
        // Expired but not taken: A's last write is still the newest state, published.
        std::thread::sleep(StdDuration::from_millis(400));
        let second = a.publish_change_fenced(&held, &state).unwrap();
        assert!(second > first, "{name}");
        // B takes over and publishes; A, waking up, publishes nothing after it.
        let took = b.acquire_lease(&op.id, "replica-b", TTL).unwrap().expect("expired lease");
        let by_b = b.publish_change_fenced(&took, &state).unwrap();
        let reason = fenced(a.publish_change_fenced(&held, &state));
        assert!(reason.contains("moved on to replica replica-b"), "{name}: {reason}");
        let feed: Vec<(u64, String)> =
            b.changes_since(0, 100).unwrap().into_iter().map(|c| (c.seq, c.replica)).collect();
        assert_eq!(
            feed,
            vec![(first, "replica-a".into()), (second, "replica-a".into()), (by_b, "replica-b".into())],
            "{name}"
        );
        // B's publication of its final state passes after the operation ended and B released.
        b.set_operation_status_fenced(&took, OperationStatus::Succeeded, None).unwrap();
        b.release_lease(&took).unwrap();
        assert!(b.publish_change_fenced(&took, &state).unwrap() > by_b, "{name}");
        // A lease never granted publishes nothing.
        let other = insert_new(a, new_op("cluster/feed-fence-2", None, json!({})));
        let invented = Lease { operation_id: other.id.clone(), ..held.clone() };
        assert!(fenced(a.publish_change_fenced(&invented, &state)).contains("never granted"), "{name}");
    }
}

#[test]
fn two_replicas_acquiring_at_once_get_one_lease() {
    for (name, handles, _guard) in shared_backends() {
        let op = insert_new(handles[0].as_ref(), new_op("cluster/race", None, json!({})));
        for round in 0..5 {
            if round > 0 {
                // Free the lease for the next race.
                let held = handles[0].get_lease(&op.id).unwrap().unwrap();
                handles[0].release_lease(&held).unwrap();
            }
            let barrier = Arc::new(Barrier::new(2));
            let winners: Vec<Option<Lease>> = std::thread::scope(|s| {
                let joins: Vec<_> = handles
                    .iter()
                    .enumerate()
                    .map(|(i, h)| {
                        let (barrier, id) = (barrier.clone(), op.id.clone());
                        s.spawn(move || {
                            barrier.wait();
                            h.acquire_lease(&id, &format!("replica-{i}"), TTL).unwrap()
                        })
                    })
                    .collect();
                joins.into_iter().map(|j| j.join().unwrap()).collect()
            });
            let won: Vec<&Lease> = winners.iter().flatten().collect();
            assert_eq!(won.len(), 1, "{name} round {round}: exactly one acquirer wins: {winners:?}");
            assert_eq!(won[0].token, round + 1, "{name} round {round}");
            assert_eq!(handles[1].get_lease(&op.id).unwrap().as_ref(), Some(won[0]), "{name}");
        }
    }
}

fn op_of_kind(target: &str, kind: OperationKind) -> NewOperation {
    NewOperation { kind, ..new_op(target, None, json!({ "kind": kind.as_str() })) }
}

#[test]
fn latest_operations_gives_the_newest_of_each_target_optionally_by_kind() {
    use OperationKind::{CreateCluster, DeleteCluster, ImportCluster, UpdateInstanceGroup};
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let create_a = insert_new(store, op_of_kind("cluster/a", CreateCluster));
        store.set_operation_status(&create_a.id, OperationStatus::Succeeded, None).unwrap();
        let update_a = insert_new(store, op_of_kind("cluster/a", UpdateInstanceGroup));
        store.set_operation_status(&update_a.id, OperationStatus::Failed, Some("throttled")).unwrap();
        let update_a2 = insert_new(store, op_of_kind("cluster/a", UpdateInstanceGroup));
        let import_b = insert_new(store, op_of_kind("cluster/b", ImportCluster));
        let other = insert_new(store, op_of_kind("cluster/z", DeleteCluster));
        let targets: Vec<String> = ["cluster/a", "cluster/b", "cluster/c"].map(String::from).to_vec();
        let lifecycle = [CreateCluster, ImportCluster, DeleteCluster];

        let latest = store.latest_operations(&targets, &[]).unwrap();
        let ids: Vec<(&str, &OperationId)> = latest.iter().map(|(t, h)| (t.as_str(), &h.id)).collect();
        assert_eq!(ids, vec![("cluster/a", &update_a2.id), ("cluster/b", &import_b.id)], "{backend}: any kind");
        let a = &latest["cluster/a"];
        assert_eq!((a.kind, a.status, a.target.as_str()), (UpdateInstanceGroup, OperationStatus::Running, "cluster/a"));
        assert_eq!(a.created_at, update_a2.created_at, "{backend}");

        let by_kind = store.latest_operations(&targets, &lifecycle).unwrap();
        let ids: Vec<(&str, &OperationId)> = by_kind.iter().map(|(t, h)| (t.as_str(), &h.id)).collect();
        assert_eq!(ids, vec![("cluster/a", &create_a.id), ("cluster/b", &import_b.id)], "{backend}: lifecycle");
        assert_eq!(by_kind["cluster/a"].status, OperationStatus::Succeeded);
        let failed = store.latest_operations(&["cluster/a".into()], &[UpdateInstanceGroup]).unwrap();
        assert_eq!(failed["cluster/a"].id, update_a2.id, "{backend}: newest of the kind, whatever its status");
        assert!(store.latest_operations(&[], &[]).unwrap().is_empty(), "{backend}: no targets");
        assert!(!store.latest_operations(&targets, &[]).unwrap().contains_key("cluster/z"), "{other:?} not asked");

        // The one-query answers agree with the trait's reference (one read per target).
        let reference = PerTarget(store);
        for kinds in [&[][..], &lifecycle[..], &[UpdateInstanceGroup][..], &[DeleteCluster][..]] {
            let all: Vec<String> = ["cluster/a", "cluster/b", "cluster/c", "cluster/z"].map(String::from).to_vec();
            assert_eq!(
                store.latest_operations(&all, kinds).unwrap(),
                reference.latest_operations(&all, kinds).unwrap(),
                "{backend}: {kinds:?}"
            );
        }
        let mut counts = store.count_operations().unwrap();
        let mut want = reference.count_operations().unwrap();
        counts.sort_by_key(|(s, _)| s.as_str());
        want.sort_by_key(|(s, _)| s.as_str());
        assert_eq!(counts, want, "{backend}");
        assert_eq!(
            counts,
            vec![(OperationStatus::Failed, 1), (OperationStatus::Running, 3), (OperationStatus::Succeeded, 1)],
            "{backend}"
        );
    }
}

/// Operations by status, as `count_operations` answers.
type Counts = Vec<(OperationStatus, u64)>;

/// A change made to a store in a table test.
type Change<'a> = Box<dyn Fn() + 'a>;

/// `count_operations`, and as the trait's reference computes it (every operation read), sorted.
fn counted(store: &dyn Store) -> (Counts, Counts) {
    let mut got = store.count_operations().unwrap();
    let mut want = PerTarget(store).count_operations().unwrap();
    got.sort_by_key(|(s, _)| s.as_str());
    want.sort_by_key(|(s, _)| s.as_str());
    (got, want)
}

#[test]
fn operation_counts_follow_every_change_without_reading_the_operations() {
    use OperationKind::{CreateCluster, UpdateInstanceGroup};
    use OperationStatus::{Cancelled, Failed, NeedsAttention, Running, Succeeded};
    for (backend, store, _dir) in backends() {
        let store = &*store;
        assert_eq!(store.count_operations().unwrap(), vec![], "{backend}: empty");
        let a = insert_new(store, op_of_kind("cluster/a", CreateCluster));
        let b = insert_new(store, op_of_kind("cluster/b", CreateCluster));
        let keyed = new_op("cluster/c", Some("key-1"), json!({"n": 1}));
        let c = insert_new(store, keyed.clone());
        // (what happens, the counts after it)
        let steps: Vec<(&str, Change<'_>, Counts)> = vec![
            ("three inserted", Box::new(|| {}), vec![(Running, 3)]),
            (
                "the same idempotency key again: no new operation",
                Box::new(|| assert!(matches!(store.insert_operation(keyed.clone()), Ok(Inserted::Existing(_))))),
                vec![(Running, 3)],
            ),
            (
                "a second running operation on a target is refused",
                Box::new(|| assert!(store.insert_operation(op_of_kind("cluster/a", UpdateInstanceGroup)).is_err())),
                vec![(Running, 3)],
            ),
            (
                "one succeeds, one fails",
                Box::new(|| {
                    store.set_operation_status(&a.id, Succeeded, None).unwrap();
                    store.set_operation_status(&b.id, Failed, Some("throttled")).unwrap();
                }),
                vec![(Failed, 1), (Running, 1), (Succeeded, 1)],
            ),
            (
                "the same status again",
                Box::new(|| store.set_operation_status(&b.id, Failed, Some("again")).unwrap()),
                vec![(Failed, 1), (Running, 1), (Succeeded, 1)],
            ),
            (
                "a retry reopens the failed one",
                Box::new(|| store.reopen_operation(&b.id).unwrap()),
                vec![(Running, 2), (Succeeded, 1)],
            ),
            (
                "needs attention, cancelled",
                Box::new(|| {
                    store.set_operation_status(&b.id, NeedsAttention, Some("not ours")).unwrap();
                    store.set_operation_status(&c.id, Cancelled, None).unwrap();
                }),
                vec![(Cancelled, 1), (NeedsAttention, 1), (Succeeded, 1)],
            ),
            (
                "archived operations still count",
                Box::new(|| assert_eq!(store.archive_operations(Utc::now(), 100).unwrap(), 2)),
                vec![(Cancelled, 1), (NeedsAttention, 1), (Succeeded, 1)],
            ),
            (
                "a new one on a finished target",
                Box::new(|| drop(insert_new(store, op_of_kind("cluster/a", UpdateInstanceGroup)))),
                vec![(Cancelled, 1), (NeedsAttention, 1), (Running, 1), (Succeeded, 1)],
            ),
        ];
        for (what, change, want) in steps {
            change();
            let (got, reference) = counted(store);
            assert_eq!(got, want, "{backend}: {what}");
            assert_eq!(got, reference, "{backend}: {what}: the reference agrees");
        }
    }
}

/// Operations recorded before schema version 8 are counted once it is applied: the migration
/// fills `operation_counts` from the table, then the triggers keep it.
#[test]
fn the_counts_migration_counts_the_operations_already_recorded() {
    let insert_some = |store: &dyn Store| {
        for (i, status) in
            [OperationStatus::Succeeded, OperationStatus::Failed, OperationStatus::Succeeded].into_iter().enumerate()
        {
            let op = insert_new(store, op_of_kind(&format!("cluster/c{i}"), OperationKind::CreateCluster));
            store.set_operation_status(&op.id, status, None).unwrap();
        }
        insert_new(store, op_of_kind("cluster/r", OperationKind::CreateCluster));
    };
    let undo_v8 = "DROP TRIGGER operation_counts_insert; DROP TRIGGER operation_counts_update; \
                   DROP TRIGGER operation_counts_delete; DROP TABLE operation_counts; \
                   DELETE FROM schema_migrations WHERE version = 8";
    let want = vec![(OperationStatus::Failed, 1), (OperationStatus::Running, 1), (OperationStatus::Succeeded, 2)];

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    insert_some(&SqliteStore::open(&path).unwrap());
    rusqlite::Connection::open(&path).unwrap().execute_batch(undo_v8).unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(counted(&store), (want.clone(), want.clone()), "sqlite: filled by the migration");
    insert_new(&store, op_of_kind("cluster/s", OperationKind::CreateCluster));
    let (got, reference) = counted(&store);
    assert_eq!((got.len(), got), (3, reference), "sqlite: then kept");

    let Some(server) = pg_server() else { return };
    let url = server.create_database();
    insert_some(&PostgresStore::connect(&url).unwrap());
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    db.batch_execute(
        "DROP TRIGGER operation_counts_insert_delete ON operations; DROP TRIGGER operation_counts_update ON operations; \
         DROP FUNCTION operation_counts_keep(); DROP TABLE operation_counts; \
         DELETE FROM schema_migrations WHERE version = 8",
    )
    .unwrap();
    let store = PostgresStore::connect(&url).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(counted(&store), (want.clone(), want), "postgres: filled by the migration");
    insert_new(&store, op_of_kind("cluster/s", OperationKind::CreateCluster));
    let (got, reference) = counted(&store);
    assert_eq!((got.len(), got), (3, reference), "postgres: then kept");
}

#[test]
fn archived_operations_leave_the_hot_lists_and_stay_readable() {
    use OperationKind::{CreateCluster, UpdateInstanceGroup};
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let create = insert_new(store, op_of_kind("cluster/a", CreateCluster));
        store.set_operation_status(&create.id, OperationStatus::Succeeded, None).unwrap();
        let failed = insert_new(store, op_of_kind("cluster/a", UpdateInstanceGroup));
        store.set_operation_status(&failed.id, OperationStatus::Failed, Some("throttled")).unwrap();
        let attention = insert_new(store, op_of_kind("cluster/b", CreateCluster));
        store.set_operation_status(&attention.id, OperationStatus::NeedsAttention, Some("not ours")).unwrap();
        let running = insert_new(store, op_of_kind("cluster/c", CreateCluster));
        let cutoff = Utc::now();
        let later = insert_new(store, op_of_kind("cluster/d", CreateCluster));
        store.set_operation_status(&later.id, OperationStatus::Cancelled, None).unwrap();
        let ids = |archived: Option<bool>, target: Option<&str>| -> Vec<OperationId> {
            let filter = OperationFilter { target: target.map(String::from), archived, ..OperationFilter::default() };
            store.list_operations(&filter).unwrap().into_iter().map(|o| o.id).collect()
        };
        let everything = ids(None, None);
        // Nothing finished before an hour ago.
        assert_eq!(store.archive_operations(Utc::now() - Duration::hours(1), 100).unwrap(), 0, "{backend}");
        assert_eq!(ids(Some(false), None), everything, "{backend}: all hot");
        assert!(ids(Some(true), None).is_empty(), "{backend}");

        // Finished before the cutoff, oldest first, at most `limit` per call; `later` finished
        // after the cutoff; the running and needs-attention ones never move.
        assert_eq!(store.archive_operations(cutoff, 1).unwrap(), 1, "{backend}: limit");
        assert_eq!(ids(Some(true), None), vec![create.id.clone()], "{backend}: the oldest first");
        assert_eq!(store.archive_operations(cutoff, 100).unwrap(), 1, "{backend}");
        assert_eq!(store.archive_operations(cutoff, 100).unwrap(), 0, "{backend}: nothing left");
        assert_eq!(ids(Some(true), None), vec![failed.id.clone(), create.id.clone()], "{backend}");
        assert_eq!(
            ids(Some(false), None),
            vec![later.id.clone(), running.id.clone(), attention.id.clone()],
            "{backend}: hot"
        );
        assert_eq!(ids(None, None), everything, "{backend}: nothing deleted");
        assert_eq!(ids(Some(true), Some("cluster/a")).len(), 2, "{backend}: with a target");
        assert!(ids(Some(false), Some("cluster/a")).is_empty(), "{backend}");
        let hot_page = store
            .page_operations(
                &OperationFilter { archived: Some(false), ..OperationFilter::default() },
                &instantstart_core::page::PageRequest { limit: 2, after: None },
            )
            .unwrap();
        assert_eq!(hot_page.items.iter().map(|o| &o.id).collect::<Vec<_>>(), vec![&later.id, &running.id], "{backend}");
        assert!(hot_page.next.is_some(), "{backend}: a next page");

        // Still read by id and still the cluster's newest operations (its status).
        let read = store.get_operation(&create.id).unwrap().expect("archived operations are kept");
        assert_eq!((read.status, read.steps.len()), (OperationStatus::Succeeded, 3), "{backend}");
        let latest = store.latest_operations(&["cluster/a".into()], &[CreateCluster]).unwrap();
        assert_eq!(latest["cluster/a"].id, create.id, "{backend}: lifecycle status reads archived operations");

        // A step retry reopens the operation: back in the hot list.
        store.reopen_operation(&failed.id).unwrap();
        assert_eq!(ids(Some(true), None), vec![create.id.clone()], "{backend}: reopened is hot");
        assert!(ids(Some(false), Some("cluster/a")).contains(&failed.id), "{backend}");
    }
}

#[test]
fn latest_operations_of_a_thousand_targets_is_one_query() {
    // The SQLite file runs the same statements as SQLite in memory, only slower (an fsync per write).
    for (backend, store, _guard) in backends().into_iter().filter(|(b, ..)| *b != "sqlite file") {
        let store = &*store;
        let targets: Vec<String> = (0..1_200).map(|i| format!("cluster/c{i:04}")).collect();
        let mut newest = HashMap::new();
        for (i, t) in targets.iter().enumerate() {
            let first = insert_new(store, new_op(t, None, json!({})));
            store.set_operation_status(&first.id, OperationStatus::Succeeded, None).unwrap();
            if i % 3 == 0 {
                let second = insert_new(store, op_of_kind(t, OperationKind::UpdateInstanceGroup));
                newest.insert(t.clone(), second.id);
            } else {
                newest.insert(t.clone(), first.id);
            }
        }
        // More targets than SQLite's bound-parameter limit of old builds (999): one statement.
        let latest = store.latest_operations(&targets, &[]).unwrap();
        assert_eq!(latest.len(), targets.len(), "{backend}");
        for (t, head) in &latest {
            assert_eq!(&head.id, &newest[t], "{backend}: {t}");
        }
        let lifecycle = store.latest_operations(&targets, &[OperationKind::CreateCluster]).unwrap();
        assert!(lifecycle.values().all(|h: &OperationHead| h.kind == OperationKind::CreateCluster), "{backend}");
        assert_eq!(lifecycle.len(), targets.len(), "{backend}");
    }
}

#[test]
fn audit_is_listed_newest_first_by_target_with_a_limit() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let entry = |secs: i64, target: &str, action: &str| AuditEntry {
            at: at(secs, 500),
            actor: Actor::system(),
            action: action.into(),
            target: target.into(),
            operation_id: (action == "op").then(|| OperationId("op-1".into())),
            detail: json!({ "n": secs }),
        };
        let entries = [entry(1, "cluster/a", "one"), entry(3, "cluster/b", "op"), entry(2, "cluster/a", "two")];
        for e in &entries {
            store.append_audit(e).unwrap();
        }
        let [e1, e3, e2] = entries;
        let cases = [
            (None, 10, vec![&e3, &e2, &e1]),
            (Some("cluster/a"), 10, vec![&e2, &e1]),
            (Some("cluster/a"), 1, vec![&e2]),
            (None, 0, vec![]),
            (Some("cluster/z"), 10, vec![]),
        ];
        for (target, limit, want) in cases {
            let got = store.list_audit(target, limit).unwrap();
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "{backend}: {target:?} {limit}");
        }
    }
}

#[test]
fn clusters_can_be_put_listed_replaced_and_deleted() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let t = at(0, 42);
        let demo = ClusterRecord {
            name: "demo".into(),
            region: "us-east-1".into(),
            source: ClusterSource::Created,
            eks_cluster: "is-demo".into(),
            hyperpod_cluster: Some("is-demo-hp".into()),
            vpc_id: None,
            bucket: None,
            kubernetes_version: Some("1.32".into()),
            request: Some(cluster_request("demo")),
            created_at: t,
            updated_at: t,
        };
        let imported = ClusterRecord {
            name: "alpha".into(),
            source: ClusterSource::Imported,
            eks_cluster: "existing".into(),
            hyperpod_cluster: None,
            request: None,
            kubernetes_version: None,
            ..demo.clone()
        };
        assert_eq!(store.get_cluster("demo").unwrap(), None, "{backend}");
        store.put_cluster(&demo).unwrap();
        store.put_cluster(&imported).unwrap();
        assert_eq!(store.get_cluster("demo").unwrap().as_ref(), Some(&demo), "{backend}");
        assert_eq!(store.list_clusters().unwrap(), vec![imported.clone(), demo.clone()], "{backend}: by name");

        let updated = ClusterRecord { vpc_id: Some("vpc-1".into()), updated_at: at(5, 0), ..demo.clone() };
        store.put_cluster(&updated).unwrap();
        assert_eq!(store.get_cluster("demo").unwrap().as_ref(), Some(&updated), "{backend}: replaced");
        assert_eq!(store.list_clusters().unwrap().len(), 2);

        store.delete_cluster("demo").unwrap();
        store.delete_cluster("demo").unwrap(); // deleting again is fine
        assert_eq!(store.get_cluster("demo").unwrap(), None, "{backend}");
        assert_eq!(store.list_clusters().unwrap(), vec![imported], "{backend}");
    }
}

#[test]
fn settings_can_be_set_replaced_and_cleared() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let steps: [(&str, Option<&str>, Option<&str>); 5] = [
            (ACTIVE_CLUSTER, Some("demo"), Some("demo")),
            (ACTIVE_CLUSTER, Some("other"), Some("other")),
            ("theme", Some(""), Some("")),
            (ACTIVE_CLUSTER, None, None),
            (ACTIVE_CLUSTER, None, None), // clearing an unset key is fine
        ];
        assert_eq!(store.get_setting(ACTIVE_CLUSTER).unwrap(), None);
        for (key, value, want) in steps {
            store.set_setting(key, value).unwrap();
            assert_eq!(store.get_setting(key).unwrap().as_deref(), want, "{backend}: {key} = {value:?}");
        }
        assert_eq!(store.get_setting("theme").unwrap().as_deref(), Some(""), "{backend}");
    }
}

// ---------------------------------------------------------------------------------------------
// Durability and schema

#[test]
fn everything_persists_across_reopening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let sqlite = SqliteStore::open(&path).unwrap();
    assert_eq!(sqlite.path(), Some(path.as_path()));
    drop(sqlite);
    type Open = Box<dyn Fn() -> Box<dyn StoreBackend>>;
    let mut reopenable: Vec<(&str, Open, common::Guard)> =
        vec![("sqlite file", Box::new(move || Box::new(SqliteStore::open(&path).unwrap())), common::Guard::Dir(dir))];
    if let Some(server) = pg_server() {
        let url = server.create_database();
        reopenable.push((
            "postgres",
            Box::new(move || Box::new(PostgresStore::connect(&url).unwrap())),
            common::Guard::Postgres(server),
        ));
    }
    for (backend, open, _guard) in reopenable {
        let store = open();
        let op = insert_new(&*store, new_op("cluster/demo", Some("k"), json!({"n": 1})));
        let started = at(10, 987_654_321);
        store
            .update_step(
                &op.id,
                "network",
                &StepUpdate {
                    phase: Some(StepPhase::Polling),
                    attempts: Some(2),
                    resource: Some(ResourceRef { kind: "vpc".into(), id: "vpc-9".into(), arn: None }),
                    outputs: Some(json!({"vpc_id": "vpc-9"})),
                    detail: Some(Some("waiting".into())),
                    started_at: Some(started),
                    ..Default::default()
                },
            )
            .unwrap();
        store.set_setting(ACTIVE_CLUSTER, Some("demo")).unwrap();
        store
            .append_audit(&AuditEntry {
                at: Utc::now() + Duration::seconds(1),
                actor: alice(),
                action: "step.retry".into(),
                target: "cluster/demo".into(),
                operation_id: Some(op.id.clone()),
                detail: json!({"step": "network"}),
            })
            .unwrap();
        let saved = store.get_operation(&op.id).unwrap().unwrap();
        let audit = store.list_audit(None, 10).unwrap();
        drop(store);

        let store = open();
        let loaded = store.get_operation(&op.id).unwrap().unwrap();
        assert_eq!(loaded, saved, "{backend}");
        let step = loaded.step("network").unwrap();
        assert_eq!((step.phase, step.attempts, step.started_at), (StepPhase::Polling, 2, Some(started)));
        assert_eq!(store.list_audit(None, 10).unwrap(), audit);
        assert_eq!(store.get_setting(ACTIVE_CLUSTER).unwrap().as_deref(), Some("demo"));
        assert_eq!(store.running_operations().unwrap(), vec![saved], "{backend}");
    }
}

#[test]
fn migrations_are_idempotent_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    for _ in 0..3 {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        store.set_setting("opened", Some("yes")).unwrap();
        store.integrity_check().unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = conn.query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, i64::from(SCHEMA_VERSION), "each migration recorded once");
    conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, 'later')", [SCHEMA_VERSION + 1])
        .unwrap();
    drop(conn);
    match SqliteStore::open(&path) {
        Err(StoreError::Backend(msg)) => assert!(msg.contains("newer"), "{msg}"),
        other => panic!("expected a schema version error, got {other:?}"),
    }
}

#[test]
fn opening_a_file_that_is_not_a_database_is_a_backend_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
    assert!(matches!(SqliteStore::open(&path), Err(StoreError::Backend(_))));
}

#[test]
fn postgres_migrations_are_idempotent_and_a_newer_schema_is_refused() {
    let Some(server) = pg_server() else { return };
    let url = server.create_database();
    for _ in 0..3 {
        let store = PostgresStore::connect(&url).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        store.set_setting("opened", Some("yes")).unwrap();
    }
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows: i64 = db.query_one("SELECT COUNT(*) FROM schema_migrations", &[]).unwrap().get(0);
    assert_eq!(rows, i64::from(SCHEMA_VERSION), "each migration recorded once");
    db.execute(
        "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 'later')",
        &[&i64::from(SCHEMA_VERSION + 1)],
    )
    .unwrap();
    match PostgresStore::connect(&url) {
        Err(StoreError::Backend(msg)) => assert!(msg.contains("newer"), "{msg}"),
        other => panic!("expected a schema version error, got {other:?}"),
    }
}

#[test]
fn postgres_servers_connecting_at_once_migrate_a_fresh_database_once() {
    let Some(server) = pg_server() else { return };
    let url = server.create_database();
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                PostgresStore::connect(&url).map(|s| s.schema_version())
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), Ok(SCHEMA_VERSION));
    }
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows: i64 = db.query_one("SELECT COUNT(*) FROM schema_migrations", &[]).unwrap().get(0);
    assert_eq!(rows, i64::from(SCHEMA_VERSION));
}

#[test]
fn postgres_refuses_to_change_the_audit_log() {
    let Some(server) = pg_server() else { return };
    let url = server.create_database();
    let store = PostgresStore::connect(&url).unwrap();
    store
        .append_audit(&AuditEntry {
            at: Utc::now(),
            actor: Actor::system(),
            action: "test".into(),
            target: "t".into(),
            operation_id: None,
            detail: Value::Null,
        })
        .unwrap();
    let mut db = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    for sql in ["UPDATE audit SET action = 'x'", "DELETE FROM audit", "TRUNCATE audit"] {
        let err = db.batch_execute(sql).unwrap_err();
        let message = err.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
        assert!(message.contains("append-only"), "{sql}: {err:?}");
    }
    assert_eq!(store.list_audit(None, 10).unwrap().len(), 1);
}

#[test]
fn postgres_calls_work_from_tokio_worker_threads() {
    // The server calls the (synchronous) store from tokio workers, where the blocking client
    // would panic if it ran on the caller's thread.
    let Some(server) = pg_server() else { return };
    let store: Arc<dyn StoreBackend> = Arc::new(PostgresStore::connect(&server.create_database()).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let got = runtime.block_on(async move {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store.set_setting(&format!("k{i}"), Some("v")).unwrap();
                    store.get_setting(&format!("k{i}")).unwrap()
                })
            })
            .collect();
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap());
        }
        got
    });
    assert_eq!(got, vec![Some("v".to_string()); 8]);
}

#[test]
fn postgres_connections_broken_under_the_store_are_reopened() {
    let Some(server) = pg_server() else { return };
    let url = server.create_database();
    let store = PostgresStore::connect(&url).unwrap();
    store.set_setting("k", Some("v")).unwrap();
    let mut admin = server.admin();
    let db = url.rsplit('/').next().unwrap().to_string();
    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", &[&db]).unwrap();
    // A call on a connection that broke fails (the store cannot know whether a write
    // committed, so it does not retry); the next call on that thread reconnects. The store has
    // four connection threads, so at most four calls fail before every one has reconnected.
    let (mut failures, mut in_a_row) = (Vec::new(), 0);
    for _ in 0..40 {
        match store.get_setting("k") {
            Ok(v) => {
                assert_eq!(v.as_deref(), Some("v"));
                in_a_row += 1;
            }
            Err(e) => {
                failures.push(e);
                in_a_row = 0;
            }
        }
        if in_a_row == 8 {
            break;
        }
    }
    assert!(failures.len() <= 4 && in_a_row == 8, "{failures:?}");
    store.set_setting("k", Some("w")).unwrap();
    assert_eq!(store.get_setting("k").unwrap().as_deref(), Some("w"));
}

#[test]
fn postgres_unreachable_or_malformed_is_a_backend_error() {
    // A loopback port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for url in [format!("postgres://nobody@127.0.0.1:{port}/x?connect_timeout=5"), "postgres://u:pw@h:port/x".into()] {
        match PostgresStore::connect(&url) {
            Err(StoreError::Backend(msg)) => assert!(!msg.contains("pw@"), "{url}: {msg}"),
            other => panic!("{url}: expected a backend error, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Crash test: SIGKILL a writer at random points; nothing it reported as committed may be lost.

/// Set in the child process: the database the writer uses.
const CRASH_DB_ENV: &str = "INSTANTSTART_STORE_CRASH_DB";
const CRASH_STEPS: usize = 3;

/// Not a test on its own: when `CRASH_DB_ENV` is set, this process is the crash writer.
#[test]
fn crash_writer_child() {
    if let Ok(path) = std::env::var(CRASH_DB_ENV) {
        crash_writer(Path::new(&path));
    }
}

/// Loops forever (until killed, or 30 s) performing store calls; after each call returns it
/// prints what is now committed as one `@@ …` line.
fn crash_writer(path: &Path) {
    let store = SqliteStore::open(path).expect("open");
    let mut out = std::io::stdout().lock();
    let mut report = move |line: String| {
        if writeln!(out, "@@ {line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(0); // the parent is gone
        }
    };
    // Like the engine after a restart: settle what the previous (killed) writer left running.
    for op in store.running_operations().expect("running") {
        store.set_operation_status(&op.id, OperationStatus::Failed, Some("interrupted")).expect("status");
        report(format!("status {} failed", op.id));
    }
    // Continue the sequence from what is durable, so it only grows across writers.
    let setting: u32 = store.get_setting("crash.seq").expect("setting").and_then(|s| s.parse().ok()).unwrap_or(0);
    let ops = store.list_operations(&OperationFilter::default()).expect("list");
    let mut seq = ops.iter().flat_map(|o| &o.steps).map(|s| s.attempts).chain([setting]).max().unwrap_or(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        seq += 1;
        let id = OperationId::generate();
        let mut new = new_op(&format!("cluster/{id}"), Some(&format!("key-{id}")), json!({ "seq": seq }));
        new.id = id;
        new.steps.truncate(CRASH_STEPS);
        let id = insert_new(&store, new).id;
        report(format!("op {id}"));
        for key in steps().iter().take(CRASH_STEPS).map(|s| s.key.clone()) {
            for phase in [StepPhase::Submitting, StepPhase::Succeeded] {
                seq += 1;
                let update = StepUpdate {
                    phase: Some(phase),
                    attempts: Some(seq),
                    detail: Some(Some(format!("seq {seq}"))),
                    outputs: Some(json!({ "seq": seq })),
                    ..Default::default()
                };
                store.update_step(&id, &key, &update).expect("update step");
                report(format!("step {id} {key} {seq}"));
            }
        }
        store.set_operation_status(&id, OperationStatus::Succeeded, None).expect("status");
        report(format!("status {id} succeeded"));
        store.set_setting("crash.seq", Some(&seq.to_string())).expect("setting");
        report(format!("setting {seq}"));
    }
}

/// What the writer reported as committed.
#[derive(Default)]
struct Claims {
    ops: HashSet<String>,
    steps: HashMap<(String, String), u32>,
    statuses: HashMap<String, String>,
    setting: u32,
    lines: usize,
}

impl Claims {
    fn record(&mut self, line: &str) {
        // libtest may print on the same line before our output: take what follows the marker.
        let Some(at) = line.find("@@ ") else { return };
        let words: Vec<&str> = line[at + 3..].split_whitespace().collect();
        self.lines += 1;
        match words.as_slice() {
            ["op", id] => {
                self.ops.insert(id.to_string());
            }
            ["step", id, key, seq] => {
                let seq: u32 = seq.parse().expect("seq");
                let e = self.steps.entry((id.to_string(), key.to_string())).or_default();
                *e = (*e).max(seq);
            }
            ["status", id, status] => {
                self.statuses.insert(id.to_string(), status.to_string());
            }
            ["setting", seq] => self.setting = self.setting.max(seq.parse().expect("seq")),
            other => panic!("unexpected line from the writer: {other:?}"),
        }
    }
}

#[test]
fn the_database_survives_sigkill_at_any_point() {
    use rand::Rng;
    const ROUNDS: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let exe = std::env::current_exe().expect("test binary");
    let mut rng = rand::rng();
    let mut claims = Claims::default();
    for round in 0..ROUNDS {
        let stderr_path = dir.path().join(format!("child-{round}.stderr"));
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_writer_child", "--nocapture", "--test-threads=1"])
            .env(CRASH_DB_ENV, &db)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
            .spawn()
            .expect("spawn the writer");
        let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
        // Kill after a random number of committed calls (sometimes before the first one).
        let kill_after = if round == 0 { 0 } else { rng.random_range(1..=300) };
        let mut seen = 0;
        let mut line = String::new();
        while seen < kill_after {
            line.clear();
            if reader.read_line(&mut line).expect("read") == 0 {
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!("round {round}: the writer exited after {seen} lines:\n{stderr}");
            }
            if line.ends_with('\n') && line.contains("@@ ") {
                claims.record(&line);
                seen += 1;
            }
        }
        child.kill().expect("kill");
        child.wait().expect("wait");
        // Lines written after the kill decision but before the kill are claims too. A line cut
        // short by the kill has no newline and claims nothing.
        loop {
            line.clear();
            if reader.read_line(&mut line).expect("read") == 0 {
                break;
            }
            if line.ends_with('\n') && line.contains("@@ ") {
                claims.record(&line);
            }
        }
    }
    assert!(claims.lines > ROUNDS, "the writer made progress");
    let interrupted = claims.statuses.values().filter(|s| *s == "failed").count();
    println!(
        "crash test: {ROUNDS} kills, {} committed calls reported, {} operations, {interrupted} interrupted mid-way",
        claims.lines,
        claims.ops.len()
    );

    // The file is intact (checked before and after the store's own open/migrate).
    let conn = rusqlite::Connection::open(&db).expect("open raw");
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check");
    assert_eq!(check, "ok");
    drop(conn);
    let store = SqliteStore::open(&db).expect("reopen");
    store.integrity_check().expect("integrity");

    // Nothing reported as committed was lost.
    for id in &claims.ops {
        assert!(store.get_operation(&OperationId(id.clone())).unwrap().is_some(), "operation {id} lost");
    }
    for ((id, key), seq) in &claims.steps {
        let op = store.get_operation(&OperationId(id.clone())).unwrap().expect("operation of a step");
        let step = op.step(key).expect("step");
        assert!(step.attempts >= *seq, "step {id}/{key}: reported seq {seq}, stored {}", step.attempts);
        assert_eq!(step.outputs, json!({ "seq": step.attempts }), "step {id}/{key}: one update is one transaction");
        assert_eq!(step.detail, Some(format!("seq {}", step.attempts)));
    }
    for (id, status) in &claims.statuses {
        let op = store.get_operation(&OperationId(id.clone())).unwrap().expect("operation");
        assert_eq!(op.status.as_str(), status, "operation {id}");
    }
    let setting: u32 = store.get_setting("crash.seq").unwrap().map_or(0, |s| s.parse().expect("number"));
    assert!(setting >= claims.setting, "setting: reported {}, stored {setting}", claims.setting);

    // Inserts are atomic: every stored operation has all its steps and exactly one create entry.
    let ops = store.list_operations(&OperationFilter::default()).unwrap();
    assert!(ops.len() >= claims.ops.len());
    let audit = store.list_audit(None, u32::MAX).unwrap();
    for op in &ops {
        assert_eq!(op.steps.len(), CRASH_STEPS, "operation {}", op.id);
        let creates =
            audit.iter().filter(|e| e.action == "operation.create" && e.operation_id.as_ref() == Some(&op.id)).count();
        assert_eq!(creates, 1, "operation {}", op.id);
    }
    assert_eq!(audit.len(), ops.len());
    // At most the last operation of the last round is still running.
    assert!(store.running_operations().unwrap().len() <= 1);
}

#[test]
fn postgres_wakes_another_handles_change_signal_on_every_published_change() {
    let Some(server) = pg_server() else { return };
    let url = server.create_database();
    let (a, b) = (PostgresStore::connect(&url).unwrap(), PostgresStore::connect(&url).unwrap());
    let signal = b.change_signal().expect("PostgreSQL signals changes");
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let op = insert_new(&a, new_op("cluster/listen", None, json!({})));
    let operation = a.get_operation(&op.id).unwrap().unwrap();
    for round in 0..3 {
        // The listener may still be connecting: publish until the first wake-up arrives.
        let woke = rt.block_on(async {
            for _ in 0..50 {
                a.publish_change("replica-a", &operation).unwrap();
                if tokio::time::timeout(StdDuration::from_millis(200), signal.notified()).await.is_ok() {
                    return true;
                }
            }
            false
        });
        assert!(woke, "round {round}: B's signal woke on A's change");
    }
}
