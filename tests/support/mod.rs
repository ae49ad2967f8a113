//! What the integration tests share, included by each test binary with `mod support;` (the
//! one of tests/it/ and the local-model binaries beside it; built on by the topical modules
//! `report_support`, `lock_support`, `view_support`): the binary run with a controlled
//! environment (std or tokio), its output as text, fresh scratch folders under
//! `CARGO_TARGET_TMPDIR/<test binary>/<test file>/` (so no two test files share a name), headless
//! Chromium (or a printed skip), and the tiny local-model fixtures with their transformers
//! references; `hostile.rs` the hostile-input suites' counting endpoint and refusal check.
//! Each test binary uses a part of it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod hostile;

use vlm_eval::model::local::backend::cpu::packed::CpuPacked;
use vlm_eval::model::local::engine::Engine;
use vlm_eval::model::local::preprocess::ImageInput;
use vlm_eval::model::local::weights::Weights;

/// The binary under test, with the OpenAI variables removed so that no test reaches a real
/// endpoint by accident, `$GITHUB_STEP_SUMMARY` removed so that no `check` appends to the CI
/// job's summary (a test that checks it sets its own), and `VLM_EVAL_NO_FETCH=1`, so that a
/// machine without textures never has them downloaded into the user's cache by a test (a test
/// of fetching removes it). The binary then finds textures as `TextureSet::discover(None)` does
/// in the test process, so the two agree.
pub fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vlm-eval"));
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("VLM_EVAL_NO_FETCH", "1");
    cmd
}

/// [`command`] for async tests (`tokio::process`).
pub fn tokio_command() -> tokio::process::Command {
    tokio::process::Command::from(command())
}

/// Run the binary to completion with `args`, the variables `remove` unset and `set` set.
pub fn run(args: &[&str], remove: &[&str], set: &[(&str, &str)]) -> Output {
    let mut cmd = command();
    cmd.args(args);
    for k in remove {
        cmd.env_remove(k);
    }
    for (k, v) in set {
        cmd.env(k, v);
    }
    cmd.output().expect("run vlm-eval")
}

/// Run the binary to completion with `args` (see [`command`] for its environment).
pub fn vlm_eval(args: &[&str]) -> Output {
    run(args, &[], &[])
}

/// stdout and stderr as text.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout followed by stderr, as one text (for messages that may go to either).
pub fn all_text(o: &Output) -> String {
    let (out, err) = text(o);
    out + &err
}

/// The calling test file's scratch folder: `CARGO_TARGET_TMPDIR/<crate name>/<file>`, the test
/// binary's crate name (this module is compiled into each) and the source file that asked
/// (`cli` for tests/it/cli.rs, `report_support` for tests/it/report_support/mod.rs), so that
/// no two test files share a name, also where many are modules of one binary (tests/it/) and
/// run in one process at once.
#[track_caller]
fn scratch_root() -> PathBuf {
    let file = Path::new(std::panic::Location::caller().file());
    let stem = file.file_stem().expect("caller's source file");
    let topic = match stem.to_str() {
        Some("mod" | "main") => file.parent().and_then(Path::file_name).unwrap_or(stem),
        _ => stem,
    };
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(topic)
}

/// An empty folder `name` under the calling test file's scratch folder (emptied if a previous
/// run left it).
#[track_caller]
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch_root().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path `name` under the calling test file's scratch folder that does not exist yet (removed
/// if a previous run left it; its parent exists), for commands that create their own output
/// folder.
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    let dir = scratch_root().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    dir
}

/// Chromium from $CHROMIUM or PATH; None (with the reason printed) when absent, unless $CI is
/// set, where its absence is a failure.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM").map(PathBuf::from) {
        if p.is_file() {
            return Some(p);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let why =
        "chromium not found ($CHROMIUM or PATH): install it (Debian: apt-get install chromium)";
    if std::env::var_os("CI").is_some() {
        panic!("{why}; CI requires the browser test");
    }
    eprintln!("SKIP: {why}");
    None
}

/// A checkpoint fixture folder under tests/fixtures/ (`tiny-qwen2vl`, `tiny-qwen35`, …).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The fixture `name` loaded on the packed CPU backend (the one `--device cpu` runs).
pub fn packed_engine(name: &str) -> Engine<CpuPacked> {
    Engine::load(&fixture(name), CpuPacked::default())
        .unwrap_or_else(|e| panic!("load the {name} fixture: {e}"))
}

/// What transformers computed for one prompt (a fixture's `reference*.safetensors`).
pub struct Reference {
    pub ids: Vec<u32>,
    pub pixels: Vec<f32>,
    pub grids: Vec<[usize; 3]>,
    pub positions: Vec<i64>,
    pub delta: i64,
    pub embeds: Vec<f32>,
    pub logits: Vec<f32>,
    /// The decode step's logits, in the references that hold them.
    pub decode_logits: Option<Vec<f32>>,
    /// The greedy tokens after the prompt.
    pub greedy: Vec<u32>,
}

/// Read the reference `file` of fixture `name`.
pub fn reference(name: &str, file: &str) -> Reference {
    reference_at(&fixture(name), file)
}

/// Read the reference `file` in the fixture folder `dir`.
pub fn reference_at(dir: &Path, file: &str) -> Reference {
    let w = Weights::open_files(&[dir.join(file)]).unwrap();
    let ids: Vec<u32> = w
        .i64_any("input_ids")
        .unwrap()
        .1
        .iter()
        .map(|&x| x as u32)
        .collect();
    let (_, g) = w.i64_any("image_grid_thw").unwrap();
    let grids = g
        .chunks(3)
        .map(|c| [c[0] as usize, c[1] as usize, c[2] as usize])
        .collect();
    let greedy_all = w.i64_any("greedy_ids").unwrap().1;
    Reference {
        greedy: greedy_all[ids.len()..].iter().map(|&x| x as u32).collect(),
        ids,
        pixels: w.f32_any("pixel_values").unwrap().1,
        grids,
        positions: w.i64_any("position_ids").unwrap().1,
        delta: w.i64_any("rope_deltas").unwrap().1[0],
        embeds: w.f32_any("image_embeds").unwrap().1,
        logits: w.f32_any("logits").unwrap().1,
        decode_logits: w.f32_any("decode_logits").ok().map(|x| x.1),
    }
}

/// A reference's images as model inputs (the processor's own patches, `patch_dim` values each).
pub fn ref_images(r: &Reference, patch_dim: usize) -> Vec<ImageInput> {
    let mut out = Vec::new();
    let mut at = 0;
    for &g in &r.grids {
        let n = g[0] * g[1] * g[2] * patch_dim;
        out.push(ImageInput {
            pixels: r.pixels[at..at + n].to_vec(),
            grid: g,
        });
        at += n;
    }
    out
}

/// The largest absolute difference between two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
