//! With feature `cli` (maturin turns it on), put the `vlm-eval` CLI binary in the wheel's data
//! folder (`python/vlmcrafter.data/scripts/vlm-eval`), so installing the wheel puts the native
//! command on PATH. maturin cannot build a PyO3 module and a binary in one crate
//! (PyO3/maturin#368), so this script either copies the binary named by `$VLM_EVAL_CLI_BIN`
//! or builds it with a nested `cargo build --release --bin vlm-eval` on the workspace manifest,
//! in a target folder of its own (`<target>/vlm-eval-cli`, so it never waits on the lock of the
//! outer build). Either way the packed command has no symbols (a copy is run through `strip`).
//! Without the feature (clippy, `cargo check`) it does nothing.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VLM_EVAL_CLI_BIN");
    if env::var_os("CARGO_FEATURE_CLI").is_none() {
        return;
    }
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .ancestors()
        .nth(2)
        .expect("crates/python sits two levels under the workspace root")
        .to_path_buf();
    let dest_dir = root.join("python").join("vlmcrafter.data").join("scripts");
    let dest = dest_dir.join(format!("vlm-eval{}", env::consts::EXE_SUFFIX));

    // Rerun when the copy is gone (a clean checkout, `git clean`) or was touched.
    println!("cargo:rerun-if-changed={}", dest.display());

    let given_bin = env::var_os("VLM_EVAL_CLI_BIN").is_some_and(|v| !v.is_empty());
    let bin = match env::var_os("VLM_EVAL_CLI_BIN").filter(|v| !v.is_empty()) {
        Some(given) => {
            let given = PathBuf::from(given);
            if !given.is_file() {
                fail(&format!(
                    "VLM_EVAL_CLI_BIN={} is not a file; point it at a built `vlm-eval` binary or unset it to build one",
                    given.display()
                ));
            }
            println!("cargo:rerun-if-changed={}", given.display());
            given
        }
        None => {
            // The nested build reruns only when the CLI's sources could have changed; cargo's
            // own fingerprints then make an unchanged rebuild a no-op.
            for p in [
                "Cargo.toml",
                "Cargo.lock",
                "build.rs",
                "src",
                "prompts",
                "presets",
                "crates/crafter",
                "crates/observe",
            ] {
                println!("cargo:rerun-if-changed={}", root.join(p).display());
            }
            build_cli(&root)
        }
    };
    fs::create_dir_all(&dest_dir)
        .unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", dest_dir.display())));
    // Copy to a temporary name and rename, so a half-written binary is never packed.
    let tmp = dest_dir.join(".vlm-eval.tmp");
    fs::copy(&bin, &tmp).unwrap_or_else(|e| {
        fail(&format!(
            "cannot copy {} to {}: {e}",
            bin.display(),
            tmp.display()
        ))
    });
    set_executable(&tmp);
    if given_bin {
        strip_copy(&tmp);
    }
    // The copy keeps the binary's modification time (as `cp -p`), so the rerun-if-changed on it
    // does not see a file newer than this run and rerun the script on every build.
    if let Ok(mtime) = fs::metadata(&bin).and_then(|m| m.modified()) {
        let _ = fs::File::options()
            .write(true)
            .open(&tmp)
            .and_then(|f| f.set_modified(mtime));
    }
    fs::rename(&tmp, &dest)
        .unwrap_or_else(|e| fail(&format!("cannot move the CLI to {}: {e}", dest.display())));
}

/// Build `vlm-eval` in release in `<target>/vlm-eval-cli` and return the binary's path.
fn build_cli(root: &Path) -> PathBuf {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>[/<triple>]/<profile>/build/<pkg>-<hash>/out.
    let target_root = out_dir
        .ancestors()
        .nth(4)
        .expect("OUT_DIR is inside the target folder")
        .to_path_buf();
    let target_dir = target_root.join("vlm-eval-cli");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--locked")
        .arg("--bin")
        .arg("vlm-eval")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    let target = env::var("TARGET").unwrap_or_default();
    let host = env::var("HOST").unwrap_or_default();
    let cross = !target.is_empty() && target != host;
    if cross {
        cmd.arg("--target").arg(&target);
    }
    // The outer build's variables describe the Python module's compilation (its features,
    // its flags, PyO3's interpreter); none of them may leak into the CLI's build. The jobserver
    // (CARGO_MAKEFLAGS) is kept so the nested build shares the outer build's job slots, and so
    // is the target's linker (CARGO_TARGET_<TRIPLE>_LINKER): the cross-compiling containers of
    // the release workflow (manylinux aarch64, musllinux) name their cross linker there.
    let target_linker = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let drop = (key.starts_with("CARGO_")
            && !matches!(key, "CARGO_HOME" | "CARGO_MAKEFLAGS")
            && key != target_linker
            && !key.starts_with("CARGO_NET_")
            && !key.starts_with("CARGO_HTTP_")
            && !key.starts_with("CARGO_REGISTRIES_")
            && !key.starts_with("CARGO_REGISTRY_"))
            || key.starts_with("PYO3_")
            || key.starts_with("MATURIN_")
            || matches!(
                key,
                "RUSTFLAGS"
                    | "RUSTC_WRAPPER"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "OUT_DIR"
                    | "TARGET"
                    | "HOST"
                    | "NUM_JOBS"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "PROFILE"
                    | "RUSTDOC"
                    | "PYTHON_SYS_EXECUTABLE"
                    | "_PYTHON_SYSCONFIGDATA_NAME"
            );
        if drop {
            cmd.env_remove(key);
        }
    }
    // The wheel's command carries no symbols (as ruff's and uv's do not).
    cmd.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    println!(
        "cargo:warning=building the vlm-eval CLI for the wheel in {} (set VLM_EVAL_CLI_BIN to a built binary to skip this)",
        target_dir.display()
    );
    // Cargo reads this script's stdout for directives: the nested build's output goes to stderr.
    cmd.stdout(std::io::stderr());
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run cargo to build the CLI: {e}")));
    if !status.success() {
        fail(&format!(
            "`cargo build --release --bin vlm-eval` for the wheel failed ({status}); its errors are above"
        ));
    }
    let mut bin = target_dir;
    if cross {
        bin.push(&target);
    }
    bin.push("release");
    bin.push(format!("vlm-eval{}", env::consts::EXE_SUFFIX));
    bin
}

/// Strip the symbols and debug information from the copy of a given binary (cargo's release
/// profile keeps line tables), as the nested build does with `strip = "symbols"`: the wheel's
/// command is then a few MB, not tens. `$STRIP` names the tool (default `strip`); where it is
/// missing or fails the copy is packed as it is, with a warning.
fn strip_copy(path: &Path) {
    println!("cargo:rerun-if-env-changed=STRIP");
    let tool = env::var_os("STRIP")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "strip".into());
    match Command::new(&tool).arg(path).status() {
        Ok(s) if s.success() => {}
        Ok(s) => println!(
            "cargo:warning={} {} failed ({s}); the wheel's CLI keeps its symbols",
            tool.to_string_lossy(),
            path.display()
        ),
        Err(e) => println!(
            "cargo:warning=cannot run {} ({e}); the wheel's CLI keeps its symbols (install binutils or set STRIP)",
            tool.to_string_lossy()
        ),
    }
}

#[cfg(unix)]
fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = fs::metadata(path)
        .unwrap_or_else(|e| fail(&format!("cannot stat {}: {e}", path.display())))
        .permissions();
    perm.set_mode(0o755);
    fs::set_permissions(path, perm)
        .unwrap_or_else(|e| fail(&format!("cannot chmod {}: {e}", path.display())));
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) {}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}
