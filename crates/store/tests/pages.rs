//! Keyset pagination of the store's lists (`instantstart_core::page`), on every backend:
//! pages cover a list exactly once in its order, the last page has no `next`, an empty list is
//! one empty page, inserts while paging neither repeat nor skip, and a forged cursor is refused.

mod common;

use chrono::{DateTime, TimeZone, Utc};
use common::backends;
use instantstart_core::operation::{
    Actor, AuditEntry, NewOperation, Operation, OperationId, OperationKind, OperationStatus, request_hash,
};
use instantstart_core::page::{Cursor, Page, PageRequest};
use instantstart_core::store::{
    AUDIT_LIST, CLUSTERS_LIST, ClusterRecord, ClusterSource, OPERATIONS_LIST, OperationFilter, Store, StoreError,
};
use serde_json::json;

fn new_op(target: &str) -> NewOperation {
    let kind = OperationKind::CreateCluster;
    let request = json!({ "target": target });
    NewOperation {
        id: OperationId::generate(),
        kind,
        target: target.into(),
        actor: Actor::system(),
        request_hash: request_hash(kind, target, &request),
        request,
        idempotency_key: None,
        steps: vec![],
    }
}

/// Inserts an operation on `target` and finishes it (a target holds one running operation).
fn finished_op(store: &dyn Store, target: &str) -> Operation {
    let op = store.insert_operation(new_op(target)).unwrap().into_operation();
    store.set_operation_status(&op.id, OperationStatus::Succeeded, None).unwrap();
    op
}

fn cluster(name: &str) -> ClusterRecord {
    let t: DateTime<Utc> = Utc.timestamp_opt(0, 0).unwrap();
    ClusterRecord {
        name: name.into(),
        region: "us-east-1".into(),
        source: ClusterSource::Imported,
        eks_cluster: name.into(),
        hyperpod_cluster: None,
        vpc_id: None,
        bucket: None,
        kubernetes_version: None,
        request: None,
        created_at: t,
        updated_at: t,
    }
}

/// Reads every page of a list through `read`, checking each page's size and that only the
/// last has no `next`.
fn all_pages<T>(limit: u32, mut read: impl FnMut(&PageRequest) -> Page<T>) -> Vec<Vec<T>> {
    let mut request = PageRequest::first(limit);
    let mut pages = Vec::new();
    loop {
        let page = read(&request);
        let last = page.next.is_none();
        assert!(page.items.len() <= limit as usize);
        if !last {
            assert_eq!(page.items.len(), limit as usize, "a page with a next is full");
        }
        pages.push(page.items);
        match page.next {
            Some(next) => request = PageRequest { limit, after: Some(next) },
            None => return pages,
        }
    }
}

#[test]
fn operation_pages_cover_each_filter_once_in_order() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let empty = store.page_operations(&OperationFilter::default(), &PageRequest::first(10)).unwrap();
        assert!(empty.items.is_empty() && empty.next.is_none(), "{backend}: an empty list is one empty page");
        for i in 0..23 {
            finished_op(store, &format!("cluster/c{}", i % 3));
        }
        let running = store.insert_operation(new_op("cluster/c0")).unwrap().into_operation();
        let filters = [
            OperationFilter::default(),
            OperationFilter { target: Some("cluster/c0".into()), ..Default::default() },
            OperationFilter { status: Some(OperationStatus::Succeeded), ..Default::default() },
            OperationFilter { status: Some(OperationStatus::Running), ..Default::default() },
            OperationFilter { target: Some("cluster/none".into()), ..Default::default() },
        ];
        for filter in &filters {
            let want: Vec<OperationId> = store.list_operations(filter).unwrap().into_iter().map(|o| o.id).collect();
            for limit in [1, 5, 8, 24, 100] {
                let pages = all_pages(limit, |r| store.page_operations(filter, r).unwrap());
                let got: Vec<OperationId> = pages.concat().into_iter().map(|o| o.id).collect();
                assert_eq!(got, want, "{backend}: {filter:?} limit {limit}");
            }
        }
        assert!(store.page_operations(&filters[3], &PageRequest::first(5)).unwrap().items[0].id == running.id);
    }
}

