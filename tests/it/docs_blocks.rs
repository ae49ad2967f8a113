//! The docs run as written: every fenced shell block (`sh`, `bash`, `shell`, `console`) and
//! Python block of README.md and docs/*.md is run, in order, one scratch folder per doc (so a
//! later block uses what an earlier one made, as a reader's would), and the test fails naming
//! the doc, the line and what failed.
//!
//! What stands in for the outside world, said here and in the test's output:
//! - `vlm-eval` is the binary under test (on PATH); `cargo run --release -- ARGS` runs it too;
//! - OpenAI-compatible endpoints (`$OPENAI_BASE_URL`, and `localhost:8000` / `127.0.0.1:8000`
//!   in a block) are a local fake server (`vlm_eval::model::mock::MockServer`) answering as the
//!   built-in `scripted` baseline, with a fake key in `$OPENAI_API_KEY`;
//! - a block marked `<!-- docs-test: with serve-env -->` gets a real `vlm-eval serve-env` on a
//!   free port in place of `localhost:8000`;
//! - `$HOME` is an empty scratch folder, textures are never fetched (`VLM_EVAL_NO_FETCH=1`).
//!
//! Blocks that need what a test machine lacks (a key for a real provider, weights, a GPU, a
//! cluster, a BALROG checkout) carry `<!-- docs-test: skip (REASON) -->` or
//! `<!-- docs-test: skip-line "TEXT" (REASON) -->` right above them in the doc
//! (tests/it/docs_support/mod.rs has the markers); every skip is listed in the output. An
//! unmarked command the test cannot run (a placeholder such as `<run>`, a remote URL, a program
//! it does not provide) fails the test, saying how to fix or mark it.
//!
//! Python blocks run with the installed wheel's venv (`$VLM_EVAL_DOCS_PYTHON`, else
//! `.venv-pypkg/bin/python`, made by scripts/python_pkg_check.sh); without it they are skipped
//! with the reason printed. `VLM_EVAL_DOCS_PYTHON_ONLY=1` (.ci/run's stage after
//! scripts/python_pkg_check.sh installs the wheel) runs only the docs that have Python blocks,
//! and there a missing wheel is a failure.

use crate::docs_support;
use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use docs_support::{Block, Lang, Marker};
use vlm_eval::model::baseline::ScriptedModel;
use vlm_eval::model::mock::MockServer;

