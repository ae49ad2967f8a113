//! `vlm-eval export-sft` on real run folders (scripted, mock and random runs): every row parses
//! and is checked against the store it came from (system prompt, user text, frame bytes and
//! sha256, reply tool calls, achievement unlock steps from episode.json), the filters against
//! episode.json, the errors for missing, partial and corrupt runs, and — when `PRISM_URL` is
//! set (`.ci/run` starts Stoplight Prism on OpenAI's spec) — every row's messages and tools sent
//! as a chat-completions request body must be accepted by the spec.

use crate::support;
use support::{stderr, stdout};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

fn vlm_eval(args: &[&str]) -> Output {
    support::run(args, &["VLM_EVAL_LOG"], &[])
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("sft-{name}"))
}

/// Make a run folder `out/name` with a built-in model.
fn make_run(out: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "--out",
        out.to_str().unwrap(),
        "--run-name",
        name,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    out.join(name)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

fn export(runs: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["export-sft".to_string()];
    args.extend(runs.iter().map(|r| r.display().to_string()));
    args.extend(["--out".to_string(), out.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    vlm_eval(&refs)
}

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Check every row against the run folders it came from; returns the number of image rows.
fn check_rows(rows: &[Value], runs: &[&Path]) -> usize {
    let mut images = 0;
    let mut expected = 0;
    for run in runs {
        let info = read_json(&run.join("run.json"));
        let name = info["config"]["run_name"].as_str().unwrap();
        let mine: Vec<&Value> = rows
            .iter()
            .filter(|r| r["metadata"]["run"] == name)
            .collect();
        let mut seeds: Vec<i64> =
            vlm_eval::results::run::seeds_of(&info["config"]["seeds"]).unwrap();
        seeds.sort();
        let mut k = 0;
        for seed in seeds {
            let ep_dir = run.join(format!("episodes/seed_{seed}"));
            if !ep_dir.join("episode.json").is_file() {
                continue;
            }
            let ep = read_json(&ep_dir.join("episode.json"));
            let traj = lines(&ep_dir.join("trajectory.jsonl"));
            let turns: Vec<&Value> = traj.iter().filter(|t| t.get("error").is_none()).collect();
            expected += turns.len();
            let mut seen = BTreeSet::new();
            for (i, t) in turns.iter().enumerate() {
                let row = mine[k];
                k += 1;
                let m = &row["metadata"];
                assert_eq!(m["seed"], seed);
                assert_eq!(m["turn"], t["turn"]);
                assert_eq!(m["model"], info["config"]["model"]);
                let msgs = row["messages"].as_array().unwrap();
                assert_eq!(msgs.len(), 3);
                assert_eq!(
                    msgs[0],
                    json!({"role": "system", "content": info["system_prompt"]})
                );
                assert_eq!(msgs[1]["role"], "user");
                assert_eq!(msgs[2]["role"], "assistant");
                // User message: the text sent, plus the frame when it was sent.
                let sent = t["frame"]["sent"].as_bool().unwrap();
                assert_eq!(m["has_image"], sent);
                assert_eq!(m["user_has_image"], sent);
                assert_eq!(m["assistant_has_image"], false);
                if sent {
                    images += 1;
                    let parts = msgs[1]["content"].as_array().unwrap();
                    assert_eq!(parts.len(), 2);
                    assert_eq!(parts[0], json!({"type": "text", "text": t["user_text"]}));
                    assert_eq!(parts[1]["type"], "image_url");
                    let url = parts[1]["image_url"]["url"].as_str().unwrap();
                    let b64 = url.strip_prefix("data:image/png;base64,").expect(url);
                    let png = base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .unwrap();
                    let file =
                        std::fs::read(ep_dir.join(t["frame"]["path"].as_str().unwrap())).unwrap();
                    assert_eq!(png, file);
                    // The recorded hash covers the decoded pixels (`rgb-sha256`).
                    let img = image::load_from_memory(&png).unwrap();
                    let rgb = img.to_rgb8();
                    let mut pixels = rgb.width().to_le_bytes().to_vec();
                    pixels.extend_from_slice(&rgb.height().to_le_bytes());
                    pixels.extend_from_slice(rgb.as_raw());
                    assert_eq!(sha(&pixels), t["frame"]["sha256"].as_str().unwrap());
                    let size = info["config"]["image_size"].as_u64().unwrap() as u32;
                    assert_eq!((img.width(), img.height()), (size, size));
                } else {
                    assert_eq!(msgs[1]["content"], t["user_text"]);
                }
                // Assistant: the reply's tool calls (arguments as JSON strings) or its text.
                let reply = &t["reply"];
                let calls = reply["tool_calls"].as_array().unwrap();
                if calls.is_empty() {
                    assert_eq!(msgs[2]["content"], reply["text"]);
                    assert!(msgs[2].get("tool_calls").is_none());
                } else {
                    let got = msgs[2]["tool_calls"].as_array().unwrap();
                    assert_eq!(got.len(), calls.len());
                    for (g, c) in got.iter().zip(calls) {
                        assert_eq!(g["id"], c["id"]);
                        assert_eq!(g["type"], "function");
                        assert_eq!(g["function"]["name"], c["name"]);
                        let args = g["function"]["arguments"].as_str().unwrap();
                        match &c["arguments"] {
                            Value::String(sent) => assert_eq!(args, sent),
                            other => {
                                assert_eq!(&serde_json::from_str::<Value>(args).unwrap(), other)
                            }
                        }
                    }
                }
                // Tools: those the run offered (run.json), named as in the trajectory.
                let offered: Vec<&str> = t["request"]["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                if offered.is_empty() {
                    assert!(row.get("tools").is_none());
                } else {
                    assert_eq!(row["tools"], info["tools"]);
                    let names: Vec<&str> = row["tools"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t["function"]["name"].as_str().unwrap())
                        .collect();
                    assert_eq!(names, offered);
                    assert_eq!(
                        row["tools"][0]["function"]["parameters"]["properties"]["actions"]
                            ["maxItems"],
                        info["config"]["max_actions_per_turn"]
                    );
                    assert_eq!(row["parallel_tool_calls"], false);
                }
                // Achievements: an achievement is new in the turn whose env steps contain its
                // first unlock step (episode.json's unlock_step).
                let lo = t["step"].as_u64().unwrap();
                let hi = turns
                    .get(i + 1)
                    .map(|n| n["step"].as_u64().unwrap())
                    .unwrap_or(ep["num_steps"].as_u64().unwrap());
                let want: BTreeSet<String> = ep["unlock_step"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(_, s)| (lo + 1..=hi).contains(&s.as_u64().unwrap()))
                    .map(|(k, _)| k.clone())
                    .collect();
                let new: BTreeSet<String> = m["achievements"]["new_unique"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                assert_eq!(new, want, "seed {seed} turn {}", t["turn"]);
                seen.extend(new);
                let cumulative: BTreeSet<String> = m["achievements"]["cumulative"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                assert_eq!(cumulative, seen);
                assert_eq!(m["achievements"]["cumulative_unique"], seen.len());
            }
            // After the last turn: every achievement episode.json counts.
            let unlocked: BTreeSet<String> = ep["achievements"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, c)| c.as_u64().unwrap() > 0)
                .map(|(k, _)| k.clone())
                .collect();
            assert_eq!(seen, unlocked, "seed {seed}");
        }
        assert_eq!(k, mine.len(), "{name}: rows beyond the trajectories");
    }
    assert_eq!(rows.len(), expected);
    images
}

#[test]
fn rows_match_the_store_across_protocols_and_modalities() {
    let d = tmp("rows");
    let tool = make_run(
        &d,
        "tool",
        &["--model", "scripted", "--seeds", "3", "--steps", "8"],
    );
    let text = make_run(
        &d,
        "text",
        &[
            "--model",
            "mock",
            "--seeds",
            "2",
            "--steps",
            "4",
            "--protocol",
            "text",
            "--modality",
            "text",
        ],
    );
    let image = make_run(
        &d,
        "image",
        &[
            "--model",
            "random",
            "--seed-list",
            "5,9",
            "--steps",
            "4",
            "--modality",
            "image",
            "--image-size",
            "56",
            "--max-actions-per-turn",
            "3",
        ],
    );
    let out = d.join("data.jsonl");
    let o = export(&[&tool, &text, &image], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = lines(&out);
    let images = check_rows(&rows, &[&tool, &text, &image]);
    assert_eq!(images, 3 * 8 + 2 * 4, "text-modality turns carry no image");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!(
            "wrote {} row(s) ({images} with an image)",
            rows.len()
        )),
        "{stdout}"
    );
    // The scripted run unlocks achievements, so the achievement check above is not vacuous.
    assert!(rows
        .iter()
        .any(|r| !r["metadata"]["achievements"]["new_unique"]
            .as_array()
            .unwrap()
            .is_empty()));

    // --images-only keeps exactly the rows with an image.
    let only = d.join("images.jsonl");
    let o = export(&[&tool, &text, &image], &only, &["--images-only"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kept = lines(&only);
    let want: Vec<&Value> = rows
        .iter()
        .filter(|r| r["metadata"]["has_image"] == true)
        .collect();
    assert_eq!(kept.iter().collect::<Vec<_>>(), want);
}

/// Seeds of a run whose episode.json satisfies `keep`.
fn seeds_where(run: &Path, keep: impl Fn(&Value) -> bool) -> BTreeSet<i64> {
    std::fs::read_dir(run.join("episodes"))
        .unwrap()
        .filter_map(|e| {
            let ep = read_json(&e.ok()?.path().join("episode.json"));
            keep(&ep).then(|| ep["seed"].as_i64().unwrap())
        })
        .collect()
}

fn row_seeds(path: &Path) -> BTreeSet<i64> {
    lines(path)
        .iter()
        .map(|r| r["metadata"]["seed"].as_i64().unwrap())
        .collect()
}

#[test]
fn filters_follow_episode_json_and_bad_values_exit_2() {
    let d = tmp("filters");
    let run = make_run(
        &d,
        "r",
        &["--model", "random", "--seeds", "8", "--steps", "12"],
    );
    let out = d.join("f.jsonl");
    // --require-achievement: episodes whose episode.json counts it.
    for ach in ["collect_wood", "collect_sapling"] {
        let o = export(&[&run], &out, &["--require-achievement", ach]);
        assert!(o.status.success(), "{}", stderr(&o));
        let want = seeds_where(&run, |ep| ep["achievements"][ach].as_u64().unwrap() > 0);
        assert_eq!(row_seeds(&out), want, "{ach}");
    }
    let o = export(
        &[&run],
        &out,
        &["--require-achievement", "collect_wood,collect_sapling"],
    );
    assert!(o.status.success());
    let want = seeds_where(&run, |ep| {
        ep["achievements"]["collect_wood"].as_u64().unwrap() > 0
            && ep["achievements"]["collect_sapling"].as_u64().unwrap() > 0
    });
    assert_eq!(row_seeds(&out), want);
    // --min-progression: a fraction or a percent, compared with episode.json's progression.
    let progs: BTreeSet<u64> = std::fs::read_dir(run.join("episodes"))
        .unwrap()
        .map(|e| {
            let ep = read_json(&e.unwrap().path().join("episode.json"));
            ep["score"].as_u64().unwrap()
        })
        .collect();
    let score = *progs.iter().nth(progs.len() / 2).unwrap();
    let frac = score as f64 / 22.0;
    let want = seeds_where(&run, |ep| ep["score"].as_u64().unwrap() >= score);
    assert!(!want.is_empty());
    let o = export(&[&run], &out, &["--min-progression", &format!("{frac}")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(row_seeds(&out), want);
    let o = export(
        &[&run],
        &out,
        &["--min-progression", &format!("{}%", 100.0 * frac)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(row_seeds(&out), want);

    for (flag, value, needle) in [
        ("--require-achievement", "collect_woood", "collect_diamond"),
        ("--min-progression", "25", "fraction"),
        ("--min-progression", "1.5", "percent"),
        ("--min-progression", "-1%", "fraction"),
    ] {
        let o = export(&[&run], &out, &[flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
        let e = stderr(&o);
        assert!(e.contains(value) && e.contains(needle), "{e}");
    }
}

#[test]
fn missing_partial_corrupt_and_older_runs() {
    let d = tmp("bad");
    let good = make_run(
        &d,
        "good",
        &["--model", "scripted", "--seeds", "3", "--steps", "4"],
    );
    let out = d.join("out.jsonl");
    std::fs::write(&out, "previous\n").unwrap();
    let fails = |runs: &[&Path], needles: &[&str]| {
        let o = export(runs, &out, &[]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        for n in needles {
            assert!(e.contains(n), "{n:?} not in {e}");
        }
        // Nothing was written over the previous file, and no temporary file is left.
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous\n");
        let leftovers: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".out.jsonl"))
            .collect();
        assert!(leftovers.is_empty());
    };
    fails(&[&good, &d.join("nope")], &["nope", "no such folder"]);

    let copy = |name: &str| {
        let dst = d.join(name);
        let o = Command::new("cp")
            .arg("-r")
            .arg(&good)
            .arg(&dst)
            .output()
            .unwrap();
        assert!(o.status.success());
        dst
    };
    let corrupt = copy("corrupt");
    std::fs::write(corrupt.join("run.json"), "{\"config\": ").unwrap();
    fails(&[&corrupt], &["corrupt/run.json", "not valid JSON"]);

    let traj = copy("traj");
    let path = traj.join("episodes/seed_1/trajectory.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut l: Vec<&str> = text.lines().collect();
    l[1] = "{not json";
    std::fs::write(&path, l.join("\n") + "\n").unwrap();
    // An unreadable trajectory: its episode is left out, warned about (file and line) and
    // counted; the other episodes are exported.
    let o = export(&[&traj], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("seed_1/trajectory.jsonl") && e.contains("line 2"),
        "{e}"
    );
    assert!(
        stdout(&o).contains("1 episode(s) with an unreadable trajectory"),
        "{}",
        stdout(&o)
    );
    assert!(!row_seeds(&out).contains(&1));
    std::fs::write(&out, "previous\n").unwrap();

    let tampered = copy("tampered");
    let frame = tampered.join("episodes/seed_2/frames/step_0000.png");
    let original = std::fs::read(&frame).unwrap();
    let mut bytes = std::fs::read(&frame).unwrap();
    let n = bytes.len();
    bytes[n - 20] ^= 1;
    std::fs::write(&frame, bytes).unwrap();
    fails(
        &[&tampered],
        &["seed_2/frames/step_0000.png", "does not match"],
    );
    // A missing frame is replayed from the trajectory (every frame's hash is recorded): the row
    // holds the original file's bytes. Without an engine it can replay with, it is an error.
    std::fs::remove_file(&frame).unwrap();
    let replayed = d.join("replayed.jsonl");
    let o = export(&[&tampered], &replayed, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&original)
    );
    assert!(std::fs::read_to_string(&replayed).unwrap().contains(&url));
    let mut info = read_json(&tampered.join("run.json"));
    info["engine_parity"] = json!(0);
    std::fs::write(tampered.join("run.json"), info.to_string()).unwrap();
    fails(
        &[&tampered],
        &["seed_2/frames/step_0000.png", "missing", "engine parity"],
    );

    // A trajectory's frame.path names a file inside the episode's frames/ folder, nothing else:
    // a crafted path (with its sha256 removed, or matching) cannot pull another file into the
    // export.
    let escape = copy("escape");
    let path = escape.join("episodes/seed_1/trajectory.jsonl");
    let secret = d.join("secret.png");
    std::fs::write(&secret, b"not for export").unwrap();
    for bad in [
        "../../../secret.png".to_string(),
        secret.display().to_string(),
        "frames/../../../../secret.png".to_string(),
    ] {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut rows: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        rows[0]["frame"]["path"] = json!(bad);
        rows[0]["frame"]["sent"] = json!(true);
        rows[0]["frame"].as_object_mut().unwrap().remove("sha256");
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let o = export(&[&escape], &out, &[]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("seed_1/trajectory.jsonl")
                && e.contains("frames/<file>.png")
                && e.trim().lines().count() == 1,
            "{bad}: {e}"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous\n");
    }

    // Partial (interrupted) run: the unfinished episode is left out with a warning; a truncated
    // last trajectory line of a finished one is dropped.
    let partial = copy("partial");
    std::fs::remove_file(partial.join("episodes/seed_0/episode.json")).unwrap();
    let o = export(&[&partial], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 unfinished episode(s) left out (seeds [0])"),
        "{}",
        stderr(&o)
    );
    assert_eq!(row_seeds(&out), BTreeSet::from([1, 2]));
    for s in [0, 1, 2] {
        std::fs::remove_file(partial.join(format!("episodes/seed_{s}/episode.json"))).ok();
    }
    let o = export(&[&partial], &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has no finished episode yet (3 unfinished, interrupted"),
        "{}",
        stderr(&o)
    );

    // An older run (no system_prompt, tools or user_text): warnings, and user text rebuilt
    // from the observation, which must equal what the run sent.
    let old = copy("old");
    let mut info = read_json(&old.join("run.json"));
    let obj = info.as_object_mut().unwrap();
    obj.remove("system_prompt");
    obj.remove("tools");
    std::fs::write(old.join("run.json"), info.to_string()).unwrap();
    for s in 0..3 {
        let p = old.join(format!("episodes/seed_{s}/trajectory.jsonl"));
        let stripped: Vec<String> = lines(&p)
            .into_iter()
            .map(|mut t| {
                t.as_object_mut().unwrap().remove("user_text");
                t.to_string()
            })
            .collect();
        std::fs::write(&p, stripped.join("\n") + "\n").unwrap();
    }
    let new_out = d.join("new.jsonl");
    let o = export(&[&good], &new_out, &[]);
    assert!(o.status.success());
    let o = export(&[&old], &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    for needle in ["has no system_prompt", "has no tools", "no user_text"] {
        assert!(e.contains(needle), "{needle:?} not in {e}");
    }
    let (old_rows, new_rows) = (lines(&out), lines(&new_out));
    assert_eq!(old_rows.len(), new_rows.len());
    for (o, n) in old_rows.iter().zip(&new_rows) {
        assert_eq!(
            o["messages"][0], n["messages"][1],
            "user message rebuilt exactly"
        );
        assert_eq!(o["messages"][1], n["messages"][2]);
        assert!(o.get("tools").is_none());
    }
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> (u16, String) {
    let r = client
        .post(format!("{url}/chat/completions"))
        .header("authorization", "Bearer test")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .send()
        .await
        .unwrap_or_else(|e| panic!("cannot reach Prism at {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

/// A row as a chat-completions request body.
fn as_request(row: &Value) -> Value {
    let mut body = json!({"model": "gpt-4o-mini", "messages": row["messages"]});
    if let Some(tools) = row.get("tools") {
        body["tools"] = tools.clone();
    }
    if let Some(p) = row.get("parallel_tool_calls") {
        body["parallel_tool_calls"] = p.clone();
    }
    body
}

#[tokio::test]
async fn rows_are_valid_openai_requests_per_prism() {
    let Some(url) = std::env::var("PRISM_URL").ok().filter(|s| !s.is_empty()) else {
        println!("SKIP: PRISM_URL not set (.ci/run starts Prism on OpenAI's spec)");
        return;
    };
    let url = url.trim_end_matches('/').to_string();
    let d = tmp("prism");
    let runs = [
        make_run(
            &d,
            "tool",
            &["--model", "scripted", "--seeds", "2", "--steps", "6"],
        ),
        make_run(
            &d,
            "text",
            &[
                "--model",
                "mock",
                "--seeds",
                "1",
                "--steps",
                "4",
                "--protocol",
                "text",
            ],
        ),
        make_run(
            &d,
            "image",
            &[
                "--model",
                "random",
                "--seeds",
                "1",
                "--steps",
                "4",
                "--modality",
                "image",
            ],
        ),
        make_run(
            &d,
            "plain",
            &[
                "--model",
                "scripted",
                "--seeds",
                "1",
                "--steps",
                "3",
                "--modality",
                "text",
            ],
        ),
    ];
    let out = d.join("rows.jsonl");
    let refs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let o = export(&refs, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = lines(&out);
    let client = reqwest::Client::new();
    let mut failures = Vec::new();
    let (mut multimodal, mut text_only) = (0, 0);
    for row in &rows {
        let (status, answer) = post(&client, &url, &as_request(row)).await;
        if row["metadata"]["has_image"] == true {
            multimodal += 1;
        } else {
            text_only += 1;
        }
        if status != 200 {
            failures.push(format!("{}: HTTP {status}: {answer}", row["metadata"]));
        }
    }
    println!(
        "Prism accepted {} of {} rows ({multimodal} multimodal, {text_only} text-only)",
        rows.len() - failures.len(),
        rows.len()
    );
    assert!(multimodal > 0 && text_only > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The validator is live: a broken image part is rejected.
    let mut broken = as_request(
        rows.iter()
            .find(|r| r["metadata"]["has_image"] == true)
            .unwrap(),
    );
    broken["messages"][1]["content"][1]["type"] = json!("image");
    let (status, _) = post(&client, &url, &broken).await;
    assert_eq!(status, 422);
}
