//! `vlm-eval view` over HTTP: the index and run pages, the live state of an episode in flight
//! (torn lines skipped, model text escaped), nothing served from outside the folder (`..`,
//! encoded `%2e%2e`, absolute paths, symbolic links), nothing written, and bad input.

use crate::support;
use crate::view_support;

use serde_json::Value;
use support::{fresh_dir, text, vlm_eval};
use view_support::{get, model_run, snapshot, View};

const HOSTILE: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";

fn body(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("")
}

#[test]
fn serves_pages_and_live_state_and_nothing_outside_the_folder() {
    let base = fresh_dir("serve");
    let dir = base.join("results");
    std::fs::create_dir_all(&dir).unwrap();
    let done = model_run(&dir, "mock", "done", "2", "12", &[]);
    let live = model_run(&dir, "mock", "live", "2", "12", &[]);
    // `live` gets an episode in flight: seed 7 with two turns, hostile reply text, and a torn
    // third line being written.
    let ep = live.join("episodes/seed_7");
    std::fs::create_dir_all(ep.join("frames")).unwrap();
    std::fs::copy(
        live.join("episodes/seed_0/frames/step_0001.png"),
        ep.join("frames/step_0001.png"),
    )
    .unwrap();
    let line = |turn: u32, reply: &str, unlocked: &[&str]| {
        serde_json::json!({"turn": turn, "step": turn, "observation": "o",
            "frame": {"path": format!("frames/step_{turn:04}.png"), "sent": true},
            "reply": {"text": reply},
            "executed": [{"action": "do", "step": turn + 1, "reward": 1.0, "unlocked": unlocked,
                          "done": false, "frame": format!("frames/step_{:04}.png", turn + 1)}]})
        .to_string()
    };
    std::fs::write(
        ep.join("trajectory.jsonl"),
        format!(
            "{}\n{}\n{{\"turn\":2,\"reply\":{{\"te",
            line(0, "first", &["collect_wood"]),
            line(1, HOSTILE, &[])
        ),
    )
    .unwrap();
    // Outside the folder: a secret, a run folder linked in, and a frame linked out.
    let secret = base.join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-CONTENT").unwrap();
    let outside = model_run(&base, "mock", "outside", "1", "4", &[]);
    std::os::unix::fs::symlink(&outside, dir.join("linked")).unwrap();
    std::os::unix::fs::symlink(&secret, ep.join("frames/step_0009.png")).unwrap();
    // `live` is held as `vlm-eval run` holds a folder while it plays (`results::lock`): that is
    // what makes a run "in progress" to the view.
    let _playing = vlm_eval::results::lock::acquire(&live).expect("hold the live run's folder");
    let before = snapshot(&dir);

    let view = View::start(&dir);
    let a = view.addr.as_str();
    let (status, index) = get(a, "/");
    assert_eq!(status, 200, "{index}");
    assert!(index.contains(r#"href="/run/done/""#) && index.contains(r#"href="/run/live/""#));
    assert!(
        index.contains(r#"id="in-progress""#),
        "live is listed as in progress"
    );
    assert!(
        !index.contains("outside"),
        "a linked run folder is not served"
    );

    let (status, page) = get(a, "/run/live/");
    assert_eq!(status, 200);
    assert!(page.contains(r#"id="live""#) && page.contains("live.json"));
    let (status, page) = get(a, "/run/done/");
    assert_eq!(status, 200);
    assert!(page.contains("<h1>done</h1>") && !page.contains(r#"id="live""#));

    let (status, resp) = get(a, "/run/live/live.json");
    assert_eq!(status, 200, "a torn last line is not an error");
    let v: Value = serde_json::from_str(body(&resp)).unwrap();
    assert_eq!(v["in_progress"], true);
    let eps = v["episodes"].as_array().unwrap();
    assert_eq!(eps.len(), 1);
    assert_eq!(eps[0]["seed"], 7);
    assert_eq!(eps[0]["turn"], 1, "the torn third line is not read yet");
    assert_eq!(
        eps[0]["reply"], HOSTILE,
        "the reply is data, drawn as text by the page"
    );
    assert_eq!(eps[0]["reward"], 2.0);
    assert_eq!(eps[0]["achievements"], serde_json::json!(["collect_wood"]));
    assert_eq!(eps[0]["frame"], "/run/live/frame/7/step_0002.png");
    // The page never parses model text as HTML: the script only sets textContent.
    assert!(!page.contains("innerHTML"));

    let (status, png) = get(a, "/run/live/frame/7/step_0001.png");
    assert_eq!(status, 200);
    assert!(png.contains("image/png"));
    for path in [
        "/run/../secret.txt",
        "/run/%2e%2e/secret.txt",
        "/run/%2E%2E/",
        "/run/..%2fsecret.txt/",
        "/run/live/frame/7/..%2f..%2f..%2f..%2fsecret.txt",
        "/run/live/frame/7/%2e%2e%2f%2e%2e%2fepisode.json",
        "/run/live/frame/7/step_0009.png",
        "/run/live/frame/..%2f..%2f/step_0001.png",
        "/run/%2Fetc%2Fpasswd/",
        "/run/linked/",
        "/run/linked/frame/0/step_0001.png",
        "//etc/passwd",
        "/etc/passwd",
        "/../secret.txt",
        "/run/live/../../secret.txt",
        "/run/live/frame/7/%2Fetc%2Fpasswd",
    ] {
        let (status, resp) = get(a, path);
        assert!(status == 404 || status == 400, "{path}: {status} {resp}");
        assert!(!resp.contains("TOP-SECRET"), "{path}");
        assert!(!resp.contains("root:"), "{path}");
    }

    // The run keeps writing: the torn line completes and a new one starts.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(ep.join("trajectory.jsonl"))
        .unwrap();
    use std::io::Write;
    f.write_all(b"xt\":\"third\"},\"executed\":[]}\n{\"tu")
        .unwrap();
    let (_, resp) = get(a, "/run/live/live.json");
    let v: Value = serde_json::from_str(body(&resp)).unwrap();
    assert_eq!(v["episodes"][0]["turn"], 2);
    assert_eq!(v["episodes"][0]["reply"], "third");

    drop(f);
    drop(view);
    // Nothing written by the server: the same files, sizes and times (but the trajectory this
    // test appended to).
    let mine = |s: Vec<(std::path::PathBuf, u64, std::time::SystemTime)>| {
        s.into_iter()
            .filter(|x| !x.0.ends_with("seed_7/trajectory.jsonl"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        mine(before),
        mine(snapshot(&dir)),
        "the server wrote nothing"
    );
    let _ = done;
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn hostile_text_in_a_run_page_is_escaped() {
    let dir = fresh_dir("hostile");
    let run = model_run(&dir, "mock", "h", "1", "3", &[]);
    let path = run.join("episodes/seed_0/trajectory.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["reply"]["text"] = HOSTILE.into();
            v.to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let view = View::start(&dir);
    let (status, page) = get(&view.addr, "/run/h/");
    assert_eq!(status, 200);
    assert!(page.contains("&lt;script&gt;document.title="));
    assert!(!page.contains("<script>document.title"));
    assert!(!page.contains("<img src=x"));
    drop(view);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = fresh_dir("bad");
    let o = vlm_eval(&["view", dir.join("missing").to_str().unwrap(), "--port", "0"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("missing") && stderr.contains("not a folder"),
        "{stderr}"
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let o = vlm_eval(&["view", dir.to_str().unwrap(), "--port", &port]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--port 0"), "{stderr}");
    drop(taken);
    let _ = std::fs::remove_dir_all(&dir);
}