/// The longest one block may run.
const BLOCK_LIMIT: Duration = Duration::from_secs(120);
/// The fake key handed to blocks that name a paid model (the fake server ignores it).
const FAKE_KEY: &str = "sk-docs-test-fake-key";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, then docs/*.md in name order.
fn docs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v.insert(0, repo().join("README.md"));
    v
}

fn rel(p: &Path) -> String {
    p.strip_prefix(repo())
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// `VLM_EVAL_DOCS_PYTHON_ONLY=1` (.ci/run's stage after the wheel is installed): only the docs
/// that have a Python block run (all their blocks, in order), and a missing wheel fails.
fn python_only() -> bool {
    std::env::var_os("VLM_EVAL_DOCS_PYTHON_ONLY").is_some_and(|v| v == "1")
}

/// What every block runs with.
struct Ctx {
    bin: PathBuf,
    home: PathBuf,
    fake_addr: String,
    python: Result<PathBuf, String>,
}

/// A folder with `vlm-eval` and a `cargo` that only runs it.
fn bin_dir(root: &Path) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_vlm-eval"));
    let link = bin.join("vlm-eval");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&exe, &link).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\n# docs-test: `cargo run --release [--quiet] -- ARGS` runs the vlm-eval under test.\n\
         if [ \"$1\" = run ]; then\n  shift\n  while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n  \
         [ \"$1\" = -- ] && shift\n  exec vlm-eval \"$@\"\nfi\n\
         echo \"docs-test: only 'cargo run --release -- ...' is provided, not: cargo $*\" >&2\nexit 97\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// The wheel's Python, or why there is none.
fn python() -> Result<PathBuf, String> {
    let py = std::env::var_os("VLM_EVAL_DOCS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv-pypkg/bin/python"));
    if !py.exists() {
        return Err(format!(
            "no Python with the wheel at {} (make it: scripts/python_pkg_check.sh, or set VLM_EVAL_DOCS_PYTHON)",
            py.display()
        ));
    }
    let ok = Command::new(&py)
        .args(["-c", "import vlmcrafter"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        Ok(py)
    } else {
        Err(format!(
            "{} cannot import vlmcrafter (install the wheel: scripts/python_pkg_check.sh)",
            py.display()
        ))
    }
}

/// A process group, killed whole when dropped (background `&` jobs of a block included).
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's process group.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// `vlm-eval serve-env --port 0`, and its address.
fn serve_env(ctx: &Ctx, cwd: &Path) -> Result<(Group, String), String> {
    let mut child = support::command()
        .args(["serve-env", "--port", "0"])
        .current_dir(cwd)
        .env("HOME", &ctx.home)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start vlm-eval serve-env: {e}"))?;
    let stdout = child.stdout.take().unwrap();
    let group = Group(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("serve-env: {e}"))?;
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .ok_or_else(|| format!("serve-env printed {line:?}, not 'listening on http://ADDR'"))?
        .to_string();
    Ok((group, addr))
}

/// Point a block's `localhost:8000` / `127.0.0.1:8000` at `addr`.
fn rewrite_port(text: &str, addr: &str) -> String {
    text.replace("localhost:8000", addr)
        .replace("127.0.0.1:8000", addr)
}

/// Run `program script` in `cwd`; Ok, or the exit status and the output's last lines.
fn run_script(
    ctx: &Ctx,
    cwd: &Path,
    program: &Path,
    script: &Path,
) -> Result<(), (String, String)> {
    let log = script.with_extension("log");
    let out = std::fs::File::create(&log).unwrap();
    let path = format!(
        "{}:{}",
        ctx.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new(program)
        .arg(script)
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", &ctx.home)
        .env("OPENAI_API_KEY", FAKE_KEY)
        .env("OPENAI_BASE_URL", format!("http://{}/v1", ctx.fake_addr))
        .env("VLM_EVAL_NO_FETCH", "1")
        .env("COLUMNS", "120")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("BALROG_SRC")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .map_err(|e| {
            (
                format!("cannot start {}: {e}", program.display()),
                String::new(),
            )
        })?;
    let mut group = Group(child);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = group.0.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > BLOCK_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(group);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(25).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err((format!("exited with {s}"), tail)),
        None => Err((
            format!("still running after {} s (killed)", BLOCK_LIMIT.as_secs()),
            tail,
        )),
    }
}

/// The doc line a failure points at, from the script's own line (`docs-test: line N` from the
/// shell's ERR trap, or a Python traceback's last `block.py", line N`).
fn failed_line(block: &Block, tail: &str, shell: bool) -> usize {
    let n = if shell {
        tail.lines()
            .rev()
            .find_map(|l| l.strip_prefix("docs-test: failed at script line "))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .map(|n| n.saturating_sub(1))
    } else {
        tail.lines()
            .rev()
            .find_map(|l| l.split("block.py\", line ").nth(1))
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse::<usize>().ok())
    };
    match n {
        Some(n) if n >= 1 => block.doc_line(n - 1),
        _ => block.fence_line,
    }
}

/// The outcome of one doc.
#[derive(Default)]
struct Tally {
    ran: Vec<String>,
    skipped: Vec<String>,
    failures: Vec<String>,
}

fn run_doc(ctx: &Ctx, doc: &Path, t: &mut Tally) {
    let name = rel(doc);
    let text = std::fs::read_to_string(doc).unwrap();
    let blocks = match docs_support::blocks(&text) {
        Ok(b) => b,
        Err(errors) => {
            for e in errors {
                t.failures.push(format!("{name}: {e}"));
            }
            return;
        }
    };
    let runnable = blocks
        .iter()
        .any(|b| b.lang != Lang::Other || b.file_name().is_some());
    if !runnable || (python_only() && !blocks.iter().any(|b| b.lang == Lang::Python)) {
        return;
    }
    let slug = name.replace(['/', '.'], "_");
    let cwd = support::fresh_dir(&format!("docs/{slug}"));
    std::fs::create_dir_all(cwd.join(".ci")).unwrap();
    std::fs::copy(
        repo().join(".ci/baseline-mock.json"),
        cwd.join(".ci/baseline-mock.json"),
    )
    .unwrap();
    let scripts = support::fresh_dir(&format!("docs-scripts/{slug}"));
    for b in &blocks {
        let at = format!("{name}:{}", b.fence_line);
        if let Some(file) = b.file_name() {
            let body = rewrite_port(&b.lines.join("\n"), &ctx.fake_addr);
            std::fs::write(cwd.join(file), body + "\n").unwrap();
            t.ran.push(format!("{at} written to {file}"));
            continue;
        }
        if b.lang == Lang::Other {
            continue;
        }
        if let Some(reason) = b.skip_reason() {
            t.skipped
                .push(format!("{at} ({}): skip ({reason})", b.info));
            continue;
        }
        let started = Instant::now();
        let (program, script, shell) = match b.lang {
            Lang::Python => {
                let py = match &ctx.python {
                    Ok(p) => p.clone(),
                    Err(why) => {
                        if python_only() {
                            t.failures.push(format!("{at} (python): {why}"));
                        } else {
                            t.skipped.push(format!("{at} (python): skip ({why})"));
                        }
                        continue;
                    }
                };
                (py, b.lines.join("\n"), false)
            }
            _ => match shell_script(b, &name, t) {
                Some(s) => (PathBuf::from("bash"), s, true),
                None => continue,
            },
        };
        let mut server = None;
        let addr = if b.with_serve_env() {
            match serve_env(ctx, &cwd) {
                Ok((g, a)) => {
                    server = Some(g);
                    a
                }
                Err(e) => {
                    t.failures.push(format!("{at}: {e}"));
                    continue;
                }
            }
        } else {
            ctx.fake_addr.clone()
        };
        let file = scripts.join(format!(
            "line{}_block.{}",
            b.fence_line,
            if shell { "sh" } else { "py" }
        ));
        std::fs::write(&file, rewrite_port(&script, &addr) + "\n").unwrap();
        let result = run_script(ctx, &cwd, &program, &file);
        drop(server);
        match result {
            Ok(()) => t.ran.push(format!(
                "{at} ({}): ok in {:.1} s",
                b.info,
                started.elapsed().as_secs_f64()
            )),
            Err((what, tail)) => {
                let line = failed_line(b, &tail, shell);
                let cmd = text.lines().nth(line - 1).unwrap_or("").trim();
                t.failures.push(format!(
                    "{name}:{line} (block at line {}, {}): `{cmd}` {what}; the script is {} and its output ends:\n{tail}",
                    b.fence_line,
                    b.info,
                    file.display()
                ));
            }
        }
    }
}

/// The block as a bash script whose line N+1 is the block's line N; skipped commands become
/// `:` lines. None (with the failure or skips recorded) when nothing of it can run.
fn shell_script(b: &Block, name: &str, t: &mut Tally) -> Option<String> {
    let mut lines = b.lines.clone();
    if b.info.starts_with("console") {
        for l in lines.iter_mut() {
            *l = match l.strip_prefix("$ ") {
                Some(c) => c.to_string(),
                None => format!(": '{}'", l.replace('\'', "")),
            };
        }
    }
    let mut matched = vec![false; b.markers.len()];
    let mut ok = true;
    for cmd in docs_support::commands(b) {
        let skip = b.markers.iter().enumerate().find_map(|(i, m)| match m {
            Marker::SkipLine { text, reason } if cmd.text.contains(text.as_str()) => {
                Some((i, reason))
            }
            _ => None,
        });
        let line = b.doc_line(cmd.first);
        if let Some((i, reason)) = skip {
            matched[i] = true;
            let first = cmd.text.lines().next().unwrap_or("").trim();
            t.skipped
                .push(format!("{name}:{line}: skip-line `{first}` ({reason})"));
            for l in &mut lines[cmd.first..cmd.first + cmd.span] {
                *l = ": # docs-test: skipped".into();
            }
            continue;
        }
        if let Some(why) = docs_support::unrunnable(&cmd.text) {
            ok = false;
            t.failures.push(format!(
                "{name}:{line}: the test cannot run `{}`: {why}. Make it runnable, or mark it in the doc right above the block: <!-- docs-test: skip-line \"TEXT\" (REASON) --> or <!-- docs-test: skip (REASON) -->",
                cmd.text.lines().next().unwrap_or("").trim()
            ));
        }
    }
    for (m, hit) in b.markers.iter().zip(matched) {
        if let (Marker::SkipLine { text, .. }, false) = (m, hit) {
            ok = false;
            t.failures.push(format!(
                "{name}:{}: the marker skip-line \"{text}\" matches no command of the block; fix or remove it",
                b.fence_line
            ));
        }
    }
    if !ok {
        return None;
    }
    let prelude =
        "set -euo pipefail; trap 'echo \"docs-test: failed at script line $LINENO\" >&2' ERR";
    Some(format!("{prelude}\n{}", lines.join("\n")))
}

#[test]
fn every_shell_and_python_block_of_the_docs_runs_or_is_marked() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(MockServer::start(Arc::new(ScriptedModel)))
        .unwrap();
    let fake_addr = server
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let root = support::fresh_dir("docs-env");
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let ctx = Ctx {
        bin: bin_dir(&root),
        home,
        fake_addr,
        python: python(),
    };
    println!(
        "docs-test: OpenAI endpoints are a fake server at http://{}/v1 answering as the scripted baseline; $HOME is {}",
        ctx.fake_addr,
        ctx.home.display()
    );
    if let Err(why) = &ctx.python {
        println!("docs-test: Python blocks: {why}");
    }
    let mut t = Tally::default();
    for doc in docs() {
        run_doc(&ctx, &doc, &mut t);
    }
    println!("docs-test: ran {} block(s):", t.ran.len());
    for r in &t.ran {
        println!("  {r}");
    }
    println!(
        "docs-test: skipped {} (marked in the docs):",
        t.skipped.len()
    );
    for s in &t.skipped {
        println!("  {s}");
    }
    drop(server);
    assert!(
        t.failures.is_empty(),
        "{} doc block(s) failed:\n\n{}",
        t.failures.len(),
        t.failures.join("\n\n")
    );
}
