"""`vlmcrafter.score.compute` and `vlm-eval score` on the stats.jsonl that crafter 1.8.3's own
Recorder writes: both equal the paper's formula evaluated here in numpy, and each other; a bad
line is one error naming the file and the line."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from support import SEEDS, actions_for, reference_env
from vlmcrafter import score

BIN = pathlib.Path(sys.prefix) / "bin" / "vlm-eval"


def cli(*args):
    return subprocess.run([str(BIN), "score", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def crafter_logs(tmp_path_factory):
    """Two runs of crafter's own Recorder (stats only), one folder each, short episodes."""
    import crafter

    root = tmp_path_factory.mktemp("crafter_logs")
    for r, seed in enumerate(SEEDS[:2]):
        env = crafter.Recorder(reference_env(seed=seed, length=60), root / f"seed{r}",
                               save_video=False, save_episode=False)
        env.reset()
        for a in actions_for(seed, 400):
            if env.step(a)[2]:
                env.reset()
    return root


def numpy_metrics(files):
    """The paper's metrics by numpy, from the raw lines."""
    names = score.ACHIEVEMENT_NAMES
    runs = [[json.loads(line) for line in pathlib.Path(f).read_text().splitlines()] for f in files]

    def rates(lines):
        a = np.array([[line["achievement_" + n] for n in names] for line in lines])
        return 100 * (a >= 1).mean(axis=0)

    def sc(p):
        return float(np.expm1(np.log1p(p).mean()))

    lines = [line for run in runs for line in run]
    per_run = [sc(rates(run)) for run in runs]
    return {
        "episodes": len(lines),
        "score": sc(rates(lines)),
        "run_scores": per_run,
        "score_std": float(np.std(per_run)),
        "reward_mean": float(np.mean([line["reward"] for line in lines])),
        "reward_std": float(np.std([line["reward"] for line in lines])),
        "length_mean": float(np.mean([line["length"] for line in lines])),
        "length_std": float(np.std([line["length"] for line in lines])),
        "success_rates": dict(zip(names, rates(lines).tolist())),
    }


def assert_close(got, want, where):
    if isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} vs {list(want)}"
        for k in want:
            assert_close(got[k], want[k], f"{where}[{k}]")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"{where}[{i}]")
    else:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), f"{where}: {got} vs {want}"


def test_python_and_cli_equal_numpy_on_crafters_own_logs(crafter_logs):
    files = sorted(crafter_logs.rglob("stats.jsonl"))
    want = numpy_metrics(files)
    assert want["episodes"] >= 10 and 0 < want["score"] < 100
    got = score.compute(crafter_logs)
    assert got["files"] == [str(f) for f in files]
    for key in want:
        assert_close(got[key], want[key], key)
    out = cli("--json", crafter_logs)
    assert out.returncode == 0, out.stderr
    from_cli = json.loads(out.stdout)
    assert list(from_cli) == list(got)
    assert from_cli["files"] == got["files"]
    for key in want:
        assert_close(from_cli[key], got[key], f"CLI {key}")
    # One file given directly: no spread over runs.
    one = score.compute(files[0])
    assert one["score_std"] is None and one["run_scores"] == [one["score"]]
    assert json.loads(cli("--json", files[0]).stdout)["score_std"] is None


BAD = [
    ("not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"reward": 1.0}', 'no "length"'),
    ('{"length": 2.5, "reward": 1.0}', 'not a count'),
    ('{"length": 3, "reward": "x"}', 'not a number'),
    ('{"length": 3, "reward": 1.0}', 'no "achievement_collect_coal"'),
]


@pytest.mark.parametrize("line,reason", BAD)
def test_bad_line_names_file_and_line(crafter_logs, tmp_path, line, reason):
    good = sorted(crafter_logs.rglob("stats.jsonl"))[0].read_text().splitlines()
    path = tmp_path / "stats.jsonl"
    path.write_text("\n".join(good[:2] + [line] + good[2:]) + "\n")
    with pytest.raises(ValueError) as err:
        score.compute(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3: ") and reason in message and "\n" not in message
    out = cli(path)
    assert out.returncode == 2 and out.stdout == ""
    assert f"{path}:3: " in out.stderr and reason in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_missing_and_empty(tmp_path):
    with pytest.raises(FileNotFoundError, match="no stats.jsonl"):
        score.compute(tmp_path)
    (tmp_path / "stats.jsonl").write_text("")
    with pytest.raises(ValueError, match="no episodes"):
        score.compute(tmp_path)
    assert cli(tmp_path).returncode == 2
