"""`recorder.VectorRecorder`: n envs on seeds S write the same stats.jsonl lines (as a multiset)
as crafter 1.8.3's own `crafter.Recorder` over n single crafter envs on the same seeds and
actions, for the native `crafter.VectorEnv` (next_step autoreset) and for gymnasium's own
`SyncVectorEnv` of the registered env in each of gymnasium's three autoreset modes.
"""
import collections
import math

import numpy as np
import pytest

from support import SEEDS, reference_env
from vlmcrafter import crafter as vc
from vlmcrafter.recorder import VectorRecorder


def crafter_lines(seeds, actions, mode, folder, **kwargs):
    """crafter's Recorder (stats only) over one crafter env per seed, fed env i's column of
    `actions` as a vector env in `mode` feeds it: in NextStep the step after an episode's end
    resets instead (its action is ignored); otherwise the reset comes at once."""
    import crafter

    lines = []
    for i, seed in enumerate(seeds):
        ref = crafter.Recorder(reference_env(seed=seed, **kwargs), folder / f"ref{i}",
                               save_video=False, save_episode=False)
        ref.reset()
        pending = False
        for a in actions[:, i]:
            if pending:
                ref.reset()
                pending = False
                continue
            _, _, done, _ = ref.step(int(a))
            if done:
                if mode == "NextStep":
                    pending = True
                else:
                    ref.reset()
        lines += (folder / f"ref{i}" / "stats.jsonl").read_text().splitlines()
    return lines


def play(rec, actions, mode):
    """Step the recorded vector env through `actions` (with DISABLED autoreset, a masked reset of
    the envs that ended after each step), then close it."""
    for a in actions:
        _, _, term, trunc, _ = rec.step(a)
        if mode == "Disabled" and (term | trunc).any():
            rec.reset(options={"reset_mask": term | trunc})
    rec.close()


def our_lines(folder):
    return (folder / "stats.jsonl").read_text().splitlines()


def assert_same_lines(ours, ref, min_episodes):
    assert len(ref) >= min_episodes, f"only {len(ref)} episodes: the test no longer crosses resets"
    assert collections.Counter(ours) == collections.Counter(ref), (
        f"{len(ours)} lines, crafter {len(ref)}; only ours: "
        f"{list((collections.Counter(ours) - collections.Counter(ref)).elements())[:2]}; only crafter's: "
        f"{list((collections.Counter(ref) - collections.Counter(ours)).elements())[:2]}")


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("length,steps", [(60, 200), (10000, 420)])
def test_native_vector_env_equals_crafter(assets, tmp_path, length, steps, mode):
    """vlmcrafter's native VectorEnv in each autoreset mode. Short episodes (many truncations),
    then crafter's default length (random play dies within about 130-250 steps); the stats'
    rewards are crafter's float64 sums, down to a "-0.0"."""
    n = 3
    seeds = [SEEDS[i % len(SEEDS)] + 1000 * i for i in range(n)]
    actions = np.random.RandomState(seeds[0] % 2**32).randint(0, 17, size=(steps, n))
    inner = vc.VectorEnv(n, seed=seeds, length=length, textures=assets, autoreset_mode=mode)
    venv = VectorRecorder(inner, tmp_path / "ours")
    venv.reset()
    play(venv, actions, mode)
    ref = crafter_lines(seeds, actions, mode, tmp_path, length=length)
    assert_same_lines(our_lines(tmp_path / "ours"), ref, min_episodes=n)
    assert venv.episodes_recorded == len(ref)


# Seeds on which env 0 dies at step 68 while the others run to the length limit (40) at steps
# 40, 80, 120: the masked reset of env 0 alone must leave the others' counts alone (gymnasium's
# SyncVectorEnv pops "reset_mask" out of the options, which once made it a full reset here).
DEATH_APART = [442749591, 588967446, 520217919]


@pytest.mark.parametrize("seed_set", ["drawn", "death apart"])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_gymnasium_sync_vector_env_every_autoreset_mode(assets, tmp_path, mode, seed_set):
    """gymnasium's SyncVectorEnv of the registered env: the recorder is a gymnasium
    VectorWrapper, reads infos["reward"], the final_info of SameStep and the reset_mask of
    Disabled."""
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.vector import AutoresetMode

    n, steps, length = 3, 150, 40
    base = SEEDS if seed_set == "drawn" else DEATH_APART
    seeds = [base[i % len(base)] + 77 * i for i in range(n)]
    envs = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make("vlmcrafter/Crafter-v1", length=length, textures=assets)] * n,
        autoreset_mode=AutoresetMode(mode))
    rec = VectorRecorder(envs, tmp_path / "ours")
    assert isinstance(rec, gymnasium.vector.VectorWrapper)
    rec.reset(seed=seeds)
    actions = np.random.RandomState(seeds[0] % 2**32).randint(0, 17, size=(steps, n))
    play(rec, actions, mode)
    ref = crafter_lines(seeds, actions, mode, tmp_path, length=length)
    if seed_set == "death apart" and mode == "Disabled":
        assert any('"length": 28,' in line for line in ref), "the seeds no longer give a death apart"
    assert_same_lines(our_lines(tmp_path / "ours"), ref, min_episodes=2 * n)


def test_reset_drops_unfinished_episodes(assets, tmp_path):
    venv = VectorRecorder(vc.VectorEnv(2, seed=5, length=30, textures=assets), tmp_path / "a")
    venv.reset()
    for _ in range(20):
        venv.step(np.zeros(2, np.int64))
    venv.reset()  # as crafter's recorder, an episode cut by reset() leaves no line
    for _ in range(31):
        venv.step(np.zeros(2, np.int64))
    lines = our_lines(tmp_path / "a")
    assert len(lines) == 2 and all('"length": 30' in line for line in lines)


