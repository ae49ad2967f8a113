//! Records the git commit the binary was built from (for run.json), when git is available.

fn git(args: &[&str]) -> Option<String> {
    std::process::Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(c) = git(&["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=VLM_EVAL_GIT_COMMIT={c}");
    }
    // Resolve the real git folders: in a worktree `.git` is a file pointing elsewhere, and
    // watching a path that does not exist would rerun this script on every build.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        let head = std::path::Path::new(&dir).join("HEAD");
        if head.exists() {
            println!("cargo:rerun-if-changed={}", head.display());
        }
    }
    // Watch only the checked-out branch's ref (and packed-refs), not every branch: with several
    // worktrees sharing one repository, a commit on another branch must not rebuild this one.
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        let mut watched = vec![std::path::PathBuf::from(&dir).join("packed-refs")];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(std::path::Path::new(&dir).join(branch));
        }
        for p in watched {
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
