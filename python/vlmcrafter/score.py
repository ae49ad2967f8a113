"""The Crafter paper's metrics (Hafner, 2021) from crafter ``stats.jsonl`` files.

``compute(paths)`` reads the lines crafter's ``Recorder`` writes (and vlmcrafter's
:class:`~vlmcrafter.recorder.Recorder` and :class:`~vlmcrafter.recorder.VectorRecorder`), one
per finished episode, and returns:

- ``success_rates``: per achievement (crafter's order), the % of episodes with a count >= 1;
- ``score``: ``exp(mean(ln(1 + p))) - 1`` over the 22 success rates ``p`` in percent, all
  episodes pooled;
- ``reward_mean``/``reward_std`` and ``length_mean``/``length_std``: over episodes (std ddof 0);
- ``run_scores`` (each file's score) and ``score_std`` (their std, ddof 0; None for one file),
  the paper's "± over seeds" when each file is one seed's run;
- ``episodes`` and ``files``.

The CLI's ``vlm-eval score PATHS --json`` prints the same object from the same files.
"""

import json
import math
import os
import pathlib

from . import _native

__all__ = ["compute", "read_stats", "stats_files", "ACHIEVEMENT_NAMES"]

ACHIEVEMENT_NAMES = tuple(_native.ACHIEVEMENT_NAMES)
_FORM = ('a crafter stats line is a JSON object with "length", "reward" and the 22 '
         '"achievement_*" counts')


def stats_files(paths):
    """The stats files ``paths`` name: a file as given, a folder as every ``stats.jsonl`` in it
    or below it (sorted)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for p in paths:
        p = pathlib.Path(p)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("stats.jsonl") if f.is_file())
            if not found:
                raise FileNotFoundError(f"{p}: no stats.jsonl in this folder or below it; give "
                                        "crafter Recorder folders or stats.jsonl files")
            files.extend(pathlib.Path(f) for f in _walk_order(p, found))
        else:
            files.append(p)
    return files


def _walk_order(root, found):
    # The CLI walks each folder's entries sorted by path, depth first; sorting the relative
    # paths' parts gives the same order.
    return sorted(found, key=lambda f: pathlib.Path(f).relative_to(root).parts)


def _count(obj, key):
    if key not in obj:
        raise ValueError(f"no {json.dumps(key)}")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{json.dumps(key)} is {json.dumps(v)}, not a count (an integer >= 0)")
    return v


def _parse(line):
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    length = _count(obj, "length")
    if "reward" not in obj:
        raise ValueError('no "reward"')
    reward = obj["reward"]
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise ValueError(f'"reward" is {json.dumps(reward)}, not a number')
    achievements = [_count(obj, "achievement_" + name) for name in ACHIEVEMENT_NAMES]
    return length, float(reward), achievements


def read_stats(path):
    """The episodes of one stats file as ``(length, reward, [22 counts])`` tuples; a bad line is
    a ValueError naming the file and the line."""
    episodes = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                episodes.append(_parse(line))
            except ValueError as err:
                raise ValueError(f"{path}:{number}: {err} ({_FORM})") from None
    return episodes


def _rates(episodes):
    n = max(len(episodes), 1)
    return [100.0 * sum(1 for e in episodes if e[2][k] >= 1) / n for k in range(len(ACHIEVEMENT_NAMES))]


def _score(rates):
    return math.exp(sum(math.log(1.0 + p) for p in rates) / len(rates)) - 1.0


def _mean_std(values):
    n = max(len(values), 1)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) * (v - mean) for v in values) / n)


def compute(paths):
    """The paper's metrics of the stats files ``paths`` names (files or folders, one or a
    list); see the module doc for the keys."""
    files = stats_files(paths)
    runs = [read_stats(f) for f in files]
    episodes = [e for run in runs for e in run]
    if not episodes:
        raise ValueError(f"no episodes in {', '.join(map(str, files))}: the stats files are empty "
                         "(episodes are written when they end)")
    rates = _rates(episodes)
    run_scores = [_score(_rates(run)) for run in runs if run]
    reward_mean, reward_std = _mean_std([e[1] for e in episodes])
    length_mean, length_std = _mean_std([float(e[0]) for e in episodes])
    return {
        "files": [str(f) for f in files],
        "episodes": len(episodes),
        "score": _score(rates),
        "score_std": _mean_std(run_scores)[1] if len(run_scores) >= 2 else None,
        "run_scores": run_scores,
        "reward_mean": reward_mean,
        "reward_std": reward_std,
        "length_mean": length_mean,
        "length_std": length_std,
        "success_rates": dict(zip(ACHIEVEMENT_NAMES, rates)),
    }
