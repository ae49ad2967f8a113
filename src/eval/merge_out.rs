//! Where `vlm-eval merge` writes: `--out` checked before anything is written (never an input,
//! `--force` replaces only an earlier merge's folder or an empty one), the work folder
//! `.<name>.merge-tmp` beside it taken under a `run.lock`, and the finished folder swapped into
//! place, so that a merge killed at any moment leaves `--out` whole (absent, the earlier merge,
//! or the new one). Also the test hook that kills a merge at a named point.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::results::store::StoreError;

use super::merge_error::MergeError;

pub(super) fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x.starts_with(&y) || y.starts_with(&x),
        _ => false,
    }
}

/// Whether `dir/run.json` was written by a merge (it lists `merged_from`).
fn made_by_merge(dir: &Path) -> bool {
    fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| v.get("merged_from").is_some())
}

/// The files an interrupted merge of an older vlm-eval left in `--out` (it wrote there directly,
/// `run.json` last): a folder holding only these, and no `run.json`, is such a leftover.
const OLD_MERGE_LEFTOVERS: [&str; 4] = [
    "episodes",
    "summary.json",
    "summary.csv",
    "achievements.csv",
];

/// Whether `out` holds only what an interrupted merge of an older vlm-eval left (no run.json).
fn old_merge_leftover(out: &Path) -> bool {
    !out.join("run.json").exists()
        && out.join("episodes").is_dir()
        && fs::read_dir(out).is_ok_and(|d| {
            d.flatten()
                .all(|e| OLD_MERGE_LEFTOVERS.contains(&e.file_name().to_string_lossy().as_ref()))
        })
}

/// Check the output folder, writing nothing: it must not hold an input, and must not exist
/// unless `force` (then only an earlier merge's folder, an empty folder, or what an interrupted
/// merge of an older vlm-eval left).
pub(super) fn check_out(inputs: &[PathBuf], out: &Path, force: bool) -> Result<(), MergeError> {
    if out.file_name().is_none() {
        return Err(MergeError::Out(format!(
            "--out {} does not name a folder: give the new run folder's path, e.g. results/<run>",
            out.display()
        )));
    }
    if let Some(input) = inputs.iter().find(|i| same_path(i, out)) {
        return Err(MergeError::Out(format!(
            "--out {} overlaps the input {}; write the merged run to a new folder",
            out.display(),
            input.display()
        )));
    }
    if !out.exists() && !out.is_symlink() {
        return Ok(());
    }
    if !force {
        return Err(MergeError::Out(format!(
            "--out {} already exists; choose a new folder or pass --force to replace it",
            out.display()
        )));
    }
    // --force replaces an earlier merged run folder, or an empty folder; never a folder that
    // is not a run, nor a file, whatever path was typed.
    if !out.is_dir() || out.is_symlink() {
        return Err(MergeError::Out(format!(
            "--out {} is not a run folder (a file or a link): --force replaces only an earlier merge's folder or an empty folder; choose a new folder",
            out.display()
        )));
    }
    let empty = fs::read_dir(out).is_ok_and(|mut d| d.next().is_none());
    if empty || old_merge_leftover(out) || made_by_merge(out) {
        return Ok(());
    }
    if out.join("run.json").is_file() {
        return Err(MergeError::Out(format!(
            "--out {} is a run that `vlm-eval merge` did not make (its run.json has no merged_from): --force replaces only an earlier merge's folder; choose a new folder",
            out.display()
        )));
    }
    Err(MergeError::Out(format!(
        "--out {} is not a run folder (no run.json): --force replaces only an earlier merge's folder or an empty folder; choose a new folder",
        out.display()
    )))
}

/// The folders beside `out` a merge works in: the new run while it is built, and the earlier
/// one while it is swapped out.
fn work_dirs(out: &Path) -> (PathBuf, PathBuf) {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    (
        parent.join(format!(".{name}.merge-tmp")),
        parent.join(format!(".{name}.merge-old")),
    )
}

pub(super) fn remove_if_there(dir: &Path) -> Result<(), StoreError> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(dir).map_err(|e| io_err(dir, e)),
        Ok(_) => fs::remove_file(dir).map_err(|e| io_err(dir, e)),
        Err(_) => Ok(()),
    }
}

/// Take the work folder for one merge into `out`: its `run.lock` held (another merge into the
/// same folder is refused), everything an interrupted merge left in it, and a swapped-out
/// earlier merge left beside it, removed.
pub(super) fn take_work_dir(
    out: &Path,
) -> Result<(PathBuf, crate::results::lock::RunLock), MergeError> {
    use crate::results::lock::{acquire, LockError};
    let (tmp, old) = work_dirs(out);
    let lock = acquire(&tmp).map_err(|e| match e {
        LockError::Held { holder, .. } => MergeError::Out(format!(
            "another `vlm-eval merge` ({holder}) is writing --out {} (in {}): wait for it to finish",
            out.display(),
            tmp.display()
        )),
        other => {
            // Nobody holds it: what the failed attempt made of it goes (a full disk).
            let _ = remove_if_there(&tmp);
            MergeError::Write(StoreError::Io {
                path: tmp.display().to_string(),
                source: std::io::Error::other(other.to_string()),
            })
        }
    })?;
    for entry in fs::read_dir(&tmp).map_err(|e| io_err(&tmp, e))?.flatten() {
        if entry.path() != lock.path {
            remove_if_there(&entry.path())?;
        }
    }
    remove_if_there(&old)?;
    Ok((tmp, lock))
}

/// Put the finished work folder in place of `out`: an earlier `out` is first moved aside (one
/// rename), the new folder renamed in, the earlier one removed last. Killed between any two
/// steps, `out` is either the earlier folder, absent, or the new one: never a half.
pub(super) fn swap_in(
    tmp: &Path,
    out: &Path,
    lock: crate::results::lock::RunLock,
) -> Result<(), StoreError> {
    let (_, old) = work_dirs(out);
    fs::remove_file(&lock.path).map_err(|e| io_err(&lock.path, e))?;
    let had_out = out.exists() || out.is_symlink();
    if had_out {
        fs::rename(out, &old).map_err(|e| io_err(out, e))?;
        kill_point("swap");
    }
    fs::rename(tmp, out).map_err(|e| io_err(out, e))?;
    drop(lock);
    kill_point("renamed");
    if had_out {
        remove_if_there(&old)?;
    }
    Ok(())
}

/// The test hook of `tests/it/hostile_merge.rs`: `VLM_EVAL_MERGE_KILL_AT=<point>` makes the merge
/// kill itself with SIGKILL at that point (`episode:<k>` after k episodes are copied, `summary`,
/// `run-json`, `swap`, `renamed`), so the test can show that a merge killed anywhere is redone
/// by `merge --force`. Unset (always, outside that test), it does nothing.
pub(super) fn kill_point(point: &str) {
    if std::env::var("VLM_EVAL_MERGE_KILL_AT").is_ok_and(|v| v == point) {
        #[cfg(unix)]
        // SAFETY: kill(2) on this process's own pid; no memory is touched.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        std::process::abort();
    }
}
