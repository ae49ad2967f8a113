//! The HTTP routes: sessions, health, metrics and info; bearer-token check; JSON errors for
//! everything that goes wrong, including bodies over the limit and unknown paths.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::api::{constant_time_eq, parse_body, ApiError, CreateRequest, StepRequest};
use super::edge::{body_edge, too_large, EdgeLimits};
use super::session::{json_with_frame, Frames, Input, Session, SessionOptions, StateView};
use super::{AppState, Slot};
use crate::agent::parse::Protocol;
use crate::agent::prompt::Prompts;
use crate::agent::tools::interact_many_tool;
use crate::crafter::{ACHIEVEMENT_NAMES, ACTION_NAMES};

type Shared = State<Arc<AppState>>;

/// The router with every route, limit and middleware.
pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/info", get(info))
        .route("/v1/sessions", post(create))
        .route(
            "/v1/sessions/{id}",
            get(show).delete(close),
        )
        .route("/v1/sessions/{id}/step", post(step))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no such route: see docs/RL.md (POST /v1/sessions, POST /v1/sessions/{id}/step, DELETE /v1/sessions/{id}, GET /healthz, GET /metrics, GET /v1/info)",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed on this route: see docs/RL.md",
            )
        })
        .layer(middleware::from_fn_with_state(
            EdgeLimits {
                max_body_bytes: state.cfg.max_body_bytes,
                body_timeout: state.cfg.body_timeout,
            },
            body_edge,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(state.cfg.max_body_bytes))
        .with_state(state)
}

/// Check the bearer token (all routes but /healthz) and count error responses (capacity
/// refusals apart: `sessions_rejected_full`, not `server_errors`).
async fn guard(State(st): Shared, req: Request, next: Next) -> Response {
    if let Some(token) = &st.cfg.token {
        if req.uri().path() != "/healthz" {
            let given = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            let ok = given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes()));
            if !ok {
                st.counters.client_errors.fetch_add(1, Ordering::Relaxed);
                let why = if given.is_some() { "wrong" } else { "missing" };
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    format!("{why} bearer token: send `Authorization: Bearer <token>` with the server's --token"),
                )
                .into_response();
            }
        }
    }
    let resp = next.run(req).await;
    let status = resp.status();
    if status.is_client_error() {
        st.counters.client_errors.fetch_add(1, Ordering::Relaxed);
    } else if status.is_server_error() && resp.extensions().get::<CapacityRefusal>().is_none() {
        st.counters.server_errors.fetch_add(1, Ordering::Relaxed);
    }
    resp
}

/// Turn a body-reading failure into a JSON error (413 names the limit).
fn body_of(st: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large(st.cfg.max_body_bytes, None)
        } else {
            ApiError::new(
                r.status(),
                format!("cannot read the request body: {}", r.body_text()),
            )
        }
    })
}

fn not_found(st: &AppState, id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "unknown session '{}': it was closed, expired after {} s idle, or never existed; create one with POST /v1/sessions",
            id.chars().take(64).collect::<String>(),
            st.cfg.idle_timeout.as_secs_f64()
        ),
    )
}

fn lookup(st: &AppState, id: &str) -> Result<Arc<Slot>, ApiError> {
    let slot = st
        .table()
        .get(id)
        .cloned()
        .ok_or_else(|| not_found(st, id))?;
    slot.last_used.store(st.now_ms(), Ordering::Relaxed);
    Ok(slot)
}

fn internal(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("internal error while {what} (a bug; the session may be unusable, DELETE it)"),
    )
}

/// Marks a 503 answered because the server is full: counted as `sessions_rejected_full`, not
/// as a server error.
#[derive(Clone, Copy)]
struct CapacityRefusal;

fn full(st: &AppState) -> Response {
    st.counters.rejected_full.fetch_add(1, Ordering::Relaxed);
    let mut r = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the server holds its maximum of {} sessions: close finished ones with DELETE /v1/sessions/{{id}}, wait for idle ones to expire, or raise --max-sessions",
            st.cfg.max_sessions
        ),
    )
    .into_response();
    r.extensions_mut().insert(CapacityRefusal);
    r
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn metrics(State(st): Shared) -> Json<Value> {
    let c = &st.counters;
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let now = st.now_ms();
    let (open, finished, idle_max_ms) = {
        let table = st.table();
        let finished = table
            .values()
            .filter(|s| s.finished.load(Ordering::Relaxed))
            .count();
        let idle = table
            .values()
            .map(|s| now.saturating_sub(s.last_used.load(Ordering::Relaxed)))
            .max()
            .unwrap_or(0);
        (table.len(), finished, idle)
    };
    Json(json!({
        "sessions_open": open,
        "sessions_open_finished": finished,
        "sessions_idle_max_s": idle_max_ms as f64 / 1000.0,
        "max_sessions": st.cfg.max_sessions,
        "idle_timeout_s": st.cfg.idle_timeout.as_secs_f64(),
        "resets": get(&c.created),
        "sessions_closed": get(&c.closed),
        "sessions_closed_unfinished": get(&c.closed_unfinished),
        "sessions_expired": get(&c.expired),
        "sessions_rejected_full": get(&c.rejected_full),
        "step_requests": get(&c.step_requests),
        "env_steps": get(&c.env_steps),
        "invalid_replies": get(&c.invalid_replies),
        "episodes_done": get(&c.episodes_done),
        "client_errors": get(&c.client_errors),
        "server_errors": get(&c.server_errors),
        "uptime_s": st.started.elapsed().as_secs_f64(),
    }))
}

