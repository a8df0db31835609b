//! Paged lists: every list route answers one page (`limit`, `cursor`) with a
//! `Link: <…&cursor=…>; rel="next"` header while more items follow (docs/rest-api.md,
//! "Lists"). This module reads one page ([`ListPage`]) or follows the cursors to the end.
//!
//! # Guarantees
//! - The `list_*` methods of the client that return a whole list follow every `next` link
//!   (pages of [`ALL_PAGE_SIZE`]), so they return every item however long the list is.
//! - A page method returns the server's cursor untouched (opaque); passing it back reads the
//!   page after it, with the same filters.

use crate::{Call, Client, Error, OperationQuery, typed};
use instantstart_core::api::clusters::ClusterView;
use instantstart_core::operation::{AuditEntry, Operation, OperationStatus};
use reqwest::Method;
use reqwest::header::{HeaderMap, LINK};
use serde::de::DeserializeOwned;

/// The page size the iterate-all helpers ask for (the server's largest).
pub const ALL_PAGE_SIZE: u32 = 500;

/// Which page of a list to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageArgs {
    /// Page size, 1-500 (server default 100).
    pub limit: Option<u32>,
    /// The `next` of the previous page; `None` for the first page.
    pub cursor: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    /// The cursor of the next page; `None` on the last page.
    pub next: Option<String>,
}

/// The `cursor` of a `Link: <path?…&cursor=…>; rel="next"` header, if any.
pub(crate) fn next_cursor(headers: &HeaderMap) -> Option<String> {
    headers.get_all(LINK).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).find_map(|link| {
        let (target, params) = link.trim().split_once(';')?;
        if !params.split(';').any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next")) {
            return None;
        }
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let (_, query) = target.split_once('?')?;
        query.split('&').find_map(|pair| pair.strip_prefix("cursor=")).map(str::to_string)
    })
}

impl Client {
    /// One page of the list `call` names.
    async fn page<T: DeserializeOwned>(&self, call: Call<'_>, args: &PageArgs) -> Result<ListPage<T>, Error> {
        let call = call.query("limit", args.limit).query("cursor", args.cursor.as_deref());
        let (_, value, next) = self.execute_page(&call).await?;
        Ok(ListPage { items: typed(&self.url(call.path, &call.query), value)?, next })
    }

    /// Every item of the list `call` names, following its cursors.
    pub(crate) async fn all<T: DeserializeOwned>(&self, call: Call<'_>) -> Result<Vec<T>, Error> {
        let mut args = PageArgs { limit: Some(ALL_PAGE_SIZE), cursor: None };
        let mut items = Vec::new();
        loop {
            let page: ListPage<T> = self.page(call.clone(), &args).await?;
            items.extend(page.items);
            match page.next {
                Some(next) => args.cursor = Some(next),
                None => return Ok(items),
            }
        }
    }

    /// `GET /api/clusters`: one page of clusters by name.
    pub async fn clusters_page(&self, args: &PageArgs) -> Result<ListPage<ClusterView>, Error> {
        self.page(Call::new(Method::GET, &["api", "clusters"]), args).await
    }

    /// `GET /api/operations`: one page of operations, newest first (`q.limit` is ignored:
    /// the page size is `args.limit`).
    pub async fn operations_page(&self, q: &OperationQuery, args: &PageArgs) -> Result<ListPage<Operation>, Error> {
        let call = Call::new(Method::GET, &["api", "operations"])
            .query("target", q.target.as_deref())
            .query("status", q.status.map(OperationStatus::as_str))
            .query("archived", q.archived.then_some("true"));
        self.page(call, args).await
    }

    /// `GET /api/operations`, every page: all operations matching `q`, newest first.
    pub async fn all_operations(&self, q: &OperationQuery) -> Result<Vec<Operation>, Error> {
        let call = Call::new(Method::GET, &["api", "operations"])
            .query("target", q.target.as_deref())
            .query("status", q.status.map(OperationStatus::as_str))
            .query("archived", q.archived.then_some("true"));
        self.all(call).await
    }

