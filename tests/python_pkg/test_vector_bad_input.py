"""Bad input to the vector env: one clear exception each, and nothing done half-way (the envs'
frames, episodes and seeds are as before the call)."""
import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import vlmcrafter  # noqa: F401  (registers the env id)
from support import SEEDS, living_seed
from vlmcrafter import crafter as vc

ENV_ID = "vlmcrafter/Crafter-v1"


def started(n=3, mode=AutoresetMode.NEXT_STEP, **kwargs):
    env = gymnasium.make_vec(ENV_ID, num_envs=n, autoreset_mode=mode, **kwargs)
    env.reset(seed=SEEDS[0])
    env.step(np.arange(n) % 17)
    return env


def snapshot(env):
    return env.unwrapped.obs.tobytes(), env.unwrapped.episodes, env.unwrapped.seeds


@pytest.mark.parametrize("seed", [[1, 2], [1, 2, 3, 4], []])
def test_wrong_seed_list_length(seed):
    env = started(3)
    before = snapshot(env)
    with pytest.raises(ValueError, match=r"seed has \d+ values for 3 envs"):
        env.reset(seed=seed)
    assert snapshot(env) == before
    with pytest.raises(ValueError, match="seed"):
        vc.VectorEnv(3, seed=seed)


def test_unhashable_seed_in_list():
    env = started(3)
    before = snapshot(env)
    with pytest.raises(TypeError, match="seed"):
        env.reset(seed=[1, [2], 3])
    assert snapshot(env) == before


@pytest.mark.parametrize("mask, error, words", [
    ([True, False, True], TypeError, "numpy bool array"),
    (np.array([1, 0, 1]), TypeError, "dtype bool"),
    (np.array([True, False]), ValueError, r"shape \(3,\)"),
    (np.array([[True, False, True]]), ValueError, r"shape \(3,\)"),
    (np.zeros(3, dtype=bool), ValueError, "no True"),
])
@pytest.mark.parametrize("mode", [AutoresetMode.DISABLED, AutoresetMode.NEXT_STEP])
def test_bad_reset_mask(mask, error, words, mode):
    env = started(3, mode)
    before = snapshot(env)
    with pytest.raises(error, match=words):
        env.reset(seed=7, options={"reset_mask": mask})
    assert snapshot(env) == before
    env.step(np.zeros(3, dtype=np.int64))  # still usable


@pytest.mark.parametrize("mode", ["next", "SAME", 3, None, "Disabled!"])
def test_unknown_autoreset_mode(mode):
    with pytest.raises(ValueError, match="autoreset_mode"):
        vc.VectorEnv(2, autoreset_mode=mode)
    with pytest.raises(ValueError, match="autoreset_mode"):
        gymnasium.make_vec(ENV_ID, num_envs=2, autoreset_mode=mode)


@pytest.mark.parametrize("name", ["nope", "np_random_seed", "render_mode", "text"])
def test_set_attr_refused(name):
    env = started(2)
    before = snapshot(env)
    with pytest.raises(AttributeError, match=name):
        env.set_attr(name, [1, 2])
    assert snapshot(env) == before


def test_episodes_wrong_count():
    env = started(3)
    before = snapshot(env)
    with pytest.raises(ValueError, match="give 3 ints"):
        env.unwrapped.episodes = [1, 2]
    with pytest.raises(ValueError, match="give 3 ints"):
        env.unwrapped.episodes = [1, 2, "x"]
    with pytest.raises(AttributeError, match="episode"):
        env.set_attr("episode", [1, 2, 3])
    assert snapshot(env) == before


@pytest.mark.parametrize("actions", [np.zeros(2, dtype=np.int64), np.zeros((3, 1), dtype=np.int64),
                                     np.zeros(4, dtype=np.int64), 3, [[1, 2, 3]]])
def test_wrong_action_shape_under_make_vec(actions):
    env = started(3)
    before = snapshot(env)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        env.step(actions)
    assert snapshot(env) == before
    env.step(np.ones(3, dtype=np.int64))


def test_disabled_mode_refuses_to_step_an_ended_env():
    env = gymnasium.make_vec(ENV_ID, num_envs=2, autoreset_mode="DISABLED", length=3)
    env.reset(seed=living_seed(SEEDS[1], [[1] * 3, [2] * 3], length=3))  # both truncated, none dead
    for _ in range(3):
        *_, trunc, _ = env.step(np.array([1, 2]))
    assert trunc.all()
    before = snapshot(env)
    with pytest.raises(RuntimeError, match=r"reset_mask"):
        env.step(np.array([1, 2]))
    assert snapshot(env) == before
    env.reset(options={"reset_mask": np.array([True, True])})
    env.step(np.array([1, 2]))


def test_bad_max_episode_steps_is_refused_clearly():
    # A valid one is accepted and truncates as SyncVectorEnv's TimeLimit (test_dropin.py).
    with pytest.raises(ValueError, match="length="):
        gymnasium.make_vec(ENV_ID, num_envs=2, max_episode_steps=0)
