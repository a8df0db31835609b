//! The web UI, embedded in the binary at build time (the single binary is the whole product).

use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use include_dir::{Dir, include_dir};

static UI: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../ui");

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// Serves a UI file; unknown non-file paths get `index.html` (client-side routes).
pub async fn serve(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    // ui/tests is the browser test suite, embedded with the directory but not part of the UI.
    if path == "tests" || path.starts_with("tests/") {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    let file = UI.get_file(path).or_else(|| if path.contains('.') { None } else { UI.get_file("index.html") });
    match file {
        Some(f) => (
            [
                (header::CONTENT_TYPE, content_type(f.path().to_str().unwrap_or_default())),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            f.contents(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
