"""vlmcrafter.sb3.CrafterVecEnv's SB3 API beside SB3's DummyVecEnv over the single env: render,
get_attr/set_attr/env_method/env_is_wrapped with indices, seed() and set_options (each used at
the next reset only), the errors, the optional import, and SB3's PPO taking the env.

The behaviours and where SB3 2.9.2 defines them: base_vec_env.py (`VecEnv.seed`: seed + i,
next reset only; `set_options`; `render` tiling `get_images()`, its warning for another mode),
dummy_vec_env.py (`get_attr` through `get_wrapper_attr`, `set_attr` on each env's outermost
wrapper, indices as `[envs[i] for i in indices]`, so negative indices count from the end), and
tests/test_vec_envs.py (test_vecenv_custom_calls, test_vec_deterministic, test_vec_seeding),
whose checks these follow with DummyVecEnv as the oracle.
"""
import functools
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize, VecTransposeImage

import vlmcrafter  # noqa: F401  (registers the id)
from vlmcrafter.sb3 import CrafterVecEnv
from vlmcrafter.vector import VectorEnv

ID = "vlmcrafter/Crafter-v1"


def dummy(n, textures, **kwargs):
    return DummyVecEnv([functools.partial(gymnasium.make, ID, textures=textures, **kwargs) for _ in range(n)])


def both(n, textures, seed=0, **kwargs):
    ref, ours = dummy(n, textures, **kwargs), CrafterVecEnv(n, textures=textures, **kwargs)
    ref.seed(seed)
    ours.seed(seed)
    assert ref.reset().tobytes() == ours.reset().tobytes()
    return ref, ours


def test_render_and_metadata_as_dummy_vec_env(textures):
    ref, ours = both(3, textures, render_mode="rgb_array")
    assert ours.render_mode == ref.render_mode == "rgb_array"
    assert ours.metadata == ref.metadata
    tiled = ours.render()
    assert tiled.shape == (128, 128, 3) and tiled.tobytes() == ref.render().tobytes()
    assert ours.render(mode="rgb_array").tobytes() == tiled.tobytes()
    with pytest.warns(UserWarning):
        assert ours.render(mode="something_else") is None
    frames = ours.get_images()
    assert [f.tobytes() for f in frames] == [f.tobytes() for f in ref.get_images()]
    plain = CrafterVecEnv(2, textures=textures)
    plain.reset()
    with pytest.warns(UserWarning):
        assert plain.render() is None
    assert plain.render_mode is None


def test_get_attr_set_attr_env_method_with_indices(textures):
    """test_vecenv_custom_calls's checks, on both envs."""
    n = 3
    ref, ours = both(n, textures, render_mode="rgb_array")
    for env in (ref, ours):
        env.step(np.array([1, 5, 3]))
    for name in ("render_mode", "observation_space", "action_space"):
        assert ours.get_attr(name) == ref.get_attr(name), name
    assert ours.get_attr("render_mode", indices=[0, 2]) == ref.get_attr("render_mode", indices=[0, 2])
    for env in (ref, ours):
        assert not env.has_attr("dummy")
        assert env.set_attr("dummy", 12) is None
        assert env.get_attr("dummy") == [12] * n
        assert env.has_attr("dummy")
        assert [env.set_attr("dummy1", i, indices=i) for i in range(n)] == [None] * n
        assert env.get_attr("dummy1") == list(range(n))
        assert env.get_attr("dummy1", indices=[0, -1]) == [0, n - 1]
        assert env.get_attr("dummy1", indices=[-1]) == [n - 1]
        env.set_attr("dummy1", 42, indices=None)
        assert env.get_attr("dummy1") == [42] * n
        with pytest.raises(AttributeError):
            env.get_attr("no_such_attribute")
        with pytest.raises(AttributeError):
            env.env_method("no_such_method")
        with pytest.raises(IndexError):
            env.get_attr("render_mode", indices=[n])
    assert ours.env_method("text", "state", indices=[0, 2]) == ref.env_method("text", "state", indices=[0, 2])
    assert ours.env_method("text", fmt="balrog") == ref.env_method("text", fmt="balrog")
    got, want = ours.env_method("render", indices=[1]), ref.env_method("render", indices=[1])
    assert len(got) == 1 and got[0].tobytes() == want[0].tobytes()
    assert ours.env_is_wrapped(Monitor) == ref.env_is_wrapped(Monitor) == [False] * n
    assert ours.env_is_wrapped(Monitor, indices=[0, 1]) == [False, False]
    with pytest.raises(AttributeError, match="read-only"):
        ours.set_attr("render_mode", "human")
    with pytest.raises(TypeError, match="get_attr"):
        ours.env_method("observation_space")
    # A wrapper passes all of this through (VecEnvWrapper's get_attr/env_method).
    assert VecMonitor(ours).get_attr("dummy1", indices=[1]) == [42]