class _Counted:
    """A vector env that is not a vlmcrafter VectorEnv (everything else forwarded): the
    recorder counts the episodes itself instead of reading the env's native counts."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_native_counts_write_what_the_recorder_counts_itself(assets, tmp_path, mode, monkeypatch):
    """The fast path (the env's own counts, kept in Rust, lines written in Rust), its fallback
    (lines written in Python, as for a reward sum Rust leaves to Python) and the recorder's own
    bookkeeping write byte-identical files over the same run: short and long episodes, masked
    resets, and a full reset mid-episode (whose cut episodes leave no line)."""
    import vlmcrafter.recorder as recorder

    def python_lines(env):  # the native counts, the text left to Python
        def lines():
            ended = env.finished_episodes()
            return None if ended is None else (None, len(ended))
        return lines if isinstance(env, vc.VectorEnv) else None

    n, length = 4, 50
    actions = np.random.RandomState(11).randint(0, 17, size=(400, n))
    files = {}
    for name, wrap in (("native", lambda env: env), ("fallback", lambda env: env), ("counted", _Counted)):
        env = vc.VectorEnv(n, seed=[3, 40, 500, 6000], length=length, textures=assets,
                           autoreset_mode=mode)
        if name == "fallback":
            monkeypatch.setattr(recorder, "_native_counts", python_lines)
        rec = VectorRecorder(wrap(env), tmp_path / name)
        rec.reset()
        assert (rec._env_counts is not None) == (name != "counted")
        for k, a in enumerate(actions):
            if k == 230:
                rec.reset()
            _, _, term, trunc, _ = rec.step(a)
            ended = term | trunc
            if mode == "Disabled" and ended.any():
                rec.reset(options={"reset_mask": ended})
            elif k % 37 == 0 and mode != "Disabled":  # masked resets restart those envs' counts
                rec.reset(options={"reset_mask": np.arange(n) == k % n})
        rec.close()
        monkeypatch.undo()
        files[name] = (tmp_path / name / "stats.jsonl").read_bytes()
    assert files["native"].count(b"\n") >= 2 * n, "too few episodes: the test no longer crosses resets"
    assert files["native"] == files["counted"] == files["fallback"]


def test_finished_episodes_reports_each_ended_episode_once(assets):
    """VectorEnv.finished_episodes(): None on steps where nothing ended and after a reset; on an
    ending step, each ended env's length, real reward sum and final achievement counts."""
    n, length = 3, 25
    env = vc.VectorEnv(n, seed=8, length=length, textures=assets, reward=False)
    _, infos = env.reset()
    assert env.finished_episodes() is None
    total = np.zeros(n)
    for step in range(1, length + 1):
        _, rewards, term, trunc, infos = env.step(np.full(n, 5, np.int64))
        assert not rewards.any()  # reward=False hides rewards; the counts use the real ones
        total += infos["reward"]
        ended = env.finished_episodes()
        if step < length:
            assert ended is None or all(term[i] for i, *_ in ended)
    assert trunc.all() or term.any()
    assert [e[0] for e in ended] == list(range(n))
    for i, steps, reward, achievements in ended:
        assert steps == length and reward == total[i]
        assert list(achievements) == [int(infos["achievements"][k][i]) for k in vc.ACHIEVEMENT_NAMES]
    env.step(np.zeros(n, np.int64))  # NEXT_STEP: the resetting step ends nothing
    assert env.finished_episodes() is None
    env.reset()
    assert env.finished_episodes() is None


def test_fast_lines_are_json_dumps_lines():
    """The vector recorder's two fast formatters, the %-template (any other vector env) and the
    native one (vlmcrafter's VectorEnv, in Rust), write exactly json.dumps's line (crafter's),
    ties of round(x, 1), signed zeros, exponents and non-finite rewards included."""
    from vlmcrafter import _native
    from vlmcrafter.recorder import _int_stats_line, _stats_line

    rng = np.random.default_rng(0)
    in_range = 0
    rewards = [0.0, -0.0, -0.04, 0.05, 0.15, 0.25, 0.75, -1.25, 2.675, 1e-3, -3.1, 11.949999,
               123.45, 1e15, 9.99e15, 1e16, -1.5e16, 1e17, 2e300, -2.5e-7, 5e-324,
               float("inf"), float("-inf"), float("nan")]
    rewards += list(rng.normal(0, 5, 300)) + list(np.cumsum(rng.choice([-0.1, 0.1, 1.0], 300)))
    rewards += [k / 4 for k in range(-41, 41, 2)]  # every exact tie x.25 / x.75 near 0
    rewards += list(rng.uniform(-1e18, 1e18, 100)) + list(10.0 ** rng.uniform(-8, 20, 100))
    rewards += list(rng.uniform(-1e14, 1e14, 200)) + list(rng.uniform(1e13, 1e14, 200))
    for k, reward in enumerate(rewards):
        counts = [int(v) for v in rng.integers(0, 3 if k % 2 else 10**6, 22)]
        length = int(rng.integers(1, 10**7))
        want = _stats_line(length, float(reward), counts)
        assert _int_stats_line(length, float(reward), counts) == want, reward
        native = _native.stats_line(length, float(reward), counts)
        if native is None:  # left to Python: only out of Rust's exact range
            assert not (math.isfinite(reward) and abs(round(reward, 1)) < 1e14), reward
        else:
            assert native == want, reward
            in_range += 1
    assert in_range > 600
