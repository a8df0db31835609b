//! The REST face of the pagination rule (`instantstart_core::page`): the `limit` and `cursor`
//! query parameters of every list route, and a page answered as the list's JSON array with a
//! `Link: <…>; rel="next"` header.
//!
//! # Guarantees
//! - Backward compatible: a list's body stays the JSON array it always was; only the first
//!   `limit` items (default 100, at most 500) are in it, and the rest is reached through the
//!   `next` link, present exactly when more items follow.
//! - The `next` link is the request's own path and query (every filter kept) with `cursor`
//!   replaced: following it reads the same list from where the page ended.
//! - A bad `limit` or `cursor` is a `400` naming the field (`crate::error`), nothing read.
//! - The strong `ETag` of a page covers its `Link` too (`crate::conditional`).

use super::ApiQuery;
use crate::error::ApiError;
use aide::OperationInput;
use aide::OperationOutput;
use aide::generate::GenContext;
use aide::openapi::{Operation, Response as ApiResponse};
use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use instantstart_core::page::{Order, Page, PageRequest, page_in_memory};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The paging parameters of a list route.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct PageQuery {
    /// At most this many items (1-500, default 100).
    pub limit: Option<u32>,
    /// Where to start: the `cursor` of the previous page's `Link: <…>; rel="next"` header
    /// (opaque). Absent: the first page.
    pub cursor: Option<String>,
}

/// `limit` and `cursor` of the request, with its URI to build the `next` link from.
pub struct PageParams {
    query: PageQuery,
    uri: Uri,
}

impl<S: Send + Sync> FromRequestParts<S> for PageParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let ApiQuery(query) = ApiQuery::<PageQuery>::from_request_parts(parts, state).await?;
        Ok(PageParams { query, uri: parts.uri.clone() })
    }
}

impl OperationInput for PageParams {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        <ApiQuery<PageQuery> as OperationInput>::operation_input(ctx, operation);
    }
}

impl PageParams {
    /// The page asked for, of the cursor list `list` whose key has `columns` parts.
    pub fn request(&self, list: &str, columns: usize) -> Result<PageRequest, ApiError> {
        Ok(PageRequest::parse(list, columns, self.query.limit, self.query.cursor.as_deref())?)
    }

    /// Pages a list read whole (from Kubernetes, AWS or memory) with the store's rule;
    /// `request` is [`PageParams::request`] of `list`, checked before the list was read.
    pub fn in_memory<T: Serialize>(
        &self,
        items: Vec<T>,
        list: &str,
        order: Order,
        key: impl Fn(&T) -> Vec<String>,
        request: &PageRequest,
    ) -> Result<Paged<T>, ApiError> {
        Ok(self.respond(page_in_memory(items, list, order, key, request)))
    }

    /// The response of `page`: its items, and the `next` link when more follow.
    pub fn respond<T: Serialize>(&self, page: Page<T>) -> Paged<T> {
        let next = page.next.map(|cursor| {
            let mut query: Vec<&str> = self
                .uri
                .query()
                .unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty() && *p != "cursor" && !p.starts_with("cursor="))
                .collect();
            let cursor = format!("cursor={}", cursor.encode());
            query.push(&cursor);
            format!("{}?{}", self.uri.path(), query.join("&"))
        });
        Paged { items: page.items, next }
    }
}

/// One page of a list: the JSON array of its items, with `Link: <next>; rel="next"` when more
/// follow.
pub struct Paged<T> {
    pub items: Vec<T>,
    /// The path and query of the next page.
    pub next: Option<String>,
}

impl<T: Serialize> IntoResponse for Paged<T> {
    fn into_response(self) -> Response {
        let mut response = Json(self.items).into_response();
        if let Some(next) = self.next
            && let Ok(link) = HeaderValue::from_str(&format!("<{next}>; rel=\"next\""))
        {
            response.headers_mut().insert(header::LINK, link);
        }
        response
    }
}

impl<T: JsonSchema> OperationOutput for Paged<T> {
    type Inner = Vec<T>;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<ApiResponse> {
        let mut response = <Json<Vec<T>> as OperationOutput>::operation_response(ctx, operation)?;
        response.headers.insert(
            "Link".into(),
            aide::openapi::ReferenceOr::Item(aide::openapi::Header {
                description: Some(
                    "`<path?…&cursor=…>; rel=\"next\"` when more items follow (absent on the last page)".into(),
                ),
                style: Default::default(),
                required: false,
                deprecated: None,
                format: aide::openapi::ParameterSchemaOrContent::Schema(aide::openapi::SchemaObject {
                    json_schema: schemars::json_schema!({ "type": "string" }),
                    external_docs: None,
                    example: None,
                }),
                example: None,
                examples: Default::default(),
                extensions: Default::default(),
            }),
        );
        Some(response)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<aide::openapi::StatusCode>, ApiResponse)> {
        match Self::operation_response(ctx, operation) {
            Some(r) => vec![(Some(aide::openapi::StatusCode::Code(200)), r)],
            None => Vec::new(),
        }
    }
}