def test_seed_and_options_apply_at_the_next_reset_only(textures):
    """test_vec_deterministic and test_vec_seeding's checks, and set_options (taken by the next
    reset, then cleared; the single env ignores reset options, so the episodes are the same)."""
    n = 3
    ref, ours = both(n, textures, seed=3)
    assert ours._seeds == [None] * n  # SB3: used once
    for env in (ref, ours):
        env.seed(3)
    first = ours.reset()
    ours.seed(3)
    assert ours.reset().tobytes() == first.tobytes()
    ref.seed(3)
    assert ref.reset().tobytes() == first.tobytes()
    # Through VecNormalize (VecEnvWrapper.seed calls venv.seed).
    norm = VecNormalize(ours)
    norm.seed(3)
    assert ours.reset().tobytes() == first.tobytes()
    # No seed given: each env still gets its own (base_vec_env.py draws one, + i).
    seeds = ours.seed()
    assert seeds == [seeds[0] + i for i in range(n)]
    obs = ours.reset()
    # Different worlds (the first frames may match: crafter makes grass around the spawn).
    worlds = {ours.vector_env.semantic_map(i).tobytes() for i in range(n)}
    assert len(worlds) == n
    # A plain reset goes on: the next episode of the same seeds, as the single env.
    ref.seed(seeds[0])
    assert ref.reset().tobytes() == obs.tobytes()
    assert ref.reset().tobytes() == ours.reset().tobytes()
    for env in (ref, ours):
        env.set_options({"hello": 1})
        assert env._options == [{"hello": 1}] * n
    assert ref.reset().tobytes() == ours.reset().tobytes()
    assert ours._options == [{}] * n
    ours.set_options([{"a": i} for i in range(n)])
    assert ours._options == [{"a": i} for i in range(n)]
    ours.reset()
    assert ours._options == [{}] * n


def test_errors(textures):
    with pytest.raises(ValueError, match="SAME_STEP"):
        CrafterVecEnv(2, autoreset_mode="NEXT_STEP", textures=textures)
    with pytest.raises(TypeError, match="seed"):
        CrafterVecEnv(2, seed="1", textures=textures)
    with pytest.raises(ValueError, match="seed"):
        CrafterVecEnv(2, seed=-1, textures=textures)
    env = CrafterVecEnv(2, textures=textures)
    env.reset()
    with pytest.raises(RuntimeError, match="step_async"):
        env.step_wait()
    with pytest.raises(ValueError, match="out of range"):
        env.step(np.array([0, 17]))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.array([0, 1, 2]))
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.array([0, 1]))
    with pytest.raises(ValueError, match="SAME_STEP"):
        CrafterVecEnv.from_vector_env(VectorEnv(2, textures=textures))
    with pytest.raises(ValueError, match="copy"):
        CrafterVecEnv(2, copy=False, textures=textures)
    with pytest.raises(TypeError, match="crafter_info"):
        CrafterVecEnv(2, crafter_info="no", textures=textures)
    with pytest.raises(ValueError, match="copy=False"):
        CrafterVecEnv.from_vector_env(VectorEnv(2, autoreset_mode="SAME_STEP", copy=False, textures=textures))
    with pytest.raises(TypeError, match="native VectorEnv"):
        CrafterVecEnv.from_vector_env(dummy(1, textures))


def test_from_vector_env_plays_the_native_envs_seeds(textures):
    native = gymnasium.make_vec(ID, num_envs=2, autoreset_mode="SAME_STEP", seed=8, textures=textures)
    ours = CrafterVecEnv.from_vector_env(native)
    assert ours.vector_env is native and ours.num_envs == 2
    ref = dummy(2, textures)
    ref.seed(8)
    assert ours.reset().tobytes() == ref.reset().tobytes()
    ours.close()
    assert native.closed


def test_the_module_imports_stable_baselines3_only_itself():
    """`import vlmcrafter` never imports SB3; without SB3, `import vlmcrafter.sb3` is one
    ImportError naming the pip command."""
    code = r"""
import importlib.abc, sys
import vlmcrafter, vlmcrafter.vector, vlmcrafter.gym
assert "stable_baselines3" not in sys.modules, "import vlmcrafter imported stable_baselines3"
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "stable_baselines3":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
try:
    import vlmcrafter.sb3
except ImportError as e:
    print(type(e).__name__, e)
else:
    print("imported")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ImportError vlmcrafter.sb3 needs Stable-Baselines3"), out.stdout
    assert "pip install stable-baselines3" in out.stdout


def test_ppo_cnn_policy_takes_the_hwc_frames(textures):
    """PPO("CnnPolicy") wraps the adapter's HWC uint8 frames in VecTransposeImage itself, as it
    does for DummyVecEnv of the single env, learns, predicts on HWC frames, and
    evaluate_policy reads VecMonitor's episodes."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    env = VecMonitor(CrafterVecEnv(2, seed=0, length=40, textures=textures))
    model = PPO("CnnPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    ref = PPO("CnnPolicy", dummy(2, textures, length=40), n_steps=32, batch_size=32, n_epochs=1,
              seed=0, device="cpu")
    for m in (model, ref):
        assert isinstance(m.get_env(), VecTransposeImage)
        assert m.observation_space.shape == (3, 64, 64)
    model.learn(128)
    assert model.num_timesteps == 128
    assert len(model.ep_info_buffer) >= 2  # 40-step episodes ended and were logged
    actions, _ = model.predict(env.reset(), deterministic=True)
    assert actions.shape == (2,) and all(0 <= a < 17 for a in actions)
    mean, std = evaluate_policy(model, env, n_eval_episodes=2)
    assert np.isfinite(mean) and np.isfinite(std)
