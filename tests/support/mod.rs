//! What the integration tests share, included with `mod support;` by the harness's two test
//! binaries, tests/it/ and tests/local_cli.rs (the local model through the CLI, which the CUDA
//! scripts run with `--features cuda`) (built on by the topical modules `report_support`, `lock_support`,
//! `view_support`): the binary run with a controlled environment (std or tokio), its output as
//! text, fresh scratch folders under `CARGO_TARGET_TMPDIR/<test binary>/<test file>/` (so no two
//! test files share a name), headless Chromium (or a printed skip); `hostile.rs` the
//! hostile-input suites' counting endpoint and refusal check.
//! Each test binary uses a part of it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod hostile;

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