#[test]
fn operation_pages_are_stable_under_inserts() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let before: Vec<OperationId> = (0..12).map(|i| finished_op(store, &format!("cluster/c{i}")).id).collect();
        let filter = OperationFilter::default();
        let first = store.page_operations(&filter, &PageRequest::first(5)).unwrap();
        // Newer operations arrive while the client pages: they sort before its position.
        for i in 0..4 {
            finished_op(store, &format!("cluster/new{i}"));
        }
        let mut seen: Vec<OperationId> = first.items.iter().map(|o| o.id.clone()).collect();
        let rest = all_pages(5, |r| {
            let r = if r.after.is_none() { PageRequest { limit: 5, after: first.next.clone() } } else { r.clone() };
            store.page_operations(&filter, &r).unwrap()
        });
        seen.extend(rest.concat().into_iter().map(|o| o.id));
        let mut want = before.clone();
        want.reverse();
        assert_eq!(seen, want, "{backend}: every operation that existed, once, newest first");
    }
}

#[test]
fn audit_pages_keep_insertion_order_between_equal_timestamps() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        let at = |secs: i64| Utc.timestamp_opt(secs, 7).unwrap();
        // Three entries share each timestamp: the tie-break is insertion order.
        let mut appended = Vec::new();
        for i in 0..15 {
            let e = AuditEntry {
                at: at(i / 3),
                actor: Actor::system(),
                action: format!("a{i}"),
                target: if i % 2 == 0 { "cluster/even".into() } else { "cluster/odd".into() },
                operation_id: None,
                detail: json!({ "i": i }),
            };
            store.append_audit(&e).unwrap();
            appended.push(e);
        }
        for target in [None, Some("cluster/even"), Some("cluster/odd"), Some("cluster/none")] {
            let want = store.list_audit(target, 1000).unwrap();
            let mut newest_first: Vec<AuditEntry> =
                appended.iter().filter(|e| target.is_none_or(|t| e.target == t)).cloned().collect();
            newest_first.reverse();
            assert_eq!(want, newest_first, "{backend}: {target:?}: newest first, then last appended first");
            for limit in [1, 2, 4, 100] {
                let got = all_pages(limit, |r| store.page_audit(target, r).unwrap()).concat();
                assert_eq!(got, want, "{backend}: {target:?} limit {limit}");
            }
        }
    }
}

#[test]
fn cluster_pages_follow_names_and_see_later_names_only() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        for i in 0..9 {
            store.put_cluster(&cluster(&format!("m{i}"))).unwrap();
        }
        let first = store.page_clusters(&PageRequest::first(4)).unwrap();
        let names = |p: &Page<ClusterRecord>| p.items.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&first), ["m0", "m1", "m2", "m3"], "{backend}");
        store.put_cluster(&cluster("a-before")).unwrap();
        store.put_cluster(&cluster("z-after")).unwrap();
        store.delete_cluster("m3").unwrap(); // the position itself may go away
        let second = store.page_clusters(&PageRequest { limit: 4, after: first.next.clone() }).unwrap();
        assert_eq!(names(&second), ["m4", "m5", "m6", "m7"], "{backend}");
        let third = store.page_clusters(&PageRequest { limit: 4, after: second.next.clone() }).unwrap();
        assert_eq!(names(&third), ["m8", "z-after"], "{backend}");
        assert!(third.next.is_none(), "{backend}: the last page has no next");
        let all = all_pages(3, |r| store.page_clusters(r).unwrap()).concat();
        assert_eq!(all, store.list_clusters().unwrap(), "{backend}");
    }
}

#[test]
fn forged_cursors_are_refused_as_bad_cursors() {
    for (backend, store, _dir) in backends() {
        let store = &*store;
        // The right shape (the page rule checked it) with contents the store cannot use.
        let forged = [
            Cursor::new(OPERATIONS_LIST, vec!["yesterday".into(), "1".into()]),
            Cursor::new(OPERATIONS_LIST, vec!["2026-01-01T00:00:00Z".into(), "one".into()]),
        ];
        for cursor in forged {
            let r = PageRequest { limit: 5, after: Some(cursor.clone()) };
            let err = store.page_operations(&OperationFilter::default(), &r).unwrap_err();
            assert_eq!(err, StoreError::BadCursor, "{backend}: {cursor:?}");
            let audit = Cursor::new(AUDIT_LIST, cursor.key().to_vec());
            let err = store.page_audit(None, &PageRequest { limit: 5, after: Some(audit) }).unwrap_err();
            assert_eq!(err, StoreError::BadCursor, "{backend}: audit {cursor:?}");
        }
        let empty = PageRequest { limit: 5, after: Some(Cursor::new(CLUSTERS_LIST, vec![])) };
        assert_eq!(store.page_clusters(&empty).unwrap_err(), StoreError::BadCursor, "{backend}");
    }
}
