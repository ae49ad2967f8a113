"""Drop-in completeness against crafter 1.8.3: `crafter.constants` attribute by attribute, what
DreamerV3's Crafter env reads, crafter's `CrafterReward-v1`/`CrafterNoReward-v1` ids under our
namespace, `spec.max_episode_steps` and `make_vec(max_episode_steps=)`; and closing: a closed
`CrafterEnv` or `Session` says so, `VectorEnv.text` takes list indices."""
import pathlib
import types

import gymnasium
import numpy as np
import pytest

import vlmcrafter
from support import SEEDS, actions_for
from vlmcrafter import crafter as vc
from vlmcrafter.session import Session

# crafter.constants' module-level names that are not data: its imports and the leftovers of
# the loop that loads data.yaml (`for key, value in ...: globals()[key] = value`).
NOT_DATA = {"pathlib", "ruamel", "yaml", "key", "value"}


def public(module):
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}


def test_constants_equal_crafters_attribute_by_attribute():
    import crafter.constants as theirs

    ours = vc.constants
    want = {k: v for k, v in public(theirs).items() if k not in NOT_DATA}
    got = {k: v for k, v in public(ours).items() if not isinstance(v, types.ModuleType) and k != "__all__"}
    assert sorted(got) == sorted(want), f"names: ours {sorted(got)}, crafter {sorted(want)}"
    for name, value in want.items():
        if name == "root":  # each package's own folder
            assert isinstance(got[name], pathlib.Path) and got[name].is_dir()
            continue
        assert type(got[name]) is type(value), name
        assert got[name] == value, f"constants.{name}: ours {got[name]!r}, crafter {value!r}"
        if isinstance(value, dict):  # the same order, recursively (yaml keeps the file's order)
            assert repr(got[name]) == repr(value), name
    assert list(vc.constants.achievements) == list(vc.ACHIEVEMENT_NAMES)
    assert list(vc.constants.actions) == list(vc.ACTION_NAMES)
    assert list(vc.constants.items) == list(vc.ITEM_NAMES)


def test_import_forms_of_constants():
    import importlib

    mod = importlib.import_module("vlmcrafter.crafter.constants")
    from vlmcrafter.crafter.constants import achievements

    assert mod is vc.constants and achievements is vc.constants.achievements


def test_what_dreamerv3_reads():
    """DreamerV3's embodied/envs/crafter.py: crafter.Env(size=, reward=, seed=),
    crafter.constants.achievements.copy(), observation_space.shape, action_space.n, and the
    info keys discount, reward and achievements[name]."""
    achievements = vc.constants.achievements.copy()
    env = vc.Env(size=(64, 64), reward=False, seed=SEEDS[0])
    assert env.observation_space.shape == (64, 64, 3) and env.action_space.n == 17
    image = env.reset()
    assert image.shape == env.observation_space.shape
    for a in actions_for(SEEDS[0], 30):
        image, reward, done, info = env.step(a)
        assert reward == 0.0 and isinstance(info["reward"], float)
        assert info["discount"] in (0.0, 1.0)
        logs = {f"log/achievement_{k}": info["achievements"][k] for k in achievements}
        assert len(logs) == 22 and all(isinstance(v, int) for v in logs.values())


@pytest.mark.parametrize("env_id,reward", [
    ("vlmcrafter/Crafter-v1", True),
    ("vlmcrafter/CrafterReward-v1", True),
    ("vlmcrafter/CrafterNoReward-v1", False),
])
def test_crafters_ids_and_max_episode_steps(env_id, reward):
    spec = gymnasium.spec(env_id)
    assert spec.max_episode_steps == 10000  # crafter registers its ids with 10000
    env = gymnasium.make(env_id)
    assert env.spec.max_episode_steps == 10000
    assert env.unwrapped._env._reward is reward
    env.reset(seed=SEEDS[1])
    rewards, real = [], []
    for a in actions_for(SEEDS[1], 200):
        _, r, terminated, truncated, info = env.step(a)
        rewards.append(r)
        real.append(info["reward"])
        if terminated or truncated:
            env.reset()
    assert any(real), "no reward in 200 steps"
    assert (rewards == real) if reward else not any(rewards)
    vec = gymnasium.make_vec(env_id, num_envs=2)
    assert vec.spec.max_episode_steps == 10000 and vec.unwrapped._kwargs["reward"] is reward
    vec.close()


@pytest.mark.parametrize("length", [10000, 7, None])
def test_make_vec_max_episode_steps_truncates_as_sync_does(length):
    n, cap = 3, 12
    kwargs = {} if length == 10000 else {"length": length}
    native = gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=n, max_episode_steps=cap, **kwargs)
    sync = gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=n, max_episode_steps=cap,
                              vectorization_mode="sync", **kwargs)
    a_obs, _ = native.reset(seed=SEEDS[2])
    b_obs, _ = sync.reset(seed=SEEDS[2])
    assert np.array_equal(a_obs, b_obs)
    for t, a in enumerate(actions_for(SEEDS[2], 40)):
        actions = np.full(n, a)
        a_obs, a_r, a_term, a_trunc, _ = native.step(actions)
        b_obs, b_r, b_term, b_trunc, _ = sync.step(actions)
        assert np.array_equal(a_obs, b_obs), t
        assert np.array_equal(a_r, b_r) and np.array_equal(a_term, b_term), t
        # gymnasium's TimeLimit also flags truncated when the player dies on the last step.
        assert np.array_equal(a_trunc & ~a_term, b_trunc & ~b_term), t
    native.close(), sync.close()


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "10"])
def test_make_vec_max_episode_steps_refused(bad):
    with pytest.raises(ValueError, match="max_episode_steps=.*give an int >= 1"):
        gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=2, max_episode_steps=bad)


def test_closed_crafter_env_says_closed():
    env = gymnasium.make("vlmcrafter/Crafter-v1", render_mode="rgb_array")
    env.reset(seed=1)
    env.step(0)
    env.close()
    env.close()
    for call in (lambda: env.step(0), lambda: env.reset(seed=1), lambda: env.unwrapped.text(),
                 lambda: env.unwrapped.render(), lambda: env.unwrapped.get_state()):
        with pytest.raises(RuntimeError, match="closed CrafterEnv"):
            call()


def test_closed_session_says_closed():
    s = Session(SEEDS[0])
    s.reset()
    s.step(actions=["noop"])
    first = s.close()
    assert s.close() == first and first["step"] == 1
    for call in (lambda: s.step(actions=["noop"]), lambda: s.reset()):
        with pytest.raises(RuntimeError, match="closed Session"):
            call()
    never = Session(1)
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\)"):
        never.step(actions=["noop"])


@pytest.mark.parametrize("index", [-1, 2, 5, 2**70])
def test_vector_text_index_out_of_range(index):
    envs = vc.VectorEnv(2, seed=1)
    envs.reset()
    with pytest.raises(IndexError, match=rf"text\({index}\): env index out of range 0\.\.1"):
        envs.text(index)
    assert envs.text(np.int64(1)) == envs.text(1)
    with pytest.raises(TypeError, match="index must be an int"):
        envs.text(1.0)
    envs.close()


def test_registered_ids_listed():
    assert set(vlmcrafter.GYM_IDS) == {"vlmcrafter/Crafter-v1", "vlmcrafter/CrafterReward-v1",
                                       "vlmcrafter/CrafterNoReward-v1"}
