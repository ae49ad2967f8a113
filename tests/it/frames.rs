//! `vlm-eval frames`: the frames are byte-identical to those a run saves for the same seed,
//! actions and size (checked against a `--model scripted` run), their pixels match the engine's
//! own `env trace` frame hashes, the preview holds one image-only user message per frame, and
//! bad input exits 2 with the valid names.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn vlm_eval(args: &[&str]) -> Output {
    support::vlm_eval(args)
}

fn tmp(name: &str) -> PathBuf {
    support::fresh_dir(&format!("frames-{name}"))
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn pngs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".png"))
        .collect();
    v.sort();
    v
}

#[test]
fn frames_are_byte_identical_to_a_runs_frames() {
    let d = tmp("run");
    let o = vlm_eval(&[
        "--model",
        "scripted",
        "--seed-list",
        "7",
        "--steps",
        "4",
        "--image-size",
        "72",
        "--out",
        d.to_str().unwrap(),
        "--run-name",
        "r",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ep = d.join("r/episodes/seed_7");
    let actions: Vec<String> = lines(&ep.join("trajectory.jsonl"))
        .iter()
        .flat_map(|t| {
            t["executed"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["action"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        actions.len() > 8,
        "the scripted policy plays several actions per turn"
    );
    let out = d.join("frames");
    let o = vlm_eval(&[
        "frames",
        "--seed",
        "7",
        "--steps",
        &actions.len().to_string(),
        "--actions",
        &actions.join(","),
        "--image-size",
        "72",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run_frames = pngs(&ep.join("frames"));
    assert_eq!(run_frames.len(), actions.len() + 1);
    assert_eq!(pngs(&out), run_frames);
    for name in &run_frames {
        let a = std::fs::read(ep.join("frames").join(name)).unwrap();
        let b = std::fs::read(out.join(name)).unwrap();
        assert!(a == b, "{name} differs from the run's frame");
    }
}

#[test]
fn default_cycle_matches_env_trace_and_preview_is_image_only() {
    let d = tmp("trace");
    let out = d.join("f");
    let o = vlm_eval(&[
        "frames",
        "--seed",
        "7",
        "--steps",
        "9",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The documented default cycle, played by the engine's tracer.
    let o = vlm_eval(&[
        "env",
        "trace",
        "--seed",
        "7",
        "--steps",
        "9",
        "--actions",
        "noop,move_left,move_right,move_up,move_down,do",
        "--size",
        "64",
    ]);
    assert!(o.status.success());
    let trace: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(trace.len(), 10);
    let names = pngs(&out);
    assert_eq!(names.len(), 10);
    let preview = lines(&out.join("preview.jsonl"));
    assert_eq!(preview.len(), 10);
    for (i, ((name, record), row)) in names.iter().zip(&trace).zip(&preview).enumerate() {
        assert_eq!(name, &format!("step_{i:04}.png"));
        let png = std::fs::read(out.join(name)).unwrap();
        let rgb = image::load_from_memory(&png).unwrap().to_rgb8();
        assert_eq!((rgb.width(), rgb.height()), (64, 64));
        let hash = format!("{:x}", Sha256::digest(rgb.as_raw()));
        assert_eq!(hash, record["frame_sha256"].as_str().unwrap(), "{name}");
        if i > 0 {
            assert_eq!(row["metadata"]["action"], record["action_name"]);
        }
        // One user message with one image part whose data URL holds the file's bytes.
        let msgs = row["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0]["role"], "user");
        let parts = msgs[0]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0]["type"], "image_url");
        let url = parts[0]["image_url"]["url"].as_str().unwrap();
        let b64 = url.strip_prefix("data:image/png;base64,").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(bytes, png);
        assert_eq!(row["metadata"]["step"], i);
    }
}

#[test]
fn bad_input_exits_2_with_the_valid_names() {
    let d = tmp("bad");
    let out = d.join("f");
    let o = vlm_eval(&[
        "frames",
        "--actions",
        "move_right,jump",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("'jump'") && e.contains("make_iron_sword") && e.contains("noop"),
        "{e}"
    );
    let o = vlm_eval(&[
        "frames",
        "--image-size",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--image-size"));
    assert!(!out.exists(), "nothing written on bad input");
}

/// `env trace --preset balrog` renders the preset's 256 px frames without `--size`, as
/// `frames --preset balrog` does: its output is the one `--size 256` gives, and every frame
/// `frames --preset balrog` writes for the same seed and actions is one of the trace's frames
/// (pixel hash), at 256×256.
#[test]
fn env_trace_takes_the_presets_frame_size_as_frames_does() {
    let play = ["--seed", "3", "--actions", "move_left,do,noop,move_up"];
    let trace = |extra: &[&str]| {
        let mut args = vec!["env", "trace", "--steps", "14", "--preset", "balrog"];
        args.extend_from_slice(&play);
        args.extend_from_slice(extra);
        let o = vlm_eval(&args);
        assert!(
            o.status.success(),
            "env trace {extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let bare = trace(&[]);
    assert_eq!(bare, trace(&["--size", "256"]));
    assert_ne!(
        bare,
        trace(&["--size", "64"]),
        "--size still overrides the preset"
    );
    let hashes: Vec<String> = bare
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["frame_sha256"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let out = tmp("balrog-size").join("f");
    let mut args = vec![
        "frames",
        "--preset",
        "balrog",
        "--steps",
        "12",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(&play);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let names = pngs(&out);
    assert!(names.len() >= 12, "{names:?}");
    for name in &names {
        let rgb = image::load_from_memory(&std::fs::read(out.join(name)).unwrap())
            .unwrap()
            .to_rgb8();
        assert_eq!((rgb.width(), rgb.height()), (256, 256), "{name}");
        let hash = format!("{:x}", Sha256::digest(rgb.as_raw()));
        assert!(
            hashes.contains(&hash),
            "{name} is not among env trace's frames"
        );
    }
}
