"""The `vlm-eval` command the wheel installs into the venv's bin/: a native binary with the CLI's
exit codes (0 for --version/--help and a mock run, 2 and one line for a bad flag)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import vlmcrafter

BIN = pathlib.Path(sys.prefix) / "bin" / "vlm-eval"


def run(*args, **kwargs):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300,
                          **kwargs)


def test_installed_native_binary():
    assert BIN.is_file(), f"{BIN} missing: the wheel must install the CLI"
    assert os.access(BIN, os.X_OK), f"{BIN} is not executable"
    with open(BIN, "rb") as f:
        assert f.read(4) == b"\x7fELF", f"{BIN} is not a native executable (a wrapper?)"


def test_version():
    out = run("--version")
    assert out.returncode == 0, out.stderr
    assert vlmcrafter.__version__ in out.stdout, (out.stdout, vlmcrafter.__version__)


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["env", "trace", "--help"]])
def test_help(args):
    out = run(*args)
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout or "usage" in out.stdout


def test_bad_flag_exits_2():
    """Exit 2 with one line, as the cargo binary gives: clap's error, its tip if any, and the
    subcommand's --help to read."""
    out = run("--no-such-flag")
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error:") and "--no-such-flag" in lines[0], out.stderr
    assert "--help" in lines[0], out.stderr
    assert out.stdout == ""


def test_bad_value_exits_2_with_one_line():
    """A usage error found by the CLI itself (not clap): one line naming the problem."""
    out = run("--model", "mock", "--seeds", "1", "--steps", "0", "--out", "/nonexistent/x")
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), out.stderr


def test_mock_run_writes_summary(tmp_path):
    out_dir = tmp_path / "run"
    out = run("--model", "mock", "--seeds", "2", "--steps", "2", "--out", str(out_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    runs = [p.parent for p in out_dir.glob("*/summary.json")]
    assert len(runs) == 1, sorted(map(str, out_dir.rglob("*")))
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert isinstance(summary, dict) and summary
    episodes = sorted(p.name for p in (runs[0] / "episodes").iterdir())
    assert episodes == ["seed_0", "seed_1"], episodes