async fn info(State(st): Shared) -> Json<Value> {
    let d = &st.cfg.defaults;
    let prompts = Prompts::builtin();
    let max_actions = if d.protocol == Protocol::Text {
        1
    } else {
        d.max_actions
    };
    let tool = interact_many_tool(d.max_actions);
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "defaults": {
            "image_size": d.image_size,
            "obs_format": d.obs_format,
            "length": d.length,
            "protocol": d.protocol,
            "max_actions": max_actions,
        },
        "textures": st.textures.kind(),
        "textures_fingerprint": st.textures.fingerprint(),
        "system_prompt": prompts.system(d.protocol, max_actions),
        "tool": {"type": "function", "function": {
            "name": tool.name, "description": tool.description, "parameters": tool.parameters,
        }},
        "actions": ACTION_NAMES,
        "achievements": ACHIEVEMENT_NAMES,
        "presets": crate::agent::preset::names(),
        "balrog_sessions": st.cfg.balrog.is_some(),
        "max_sessions": st.cfg.max_sessions,
        "idle_timeout_s": st.cfg.idle_timeout.as_secs_f64(),
        "max_body_bytes": st.cfg.max_body_bytes,
        "body_timeout_s": st.cfg.body_timeout.as_secs_f64(),
    }))
}

async fn create(
    State(st): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_of(&st, body)?;
    let req: CreateRequest = parse_body(&body)?;
    let opts = req.options(&st.cfg.defaults)?;
    let frames = req.frames()?;
    if st.table().len() >= st.cfg.max_sessions {
        return Ok(full(&st));
    }
    if opts.preset == "balrog" && st.textures.kind() != "official" {
        return Err(ApiError::bad_request(
            "preset `balrog` sends crafter's official textures, but this server has only the built-in sprites: start serve-env with --assets DIR (or CRAFTER_ASSETS)",
        ));
    }
    let textures = st.textures.clone();
    let balrog = st.cfg.balrog.clone();
    let session = tokio::task::spawn_blocking(move || {
        Session::with_balrog(opts, &textures, balrog).map(|s| {
            let state = s.state(frames);
            (s, state)
        })
    })
    .await
    .map_err(|_| internal("creating the session"))?
    .map_err(ApiError::bad_request)?;
    let (session, view) = session;
    let (options, world_seed) = (session.options().clone(), session.world_seed());
    let id = st.new_id();
    {
        let mut table = st.table();
        if table.len() >= st.cfg.max_sessions {
            drop(table);
            return Ok(full(&st));
        }
        table.insert(
            id.clone(),
            Arc::new(Slot {
                session: std::sync::Mutex::new(session),
                image_size: options.image_size,
                max_actions: options.max_actions,
                last_used: st.now_ms().into(),
                finished: false.into(),
            }),
        );
    }
    st.counters.created.fetch_add(1, Ordering::Relaxed);
    opened(&id, world_seed, &options, &view)
}

/// The answer to creating or showing a session: its id, seeds and options, then its state.
fn opened(
    id: &str,
    world_seed: u32,
    options: &SessionOptions,
    state: &StateView,
) -> Result<Response, ApiError> {
    #[derive(serde::Serialize)]
    struct Opened<'a> {
        id: &'a str,
        seed: i64,
        world_seed: u32,
        options: &'a SessionOptions,
        #[serde(flatten)]
        state: &'a StateView,
    }
    let body = json_with_frame(
        &Opened {
            id,
            seed: options.seed,
            world_seed,
            options,
            state,
        },
        state.frame_png.as_deref(),
    )
    .map_err(|_| internal("writing the response"))?;
    Ok(json_response(body))
}

fn json_response(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A response body: the session id followed by the fields of `inner`.
#[derive(serde::Serialize)]
struct WithId<'a, T> {
    id: &'a str,
    #[serde(flatten)]
    inner: T,
}

async fn show(State(st): Shared, Path(id): Path<String>) -> Result<Response, ApiError> {
    let slot = lookup(&st, &id)?;
    let view = tokio::task::spawn_blocking(move || {
        let s = slot
            .session
            .lock()
            .map_err(|_| internal("reading the session"))?;
        Ok::<_, ApiError>((s.options().clone(), s.world_seed(), s.state(Frames::Last)))
    })
    .await
    .map_err(|_| internal("reading the session"))??;
    let (options, world_seed, state) = view;
    // The same fields as the create response, so a client can recover a session from it.
    opened(&id, world_seed, &options, &state)
}

