//! No clobbering: a page that `vlm-eval report` or `leaderboard` would write over is replaced
//! only when it is the same thing regenerated, else refused in one line that names `--force`.
//! "The same thing" is read from the page itself: a report of the same run (its title names the
//! run), a leaderboard of the same folders (its `vlm-eval-leaderboard` meta tag), a leaderboard
//! CSV whose runs all lie in those folders.

use std::path::{Path, PathBuf};

use super::escape::escape;
use super::leaderboard_html::IDENTITY_META;

/// A refusal to write over a file: one line naming the file and `--force`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The line.
    pub message: String,
}

/// Most bytes of an existing page read to find what it holds (the head comes first).
const HEAD_BYTES: usize = 64 * 1024;

fn head_of(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut buf)
        .ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn refuse(path: &Path, holds: &str, what: &str) -> Refused {
    Refused {
        message: format!(
        "{} already holds {holds}, not {what}: pass --force to replace it, or --out to write elsewhere",
            path.display()
        ),
    }
}

/// Refuse to write the report of run `name` over `path` when `path` holds anything but a report
/// of that run (`--force` skips the check).
pub fn check_report(path: &Path, name: &str, force: bool) -> Result<(), Refused> {
    if force || !path.exists() {
        return Ok(());
    }
    let what = format!("the report of {name}");
    let Some(head) = head_of(path) else {
        return Err(refuse(path, "a file that is not a vlm-eval report", &what));
    };
    let title = |h: &str| -> Option<String> {
        let start = h.find("<title>vlm-eval report: ")? + "<title>vlm-eval report: ".len();
        let end = h[start..].find("</title>")?;
        Some(h[start..start + end].to_string())
    };
    match title(&head) {
        Some(t) if t == escape(name) => Ok(()),
        Some(t) => Err(refuse(
            path,
            &format!("the report of another run ({t})"),
            &what,
        )),
        None => Err(refuse(path, "a file that is not a vlm-eval report", &what)),
    }
}

/// What a leaderboard is of: the folders given, as absolute paths, sorted and joined.
pub fn leaderboard_identity(sources: &[PathBuf]) -> String {
    let mut abs: Vec<String> = sources
        .iter()
        .map(|p| {
            std::fs::canonicalize(p)
                .or_else(|_| std::path::absolute(p))
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string()
        })
        .collect();
    abs.sort();
    abs.dedup();
    abs.join(" | ")
}

/// Refuse to write a leaderboard of `identity` over a page that holds anything else.
pub fn check_leaderboard_page(path: &Path, identity: &str, force: bool) -> Result<(), Refused> {
    if force || !path.exists() {
        return Ok(());
    }
    let what = "a leaderboard of these folders";
    let marker = format!(r#"<meta name="{IDENTITY_META}" content=""#);
    let found = head_of(path).and_then(|h| {
        let start = h.find(&marker)? + marker.len();
        let end = h[start..].find('"')?;
        Some(h[start..start + end].to_string())
    });
    match found {
        Some(f) if f == escape(identity) => Ok(()),
        Some(_) => Err(refuse(path, "a leaderboard of other folders", what)),
        None => Err(refuse(
            path,
            "a file that is not a vlm-eval leaderboard of known folders",
            what,
        )),
    }
}

/// Refuse to write the leaderboard CSV over a file that is not a leaderboard CSV, or one that
/// ranks a run outside `sources` (its `dir` column, compared as written and as absolute paths).
pub fn check_leaderboard_csv(
    path: &Path,
    header: &[&str],
    sources: &[PathBuf],
    force: bool,
) -> Result<(), Refused> {
    if force || !path.exists() {
        return Ok(());
    }
    let what = "a leaderboard CSV of these folders";
    let not_ours = || refuse(path, "a file that is not a vlm-eval leaderboard CSV", what);
    let mut reader = csv::Reader::from_path(path).map_err(|_| not_ours())?;
    let found: Vec<String> = reader
        .headers()
        .map_err(|_| not_ours())?
        .iter()
        .map(str::to_string)
        .collect();
    if found != header {
        return Err(not_ours());
    }
    let Some(col) = header.iter().position(|h| *h == "dir") else {
        return Ok(());
    };
    let abs = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .ok()
    };
    let roots: Vec<PathBuf> = sources.iter().filter_map(|s| abs(s)).collect();
    for row in reader.records() {
        let row = row.map_err(|_| not_ours())?;
        let dir = PathBuf::from(row.get(col).unwrap_or_default());
        let inside = sources.iter().any(|s| dir.starts_with(s))
            || abs(&dir).is_some_and(|d| roots.iter().any(|r| d.starts_with(r)));
        if !inside {
            return Err(refuse(
                path,
                &format!(
                    "a leaderboard that ranks {} (not in these folders)",
                    dir.display()
                ),
                what,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_replaced_only_by_a_report_of_its_run() {
        let dir = std::env::temp_dir().join(format!("vlm-eval-overwrite-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let page = dir.join("report.html");
        assert!(check_report(&page, "a", false).is_ok(), "no file yet");
        std::fs::write(&page, "<html><head><title>vlm-eval report: a&amp;b</title>").unwrap();
        assert!(check_report(&page, "a&b", false).is_ok());
        let e = check_report(&page, "c", false).unwrap_err().message;
        assert!(
            e.contains("another run (a&amp;b)") && e.contains("--force"),
            "{e}"
        );
        assert!(check_report(&page, "c", true).is_ok());
        std::fs::write(&page, "notes").unwrap();
        assert!(check_report(&page, "c", false)
            .unwrap_err()
            .message
            .contains("not a vlm-eval report"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
