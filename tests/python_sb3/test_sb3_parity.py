"""vlmcrafter.sb3.CrafterVecEnv against SB3's own DummyVecEnv over the gymnasium single env
(`gymnasium.make("vlmcrafter/Crafter-v1")`), step for step on the same seeds and actions: obs,
rewards, dones, infos (terminal_observation, TimeLimit.truncated), reset_infos, and SB3's vector
wrappers on top of each.

The oracle is SB3 2.9.2's DummyVecEnv (stable_baselines3/common/vec_env/dummy_vec_env.py), whose
step_wait defines SB3's VecEnv semantics: `dones = terminated or truncated`,
`info["TimeLimit.truncated"] = truncated and not terminated`, on done the reset obs in `obs`
and the last one in `info["terminal_observation"]`; reset() seeds from `_seeds` once
(base_vec_env.py's `seed()`: env i gets seed + i).

SB3's own tests/test_vec_envs.py (in its sdist) builds every VecEnv from `env_fns` of its toy
envs and asserts on those envs' attributes, so none of its tests is generic over a VecEnv; the
checks here follow them (test_vecenv_terminal_obs, test_vec_deterministic, test_vec_seeding) with
DummyVecEnv as the oracle instead.
"""
import functools

import gymnasium
import numpy as np
import pytest
from stable_baselines3.common.vec_env import (DummyVecEnv, VecFrameStack, VecMonitor, VecNormalize,
                                              VecTransposeImage)

import vlmcrafter  # noqa: F401  (registers the id)
from vlmcrafter.sb3 import CrafterVecEnv

ID = "vlmcrafter/Crafter-v1"


def dummy(n, textures, **kwargs):
    return DummyVecEnv([functools.partial(gymnasium.make, ID, textures=textures, **kwargs) for _ in range(n)])


