//! The view server's routes: `/` (index), `/favicon.ico` (the pages' icon), `/run/NAME/` (run
//! page), `/run/NAME/live.json`,
//! `/run/NAME/frame/SEED/FILE` (a frame PNG). Anything else, or a name or file that does not
//! resolve to a file inside the folder, is a 404. Reading runs happens on blocking threads.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use crate::results::live::frame_file;

use super::live::live_json;
use super::pages::{index_page, run_page};
use super::state::ViewState;

type St = State<Arc<ViewState>>;

/// The router over a state.
pub fn router(state: Arc<ViewState>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/favicon.ico", get(favicon))
        .route("/run/{name}", get(run_redirect))
        .route("/run/{name}/", get(run))
        .route("/run/{name}/live.json", get(live))
        .route("/run/{name}/frame/{seed}/{file}", get(frame))
        .fallback(|| async { not_found() })
        .with_state(state)
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "not found\n",
    )
        .into_response()
}

/// The pages declare their icon inline (`report::html::ICON`); a browser that asks anyway
/// gets the same picture rather than a 404.
async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, "max-age=86400"),
        ],
        crate::report::html::ICON_PNG,
    )
        .into_response()
}

fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

async fn index(State(s): St) -> Response {
    match blocking(move || s.index_html(index_page)).await {
        Some(page) => html(page.as_str().to_string()),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "index failed\n").into_response(),
    }
}

async fn run_redirect(UrlPath(name): UrlPath<String>, State(s): St) -> Response {
    match s.run_dir(&name) {
        Some(d) => Redirect::permanent(&super::live::run_url(&d)).into_response(),
        None => not_found(),
    }
}

async fn run(UrlPath(name): UrlPath<String>, State(s): St) -> Response {
    let Some(dir) = s.run_dir(&name) else {
        return not_found();
    };
    match blocking(move || run_page(&s, &dir)).await {
        Some(page) => html(page),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "page failed\n").into_response(),
    }
}

async fn live(UrlPath(name): UrlPath<String>, State(s): St) -> Response {
    let Some(dir) = s.run_dir(&name) else {
        return not_found();
    };
    match blocking(move || live_json(&s, &dir)).await {
        Some(v) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            v.to_string(),
        )
            .into_response(),
        None => (StatusCode::INTERNAL_SERVER_ERROR, "live failed\n").into_response(),
    }
}

/// The frame file, when it is a plain frame name of an episode of a served run and its real
/// path (links resolved) is inside the served folder.
fn frame_path(s: &ViewState, name: &str, seed: &str, file: &str) -> Option<PathBuf> {
    let dir = s.run_dir(name)?;
    let seed: i64 = seed.parse().ok()?;
    let path = frame_file(&dir, seed, &format!("frames/{file}"))?;
    let real = path.canonicalize().ok()?;
    let root = s.root.canonicalize().ok()?;
    (real.starts_with(&root) && real.is_file()).then_some(real)
}

async fn frame(
    UrlPath((name, seed, file)): UrlPath<(String, String, String)>,
    State(s): St,
) -> Response {
    let Some(path) = frame_path(&s, &name, &seed, &file) else {
        return not_found();
    };
    match tokio::fs::read(&path).await {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, "image/png"),
                (header::CACHE_CONTROL, "max-age=3600"),
            ],
            bytes,
        )
            .into_response(),
        Err(_) => not_found(),
    }
}
