//! Lists that scale (issue #23): every list route takes `limit` and `cursor`, answers its JSON
//! array with `Link: <…>; rel="next"` while more follow, keeps its filters in that link, and
//! answers a bad `limit` or `cursor` with 400 naming the field before reading anything.

use super::*;
use instantstart_core::operation::{Actor, AuditEntry, NewOperation, OperationId, OperationKind, request_hash};
use instantstart_core::store::{ClusterRecord, ClusterSource};

/// Every list route (cluster-scoped ones name a cluster that need not exist: paging is checked
/// first).
const LIST_ROUTES: &[&str] = &[
    "/api/clusters",
    "/api/operations",
    "/api/audit",
    "/api/tokens",
    "/api/mlflow/servers",
    "/api/clusters/demo/jobs",
    "/api/clusters/demo/endpoints",
    "/api/clusters/demo/pools",
    "/api/clusters/demo/downloads",
    "/api/clusters/demo/instance-groups",
    "/api/clusters/demo/nodes",
];

/// The `next` link of a reply, if any.
fn next_link(r: &Reply) -> Option<String> {
    let link = r.headers.get(header::LINK)?.to_str().unwrap().to_string();
    let target = link.strip_prefix('<').and_then(|l| l.split_once(">; rel=\"next\"")).map(|(t, _)| t.to_string());
    assert!(target.is_some(), "a next link: {link}");
    target
}

/// Reads every page of `first`, following the links; checks every page but the last is full.
async fn follow(app: &Bed, first: &str, limit: usize) -> (Vec<Value>, Vec<String>) {
    let (mut items, mut links, mut uri) = (Vec::new(), Vec::new(), first.to_string());
    loop {
        let r = app.get(&uri).await;
        assert_eq!(r.status, StatusCode::OK, "{uri}: {:#}", r.body);
        let page = r.body.as_array().unwrap().clone();
        assert!(page.len() <= limit, "{uri}");
        match next_link(&r) {
            Some(next) => {
                assert_eq!(page.len(), limit, "{uri}: a page with a next link is full");
                items.extend(page);
                links.push(next.clone());
                uri = next;
            }
            None => {
                items.extend(page);
                return (items, links);
            }
        }
    }
}

#[tokio::test]
async fn bad_limits_and_cursors_are_400_naming_the_field_on_every_list() {
    let app = test_app(2000.0);
    for route in LIST_ROUTES {
        // (query, field named)
        for (query, field) in
            [("limit=0", "limit"), ("limit=501", "limit"), ("cursor=nonsense", "cursor"), ("limit=-1", "limit")]
        {
            let r = app.get(&format!("{route}?{query}")).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{route}?{query}: {:#}", r.body);
            assert!(r.body.to_string().contains(field), "{route}?{query} names {field}: {:#}", r.body);
        }
        // A good page is not refused: the route reads `limit` and `cursor` beside its own filters
        // (a cluster-scoped route may answer 404: `demo` does not exist).
        let r = app.get(&format!("{route}?limit=1")).await;
        assert!(matches!(r.status, StatusCode::OK | StatusCode::NOT_FOUND), "{route}?limit=1: {:#}", r.body);
        // A cursor of another list is refused too.
        let clusters_cursor = instantstart_core::page::Cursor::new("elsewhere", vec!["x".into()]).encode();
        let r = app.get(&format!("{route}?cursor={clusters_cursor}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{route}: a foreign cursor");
    }
}

#[tokio::test]
async fn clusters_page_by_name_with_next_links_and_tags_that_cover_them() {
    let app = test_app(2000.0);
    let t = chrono::Utc::now();
    let mut names: Vec<String> = (0..23).map(|i| format!("c{i:02}")).collect();
    for name in &names {
        app.state()
            .store
            .put_cluster(&ClusterRecord {
                name: name.clone(),
                region: "us-east-1".into(),
                source: ClusterSource::Imported,
                eks_cluster: name.clone(),
                hyperpod_cluster: None,
                vpc_id: None,
                bucket: None,
                kubernetes_version: None,
                request: None,
                created_at: t,
                updated_at: t,
            })
            .unwrap();
    }
    names.sort();
    let (items, links) = follow(&app, "/api/clusters?limit=5", 5).await;
    let got: Vec<&str> = items.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(got, names, "every cluster once, by name");
    assert_eq!(links.len(), 4);
    assert!(links.iter().all(|l| l.starts_with("/api/clusters?limit=5&cursor=")), "{links:?}");
    // Default page: 100, so all 23 without a link.
    let all = app.get("/api/clusters").await;
    assert_eq!(all.body.as_array().unwrap().len(), 23);
    assert!(all.headers.get(header::LINK).is_none());
    // The tag of a page covers its link: the same 5 items without a next page differ.
    let full = app.get("/api/clusters?limit=5").await;
    let tag = full.headers.get(header::ETAG).unwrap().to_str().unwrap().to_string();
    let again = app.send(Method::GET, "/api/clusters?limit=5", None, &[("if-none-match", &tag)]).await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
}

#[tokio::test]
async fn operations_and_audit_page_newest_first_keeping_their_filters() {
    let app = test_app(2000.0);
    let store = &app.state().store;
    for i in 0..14 {
        let target = if i % 2 == 0 { "cluster/even" } else { "cluster/odd" };
        let kind = OperationKind::CreateCluster;
        let request = json!({ "i": i });
        let op = store
            .insert_operation(NewOperation {
                id: OperationId::generate(),
                kind,
                target: target.into(),
                actor: Actor::system(),
                request_hash: request_hash(kind, target, &request),
                request,
                idempotency_key: None,
                steps: vec![],
            })
            .unwrap()
            .into_operation();
        store.set_operation_status(&op.id, instantstart_core::operation::OperationStatus::Succeeded, None).unwrap();
    }
    let want: Vec<Value> =
        app.get("/api/operations?target=cluster/even&limit=500").await.body.as_array().unwrap().clone();
    assert_eq!(want.len(), 7);
    let (items, links) = follow(&app, "/api/operations?target=cluster/even&status=succeeded&limit=3", 3).await;
    assert_eq!(items, want, "every operation of the filter once, newest first");
    assert!(links.iter().all(|l| l.contains("target=cluster/even") && l.contains("status=succeeded")), "{links:?}");

    store
        .append_audit(&AuditEntry {
            at: chrono::Utc::now(),
            actor: Actor::system(),
            action: "note".into(),
            target: "cluster/even".into(),
            operation_id: None,
            detail: json!(null),
        })
        .unwrap();
    let want = app.get("/api/audit?target=cluster/even&limit=500").await.body;
    assert_eq!(want.as_array().unwrap().len(), 8, "7 creations and the note");
    let (items, _) = follow(&app, "/api/audit?target=cluster/even&limit=3", 3).await;
    assert_eq!(Value::Array(items), want);
}

#[tokio::test]
async fn lists_read_whole_page_in_memory_with_the_same_rule() {
    let app = test_app(2000.0);
    for name in ["t-c", "t-a", "t-b"] {
        let r = app.send(Method::POST, "/api/tokens", Some(json!({ "name": name, "scope": "read" })), &[]).await;
        assert!(r.status.is_success(), "{:#}", r.body);
    }
    let all = app.get("/api/tokens").await.body;
    let (items, links) = follow(&app, "/api/tokens?limit=1", 1).await;
    assert_eq!(Value::Array(items), all);
    assert_eq!(links.len(), all.as_array().unwrap().len() - 1);
}
