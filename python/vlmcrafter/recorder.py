"""crafter 1.8.3's ``Recorder`` for the drop-in env, and a stats recorder for vector envs.

:class:`Recorder` wraps a :class:`vlmcrafter.crafter.Env` (or any env with crafter's 4-tuple
``step``) and writes what crafter 1.8.3's ``crafter.Recorder`` writes for the same seed and
actions: one ``stats.jsonl`` line per finished episode, one ``.npz`` file per episode with
crafter's arrays, and one ``.mp4`` video per episode (needs the ``video`` extra: ``imageio`` and
``imageio-ffmpeg``). It makes the same ``render(video_size)`` calls crafter's does (at night a
render draws from the world's RNG), so a recorded run plays the same episodes as crafter's.

:class:`VectorRecorder` wraps a vector env (``vlmcrafter.crafter.VectorEnv`` or any gymnasium
``VectorEnv`` whose infos carry crafter's achievements) and appends the same ``stats.jsonl``
line per finished episode, in gymnasium's three autoreset modes. Both write lines as crafter
does: ``{"length": ..., "reward": ..., "achievement_collect_coal": ..., ...}``; the Crafter
score reads them (:mod:`vlmcrafter.score`, ``vlm-eval score``).
"""

import datetime
import json
import math
import os
import pathlib
import tempfile

import numpy as np

from . import _native

__all__ = ["Recorder", "VectorRecorder"]

ACHIEVEMENT_NAMES = tuple(_native.ACHIEVEMENT_NAMES)
_VIDEO_HINT = "pip install 'vlmcrafter[video]' (imageio and imageio-ffmpeg), or pass save_video=False"


def _writable_directory(directory, who):
    """``directory`` made (with its parents) and checked writable; one clear error otherwise."""
    path = pathlib.Path(os.fspath(directory)).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise type(err)(
            f"{who}: cannot write to the directory {str(path)!r} ({reason}); give a folder this "
            "process can create and write") from None
    return path


def _open_stats(path, who, binary=False):
    """``path/stats.jsonl`` opened for appending: text (buffered, flushed per episode), or with
    ``binary`` unbuffered bytes (each write goes straight to the file, as a flush would)."""
    try:
        return (path / "stats.jsonl").open("ab", buffering=0) if binary else (path / "stats.jsonl").open("a")
    except OSError as err:
        raise type(err)(
            f"{who}: cannot open {str(path / 'stats.jsonl')!r} for appending "
            f"({err.strerror or err}); give a folder this process can write") from None


def _stats_line(length, reward, achievements):
    """crafter's stats line: ``achievements`` is a sequence of counts in crafter's order."""
    stats = {"length": length, "reward": round(reward, 1)}
    for name, value in zip(ACHIEVEMENT_NAMES, achievements):
        stats["achievement_" + name] = value
    return json.dumps(stats) + "\n"


# The same line as _stats_line for int counts, from a %-template (a few µs a line where
# json.dumps of a 24-key dict takes several times that): the vector recorder's hot path.
_LINE = ('{"length": %d, "reward": %s, '
         + ", ".join(f'"achievement_{name}": %d' for name in ACHIEVEMENT_NAMES) + "}\n")


def _int_stats_line(length, reward, achievements):
    """:func:`_stats_line` for an int ``length`` and int ``achievements`` (22 of them)."""
    reward = round(reward, 1)
    if type(reward) is float and math.isfinite(reward):
        text = float.__repr__(reward)  # what json.dumps writes for a finite float
    else:
        text = json.dumps(reward)
    return _LINE % (length, text, *achievements)


def _replace_into(target, write):
    """``write(tmp_path)`` then rename onto ``target``: a file is whole or absent, never half."""
    tmp = target.with_name("." + target.stem + ".partial" + target.suffix)
    try:
        write(str(tmp))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


