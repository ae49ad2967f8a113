"""`copy=`: as gymnasium's `SyncVectorEnv(copy=)`. With the default `copy=True` every `reset`
and `step` returns a new observation array that a replay buffer may keep (CleanRL's DQN loop
stores distinct obs and next_obs); `copy=False` returns the env's one frame buffer."""
import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import vlmcrafter  # noqa: F401  (registers the env id)
from support import SEEDS
from vlmcrafter import crafter as vc

ENV_ID = "vlmcrafter/Crafter-v1"


class ReplayBuffer:
    """CleanRL dqn_atari.py's use of SB3's ReplayBuffer, reduced to what it stores: `add(obs,
    next_obs, actions, rewards, dones, infos)` keeps the arrays it is given (SB3 copies into its
    storage; a buffer that keeps references, as many hand-written ones do, is the harder case)."""

    def __init__(self):
        self.obs, self.next_obs = [], []

    def add(self, obs, next_obs, actions, rewards, dones, infos):
        self.obs.append(obs)
        self.next_obs.append(next_obs)


def dqn_loop(env, steps, seed):
    """CleanRL's loop: `rb.add(obs, real_next_obs, ...)`, then `obs = next_obs`."""
    rb = ReplayBuffer()
    truth = []  # the frames each step returned, copied at once
    obs, _ = env.reset(seed=seed)
    truth.append(obs.copy())
    rng = np.random.RandomState(seed % 2 ** 32)
    for _ in range(steps):
        actions = rng.randint(0, 17, size=env.num_envs)
        next_obs, rewards, terminations, truncations, infos = env.step(actions)
        truth.append(next_obs.copy())
        rb.add(obs, next_obs, actions, rewards, terminations, infos)
        obs = next_obs
    return rb, truth


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_dqn_buffer_keeps_distinct_obs_and_next_obs(mode):
    env = gymnasium.make_vec(ENV_ID, num_envs=4, autoreset_mode=mode)
    assert env.unwrapped.copy is True  # gymnasium's default
    rb, truth = dqn_loop(env, 60, SEEDS[0])
    same = 0
    for t, (o, no) in enumerate(zip(rb.obs, rb.next_obs)):
        assert o.tobytes() == truth[t].tobytes(), f"stored obs {t} changed after it was stored"
        assert no.tobytes() == truth[t + 1].tobytes(), f"stored next_obs {t} changed"
        same += o.tobytes() == no.tobytes()
    assert same < len(rb.obs) // 2  # moving, the frames differ (a noop facing a wall may not)
    assert all(o is not env.unwrapped.obs for o in rb.obs)


def test_copy_false_returns_the_one_frame_buffer():
    env = gymnasium.make_vec(ENV_ID, num_envs=3, copy=False)
    rb, truth = dqn_loop(env, 20, SEEDS[1])
    buffer = env.unwrapped.obs
    assert all(o is buffer for o in rb.obs + rb.next_obs)  # what the docs warn about
    assert buffer.tobytes() == truth[-1].tobytes()
    # The same frames as the copying env, step for step.
    _, truth_copy = dqn_loop(gymnasium.make_vec(ENV_ID, num_envs=3), 20, SEEDS[1])
    assert [t.tobytes() for t in truth] == [t.tobytes() for t in truth_copy]


def test_copy_masked_reset_keeps_the_other_frames():
    env = vc.VectorEnv(3, seed=SEEDS[2], autoreset_mode="DISABLED", length=5)
    obs, _ = env.reset()
    for _ in range(5):
        before = obs
        obs, _, term, trunc, _ = env.step(np.ones(3, dtype=np.int64))
        assert obs is not before
    mask = np.array([True, False, True])
    again, infos = env.reset(options={"reset_mask": mask})
    assert again is not obs and again[1].tobytes() == obs[1].tobytes()
    assert infos["_reward"].tolist() == mask.tolist()


@pytest.mark.parametrize("value", [None, 1, 0, "yes", "False", [True]])
def test_copy_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"copy=.*True or False"):
        vc.VectorEnv(2, copy=value)
    with pytest.raises(TypeError, match=r"copy=.*True or False"):
        gymnasium.make_vec(ENV_ID, num_envs=2, copy=value)
