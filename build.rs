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
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        for sub in ["refs/heads", "packed-refs"] {
            let p = std::path::Path::new(&dir).join(sub);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
