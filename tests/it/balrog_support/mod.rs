//! What the BALROG tests need from the machine: `../shared/balrog` (BALROG's files at the pinned
//! commit and `balrog_reference.py`) and the crafter venv's Python. Each returns `None` when it
//! is absent, so the test can skip with a printed reason.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `../shared/balrog`, when it holds BALROG's reference checkout and `balrog_reference.py`.
pub fn shared_balrog() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/balrog");
    let whole = dir.join("balrog_reference.py").is_file()
        && dir.join("reference/balrog/evaluator.py").is_file();
    whole.then_some(dir)
}

/// `.venv-crafter/bin/python`, when it imports crafter.
pub fn crafter_python() -> Option<PathBuf> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-crafter/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import crafter"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(py)
}
