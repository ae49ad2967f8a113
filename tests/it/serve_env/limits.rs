//! Limits, bad requests, idle expiry, the session view and the metrics that show leaks.

use std::time::Duration;

use serde_json::{json, Value};
use vlm_eval::serve::ServeConfig;

use super::{server, Http};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_bad_requests_get_json_errors() {
    let cfg = ServeConfig {
        max_sessions: 3,
        max_body_bytes: 4096,
        token: Some("s3cret-token".into()),
        ..ServeConfig::default()
    };
    let s = server(cfg).await;
    let mut http = Http::new(&s);
    let err = |v: &Value| {
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error message: {v}"))
            .to_string()
    };

    // Token: /healthz is open, everything else needs it.
    let (st, v) = http.send("GET", "/healthz", None).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")));
    let (st, v) = http.post("/v1/sessions", &json!({"seed": 1})).await;
    assert_eq!(st, 401);
    assert!(err(&v).contains("missing bearer token"));
    http.token = Some("s3cret-tokem".into());
    let (st, v) = http.send("GET", "/metrics", None).await;
    assert_eq!(st, 401);
    assert!(err(&v).contains("wrong bearer token"));
    http.token = Some("s3cret-token".into());

    // Bad create requests.
    for (body, needle) in [
        (json!({}), "missing `seed`"),
        (json!({"seed": "seven"}), "`seed` must be an integer"),
        (json!({"seed": 1.5}), "`seed` must be an integer"),
        (
            json!({"seed": 18446744073709551615u64}),
            "`seed` must be an integer",
        ),
        (json!({"seed": 1, "image_size": 4}), "image_size"),
        (
            json!({"seed": 1, "obs_format": "pixels"}),
            "`obs_format` must be one of",
        ),
        (
            json!({"seed": 1, "protocol": "xml"}),
            "`protocol` must be one of",
        ),
        (json!({"seed": 1, "max_actions": 0}), "max_actions"),
        (json!({"seed": 1, "sead": 2}), "unknown field `sead`"),
        (json!([1, 2]), "the request body is an array"),
    ] {
        let (st, v) = http.post("/v1/sessions", &body).await;
        assert_eq!(st, 400, "{body}: {v}");
        assert!(err(&v).contains(needle), "{body}: {v}");
    }
    let (st, v) = http
        .send("POST", "/v1/sessions", Some(b"{\"seed\": 1".to_vec()))
        .await;
    assert_eq!(st, 400);
    assert!(err(&v).contains("not valid JSON"));
    let (st, v) = http.send("POST", "/v1/sessions", None).await;
    assert_eq!(st, 400);
    assert!(err(&v).contains("empty"));

    // Sessions up to the limit, then 503.
    let (a, _) = http.create(json!({"seed": 1, "length": 2})).await;
    http.create(json!({"seed": 2})).await;
    http.create(json!({"seed": 3})).await;
    let (st, v) = http.post("/v1/sessions", &json!({"seed": 4})).await;
    assert_eq!(st, 503);
    assert!(err(&v).contains("maximum of 3 sessions"));

    // Bad step requests.
    let step = format!("/v1/sessions/{a}/step");
    for (body, needle) in [
        (json!({"actions": ["jump"]}), "unknown action \"jump\""),
        (json!({"actions": [99]}), "unknown action 99"),
        (json!({"actions": []}), "empty"),
        (json!({"text": "do", "actions": ["do"]}), "not both"),
        (json!({}), "missing `text` or `actions`"),
        (json!({"text": 5}), "bad request field"),
        (
            json!({"text": "do", "frames": "many"}),
            "`frames` must be one of",
        ),
    ] {
        let (st, v) = http.post(&step, &body).await;
        assert_eq!(st, 400, "{body}: {v}");
        assert!(err(&v).contains(needle), "{body}: {v}");
    }
    let big = json!({"text": "x".repeat(5000)});
    let (st, v) = http.post(&step, &big).await;
    assert_eq!(st, 413);
    assert!(err(&v).contains("4096 bytes"));
    let (st, v) = http
        .post("/v1/sessions/no-such-id/step", &json!({"actions": ["do"]}))
        .await;
    assert_eq!(st, 404);
    assert!(err(&v).contains("unknown session"));

    // The episode ends at its length; stepping on is a conflict.
    let v = http
        .ok(&step, &json!({"actions": ["noop", "noop", "noop"]}))
        .await;
    assert_eq!(
        (v["done"].as_bool(), v["termination"].as_str()),
        (Some(true), Some("length"))
    );
    assert_eq!(v["actions"].as_array().unwrap().len(), 2);
    let (st, v) = http.post(&step, &json!({"actions": ["noop"]})).await;
    assert_eq!(st, 409);
    assert!(err(&v).contains("episode is over"));

    // Unknown routes and methods.
    let (st, _) = http.send("GET", "/v2/things", None).await;
    assert_eq!(st, 404);
    let (st, _) = http.send("PUT", "/v1/sessions", None).await;
    assert_eq!(st, 405);

    // Closing frees a slot; closing twice is 404.
    let (st, v) = http
        .send("DELETE", &format!("/v1/sessions/{a}"), None)
        .await;
    assert_eq!((st, v["closed"].as_bool()), (200, Some(true)));
    let (st, _) = http
        .send("DELETE", &format!("/v1/sessions/{a}"), None)
        .await;
    assert_eq!(st, 404);
    http.create(json!({"seed": 4})).await;

    let (_, m) = http.send("GET", "/metrics", None).await;
    assert_eq!(m["sessions_open"], 3);
    assert_eq!(m["resets"], 4);
    assert_eq!(m["sessions_rejected_full"], 1);
    assert_eq!(m["env_steps"], 2);
    // The 503 for a full server is a capacity refusal, not a server error.
    assert_eq!(m["server_errors"], 0);
    assert!(m["client_errors"].as_u64().unwrap() >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire() {
    let cfg = ServeConfig {
        idle_timeout: Duration::from_millis(150),
        ..ServeConfig::default()
    };
    let s = server(cfg).await;
    let http = Http::new(&s);
    let (id, _) = http.create(json!({"seed": 9})).await;
    assert_eq!(s.sessions_open(), 1);
    // Poll instead of assuming how fast the reaper runs on a loaded machine.
    for _ in 0..200 {
        if s.sessions_open() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(s.sessions_open(), 0, "the idle session was never closed");
    let (st, v) = http
        .post(
            &format!("/v1/sessions/{id}/step"),
            &json!({"actions": ["noop"]}),
        )
        .await;
    assert_eq!(st, 404, "{v}");
    let (_, m) = http.send("GET", "/metrics", None).await;
    assert_eq!(m["sessions_expired"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_session_answers_what_create_did() {
    let s = server(ServeConfig::default()).await;
    let http = Http::new(&s);
    let (id, created) = http
        .create(json!({"seed": 11, "image_size": 48, "obs_format": "balrog", "length": 30, "protocol": "text"}))
        .await;
    let (st, shown) = http.send("GET", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(st, 200, "{shown}");
    // The same document as the create response: id, seed, world seed, options and state.
    assert_eq!(shown, created);
    assert_eq!(
        shown["options"],
        json!({"seed": 11, "image_size": 48, "obs_format": "balrog", "length": 30, "protocol": "text", "max_actions": 1,
               "preset": "vlm-eval", "parser": "lenient", "feedback": "vlm-eval", "reset_noop": false, "render_twice": false})
    );
    let stepped = http
        .ok(
            &format!("/v1/sessions/{id}/step"),
            &json!({"text": "ACTION: move_left"}),
        )
        .await;
    let (_, shown) = http.send("GET", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(shown["options"], created["options"]);
    for key in [
        "step",
        "vitals",
        "inventory",
        "achievements",
        "observation",
        "frame_png_b64",
        "done",
    ] {
        assert_eq!(shown[key], stepped[key], "{key}");
    }
    assert_eq!(shown["step"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_sessions_left_open() {
    let s = server(ServeConfig::default()).await;
    let http = Http::new(&s);
    let metrics = || async { http.send("GET", "/metrics", None).await.1 };
    let (running, _) = http.create(json!({"seed": 1})).await;
    let (finished, _) = http.create(json!({"seed": 2, "length": 2})).await;
    let (_idle, _) = http.create(json!({"seed": 3})).await;
    http.ok(
        &format!("/v1/sessions/{running}/step"),
        &json!({"actions": ["noop"]}),
    )
    .await;
    let v = http
        .ok(
            &format!("/v1/sessions/{finished}/step"),
            &json!({"actions": ["noop", "noop"]}),
        )
        .await;
    assert_eq!(v["done"], true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = metrics().await;
    assert_eq!(m["sessions_open"], 3);
    // A finished episode whose session is still open: its client forgot the DELETE.
    assert_eq!(m["sessions_open_finished"], 1);
    let idle = m["sessions_idle_max_s"].as_f64().unwrap();
    assert!((0.25..60.0).contains(&idle), "{m}");

    // Closing a running episode (a client stopping early) is counted apart.
    http.send("DELETE", &format!("/v1/sessions/{running}"), None)
        .await;
    // Two DELETEs racing on one session: one closes it, the other gets 404, counted once.
    let path = format!("/v1/sessions/{finished}");
    let (a, b) = tokio::join!(
        http.send("DELETE", &path, None),
        http.send("DELETE", &path, None)
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [200, 404]);
    let m = metrics().await;
    assert_eq!(m["sessions_open"], 1);
    assert_eq!(m["sessions_open_finished"], 0);
    assert_eq!(m["sessions_closed"], 2);
    assert_eq!(m["sessions_closed_unfinished"], 1);
    assert_eq!(m["sessions_expired"], 0);
    // Every session created is open, closed or expired.
    assert_eq!(m["resets"], 3);
}
