//! `vlm-eval report`: the HTML page built from real `--model mock` runs, rendered in headless
//! Chromium (screenshot pixels and the DOM after load), the escaping of hostile model text,
//! and missing, partial, corrupt or old run folders.

use crate::support;
use support::{chromium, text, vlm_eval};

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SCRIPT: &str = "<script>document.title='pwned'</script>";
const IMG: &str =
    "<img src=x onerror=\"document.body.appendChild(document.createElement('aside')).id='pwned'\">";
/// The chart colours chosen in src/report/svg.rs.
const BAR_RGB: [u8; 3] = [0x2f, 0x6f, 0xdf];
const LINE_RGB: [u8; 3] = [0xe8, 0x59, 0x0c];

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("report-html-{name}"))
}

/// A real run folder: `vlm-eval --model mock` (deterministic, offline).
fn mock_run(dir: &Path, name: &str, seeds: &str, steps: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "--model",
        "mock",
        "--seeds",
        seeds,
        "--steps",
        steps,
        "--out",
        dir.to_str().unwrap(),
        "--run-name",
        name,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "{}", text(&o).1);
    dir.join(name)
}

fn report(run: &Path, extra: &[&str]) -> (Output, PathBuf) {
    let mut args = vec!["report", run.to_str().unwrap()];
    args.extend_from_slice(extra);
    (vlm_eval(&args), run.join("report.html"))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn trajectory(run: &Path, seed: i64) -> Vec<Value> {
    std::fs::read_to_string(run.join(format!("episodes/seed_{seed}/trajectory.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_trajectory(run: &Path, seed: i64, lines: &[Value]) {
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(
        run.join(format!("episodes/seed_{seed}/trajectory.jsonl")),
        body,
    )
    .unwrap();
}

/// Run headless Chromium on a local file; kills its process group after `limit`.
fn run_chromium(bin: &Path, work: &Path, mode: &str, page: &Path) -> Vec<u8> {
    let profile = work.join(format!("profile-{}", mode.trim_start_matches("--")));
    let _ = std::fs::remove_dir_all(&profile);
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", profile.display()),
            "--window-size=1200,2400",
            mode,
            &format!("file://{}", page.display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium {mode} exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("chromium {mode} hung for 120 s and was killed");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

fn near(a: &[u8], b: [u8; 3], tol: i16) -> bool {
    (0..3).all(|i| (a[i] as i16 - b[i] as i16).abs() <= tol)
}

#[test]
fn report_renders_in_headless_chromium() {
    let dir = tmp("render");
    let run = mock_run(&dir, "r", "2", "6", &[]);
    let (o, page) = report(&run, &[]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(
        stdout.contains(&format!("({size} bytes)")) && stdout.contains("2 of 2 episodes"),
        "{stdout}"
    );

    // Oracles from the run's own files.
    let episodes: Vec<Value> = (0..2)
        .map(|s| read_json(&run.join(format!("episodes/seed_{s}/episode.json"))))
        .collect();
    let mut rates = BTreeMap::new();
    for name in episodes[0]["achievements"].as_object().unwrap().keys() {
        let k = episodes
            .iter()
            .filter(|e| e["achievements"][name].as_u64().unwrap() > 0)
            .count();
        rates.insert(name.clone(), 100.0 * k as f64 / episodes.len() as f64);
    }
    assert_eq!(rates.len(), 22);
    let turns: Vec<usize> = (0..2).map(|s| trajectory(&run, s).len()).collect();
    // The reply-format card: the mock answers every turn in the exact form.
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(r#"<div class="card" data-key="format"><span class="key">Reply format</span><span class="value">100.0% exact</span><span class="sub">0.0% repaired · 0.0% invalid</span></div>"#),
        "no format card"
    );
    assert!(
        html.contains("preset vlm-eval · parser lenient"),
        "header facts"
    );

    let Some(bin) = chromium() else { return };
    let dom = String::from_utf8(run_chromium(&bin, &dir, "--dump-dom", &page)).unwrap();
    assert!(
        dom.contains("<title>vlm-eval report: r</title>"),
        "{dom:.400}"
    );
    assert_eq!(dom.matches(r#"<rect class="bar""#).count(), 22);
    for (name, rate) in &rates {
        let needle = format!(r#"data-achievement="{name}" data-rate="{rate:.2}""#);
        assert!(dom.contains(&needle), "missing {needle}");
    }
    assert_eq!(dom.matches(r#"<details class="episode""#).count(), 2);
    assert_eq!(
        dom.matches(r#"<tr class="turn"#).count(),
        turns.iter().sum::<usize>()
    );
    let points = format!(r#"data-points="{}""#, turns.iter().max().unwrap() + 1);
    assert!(dom.contains(&points), "progression line lacks {points}");
    assert!(!dom.contains("http://") && !dom.contains("https://"));

    let shot = dir.join("shot.png");
    run_chromium(
        &bin,
        &dir,
        &format!("--screenshot={}", shot.display()),
        &page,
    );
    let img = image::open(&shot).expect("screenshot decodes").to_rgb8();
    assert_eq!(img.dimensions(), (1200, 2400));
    let mut counts: HashMap<[u8; 3], usize> = HashMap::new();
    for p in img.pixels() {
        *counts.entry(p.0).or_default() += 1;
    }
    assert!(
        counts.len() > 50,
        "screenshot looks blank: {} colours",
        counts.len()
    );
    // Bars: 300 px track, 15 px high, width proportional to the hand-computed rate.
    let want_bar: f64 = rates.values().map(|r| 300.0 * r / 100.0 * 15.0).sum();
    let bar_px: usize = counts
        .iter()
        .filter(|(c, _)| near(&c[..], BAR_RGB, 2))
        .map(|(_, n)| n)
        .sum();
    assert!(
        (bar_px as f64) > 0.85 * want_bar && (bar_px as f64) < 1.1 * want_bar + 50.0,
        "bar pixels {bar_px}, expected about {want_bar}"
    );
    let line_px: usize = counts
        .iter()
        .filter(|(c, _)| near(&c[..], LINE_RGB, 2))
        .map(|(_, n)| n)
        .sum();
    assert!(line_px > 300, "progression line pixels: {line_px}");
    // A frame: the distinctive (non-grey) colours of the run's first frame appear, scaled up.
    let frame = image::open(run.join("episodes/seed_0/frames/step_0000.png"))
        .unwrap()
        .to_rgb8();
    let mut frame_colours: HashMap<[u8; 3], usize> = HashMap::new();
    for p in frame.pixels() {
        *frame_colours.entry(p.0).or_default() += 1;
    }
    let distinctive: Vec<[u8; 3]> = frame_colours
        .iter()
        .filter(|(c, n)| {
            let (r, g, b) = (c[0] as i16, c[1] as i16, c[2] as i16);
            **n >= 20 && ((r - g).abs() > 12 || (g - b).abs() > 12 || (r - b).abs() > 12)
        })
        .map(|(c, _)| *c)
        .collect();
    assert!(distinctive.len() >= 3, "frame has too few colours to test");
    let found: Vec<usize> = distinctive
        .iter()
        .map(|c| counts.get(c).copied().unwrap_or(0))
        .collect();
    let frame_px: usize = found.iter().sum();
    assert!(
        found.iter().filter(|&&n| n > 0).count() >= 3 && frame_px > 64 * 64,
        "frame colours in the screenshot: {found:?}"
    );
}

#[test]
fn hostile_model_text_renders_as_text_in_chromium() {
    let dir = tmp("escape");
    let run = mock_run(&dir, "e", "1", "3", &[]);
    let mut info = read_json(&run.join("run.json"));
    info["config"]["run_name"] = Value::from(format!("x</title>{SCRIPT}"));
    std::fs::write(run.join("run.json"), info.to_string()).unwrap();
    let mut lines = trajectory(&run, 0);
    for l in &mut lines {
        l["reply"]["text"] = Value::from(format!("{SCRIPT} {IMG}"));
        l["parsed"]["reasoning"] = Value::from(format!("plan {SCRIPT}"));
        l["user_text"] = Value::from(IMG);
    }
    write_trajectory(&run, 0, &lines);
    let (o, page) = report(&run, &[]);
    assert!(o.status.success(), "{}", text(&o).1);
    let html = std::fs::read_to_string(&page).unwrap();

    if let Some(bin) = chromium() {
        let dom = String::from_utf8(run_chromium(&bin, &dir, "--dump-dom", &page)).unwrap();
        let lower = dom.to_lowercase();
        // The script did not run (title unchanged), injected no element, and the text is
        // literal. All checks are made so that a failure lists every one that broke.
        let checks = [
            (
                "title is the literal run name",
                dom.contains("<title>vlm-eval report: x&lt;/title&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;</title>"),
            ),
            ("title was not changed by a script", !dom.contains("<title>pwned")),
            ("no script element", !lower.contains("<script")),
            ("no injected element", !dom.contains("<aside") && !dom.contains("id=\"pwned\"")),
            ("no injected img", !dom.contains("<img src=\"x\"")),
            (
                "reasoning shown literally",
                dom.contains("plan &lt;script&gt;document.title='pwned'&lt;/script&gt;"),
            ),
            ("reply shown literally", dom.contains("&lt;img src=x onerror=")),
        ];
        let failed: Vec<&str> = checks.iter().filter(|c| !c.1).map(|c| c.0).collect();
        assert!(
            failed.is_empty(),
            "escaping failed in the browser: {failed:?}\n{}",
            &dom[..dom.len().min(800)]
        );
    }
    assert!(!html.to_lowercase().contains("<script"));
}

#[test]
fn broken_runs_fail_or_warn_naming_the_file() {
    let dir = tmp("broken");
    // Missing folder and folder without run.json: exit 2 naming the path.
    let o = vlm_eval(&["report", dir.join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("nope"), "{}", text(&o).1);
    let o = vlm_eval(&["report", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("run.json"), "{}", text(&o).1);

    let run = mock_run(&dir, "b", "3", "4", &[]);
    // Corrupt episode.json: exit 2 naming it; nothing written.
    let ep1 = run.join("episodes/seed_1/episode.json");
    let good = std::fs::read_to_string(&ep1).unwrap();
    std::fs::write(&ep1, &good[..good.len() / 2]).unwrap();
    let (o, page) = report(&run, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("seed_1/episode.json"), "{}", text(&o).1);
    assert!(!page.exists());

    // Partial run (seed 1 unfinished), a missing frame, a corrupt trajectory line in seed 2,
    // and a truncated last line in seed 0 (its turns still shown, the trajectory counted as
    // damaged: fewer whole lines than episode.json's turns).
    std::fs::remove_file(&ep1).unwrap();
    std::fs::remove_file(run.join("episodes/seed_0/frames/step_0000.png")).unwrap();
    let t0 = run.join("episodes/seed_0/trajectory.jsonl");
    let body = std::fs::read_to_string(&t0).unwrap();
    let kept = body.lines().count() - 1;
    let cut = body.trim_end().len() - 10;
    std::fs::write(&t0, &body[..cut]).unwrap();
    let t2 = run.join("episodes/seed_2/trajectory.jsonl");
    let body = std::fs::read_to_string(&t2).unwrap();
    std::fs::write(&t2, format!("{{\"turn\":0}}\nnot json\n{body}")).unwrap();
    let (o, page) = report(&run, &[]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stdout.contains("2 of 2 episodes")
            && stdout.contains("3 warnings (2 unreadable or damaged trajectories"),
        "{stdout}"
    );
    assert!(stderr.contains("seed_0/trajectory.jsonl"), "{stderr}");
    assert!(stderr.contains("seed_0/frames/step_0000.png"), "{stderr}");
    assert!(
        stderr.contains("seed_2/trajectory.jsonl") && stderr.contains("line 2"),
        "{stderr}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(r#"id="incomplete""#) && html.contains("seed(s) 1 have no"));
    assert!(html.contains("frame missing") && html.contains("Trajectory unavailable"));
    assert!(
        html.contains("seed_0/frames/step_0000.png"),
        "warning not in the page"
    );
    let seed0 =
        &html[html.find(r#"data-seed="0""#).unwrap()..html.find(r#"data-seed="2""#).unwrap()];
    assert_eq!(seed0.matches(r#"<tr class="turn"#).count(), kept);
}

#[test]
fn errored_text_only_and_old_runs_still_render() {
    let dir = tmp("variants");
    let run = mock_run(&dir, "t", "2", "4", &["--modality", "text"]);
    // Seed 1 ended in an error: its last call failed.
    let ep_path = run.join("episodes/seed_1/episode.json");
    let mut ep = read_json(&ep_path);
    ep["termination"] = Value::from("error");
    ep["error"] = Value::from("turn 4: endpoint said <503> & gave up");
    std::fs::write(&ep_path, ep.to_string()).unwrap();
    let mut lines = trajectory(&run, 1);
    lines.push(
        serde_json::json!({"turn": 4, "step": 99, "observation": "", "error": "HTTP 503 <busy>"}),
    );
    write_trajectory(&run, 1, &lines);
    // Seed 0 as an older version wrote it: no user_text, frame, parsed, executed or reply.
    let old: Vec<Value> = trajectory(&run, 0)
        .into_iter()
        .map(|mut l| {
            let o = l.as_object_mut().unwrap();
            for k in [
                "user_text",
                "frame",
                "parsed",
                "executed",
                "reply",
                "invalid",
            ] {
                o.remove(k);
            }
            l
        })
        .collect();
    write_trajectory(&run, 0, &old);
    let (o, page) = report(&run, &[]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(!stdout.contains("warning"), "{stdout} {stderr}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Text-only run"));
    // Text-only: every turn's frame is marked as not sent (seed 0's lines lost the flag; the
    // run's modality says so).
    let rows = old.len() + lines.len() - 1;
    assert_eq!(html.matches("thumb-cell not-sent").count(), rows);
    assert!(html.contains("Episode error: turn 4: endpoint said &lt;503&gt; &amp; gave up"));
    assert!(html.contains("model call failed: HTTP 503 &lt;busy&gt;"));
    // The progression plot still covers seed 0 (from unlock_step), the errored seed is left out.
    assert!(html.contains(&format!(r#"data-points="{}""#, old.len() + 1)));
    assert!(html.contains("over 1 episodes"));
}

#[test]
fn size_flags_bound_the_page() {
    let dir = tmp("flags");
    let run = mock_run(&dir, "f", "3", "5", &[]);
    let (o, page) = report(&run, &[]);
    assert!(o.status.success());
    let full = std::fs::read_to_string(&page).unwrap();
    assert_eq!(full.matches("data:image/gif;base64,").count(), 3);
    let small = dir.join("small.html");
    let o = vlm_eval(&[
        "report",
        run.to_str().unwrap(),
        "--out",
        small.to_str().unwrap(),
        "--no-gif",
        "--max-episodes",
        "1",
        "--frame-size",
        "32",
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("1 of 3 episodes"), "{stdout}");
    let html = std::fs::read_to_string(&small).unwrap();
    assert!(
        html.len() < full.len() / 2,
        "{} vs {}",
        html.len(),
        full.len()
    );
    assert!(!html.contains("data:image/gif"));
    assert_eq!(html.matches(r#"<details class="episode""#).count(), 1);
    assert!(html.contains("pass --max-episodes"));
    // Thumbnails were scaled from 64 to 32 pixels (the first PNG inside the episode; the page's
    // icon, a PNG data URL in the head, comes before it).
    let episode = html.find(r#"<details class="episode""#).unwrap();
    let start = episode
        + html[episode..].find("data:image/png;base64,").unwrap()
        + "data:image/png;base64,".len();
    let b64 = &html[start..start + html[start..].find('"').unwrap()];
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let thumb = image::load_from_memory(&bytes).unwrap();
    assert_eq!((thumb.width(), thumb.height()), (32, 32));
    // Bad values are usage errors.
    let o = vlm_eval(&["report", run.to_str().unwrap(), "--frame-size", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--frame-size"));
}
