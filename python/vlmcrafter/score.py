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
- ``episodes`` and ``files`` (each file once, in reading order; ``run_scores[i]`` is
  ``files[i]``'s score).

The CLI's ``vlm-eval score PATHS --json`` prints the same object from the same files: both
call one reader (the engine crate's ``score`` module), so they accept and refuse the same
inputs with the same messages.
"""

import json
import os
import pathlib
import warnings

from . import _native

__all__ = ["compute", "read_stats", "stats_files", "ACHIEVEMENT_NAMES", "CutLineWarning"]

ACHIEVEMENT_NAMES = tuple(_native.ACHIEVEMENT_NAMES)


class CutLineWarning(UserWarning):
    """A stats file's last line was cut (a run still writing, or killed mid-line) and was
    skipped; the message counts and names the lines (``file:line``)."""


def _paths(paths):
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    return [os.fsdecode(p) if isinstance(p, bytes) else os.fspath(p) for p in paths]


def stats_files(paths):
    """The stats files ``paths`` names: a file as given, a folder as every ``stats.jsonl`` in it
    or below it (sorted); a file named twice (a folder given with its own ``stats.jsonl``) is
    kept once, where it first appears."""
    return [pathlib.Path(p) for p in _native.score_files(_paths(paths))]


def read_stats(path):
    """The episodes of one stats file as ``(length, reward, [22 counts])`` tuples. A bad line
    (binary data included) is a ValueError naming the file and the line, a file without an
    episode a ValueError naming it; a cut last line is skipped with a :class:`CutLineWarning`."""
    episodes, cut = _native.score_read(os.fspath(path))
    if cut is not None:
        warnings.warn(f"skipped 1 cut last line (a run still writing, or killed mid-line): {path}:{cut}",
                      CutLineWarning, stacklevel=2)
    return episodes


def compute(paths):
    """The paper's metrics of the stats files ``paths`` names (files or folders, one or a
    list); see the module doc for the keys. The files are read by the same code as the CLI's
    ``vlm-eval score`` (the engine's), so both accept and refuse the same files with the same
    messages: a bad line is a ValueError naming the file and the line, a missing path a
    FileNotFoundError, a file without an episode a ValueError; a cut last line is skipped with
    a :class:`CutLineWarning` that counts them (the CLI prints the same text after
    ``warning:``)."""
    text, warning = _native.score_compute(_paths(paths))
    if warning is not None:
        warnings.warn(warning, CutLineWarning, stacklevel=2)
    return json.loads(text)