class Recorder:
    """crafter 1.8.3's ``crafter.Recorder``: stats, episodes and videos of a single env.

    Args:
        env: the env to record (``vlmcrafter.crafter.Env``; crafter's 4-tuple ``step``).
        directory: the folder to write into (made with its parents); falsy records nothing.
        save_stats: append one line per finished episode to ``directory/stats.jsonl``.
        save_video: write ``<name>.mp4`` per episode, frames of ``env.render(video_size)``
            (needs the ``video`` extra; without it, an ImportError here).
        save_episode: write ``<name>.npz`` per episode with crafter's arrays (``image``,
            ``action``, ``reward``, ``done``, ``discount``, ``semantic``, ``player_pos``,
            ``achievement_*``, ``ainventory_*``), one row per step plus the reset row.
        video_size: the video's frame size (width, height).

    Episode files are named as crafter names them: ``<YYYYmmddTHHMMSS>-ach<unlocked>-len<length>``.
    An unwritable ``directory`` is an OSError here, before anything is recorded; each episode
    file is written beside its final name and renamed, so it is whole or absent. Other
    attributes (``render``, ``action_space``, ...) are the wrapped env's.
    """

    def __init__(self, env, directory, save_stats=True, save_video=True, save_episode=True,
                 video_size=(512, 512)):
        self._env = env
        self._stats = self._video = self._episode = False
        if not directory or not (save_stats or save_video or save_episode):
            return
        if save_video:
            try:
                import imageio  # noqa: F401
                import imageio_ffmpeg  # noqa: F401
            except ImportError as err:
                raise ImportError(f"Recorder(save_video=True) writes mp4 videos with imageio and "
                                  f"imageio-ffmpeg ({err}): {_VIDEO_HINT}") from None
        self._directory = _writable_directory(directory, "Recorder")
        self._file = _open_stats(self._directory, "Recorder") if save_stats else None
        self._stats, self._video, self._episode = bool(save_stats), bool(save_video), bool(save_episode)
        self._video_size = video_size
        self._length = 0
        self._reward = 0
        self._frames = None
        self._steps = None
        self._name = None

    def __getattr__(self, name):
        if name.startswith("__") or name == "_env":
            raise AttributeError(name)
        return getattr(self._env, name)

    @property
    def directory(self):
        """The folder written into (None when nothing is recorded)."""
        return getattr(self, "_directory", None)

    def reset(self):
        obs = self._env.reset()
        self._length = 0
        self._reward = 0
        if self._video:
            self._frames = [self._env.render(self._video_size)]
        if self._episode:
            self._steps = [{"image": obs}]
        return obs

    def step(self, action):
        obs, reward, done, info = self._env.step(action)
        if not (self._stats or self._video or self._episode):
            return obs, reward, done, info
        self._length += 1
        self._reward += info["reward"]
        if self._video:
            self._frames.append(self._env.render(self._video_size))
        if self._episode:
            transition = {"action": action, "image": obs, "reward": reward, "done": done}
            for key, value in info.items():
                if key not in ("inventory", "achievements"):
                    transition[key] = value
            for key, value in info["achievements"].items():
                transition["achievement_" + key] = value
            for key, value in info["inventory"].items():
                transition["ainventory_" + key] = value
            self._steps.append(transition)
        if done:
            achievements = info["achievements"]
            if self._stats:
                self._file.write(_stats_line(self._length, self._reward, achievements.values()))
                self._file.flush()
            stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
            unlocked = sum(int(v >= 1) for v in achievements.values())
            self._name = f"{stamp}-ach{unlocked}-len{self._length}"
            if self._video:
                self._save_video()
            if self._episode:
                self._save_episode()
        return obs, reward, done, info

    @property
    def episode_name(self):
        """The name of the last finished episode's files (crafter's ``episode_name``)."""
        return self._name

    def _save_video(self):
        import imageio

        frames = self._frames
        _replace_into(self._directory / (self._name + ".mp4"),
                      lambda tmp: imageio.mimsave(tmp, frames))

    def _save_episode(self):
        steps = self._steps
        # crafter fills the reset row with zeros for the keys it lacks.
        for key, value in steps[1].items():
            if key not in steps[0]:
                steps[0][key] = np.zeros_like(value)
        arrays = {key: np.array([step[key] for step in steps]) for key in steps[0]}

        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez_compressed(f, **arrays)

        _replace_into(self._directory / (self._name + ".npz"), write)

    def close(self):
        if getattr(self, "_file", None) is not None:
            self._file.close()
        close = getattr(self._env, "close", None)
        if close is not None:
            close()


# crafter's per-step reward is (health change) / 10, plus 1.0 in a step that unlocks an
# achievement, computed in float64. A vector env's float32 reward k/10 maps back to that exact
# float64 (k = round(10 r) in -9..11), so the episode sums (and crafter's rounding, down to the
# sign of a -0.0) are crafter's own. Health rises at most 1 a step, so k = 1 is +0.1 (not a loss
# of 9 in the step of an unlock) and k = 2..11 are an unlock with a change of k - 10.
_K_MIN, _K_MAX = -9, 11
_EXACT = np.array([(k / 10 if k <= 1 else (k - 10) / 10 + 1.0) for k in range(_K_MIN, _K_MAX + 1)])


