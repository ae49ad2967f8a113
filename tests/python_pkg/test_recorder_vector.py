"""`recorder.VectorRecorder`: n envs on seeds S write the same stats.jsonl lines (as a multiset)
as crafter 1.8.3's own `crafter.Recorder` over n single crafter envs on the same seeds and
actions, for the native `crafter.VectorEnv` (next_step autoreset) and for gymnasium's own
`SyncVectorEnv` of the registered env in each of gymnasium's three autoreset modes.
"""
import collections

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


def our_lines(folder):
    return (folder / "stats.jsonl").read_text().splitlines()


def assert_same_lines(ours, ref, min_episodes):
    assert len(ref) >= min_episodes, f"only {len(ref)} episodes: the test no longer crosses resets"
    assert collections.Counter(ours) == collections.Counter(ref), (
        f"{len(ours)} lines, crafter {len(ref)}; only ours: "
        f"{list((collections.Counter(ours) - collections.Counter(ref)).elements())[:2]}; only crafter's: "
        f"{list((collections.Counter(ref) - collections.Counter(ours)).elements())[:2]}")


@pytest.mark.parametrize("length,steps", [(60, 200), (10000, 420)])
def test_native_vector_env_equals_crafter(assets, tmp_path, length, steps):
    """Short episodes (many truncations), then crafter's default length (random play dies
    within about 130-250 steps): rewards summed from float32 step rewards give crafter's
    float64 sums, down to a "-0.0"."""
    n = 3
    seeds = [SEEDS[i % len(SEEDS)] + 1000 * i for i in range(n)]
    actions = np.random.RandomState(seeds[0] % 2**32).randint(0, 17, size=(steps, n))
    venv = VectorRecorder(vc.VectorEnv(n, seed=seeds, length=length, textures=assets), tmp_path / "ours")
    venv.reset()
    for a in actions:
        venv.step(a)
    venv.close()
    ref = crafter_lines(seeds, actions, "NextStep", tmp_path, length=length)
    assert_same_lines(our_lines(tmp_path / "ours"), ref, min_episodes=n)
    assert venv.episodes_recorded == len(ref)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_gymnasium_sync_vector_env_every_autoreset_mode(assets, tmp_path, mode):
    """gymnasium's SyncVectorEnv of the registered env: the recorder is a gymnasium
    VectorWrapper, reads infos["reward"], the final_info of SameStep and the reset_mask of
    Disabled."""
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.vector import AutoresetMode

    n, steps, length = 3, 150, 40
    seeds = [SEEDS[i % len(SEEDS)] + 77 * i for i in range(n)]
    envs = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make("vlmcrafter/Crafter-v1", length=length, textures=assets)] * n,
        autoreset_mode=AutoresetMode(mode))
    rec = VectorRecorder(envs, tmp_path / "ours")
    assert isinstance(rec, gymnasium.vector.VectorWrapper)
    rec.reset(seed=seeds)
    actions = np.random.RandomState(seeds[0] % 2**32).randint(0, 17, size=(steps, n))
    for a in actions:
        _, _, term, trunc, _ = rec.step(a)
        if mode == "Disabled" and (term | trunc).any():
            rec.reset(options={"reset_mask": term | trunc})
    rec.close()
    ref = crafter_lines(seeds, actions, mode, tmp_path, length=length)
    assert_same_lines(our_lines(tmp_path / "ours"), ref, min_episodes=2 * n)


def test_reset_drops_unfinished_episodes_and_reward_false_is_refused(assets, tmp_path):
    venv = VectorRecorder(vc.VectorEnv(2, seed=5, length=30, textures=assets), tmp_path / "a")
    venv.reset()
    for _ in range(20):
        venv.step(np.zeros(2, np.int64))
    venv.reset()  # as crafter's recorder, an episode cut by reset() leaves no line
    for _ in range(31):
        venv.step(np.zeros(2, np.int64))
    lines = our_lines(tmp_path / "a")
    assert len(lines) == 2 and all('"length": 30' in line for line in lines)
    with pytest.raises(ValueError, match="reward=False"):
        VectorRecorder(vc.VectorEnv(2, seed=5, reward=False, textures=assets), tmp_path / "b")