    /// `GET /api/audit`: one page of the audit log, newest first.
    pub async fn audit_page(&self, target: Option<&str>, args: &PageArgs) -> Result<ListPage<AuditEntry>, Error> {
        self.page(Call::new(Method::GET, &["api", "audit"]).query("target", target), args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use serde_json::Value;

    #[test]
    fn the_next_cursor_is_read_from_the_link_header() {
        // (Link header, cursor)
        let cases: &[(Option<&str>, Option<&str>)] = &[
            (None, None),
            (Some("</api/clusters?cursor=abc>; rel=\"next\""), Some("abc")),
            (Some("</api/operations?status=running&limit=5&cursor=x_y-z>; rel=\"next\""), Some("x_y-z")),
            (Some("</api/clusters?cursor=abc>; rel=\"prev\""), None),
            (Some("</api/docs>; rel=\"help\", </api/clusters?cursor=n2>; rel=next"), Some("n2")),
            (Some("garbage"), None),
        ];
        for (link, want) in cases {
            let mut h = HeaderMap::new();
            if let Some(l) = link {
                h.insert(LINK, HeaderValue::from_str(l).unwrap());
            }
            assert_eq!(next_cursor(&h).as_deref(), *want, "{link:?}");
        }
    }

    /// A server paging a list of 7 clusters by 3 (its cursor: the index to start at), ignoring
    /// the `limit` asked for, and recording the queries it got.
    async fn paging_server() -> (crate::Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use axum::http::Uri;
        use axum::response::IntoResponse;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let handle = move |uri: Uri| {
            let log = log.clone();
            async move {
                let query = uri.query().unwrap_or_default().to_string();
                log.lock().unwrap().push(query.clone());
                let start: usize =
                    query.split('&').find_map(|p| p.strip_prefix("cursor=")).map_or(0, |c| c.parse().unwrap());
                let items: Vec<Value> = (start..(start + 3).min(7))
                    .map(|i| {
                        serde_json::json!({
                            "name": format!("c{i}"), "region": "us-east-1", "source": "created",
                            "eks_cluster": format!("c{i}-eks"), "hyperpod_cluster": null, "vpc_id": null,
                            "bucket": null, "kubernetes_version": null, "request": null,
                            "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z",
                            "active": i == 0, "status": "ready", "last_operation": null
                        })
                    })
                    .collect();
                let mut response = axum::Json(items).into_response();
                if start + 3 < 7 {
                    let link = format!("</api/clusters?limit=3&cursor={}>; rel=\"next\"", start + 3);
                    response.headers_mut().insert(LINK, HeaderValue::from_str(&link).unwrap());
                }
                response
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(handle)).await.unwrap() });
        (crate::Client::new(&url, Some("t".into()), crate::Face::Cli).unwrap(), seen)
    }

    #[tokio::test]
    async fn whole_lists_follow_every_page_and_page_methods_return_the_cursor() {
        let (client, seen) = paging_server().await;
        let all = client.list_clusters().await.unwrap();
        let names: Vec<&str> = all.iter().map(|c| c.record.name.as_str()).collect();
        assert_eq!(names, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
        assert!(all[0].active && !all[1].active, "typed views: {:?}", all[0]);
        assert_eq!(*seen.lock().unwrap(), ["limit=500", "limit=500&cursor=3", "limit=500&cursor=6"]);

        let first = client.clusters_page(&PageArgs { limit: Some(3), cursor: None }).await.unwrap();
        assert_eq!((first.items.len(), first.next.as_deref()), (3, Some("3")));
        let last = client.clusters_page(&PageArgs { limit: Some(3), cursor: Some("6".into()) }).await.unwrap();
        assert_eq!((last.items.len(), last.next), (1, None), "the last page has no next");
    }
}
