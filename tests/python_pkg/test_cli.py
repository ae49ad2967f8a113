"""The `vlm-eval` command the wheel installs into the venv's bin/: a native binary with the CLI's
exit codes (0 for --version/--help and a mock run, 2 and one line for a bad flag)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import vlm_eval

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
    assert vlm_eval.__version__ in out.stdout, (out.stdout, vlm_eval.__version__)


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["env", "trace", "--help"]])
def test_help(args):
    out = run(*args)
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout or "usage" in out.stdout


def test_bad_flag_exits_2_with_one_line():
    out = run("--no-such-flag")
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert "--no-such-flag" in lines[0]
    assert out.stdout == ""


def test_mock_run_writes_summary(tmp_path):
    out_dir = tmp_path / "run"
    out = run("--model", "mock", "--seeds", "2", "--steps", "2", "--out", str(out_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert isinstance(summary, dict) and summary
    episodes = sorted(p.name for p in (out_dir / "episodes").iterdir())
    assert episodes == ["seed_0", "seed_1"], episodes
