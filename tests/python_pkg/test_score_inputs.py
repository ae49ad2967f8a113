"""`vlmcrafter.score.compute` and `vlm-eval score` on the same bad and edge inputs: each case
is accepted by both with the same metrics and the same warning, or refused by both with the
same one-line message (file and line). The stats lines are crafter 1.8.3's Recorder format
(`json.dumps` of length, reward and the 22 achievement counts)."""
import json
import pathlib
import subprocess
import sys
import warnings

import pytest

from vlmcrafter import score

BIN = pathlib.Path(sys.prefix) / "bin" / "vlm-eval"


def line(length, reward, unlocked=()):
    stats = {"length": length, "reward": reward}
    for name in score.ACHIEVEMENT_NAMES:
        stats["achievement_" + name] = 1 if name in unlocked else 0
    return json.dumps(stats)  # crafter's Recorder: json.dumps(stats) + "\n"


GOOD = (line(120, 2.1, ("collect_wood",)) + "\n" + line(80, 0.1) + "\n").encode()


def cases():
    """name -> (files to write {relative path: bytes}, the paths to pass)."""
    good2 = (line(300, 5.0, ("collect_wood", "place_table")) + "\n").encode()
    cut = GOOD + line(50, 1.0).encode()[:37]
    return {
        "nan reward": ({"a/stats.jsonl": GOOD + b'{"length": 3, "reward": NaN}\n'}, ["a"]),
        "infinite reward": ({"a/stats.jsonl": GOOD + line(3, 1.0).replace("1.0", "1e999").encode() + b"\n"}, ["a"]),
        "Infinity literal": ({"a/stats.jsonl": GOOD + line(3, 1.0).replace("1.0", "Infinity").encode() + b"\n"}, ["a"]),
        "30-digit length": ({"a/stats.jsonl": GOOD + line(10**29 + 7, 1.0).encode() + b"\n"}, ["a"]),
        "binary file": ({"a/stats.jsonl": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\n"}, ["a/stats.jsonl"]),
        "binary line": ({"a/stats.jsonl": GOOD + b"\xff\xfe\xfd\n"}, ["a/stats.jsonl"]),
        "empty file": ({"a/stats.jsonl": b""}, ["a/stats.jsonl"]),
        "empty beside a good one": ({"a/stats.jsonl": GOOD, "b/stats.jsonl": b"\n"}, ["a", "b"]),
        "cut last line": ({"a/stats.jsonl": cut}, ["a/stats.jsonl"]),
        "cut in two files": ({"a/stats.jsonl": cut, "b/stats.jsonl": good2 + b'{"length": 4'}, ["a", "b"]),
        "cut in a multi-byte character": ({"a/stats.jsonl": GOOD + '{"length": 4, "x": "é'.encode()[:-1]}, ["a"]),
        "last line not cut, no newline": ({"a/stats.jsonl": GOOD + line(7, 0.0).encode()}, ["a"]),
        "bad last line, no newline": ({"a/stats.jsonl": GOOD + b"[1, 2]"}, ["a"]),
        "folder and its own file": ({"a/stats.jsonl": GOOD, "b/stats.jsonl": good2}, [".", "a/stats.jsonl", "b"]),
        "same file twice": ({"a/stats.jsonl": GOOD}, ["a/stats.jsonl", "a/../a/stats.jsonl"]),
        "missing file": ({"a/stats.jsonl": GOOD}, ["a/stats.jsonl", "nope/stats.jsonl"]),
        "folder without stats": ({"a/other.txt": b"x"}, ["a"]),
    }


def python_side(paths):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            metrics = score.compute(paths)
        except (ValueError, OSError) as err:
            return ("refused", str(err), None)
    texts = [str(w.message) for w in caught if issubclass(w.category, score.CutLineWarning)]
    assert len(texts) <= 1, texts
    return ("accepted", metrics, texts[0] if texts else None)


def cli_side(paths, cwd):
    out = subprocess.run([str(BIN), "score", "--json", *paths], capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    if out.returncode == 0:
        lines = out.stderr.strip().splitlines()
        assert len(lines) <= 1, out.stderr
        warning = lines[0].removeprefix("warning: ") if lines else None
        if lines:
            assert lines[0].startswith("warning: "), out.stderr
        return ("accepted", json.loads(out.stdout), warning)
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return ("refused", lines[0].removeprefix("error: "), None)


EXPECT = {
    "nan reward": ("refused", "a/stats.jsonl:3: not JSON"),
    "infinite reward": ("refused", "a/stats.jsonl:3: not JSON"),
    "Infinity literal": ("refused", "a/stats.jsonl:3: not JSON"),
    "30-digit length": ("refused", 'a/stats.jsonl:3: "length" is'),
    "binary file": ("refused", "a/stats.jsonl:1: not UTF-8 text"),
    "binary line": ("refused", "a/stats.jsonl:3: not UTF-8 text"),
    "empty file": ("refused", "a/stats.jsonl: no episodes in this file"),
    "empty beside a good one": ("refused", "b/stats.jsonl: no episodes in this file"),
    "cut last line": ("accepted", "skipped 1 cut last line (a run still writing, or killed mid-line): a/stats.jsonl:3"),
    "cut in two files": ("accepted", "skipped 2 cut last lines (a run still writing, or killed mid-line): "
                                     "a/stats.jsonl:3, b/stats.jsonl:2"),
    "cut in a multi-byte character": ("accepted", "skipped 1 cut last line"),
    "last line not cut, no newline": ("accepted", None),
    "bad last line, no newline": ("refused", "a/stats.jsonl:3: not a JSON object"),
    "folder and its own file": ("accepted", None),
    "same file twice": ("accepted", None),
    "missing file": ("refused", "nope/stats.jsonl: "),
    "folder without stats": ("refused", "a: no stats.jsonl in this folder or below it"),
}


@pytest.mark.parametrize("name", list(cases()))
def test_python_and_cli_agree(name, tmp_path, monkeypatch):
    files, paths = cases()[name]
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    monkeypatch.chdir(tmp_path)  # relative paths: the messages name them as given
    ours = python_side(paths)
    theirs = cli_side(paths, tmp_path)
    assert ours[0] == theirs[0], f"{name}: Python {ours}, CLI {theirs}"
    kind, expected = EXPECT[name]
    assert ours[0] == kind, f"{name}: {ours}"
    if kind == "refused":
        assert ours[1] == theirs[1], f"{name}: Python says {ours[1]!r}, the CLI {theirs[1]!r}"
        assert ours[1].startswith(expected) and "\n" not in ours[1], ours[1]
        return
    assert ours[1] == theirs[1], f"{name}: the metrics differ"
    assert ours[2] == theirs[2], f"{name}: warnings {ours[2]!r} vs {theirs[2]!r}"
    if expected is None:
        assert ours[2] is None
    else:
        assert ours[2] is not None and ours[2].startswith(expected), ours[2]
    metrics = ours[1]
    assert len(metrics["files"]) == len(metrics["run_scores"]) == len(set(metrics["files"]))


def test_duplicates_count_once(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "stats.jsonl").write_bytes(GOOD)
    once = score.compute(tmp_path / "a")
    twice = score.compute([tmp_path / "a", tmp_path / "a" / "stats.jsonl", tmp_path])
    assert twice == once and once["episodes"] == 2


def test_cut_last_line_is_skipped_not_counted(tmp_path):
    whole = tmp_path / "whole" / "stats.jsonl"
    cut = tmp_path / "cut" / "stats.jsonl"
    for p in (whole, cut):
        p.parent.mkdir()
    whole.write_bytes(GOOD)
    cut.write_bytes(GOOD + b'{"length": 12, "reward": 0.')
    with pytest.warns(score.CutLineWarning, match=r"skipped 1 cut last line .*stats.jsonl:3"):
        got = score.compute(cut)
    want = score.compute(whole)
    assert {k: v for k, v in got.items() if k != "files"} == {k: v for k, v in want.items() if k != "files"}
    with pytest.warns(score.CutLineWarning):
        assert score.read_stats(cut) == score.read_stats(whole)