def _exact_rewards(rewards):
    r = np.asarray(rewards)
    if r.dtype == np.float64:
        return r
    # Out of crafter's range (which its rewards never leave) clips to the nearest end.
    return _EXACT.take(np.rint(r * 10).astype(np.intp) - _K_MIN, mode="clip")


def _autoreset_mode(env):
    meta = getattr(env, "metadata", None) or {}
    mode = meta.get("autoreset_mode", "NextStep")
    return getattr(mode, "value", mode)


def _achievement_rows(infos, names):
    """Achievement counts, (n, 22) in crafter's order, from a dict of arrays: an
    ``achievements`` (n, k) array with columns ``names``, a dict of per-name arrays, or
    ``achievement_<name>`` keys."""
    ach = infos.get("achievements") if isinstance(infos, dict) else None
    if isinstance(ach, np.ndarray) and ach.ndim == 2:
        if names is None or tuple(names) == ACHIEVEMENT_NAMES:
            return ach
        index = {n: i for i, n in enumerate(names)}
        return ach[:, [index[n] for n in ACHIEVEMENT_NAMES]]
    if isinstance(ach, dict):
        return np.stack([np.asarray(ach[n]) for n in ACHIEVEMENT_NAMES], axis=1)
    if isinstance(infos, dict) and all(("achievement_" + n) in infos for n in ACHIEVEMENT_NAMES):
        return np.stack([np.asarray(infos["achievement_" + n]) for n in ACHIEVEMENT_NAMES], axis=1)
    raise KeyError("VectorRecorder: the vector env's infos carry no crafter achievements "
                   "(an 'achievements' array or dict): wrap a vlmcrafter vector env")


def _native_counts(env):
    """For a vlmcrafter ``VectorEnv``, its native ``stats_lines`` (the lines of the episodes that
    ended on the last step, from the counts the env keeps in Rust, formatted there exactly as
    :func:`_stats_line` formats them: ``(text, count)``, text None where Rust leaves it to
    Python; or None); None for any other vector env (wrappers included), which the recorder
    counts itself."""
    from .vector import VectorEnv

    return env._core.stats_lines if isinstance(env, VectorEnv) else None


try:  # a gymnasium VectorWrapper when gymnasium is installed; a plain wrapper otherwise
    from gymnasium.vector import VectorEnv as _GymVectorEnv
    from gymnasium.vector import VectorWrapper as _Base
except ImportError:  # pragma: no cover - exercised without gymnasium
    _GymVectorEnv = None
    _Base = object


