//! Frames by hash and replay (`--frames`, `vlm-eval replay`): a run with `--frames none` then
//! `replay` gives files byte-identical to the same run with `--frames all`, at 64 and 256 px
//! with night frames, and under the balrog preset (its reset Noop and double render); every
//! frame's recorded hash is `rgb-sha256` of the pixels of the file the `all` run wrote; `sent` keeps exactly the
//! frames the model was shown; readers (export-sft, report) replay what is missing; a hand-edited
//! trajectory stops replay at the edited step; bad input exits 2 with one line.

use crate::support;
use support::stderr;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};

fn vlm_eval(args: &[&str]) -> Output {
    support::run(args, &["BALROG_SRC"], &[("VLM_EVAL_NO_FETCH", "1")])
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("frames-replay-{name}"))
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The `rgb-sha256` of a PNG file as docs/FORMATS.md defines it, computed here from the image
/// crate's decoding: sha256 of width and height (u32 LE) then the RGB rows.
fn pixel_sha(png: &[u8]) -> String {
    let img = image::load_from_memory(png).unwrap().into_rgb8();
    let mut bytes = img.width().to_le_bytes().to_vec();
    bytes.extend_from_slice(&img.height().to_le_bytes());
    bytes.extend_from_slice(img.as_raw());
    sha(&bytes)
}

/// Every PNG under a folder (recursively), by path relative to it.
fn pngs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|x| x == "png") {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Play one run with the given `--frames` mode; returns its folder.
fn play(out: &Path, name: &str, frames: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "--out",
        out.to_str().unwrap(),
        "--run-name",
        name,
        "--quiet",
        "--frames",
        frames,
    ];
    args.extend_from_slice(extra);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "{name}: {}", stderr(&o));
    out.join(name)
}

/// The `all` run's frames against the trajectory's hashes (of the files' decoded pixels):
/// every executed frame's
/// `frame_sha256`, every sent frame's `frame.sha256`, the reset frames and the episode hash.
fn hashes_match_files(run: &Path, seed: i64) {
    let ep_dir = run.join(format!("episodes/seed_{seed}"));
    let file =
        |step: u64| std::fs::read(ep_dir.join(format!("frames/step_{step:04}.png"))).unwrap();
    let ep = json(&ep_dir.join("episode.json"));
    assert_eq!(ep["frames"]["hash"], "rgb-sha256");
    assert_eq!(json(&run.join("run.json"))["frame_hash"], "rgb-sha256");
    let mut all = BTreeMap::new();
    for r in ep["frames"]["reset"].as_array().unwrap() {
        let step = r["step"].as_u64().unwrap();
        assert_eq!(
            r["sha256"].as_str().unwrap(),
            pixel_sha(&file(step)),
            "reset {step}"
        );
        all.insert(step, r["sha256"].as_str().unwrap().to_string());
    }
    for t in lines(&ep_dir.join("trajectory.jsonl")) {
        let step = t["step"].as_u64().unwrap();
        assert_eq!(
            t["frame"]["sha256"].as_str().unwrap(),
            pixel_sha(&file(step))
        );
        for e in t["executed"].as_array().into_iter().flatten() {
            let step = e["step"].as_u64().unwrap();
            let h = e["frame_sha256"].as_str().unwrap();
            assert_eq!(h, pixel_sha(&file(step)), "step {step}");
            all.insert(step, h.to_string());
        }
    }
    let n = ep["num_steps"].as_u64().unwrap();
    assert_eq!(all.len() as u64, n + 1, "a hash for every frame");
    assert_eq!(ep["frames"]["count"], n + 1);
    let joined: String = all.values().map(|h| format!("{h}\n")).collect();
    assert_eq!(
        ep["frames"]["sha256"].as_str().unwrap(),
        sha(joined.as_bytes())
    );
}