def assert_same(ref, ours, where):
    """Same type (ndarray: dtype, shape, bytes), same value, dict keys in the same order."""
    if isinstance(ref, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{where}: {type(ours).__name__}, DummyVecEnv an ndarray"
        assert (ours.dtype, ours.shape) == (ref.dtype, ref.shape), (
            f"{where}: {ours.dtype}{ours.shape}, DummyVecEnv {ref.dtype}{ref.shape}")
        assert ours.tobytes() == ref.tobytes(), f"{where}: values differ"
        return
    assert type(ours) is type(ref), f"{where}: {type(ours).__name__}, DummyVecEnv {type(ref).__name__}"
    if isinstance(ref, dict):
        assert list(ours) == list(ref), f"{where}: keys {list(ours)}, DummyVecEnv {list(ref)}"
        for k in ref:
            assert_same(ref[k], ours[k], f"{where}[{k!r}]")
    elif isinstance(ref, (list, tuple)):
        assert len(ours) == len(ref), f"{where}: {len(ours)} items, DummyVecEnv {len(ref)}"
        for i, (a, b) in enumerate(zip(ref, ours)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == ref, f"{where}: {ours!r}, DummyVecEnv {ref!r}"


def step_both(ref, ours, actions, where, drop=()):
    """One step of both; asserts the same (obs, rewards, dones, infos); returns them."""
    got_ref, got = ref.step(actions), ours.step(actions)
    for name, a, b in zip(("obs", "rewards", "dones"), got_ref[:3], got[:3]):
        assert_same(a, b, f"{where}: {name}")
    infos_ref = [{k: v for k, v in info.items() if k not in drop} for info in got_ref[3]]
    infos = [{k: v for k, v in info.items() if k not in drop} for info in got[3]]
    assert_same(infos_ref, infos, f"{where}: infos")
    return got_ref, got


@pytest.mark.parametrize("extra", [{"semantic": True}, {"obs_text": "state", "semantic": True}])
def test_step_for_step_against_dummy_vec_env(textures, extra):
    """Every return and info, deaths (terminated) and time limits (truncated) both seen, then
    `seed()` + `reset()` and a plain `reset()` in the middle of episodes."""
    n, length = 6, 120
    single = {k: v for k, v in extra.items() if k != "semantic"}  # the single env always has it
    ref = dummy(n, textures, length=length, **single)
    ours = CrafterVecEnv(n, seed=11, length=length, textures=textures, **extra)
    ref.seed(11)
    assert_same(ref.reset(), ours.reset(), "reset obs")
    assert_same(ref.reset_infos, ours.reset_infos, "reset_infos")
    rng = np.random.RandomState(3)
    seen = {"terminated": 0, "truncated": 0}
    for t in range(700):
        if t == 400:  # SB3: seeds apply at the next reset only (base_vec_env.py seed())
            assert ref.seed(5) == ours.seed(5) == [5 + i for i in range(n)]
        if t in (400, 550):
            assert_same(ref.reset(), ours.reset(), f"reset at step {t}")
            assert_same(ref.reset_infos, ours.reset_infos, f"reset_infos at step {t}")
        _, (_, _, dones, infos) = step_both(ref, ours, rng.randint(0, 17, size=n), f"step {t}")
        for i in np.flatnonzero(dones):
            assert "terminal_observation" in infos[i]
            seen["truncated" if infos[i]["TimeLimit.truncated"] else "terminated"] += 1
        assert_same(ref.reset_infos, ours.reset_infos, f"reset_infos after step {t}")
    assert seen["terminated"] > 0 and seen["truncated"] > 0, seen
    ref.close()
    ours.close()


def test_terminal_observation_is_the_last_frame_and_obs_the_reset_frame(textures):
    """test_vecenv_terminal_obs's check with crafter's own frames as the oracle: on done,
    `terminal_observation` is the frame the single env returned on its last step and `obs[i]`
    is the next episode's first frame (crafter's reset of that seed's next episode)."""
    from vlmcrafter import crafter

    n, length = 3, 25
    ours = CrafterVecEnv(n, seed=40, length=length, textures=textures)
    refs = [crafter.Env(seed=40 + i, length=length, textures=textures) for i in range(n)]
    obs = ours.reset()
    for i, env in enumerate(refs):
        assert env.reset().tobytes() == obs[i].tobytes()
    rng = np.random.RandomState(9)
    ended = 0
    for t in range(80):
        actions = rng.randint(0, 17, size=n)
        obs, _, dones, infos = ours.step(actions)
        for i, env in enumerate(refs):
            frame, _, done, _ = env.step(int(actions[i]))
            assert bool(dones[i]) == done, (t, i)
            if done:
                ended += 1
                assert infos[i]["terminal_observation"].tobytes() == frame.tobytes(), (t, i)
                assert env.reset().tobytes() == obs[i].tobytes(), (t, i)
            else:
                assert "terminal_observation" not in infos[i]
                assert frame.tobytes() == obs[i].tobytes(), (t, i)
    assert ended >= 3 * n, ended
    ours.close()


def wrap(venv, name):
    if name == "monitor":
        return VecMonitor(venv)
    if name == "frame_stack":
        return VecFrameStack(venv, n_stack=3)
    if name == "transpose":
        return VecTransposeImage(venv)
    if name == "normalize":
        return VecNormalize(venv, norm_obs=True, norm_reward=True, gamma=0.99)
    if name == "all":  # what PPO("CnnPolicy") builds on a monitored, stacked env
        return VecTransposeImage(VecFrameStack(VecMonitor(venv), n_stack=2))
    raise ValueError(name)


@pytest.mark.parametrize("wrapper", ["monitor", "frame_stack", "transpose", "normalize", "all"])
def test_sb3_wrappers_on_top_see_the_same(textures, wrapper):
    """SB3's vector wrappers over the adapter give exactly what they give over DummyVecEnv:
    VecMonitor's episode returns and lengths (its wall-clock `t` aside), VecFrameStack's stacks
    and terminal_observation, VecTransposeImage's CHW frames, VecNormalize's running
    normalisation."""
    n, length = 4, 60
    ref = wrap(dummy(n, textures, length=length), wrapper)
    ours = wrap(CrafterVecEnv(n, length=length, textures=textures), wrapper)
    ref.seed(21)
    ours.seed(21)
    assert_same(ref.reset(), ours.reset(), "reset obs")
    rng = np.random.RandomState(4)
    episodes = 0
    for t in range(200):
        got_ref, got = step_both(ref, ours, rng.randint(0, 17, size=n), f"{wrapper}, step {t}",
                                 drop=("episode", "semantic"))
        if wrapper in ("monitor", "all"):
            for i in np.flatnonzero(got[2]):
                episodes += 1
                a, b = got_ref[3][i]["episode"], got[3][i]["episode"]
                assert (a["r"], a["l"]) == (b["r"], b["l"]), (t, i, a, b)
    if wrapper in ("monitor", "all"):
        assert episodes > 0
    ref.close()
    ours.close()


def test_crafter_info_false_keeps_only_sb3s_keys(textures):
    """`crafter_info=False`: the same obs, rewards and dones, and in `infos` only SB3's own keys
    (`TimeLimit.truncated`, and on done `terminal_observation`), equal to DummyVecEnv's."""
    n, length = 4, 50
    ref = dummy(n, textures, length=length)
    ours = CrafterVecEnv(n, seed=2, length=length, textures=textures, crafter_info=False)
    ref.seed(2)
    assert_same(ref.reset(), ours.reset(), "reset obs")
    assert ours.reset_infos == [{}] * n
    rng = np.random.RandomState(6)
    sb3_keys = ("TimeLimit.truncated", "terminal_observation")
    ended = 0
    for t in range(150):
        actions = rng.randint(0, 17, size=n)
        got_ref, got = ref.step(actions), ours.step(actions)
        for name, a, b in zip(("obs", "rewards", "dones"), got_ref[:3], got[:3]):
            assert_same(a, b, f"step {t}: {name}")
        want = [{k: v for k, v in info.items() if k in sb3_keys} for info in got_ref[3]]
        assert_same(want, got[3], f"step {t}: infos")
        ended += int(got[2].sum())
    assert ended > 0 and ours.reset_infos == [{}] * n