class VectorRecorder(_Base):
    """Crafter's ``stats.jsonl`` for a vector env: one line per finished episode, as crafter's
    ``Recorder(save_stats=True)`` writes for a single env with the same seed and actions.

    Args:
        env: ``vlmcrafter.crafter.VectorEnv`` or a gymnasium ``VectorEnv`` (wrappers included)
            whose infos carry crafter's ``achievements``.
        directory: the folder of ``stats.jsonl`` (made with its parents; lines are appended).

    With gymnasium installed this is a ``gymnasium.vector.VectorWrapper``. It follows the env's
    ``metadata["autoreset_mode"]``: ``NEXT_STEP`` (the step after an episode's end resets that
    env and is not counted), ``SAME_STEP`` (the ended episode's achievements are read from
    ``infos["final_info"]``) and ``DISABLED`` (``reset(options={"reset_mask": m})`` restarts
    the counts of the masked envs). A ``reset()`` of every env drops unfinished episodes, as
    crafter's recorder does. An episode's ``reward`` is the sum of crafter's per-step rewards
    (``infos["reward"]`` when the env gives it, as vlmcrafter's ``VectorEnv`` and gymnasium's
    vector envs of the registered env do, also under ``reward=False``; else the step rewards).

    Wrapping a ``vlmcrafter.crafter.VectorEnv`` directly, the recorder reads the env's own
    episode counts (:meth:`~vlmcrafter.crafter.VectorEnv.finished_episodes`, kept in Rust) from
    its first full ``reset()`` on, so a step costs it almost nothing; the lines are the same.
    """

    def __init__(self, env, directory):
        if _Base is not object and isinstance(env, _GymVectorEnv):
            super().__init__(env)
        else:
            self.env = env
            self._observation_space = self._action_space = None
            self._single_observation_space = self._single_action_space = None
            self._metadata = None
        mode = _autoreset_mode(env)
        if mode not in ("NextStep", "SameStep", "Disabled"):
            raise ValueError(f"VectorRecorder: unknown autoreset mode {mode!r}")
        self._mode = mode
        self._directory = _writable_directory(directory, "VectorRecorder")
        self._file = _open_stats(self._directory, "VectorRecorder", binary=True)
        n = int(env.num_envs)
        self._names = getattr(env, "achievement_names", None)
        self._length = np.zeros(n, np.int64)
        self._reward = np.zeros(n, np.float64)
        self._pending = np.zeros(n, bool)
        self._any_pending = False
        self._env_counts = None
        self.episodes_recorded = 0

    def __getattr__(self, name):
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def directory(self):
        """The folder of ``stats.jsonl``."""
        return self._directory

    def reset(self, *args, **kwargs):
        # Read the mask before the env resets: gymnasium's SyncVectorEnv pops "reset_mask" out of
        # the caller's options dict (reading it afterwards took a masked reset for a full one).
        options = kwargs.get("options") or {}
        mask = options.get("reset_mask") if isinstance(options, dict) else None
        result = self.env.reset(*args, **kwargs)
        if mask is None:
            # From a full reset on, a vlmcrafter VectorEnv's own counts (kept in Rust, in every
            # autoreset mode) replace the per-step bookkeeping here.
            self._env_counts = _native_counts(self.env)
            self._length[:] = 0
            self._reward[:] = 0
            self._pending[:] = False
            self._any_pending = False
        else:
            mask = np.asarray(mask, bool)
            self._length[mask] = 0
            self._reward[mask] = 0
            self._pending[mask] = False
        return result

    def step(self, actions):
        stats_lines = self._env_counts
        if stats_lines is not None:
            result = self.env.step(actions)
            ended = stats_lines()
            if ended is not None:
                text, count = ended
                if text is None:  # a reward sum of 1e14 or more (not crafter's): Python writes it
                    text = "".join(_int_stats_line(length, reward, achievements) for _, length, reward,
                                   achievements in self.env.finished_episodes()).encode()
                self._write_bytes(text)
                self.episodes_recorded += count
            return result
        result = self.env.step(actions)
        _, rewards, terminations, truncations, infos = result
        if "reward" in infos:  # crafter's own per-step reward (also under reward=False)
            r = np.asarray(infos["reward"], np.float64)
            if self._mode == "SameStep":  # an ended env's info is the next episode's first
                ended = terminations | truncations
                if ended.any():
                    r = np.where(ended, np.asarray(infos["final_info"]["reward"], np.float64), r)
        else:
            r = _exact_rewards(rewards)
        if self._any_pending:  # NEXT_STEP: these envs reset in this step; it is not counted
            pending = self._pending
            self._length[pending] = 0
            self._reward[pending] = 0.0
            self._length += ~pending
        else:
            self._length += 1
        self._reward += r  # a reset step's reward is 0
        done = terminations | truncations
        any_done = done.any()
        if any_done:
            self._finish(np.flatnonzero(done), infos)
        if self._mode == "NextStep":
            self._pending = done
            self._any_pending = any_done
        return result

    def _finish(self, ended, infos):
        if self._mode == "SameStep":
            source = infos["final_info"]
        else:
            source = infos
        rows = _achievement_rows(source, self._names)[ended].tolist()
        self._write([_int_stats_line(int(self._length[i]), float(self._reward[i]), row)
                     for i, row in zip(ended, rows)])
        if self._mode != "NextStep":
            self._length[ended] = 0
            self._reward[ended] = 0

    def _write(self, lines):
        """Append whole lines (each episode's line reaches the file at once, as crafter's)."""
        self._write_bytes("".join(lines).encode())
        self.episodes_recorded += len(lines)

    def _write_bytes(self, data):
        written = self._file.write(data)  # unbuffered: one write call, all of it for a file
        while written < len(data):
            data = data[written:]
            written = self._file.write(data)

    def close(self, **kwargs):
        if not self._file.closed:
            self._file.close()
        return self.env.close(**kwargs)

    def __repr__(self):
        return f"<VectorRecorder {str(self._directory)!r}, {self.env!r}>"