async fn step(
    State(st): Shared,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_of(&st, body)?;
    let slot = lookup(&st, &id)?;
    let (input, frames) = parse_body::<StepRequest>(&body)?.input()?;
    st.counters.step_requests.fetch_add(1, Ordering::Relaxed);
    let inline = runs_inline(&input, frames, slot.image_size, slot.max_actions);
    let work = move || {
        let mut s = slot.session.lock().map_err(|_| internal("stepping"))?;
        let r = s
            .step(input, frames)
            .map_err(|e| ApiError::new(StatusCode::CONFLICT, e.to_string()));
        drop(s);
        slot.last_used.store(st.now_ms(), Ordering::Relaxed);
        if let Ok(r) = &r {
            let c = &st.counters;
            c.env_steps
                .fetch_add(r.actions.len() as u64, Ordering::Relaxed);
            c.invalid_replies
                .fetch_add(r.invalid as u64, Ordering::Relaxed);
            c.episodes_done
                .fetch_add(r.state.done as u64, Ordering::Relaxed);
            if r.state.done {
                slot.finished.store(true, Ordering::Relaxed);
            }
        }
        // Serialised here, once, straight from the report (not through a `Value`).
        let r = r?;
        json_with_frame(&WithId { id: &id, inner: &r }, r.state.frame_png.as_deref())
            .map_err(|_| internal("writing the response"))
    };
    let body = if inline {
        work()?
    } else {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|_| internal("stepping"))??
    };
    Ok(json_response(body))
}

/// Work a step may do on an async worker, in 64-px frames rendered (a PNG encode counts as
/// two): about 40 µs. Larger steps go to the blocking pool, so that one of them cannot hold up
/// the other connections on that worker.
const INLINE_FRAMES: usize = 8;

/// Longest model text parsed on an async worker.
const INLINE_TEXT_BYTES: usize = 4096;

/// Whether a step is small enough to run on the async worker that received it. Handing a
/// small step to the blocking pool and back costs two thread wake-ups, more than the step
/// itself (`bench serve`, 64 sessions at 64 px: docs/BENCHMARKS.md, "Env server").
fn runs_inline(input: &Input, frames: Frames, image_size: usize, max_actions: usize) -> bool {
    let steps = match input {
        Input::Actions(a) => a.len(),
        Input::Text(t) if t.len() <= INLINE_TEXT_BYTES => max_actions,
        Input::Text(_) => return false,
    };
    let encoded = match frames {
        Frames::All => steps + 1,
        Frames::Last => 1,
        Frames::None => 0,
    };
    let area = (image_size * image_size).div_ceil(64 * 64);
    (steps + 2 * encoded) * area <= INLINE_FRAMES
}

async fn close(State(st): Shared, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    // Counted once even when two DELETEs (or a DELETE and the reaper) race.
    let slot = st.table().remove(&id).ok_or_else(|| not_found(&st, &id))?;
    st.counters.closed.fetch_add(1, Ordering::Relaxed);
    if !slot.finished.load(Ordering::Relaxed) {
        st.counters
            .closed_unfinished
            .fetch_add(1, Ordering::Relaxed);
    }
    // A step still running on this session keeps its own handle; don't wait for it.
    let step = slot.session.try_lock().map(|s| s.env().step_count()).ok();
    Ok(Json(json!({"id": id, "closed": true, "step": step})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crafter::Action;

    #[test]
    fn only_small_steps_run_inline() {
        let one = Input::Actions(vec![Action::Noop]);
        let many = Input::Actions(vec![Action::Noop; 16]);
        // One action with its frame at crafter's 64 px: inline; also at 90 px (two 64-px areas).
        assert!(runs_inline(&one, Frames::Last, 64, 8));
        assert!(runs_inline(&one, Frames::Last, 90, 8));
        // Bigger frames, many actions, every frame encoded: the blocking pool.
        assert!(!runs_inline(&one, Frames::Last, 256, 8));
        assert!(!runs_inline(&many, Frames::None, 64, 8));
        assert!(!runs_inline(
            &Input::Actions(vec![Action::Noop; 3]),
            Frames::All,
            64,
            8
        ));
        // A text is costed at the session's most actions, and long texts are parsed off the workers.
        let text = Input::Text("ACTION: noop".into());
        assert!(runs_inline(&text, Frames::Last, 64, 4));
        assert!(!runs_inline(&text, Frames::Last, 64, 8));
        let long = Input::Text("x".repeat(INLINE_TEXT_BYTES + 1));
        assert!(!runs_inline(&long, Frames::None, 64, 1));
    }
}
