"""The gymnasium env `vlmcrafter/Crafter-v1`: env_checker, parity with Python crafter 1.8.3 through
the 5-tuple API, and the text observation in `info["text"]`.
"""
import json
import os
import pathlib
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import vlmcrafter  # noqa: F401  (registers the env id)
from support import (SEEDS, actions_for, assert_same_frame, assert_same_info,
                     assert_same_value, reference_env)

ENV_ID = "vlmcrafter/Crafter-v1"


def make(**kwargs):
    return gymnasium.make(ENV_ID, **kwargs)


def test_registered_on_import():
    assert ENV_ID in gymnasium.registry


@pytest.mark.parametrize("obs_text", [None, "state", "balrog"])
def test_check_env(obs_text):
    env = make(obs_text=obs_text)
    # check_env wants the bare env; it reports problems as exceptions (and warnings, made
    # errors here so that a warning is not missed).
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)
    env.close()


def test_spaces():
    env = make(size=(96, 80))
    assert env.action_space == gymnasium.spaces.Discrete(17)
    space = env.observation_space
    assert isinstance(space, gymnasium.spaces.Box)
    assert space.shape == (80, 96, 3) and space.dtype == np.uint8
    assert (space.low == 0).all() and (space.high == 255).all()
    obs, _ = env.reset(seed=1)
    assert space.contains(obs)
    env.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_gym_parity(seed):
    """reset(seed=s) starts crafter.Env(seed=s)'s first episode; later plain resets go on with
    crafter's per-reset increment. terminated = death (discount 0), truncated = length."""
    length = 80
    ref = reference_env(seed=seed, length=length)
    env = make(length=length)
    obs, info = env.reset(seed=seed)
    assert isinstance(info, dict)
    assert_same_frame(ref.reset(), obs, f"seed {seed} reset")
    episodes = 1
    for t, action in enumerate(actions_for(seed + 2, 300)):
        here = f"seed {seed} step {t} action {action}"
        r_obs, r_rew, r_done, r_info = ref.step(action)
        obs, reward, terminated, truncated, info = env.step(action)
        assert_same_frame(r_obs, obs, here)
        assert float(reward) == r_rew, f"{here}: reward {reward}, crafter {r_rew}"
        assert type(terminated) is bool and type(truncated) is bool, here
        dead = r_info["discount"] == 0
        assert terminated == (r_done and dead), f"{here}: terminated {terminated}"
        assert truncated == (r_done and not dead), f"{here}: truncated {truncated}"
        for key in r_info:
            assert key in info, f"{here}: info lacks {key!r}"
            assert_same_value(r_info[key], info[key], f"{here}: info[{key!r}]")
        if r_done:
            episodes += 1
            obs, info = env.reset()
            assert_same_frame(ref.reset(), obs, f"seed {seed} reset {episodes}")
    assert episodes >= 4
    # Reseeding restarts the sequence: the first episode's frame again.
    obs, _ = env.reset(seed=seed)
    assert_same_frame(reference_env(seed=seed).reset(), obs, f"seed {seed} reseeded")
    env.close()


def test_render_rgb_array():
    env = make(render_mode="rgb_array", size=(64, 64))
    obs, _ = env.reset(seed=3)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
    assert frame.shape == obs.shape and frame.tobytes() == obs.tobytes()
    env.close()


def cli_binary():
    return pathlib.Path(sys.prefix) / "bin" / "vlm-eval"


@pytest.mark.parametrize("fmt", ["state", "balrog"])
def test_text_matches_cli(fmt):
    """info["text"] is the text the CLI's `env trace --observe` gives for the same state."""
    seed, steps = SEEDS[0], 30
    actions = actions_for(seed, steps)
    env = make(obs_text=fmt)
    obs, info = env.reset(seed=seed)
    ours = [info["text"]]
    for action in actions:
        _, _, terminated, truncated, info = env.step(action)
        ours.append(info["text"])
        assert not (terminated or truncated)
    env.close()
    out = subprocess.run(
        [str(cli_binary()), "env", "trace", "--seed", str(seed), "--steps", str(steps),
         "--actions", ",".join(map(str, actions)), "--observe", fmt,
         "--assets", os.environ["CRAFTER_ASSETS"]],
        capture_output=True, text=True, check=True).stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == steps + 1
    for t, (record, text) in enumerate(zip(records, ours)):
        want = record[fmt]
        if isinstance(want, dict):  # balrog: the long- and short-term context texts
            assert isinstance(text, (dict, str)), f"step {t}: {type(text).__name__}"
            if isinstance(text, dict):
                assert text == want, f"step {t}: {text!r} vs CLI {want!r}"
            else:
                assert all(part in text for part in want.values() if part), f"step {t}"
        else:
            assert text == want, f"step {t}: {text!r}\nCLI: {want!r}"
