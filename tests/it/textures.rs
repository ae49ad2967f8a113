//! How a rendering command finds crafter's textures when they are not configured: an
//! installed crafter package is copied into the cache once, a download fills the cache once
//! (announced on one line), later starts find the cache without starting any subprocess, and
//! only a failed fetch falls back to the built-in sprites with the warning.
//!
//! Python is observed through `$VLM_EVAL_PYTHON` pointing at a wrapper script that logs each
//! invocation before running the real interpreter.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh scratch folder (`support::fresh_dir`, removed on drop).
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        Scratch(support::fresh_dir(tag))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A script that appends one line to `log` per invocation, then runs `python`.
fn logging_python(dir: &Path, python: &Path, log: &Path) -> PathBuf {
    let script = dir.join("python-logged");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            python.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn calls(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// `vlm-eval env trace` for 3 steps with an empty environment except the given cache and
/// Python.
fn trace(cache: &Path, python: &Path, extra: &[(&str, &str)]) -> Output {
    let mut cmd = support::command();
    cmd.args(["env", "trace", "--seed", "4", "--steps", "3"])
        .env("VLM_EVAL_CACHE", cache)
        .env("VLM_EVAL_PYTHON", python)
        .env_remove("CRAFTER_ASSETS")
        .env_remove("VLM_EVAL_NO_FETCH");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.output().expect("run vlm-eval")
}

fn assets_which(cache: &Path, python: &Path) -> String {
    let out = support::command()
        .args(["assets", "which"])
        .env("VLM_EVAL_CACHE", cache)
        .env("VLM_EVAL_PYTHON", python)
        .env_remove("CRAFTER_ASSETS")
        .env("VLM_EVAL_NO_FETCH", "1")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The project's crafter venv Python (`.ci/run` creates `.venv-crafter`).
fn venv_python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-crafter/bin/python");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: no .venv-crafter with crafter 1.8.3 (.ci/run creates it)");
        None
    }
}

const CACHED: &str = "crafter-1.8.3-assets";

#[test]
fn an_installed_crafter_is_copied_into_the_cache_once() {
    let Some(python) = venv_python() else { return };
    let tmp = Scratch::new("installed");
    let log = tmp.0.join("calls.log");
    let wrapper = logging_python(&tmp.0, &python, &log);
    let cache = tmp.0.join("cache");

    let first = trace(&cache, &wrapper, &[]);
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{err}");
    assert!(
        !err.contains("built-in"),
        "fell back to built-in sprites: {err}"
    );
    assert!(
        !err.contains("fetching"),
        "downloaded although crafter is installed: {err}"
    );
    assert!(calls(&log) >= 1, "Python was never asked");
    assert!(cache.join(CACHED).join("cow.png").is_file());

    let before = calls(&log);
    let second = trace(&cache, &wrapper, &[]);
    assert!(second.status.success());
    assert_eq!(calls(&log), before, "the second start ran Python");
    assert_eq!(first.stdout, second.stdout, "same frames from the cache");
    assert!(assets_which(&cache, &wrapper).starts_with("official "));
}

#[test]
fn a_failed_fetch_falls_back_to_builtin_sprites_with_one_notice_and_the_warning() {
    let tmp = Scratch::new("nofetch");
    let cache = tmp.0.join("cache");
    let missing = tmp.0.join("no-python");
    let out = trace(&cache, &missing, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let notices = err
        .lines()
        .filter(|l| l.contains("fetching them once"))
        .count();
    assert_eq!(notices, 1, "{err}");
    assert!(
        err.contains("fetching them failed") && err.contains("built-in"),
        "{err}"
    );
    // VLM_EVAL_NO_FETCH: no attempt, only the warning.
    let out = trace(&cache, &missing, &[("VLM_EVAL_NO_FETCH", "1")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("fetching"), "{err}");
    assert!(err.contains("built-in"), "{err}");
    assert!(!cache.join(CACHED).exists());
}

/// Downloads crafter 1.8.3 from PyPI: runs when `VLM_EVAL_TEST_FETCH=1` (CI sets it).
#[test]
fn the_first_run_fetches_official_textures_once_and_later_runs_start_no_subprocess() {
    if std::env::var("VLM_EVAL_TEST_FETCH").as_deref() != Ok("1") {
        eprintln!("skipping: set VLM_EVAL_TEST_FETCH=1 to download crafter from PyPI");
        return;
    }
    // A Python with pip but without crafter: the system's python3.
    let python = which("python3").expect("python3 on PATH");
    let has_crafter = Command::new(&python)
        .args(["-c", "import crafter"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_crafter {
        eprintln!("skipping: python3 has crafter installed, so nothing would be fetched");
        return;
    }
    let tmp = Scratch::new("fetch");
    let log = tmp.0.join("calls.log");
    let wrapper = logging_python(&tmp.0, &python, &log);
    let cache = tmp.0.join("cache");

    let first = trace(&cache, &wrapper, &[]);
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{err}");
    let notices: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("fetching them once"))
        .collect();
    assert_eq!(notices.len(), 1, "{err}");
    assert!(notices[0].contains(&cache.join(CACHED).display().to_string()));
    assert!(!err.contains("built-in"), "{err}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("pip download"), "{logged}");

    let before = calls(&log);
    let second = trace(&cache, &wrapper, &[]);
    let err2 = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err2}");
    assert_eq!(calls(&log), before, "the second start ran Python");
    assert!(!err2.contains("fetching"), "{err2}");
    assert_eq!(first.stdout, second.stdout);
    let which = assets_which(&cache, &wrapper);
    assert!(
        which.contains("453f5748964131b7187f8037dfca502a4ebf675725e08b11362133f52cb379d6"),
        "not crafter 1.8.3's textures: {which}"
    );
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}