/// `--frames none` then `replay --out` gives the `all` run's files, byte for byte.
fn none_replays_to_all(d: &Path, size: &str, seed: &str, extra: &[&str]) {
    let mut args = vec!["--seed-list", seed, "--image-size", size];
    args.extend_from_slice(extra);
    let all = play(d, "all", "all", &args);
    let none = play(d, "none", "none", &args);
    let seed: i64 = seed.parse().unwrap();
    let ep = json(&all.join(format!("episodes/seed_{seed}/episode.json")));
    let n = ep["num_steps"].as_u64().unwrap();
    assert!(
        n >= 180,
        "the episode reaches the night (steps 148..=272): {n} steps"
    );
    hashes_match_files(&all, seed);
    assert!(pngs(&none).is_empty(), "--frames none writes no PNG");
    let ep_none = json(&none.join(format!("episodes/seed_{seed}/episode.json")));
    assert_eq!(ep_none["frames"]["sha256"], ep["frames"]["sha256"]);
    assert_eq!(ep_none["frames"]["saved"], "none");
    assert_eq!(json(&none.join("run.json"))["config"]["frames"], "none");

    let out = d.join("replayed");
    let o = vlm_eval(&[
        "replay",
        none.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("{} frames", n + 1)));
    let want = pngs(&all);
    let got = pngs(&out);
    assert_eq!(got.len() as u64, n + 1);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (k, v) in &want {
        assert!(got[k] == *v, "{k} differs from the `all` run's file");
    }
    assert!(
        pngs(&none).is_empty(),
        "replay --out never writes into the run"
    );

    // --restore brings the files back into the run folder itself.
    let o = vlm_eval(&["replay", none.to_str().unwrap(), "--restore"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(pngs(&none), want);
}

#[test]
fn none_then_replay_equals_all_at_64_px_with_night() {
    let d = tmp("64");
    none_replays_to_all(&d, "64", "3", &["--model", "random", "--steps", "70"]);
}

#[test]
fn none_then_replay_equals_all_at_256_px_with_night() {
    let d = tmp("256");
    none_replays_to_all(&d, "256", "3", &["--model", "random", "--steps", "70"]);
}

#[test]
fn balrog_preset_none_then_replay_equals_all() {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/balrog/reference");
    if !reference.join("balrog/evaluator.py").is_file() {
        println!("SKIP: ../shared/balrog/reference (BALROG's checkout) is absent");
        return;
    }
    let official = vlm_eval_textures_official();
    if !official {
        println!("SKIP: crafter's official textures not found (set CRAFTER_ASSETS)");
        return;
    }
    let d = tmp("balrog");
    let src = reference.to_str().unwrap().to_string();
    none_replays_to_all(
        &d,
        "256",
        "4",
        &[
            "--preset",
            "balrog",
            "--model",
            "mock",
            "--steps",
            "200",
            "--balrog-src",
            &src,
        ],
    );
}

fn vlm_eval_textures_official() -> bool {
    vlm_eval::crafter::TextureSet::discover(None)
        .map(|(t, _)| t.kind())
        .ok()
        == Some("official")
}

#[test]
fn sent_keeps_the_frames_shown_and_readers_replay_the_rest() {
    let d = tmp("sent");
    let args = ["--model", "scripted", "--seeds", "2", "--steps", "6"];
    let all = play(&d, "all", "all", &args);
    let sent = play(&d, "sent", "sent", &args);
    for seed in 0..2 {
        let ep_dir = sent.join(format!("episodes/seed_{seed}"));
        let mut shown: Vec<String> = lines(&ep_dir.join("trajectory.jsonl"))
            .iter()
            .filter(|t| t["frame"]["sent"] == true)
            .map(|t| format!("frames/step_{:04}.png", t["step"].as_u64().unwrap()))
            .collect();
        shown.sort();
        assert!(!shown.is_empty());
        let files: Vec<String> = pngs(&ep_dir).into_keys().collect();
        assert_eq!(files, shown, "seed {seed}: exactly the frames sent");
        for (k, v) in pngs(&ep_dir) {
            let a = std::fs::read(all.join(format!("episodes/seed_{seed}")).join(&k)).unwrap();
            assert!(a == v, "{k}");
        }
    }

    // export-sft of a `none` run gives the `all` run's rows (frames replayed).
    let none = play(&d, "none", "none", &args);
    let export = |run: &Path, out: &Path| {
        let o = vlm_eval(&[
            "export-sft",
            run.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut rows = lines(out);
        for r in &mut rows {
            r["metadata"].as_object_mut().unwrap().remove("run");
        }
        serde_json::to_string(&rows).unwrap()
    };
    let a = export(&all, &d.join("all.jsonl"));
    let b = export(&none, &d.join("none.jsonl"));
    assert!(a.contains("data:image/png;base64,"));
    assert!(
        a == b,
        "export-sft of the none run differs from the all run's"
    );

    // The report shows every frame (no placeholder, no warning).
    let o = vlm_eval(&[
        "report",
        none.to_str().unwrap(),
        "--out",
        d.join("r.html").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(d.join("r.html")).unwrap();
    assert!(!html.contains("frame missing") && !html.contains("no frames"));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("warning"));

    // Shards made with `none` merge, and the merged run replays.
    let s0 = play(
        &d,
        "s0",
        "none",
        &[
            "--model", "scripted", "--seeds", "2", "--steps", "6", "--shard", "0/2",
        ],
    );
    let s1 = play(
        &d,
        "s1",
        "sent",
        &[
            "--model", "scripted", "--seeds", "2", "--steps", "6", "--shard", "1/2",
        ],
    );
    let merged = d.join("merged");
    let o = vlm_eval(&[
        "merge",
        s0.to_str().unwrap(),
        s1.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&merged.join("run.json"))["config"]["frames"], "mixed");
    let o = vlm_eval(&[
        "replay",
        merged.to_str().unwrap(),
        "--out",
        d.join("m").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(pngs(&d.join("m")), pngs(&all));
}

#[test]
fn an_edited_trajectory_stops_replay_at_that_step() {
    let d = tmp("edited");
    let run = play(
        &d,
        "r",
        "none",
        &["--model", "scripted", "--seed-list", "5", "--steps", "8"],
    );
    let path = run.join("episodes/seed_5/trajectory.jsonl");
    let mut rows = lines(&path);
    // The first executed move whose frame differs from the one before: played as its opposite,
    // the frame must differ there.
    let mut prev: String;
    let mut edited = None;
    'rows: for r in rows.iter_mut() {
        prev = r["frame"]["sha256"].as_str().unwrap().to_string();
        for e in r["executed"].as_array_mut().unwrap() {
            let h = e["frame_sha256"].as_str().unwrap().to_string();
            let opposite = match e["action"].as_str().unwrap() {
                "move_left" => Some("move_right"),
                "move_right" => Some("move_left"),
                "move_up" => Some("move_down"),
                "move_down" => Some("move_up"),
                _ => None,
            };
            if let (Some(o), true) = (opposite, h != prev) {
                e["action"] = Value::String(o.into());
                edited = Some(e["step"].as_u64().unwrap());
                break 'rows;
            }
            prev = h;
        }
    }
    let step = edited.expect("the scripted policy moves");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let o = vlm_eval(&["replay", run.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("seed 5 step {step}:")) && e.contains("sha256"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let d = tmp("bad");
    let o = vlm_eval(&[
        "--model",
        "scripted",
        "--frames",
        "some",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("all") && stderr(&o).contains("none"));
    let cfg = d.join("c.toml");
    std::fs::write(&cfg, "model = \"scripted\"\nframes = \"most\"\n").unwrap();
    let o = vlm_eval(&[
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        d.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("most") && stderr(&o).contains("sent"),
        "{}",
        stderr(&o)
    );

    let run = play(
        &d,
        "r",
        "none",
        &["--model", "scripted", "--seeds", "1", "--steps", "3"],
    );
    let one_line = |args: &[&str], needles: &[&str]| {
        let o = vlm_eval(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        for n in needles {
            assert!(e.contains(n), "{args:?}: {n:?} not in {e}");
        }
    };
    let r = run.to_str().unwrap();
    // --out inside the run, or holding another run.
    one_line(
        &["replay", r, "--out", run.join("x").to_str().unwrap()],
        &["inside the run folder"],
    );
    let other = play(
        &d,
        "other",
        "none",
        &["--model", "scripted", "--seeds", "1", "--steps", "2"],
    );
    one_line(
        &["replay", r, "--out", other.to_str().unwrap()],
        &["holds a run"],
    );
    let o = vlm_eval(&[
        "replay",
        other.to_str().unwrap(),
        "--out",
        d.join("o").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    one_line(
        &["replay", r, "--out", d.join("o").to_str().unwrap()],
        &["another run"],
    );
    // A seed the run does not have.
    one_line(&["replay", r, "--seed", "9"], &["--seed 9"]);

    let edit = |name: &str, f: &dyn Fn(&Path)| {
        let copy = d.join(name);
        assert!(Command::new("cp")
            .arg("-r")
            .arg(&run)
            .arg(&copy)
            .status()
            .unwrap()
            .success());
        f(&copy);
        copy
    };
    let set = |p: &Path, key: &[&str], v: Value| {
        let mut info = json(&p.join("run.json"));
        let mut x = &mut info;
        for k in &key[..key.len() - 1] {
            x = &mut x[*k];
        }
        match v {
            Value::Null => {
                x.as_object_mut().unwrap().remove(key[key.len() - 1]);
            }
            v => x[key[key.len() - 1]] = v,
        }
        std::fs::write(p.join("run.json"), info.to_string()).unwrap();
    };
    let parity = edit("parity", &|p| set(p, &["engine_parity"], Value::from(99)));
    one_line(
        &["replay", parity.to_str().unwrap()],
        &["engine parity version 99"],
    );
    let old = edit("old", &|p| set(p, &["engine_parity"], Value::Null));
    one_line(&["replay", old.to_str().unwrap()], &["engine_parity"]);
    let tex = edit("tex", &|p| {
        set(
            p,
            &["textures", "fingerprint"],
            Value::from("0123456789abcdef"),
        )
    });
    one_line(
        &["replay", tex.to_str().unwrap()],
        &["0123456789ab", "--assets"],
    );
    let notraj = edit("notraj", &|p| {
        std::fs::remove_file(p.join("episodes/seed_0/trajectory.jsonl")).unwrap()
    });
    one_line(
        &["replay", notraj.to_str().unwrap()],
        &["seed 0", "no trajectory"],
    );
}

/// Copy a folder tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A run written before `rgb-sha256` (tests/fixtures/png-sha256-run: `vlm-eval run --model
/// mock --seeds 2 --steps 3 --frames none` by the binary of commit c10a747, built-in sprites)
/// still replays, checked by re-encoding each frame as PNG, and says so; its replayed files
/// hash to what it recorded; export-sft reads it; a resume adds an `rgb-sha256` episode beside
/// its `png-sha256` ones and run.json says `mixed`; an edited PNG hash stops replay.
#[test]
fn a_run_with_png_hashes_still_replays_and_says_so() {
    let d = tmp("png-run");
    let run = d.join("png-sha256-run");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/png-sha256-run"),
        &run,
    );
    let info = json(&run.join("run.json"));
    assert!(info.get("frame_hash").is_none(), "an honest old run");
    assert_eq!(info["textures"]["kind"], "builtin");
    for seed in 0..2 {
        let ep = json(&run.join(format!("episodes/seed_{seed}/episode.json")));
        assert!(ep["frames"].get("hash").is_none());
    }

    let o = vlm_eval(&["replay", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        out.matches("against their png-sha256 hashes").count(),
        2,
        "{out}"
    );

    // The replayed files are the PNGs whose bytes the run hashed.
    let files = d.join("files");
    let o = vlm_eval(&[
        "replay",
        run.to_str().unwrap(),
        "--out",
        files.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut checked = 0;
    for seed in 0..2 {
        let ep_dir = run.join(format!("episodes/seed_{seed}"));
        for t in lines(&ep_dir.join("trajectory.jsonl")) {
            for e in t["executed"].as_array().into_iter().flatten() {
                let step = e["step"].as_u64().unwrap();
                let png = std::fs::read(
                    files.join(format!("episodes/seed_{seed}/frames/step_{step:04}.png")),
                )
                .unwrap();
                assert_eq!(e["frame_sha256"].as_str().unwrap(), sha(&png));
                checked += 1;
            }
        }
    }
    assert!(checked >= 6, "{checked} frames");

    // export-sft replays the frames and checks them against the PNG hashes.
    let o = vlm_eval(&[
        "export-sft",
        run.to_str().unwrap(),
        "--out",
        d.join("sft.jsonl").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(d.join("sft.jsonl"))
        .unwrap()
        .contains("data:image/png;base64,"));

    // An edited PNG hash stops the replay at its step, naming the hash kind.
    let path = run.join("episodes/seed_1/trajectory.jsonl");
    let original = std::fs::read(&path).unwrap();
    let mut rows = lines(&path);
    let e = &mut rows[0]["executed"][0];
    let step = e["step"].as_u64().unwrap();
    e["frame_sha256"] = Value::String("0".repeat(64));
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let o = vlm_eval(&["replay", run.to_str().unwrap(), "--seed", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("seed 1 step {step}:")) && e.contains("png-sha256"),
        "{e}"
    );
    std::fs::write(&path, original).unwrap();

    // A resume with one more seed: the new episode holds rgb-sha256, the old ones keep theirs.
    // It must find the built-in sprites, as the old run did (no cache, no CRAFTER_ASSETS).
    let empty_cache = d.join("empty-cache");
    std::fs::create_dir_all(&empty_cache).unwrap();
    let o = support::command()
        .args(["run", "--model", "mock", "--seeds", "3", "--steps", "3"])
        .args([
            "--frames",
            "none",
            "--quiet",
            "--run-name",
            "png-sha256-run",
        ])
        .arg("--out")
        .arg(&d)
        .env_remove("CRAFTER_ASSETS")
        .env("VLM_EVAL_CACHE", &empty_cache)
        .env("VLM_EVAL_NO_FETCH", "1")
        .output()
        .unwrap();
    // Other textures than the old run's are refused as a differing setting.
    let refused_textures = o.status.code() == Some(2) && stderr(&o).contains("textures: ");
    assert!(o.status.success() || refused_textures, "{}", stderr(&o));
    let info = json(&run.join("run.json"));
    if refused_textures || info["textures"]["kind"] != "builtin" {
        eprintln!(
            "skipping the mixed-hash resume check: this machine finds crafter's official textures even without a cache (an installed crafter), the old run used the built-in sprites"
        );
        return;
    }
    assert_eq!(info["frame_hash"], "mixed");
    assert_eq!(
        json(&run.join("episodes/seed_2/episode.json"))["frames"]["hash"],
        "rgb-sha256"
    );
    assert!(json(&run.join("episodes/seed_0/episode.json"))["frames"]
        .get("hash")
        .is_none());
    let o = vlm_eval(&["replay", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        out.matches("against their png-sha256 hashes").count(),
        2,
        "{out}"
    );
    assert_eq!(
        out.matches("against their rgb-sha256 hashes").count(),
        1,
        "{out}"
    );
}

#[test]
fn the_pixel_hash_is_the_documented_byte_layout() {
    use vlm_eval::results::frames::{rgb_sha256, FrameHashKind};
    // hashlib.sha256(struct.pack('<II', 2, 1) + bytes([1, 2, 3, 4, 5, 6])), in Python.
    let want = "f25af82c68d29a6c012779bae23ccc6e5640b399d8b0e0b4eddb25ea7f2a61dd";
    assert_eq!(rgb_sha256(&[1, 2, 3, 4, 5, 6], 2, 1), want);
    // A PNG of those pixels hashes to the same under `rgb-sha256`, to its bytes under
    // `png-sha256`; bytes that are not a PNG are refused with a reason.
    let mut png = Vec::new();
    image::RgbImage::from_raw(2, 1, vec![1, 2, 3, 4, 5, 6])
        .unwrap()
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    assert_eq!(FrameHashKind::Rgb.of_png(&png).unwrap(), want);
    assert_eq!(FrameHashKind::Png.of_png(&png).unwrap(), sha(&png));
    assert!(FrameHashKind::Rgb
        .of_png(b"not a png")
        .unwrap_err()
        .contains("not a readable PNG"));
    assert_eq!(
        serde_json::to_value(FrameHashKind::Rgb).unwrap(),
        "rgb-sha256"
    );
    assert_eq!(FrameHashKind::default().as_str(), "png-sha256");
}
