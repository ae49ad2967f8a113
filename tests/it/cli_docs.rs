//! docs/CLI.md is what `vlm-eval docs cli` generates from the clap tree: a flag added, renamed
//! or re-documented without regenerating the file fails here.

use crate::support;

#[test]
fn committed_cli_reference_is_what_the_command_generates() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = support::command()
        .args(["docs", "cli"])
        .env_remove("COLUMNS")
        .output()
        .expect("run vlm-eval docs cli");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).expect("UTF-8");
    let committed = std::fs::read_to_string(root.join("docs/CLI.md")).unwrap_or_default();
    if generated != committed {
        let line = generated
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| generated.lines().count().min(committed.lines().count()));
        panic!(
            "docs/CLI.md differs from `vlm-eval docs cli` (first at line {}): regenerate it with \
             `cargo run --release -- docs cli > docs/CLI.md`\n  generated: {:?}\n  committed: {:?}",
            line + 1,
            generated.lines().nth(line),
            committed.lines().nth(line)
        );
    }
    // The reference covers every visible command and the flags' details.
    for needle in [
        "## `vlm-eval run`",
        "## `vlm-eval compare`",
        "## `vlm-eval bench env`",
        "## `vlm-eval assets fetch`",
        "`--wide`",
        "[default: `10`]",
        "one of `run` (One row per run folder)",
        "[env: `CRAFTER_ASSETS`]",
    ] {
        assert!(generated.contains(needle), "no {needle:?} in docs/CLI.md");
    }
    assert!(
        !generated.contains("vlm-eval docs cli`:"),
        "the docs command stays hidden"
    );
}
