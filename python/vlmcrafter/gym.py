"""Crafter as a gymnasium (>= 1.0) env: ``gymnasium.make("vlmcrafter/Crafter-v1")``.

Registered when ``vlmcrafter`` is imported with gymnasium installed. ``step`` returns gymnasium's
5-tuple: ``terminated`` when the player dies (crafter's discount 0), ``truncated`` when
``length`` steps are reached alive. ``info`` carries crafter's info keys (on ``reset`` too),
plus ``info["text"]`` with ``obs_text="state"`` or ``"balrog"``.

Seeding: ``reset(seed=s)`` starts a new env sequence with crafter's seed ``s``; its episodes
are crafter's episodes 1, 2, ... of that seed, so ``reset(seed=s)`` always gives the same first
frame, and plain ``reset()`` continues the sequence. The first ``reset()`` without a seed draws
one from the env's ``np_random`` (gymnasium's generator, itself seeded by the first seeded reset
or from entropy).
"""

import copy

import gymnasium
import numpy as np
from gymnasium import spaces

from . import crafter as _crafter

__all__ = ["CrafterEnv", "CrafterState"]

_TEXT_FORMATS = (None, "state", "balrog")


class CrafterEnv(gymnasium.Env):
    """Crafter with gymnasium's API.

    Args:
        area, view, size, reward, length: as for :class:`vlmcrafter.crafter.Env`.
        obs_text: None, ``"state"`` or ``"balrog"``: add that text observation as
            ``info["text"]``.
        render_mode: None or ``"rgb_array"`` (``render()`` returns the current frame).
        textures, fetch: as for :class:`vlmcrafter.crafter.Env`.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        area=(64, 64),
        view=(9, 9),
        size=(64, 64),
        reward=True,
        length=10000,
        obs_text=None,
        render_mode=None,
        *,
        textures=None,
        fetch=True,
    ):
        if obs_text not in _TEXT_FORMATS:
            raise ValueError(f"obs_text={obs_text!r}: use None, 'state' or 'balrog'")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r}: use None or 'rgb_array'")
        self._kwargs = dict(area=area, view=view, size=size, reward=reward, length=length, textures=textures, fetch=fetch)
        self.obs_text = obs_text
        self.render_mode = render_mode
        # Checks the arguments now, and holds the env until the first reset.
        self._env = _crafter.Env(seed=0, **self._kwargs)
        self._seeded = False
        width, height = (int(v) for v in self._env._size)
        self.observation_space = spaces.Box(0, 255, (height, width, 3), np.uint8)
        self.action_space = spaces.Discrete(len(_crafter.ACTION_NAMES))
        self._frame = None
        self._closed = False

    def _open(self, call):
        if self._closed:
            raise RuntimeError(f"{call} on a closed CrafterEnv: close() ended it; make a new env (gymnasium.make)")

    def reset(self, *, seed=None, options=None):
        """Start an episode: ``(obs, info)``; ``seed`` starts crafter's episode 1 of that seed."""
        self._open("reset()")
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            crafter_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
            self._env = _crafter.Env(seed=crafter_seed, **self._kwargs)
            self._seeded = True
        obs = self._env.reset()
        self._frame = obs
        info = self._reset_info()
        return obs, info

    def _reset_info(self):
        core = self._env._core
        return self._with_text(
            {
                "inventory": dict(zip(_crafter.ITEM_NAMES, [9, 9, 9, 9] + [0] * 12)),
                "achievements": dict.fromkeys(_crafter.ACHIEVEMENT_NAMES, 0),
                "discount": 1.0,
                "semantic": core.semantic(),
                "player_pos": np.array([int(v) // 2 for v in self._env._area], dtype=np.int64),
                "reward": 0.0,
            }
        )

    def _with_text(self, info):
        if self.obs_text is not None:
            info["text"] = self._env.text(self.obs_text)
        return info

    def step(self, action):
        """Apply ``action``: ``(obs, reward, terminated, truncated, info)``."""
        self._open("step()")
        obs, reward, done, info = self._env.step(action)
        self._frame = obs
        terminated = info["discount"] == 0.0
        truncated = bool(done) and not terminated
        return obs, float(reward), terminated, truncated, self._with_text(info)

    def render(self):
        """The current frame (``render_mode="rgb_array"``); None without a render mode."""
        self._open("render()")
        if self.render_mode is None:
            gymnasium.logger.warn("render() without render_mode: pass render_mode='rgb_array' to make()")
            return None
        return self._frame

    def text(self, fmt="state"):
        """The text observation of the current state (``"state"`` or ``"balrog"``)."""
        self._open("text()")
        return self._env.text(fmt)

    def close(self):
        """Close the env: every later ``reset``, ``step``, ``text`` or state call raises a
        RuntimeError saying it is closed (``close`` again does nothing)."""
        self._closed = True

    def get_state(self):
        """The env's current state, for ``set_state`` (planners, tree search): the crafter
        state (:meth:`vlmcrafter.crafter.Env.get_state`), the current frame and gymnasium's
        ``np_random``. Deep-copyable and picklable."""
        self._open("get_state()")
        frame = None if self._frame is None else self._frame.copy()
        return CrafterState(self._env.get_state(), frame, self._seeded, copy.deepcopy(self.np_random))

    def set_state(self, state):
        """Continue from ``state`` (``get_state()`` of a CrafterEnv made with the same
        arguments); another configuration's state is a ValueError, and this env is unchanged."""
        self._open("set_state()")
        if not isinstance(state, CrafterState):
            raise TypeError(f"set_state takes a CrafterState (from get_state()), not {type(state).__name__}")
        self._env.set_state(state.env)
        self._frame = None if state.frame is None else state.frame.copy()
        self._seeded = state.seeded
        self.np_random = copy.deepcopy(state.np_random)


class CrafterState:
    """A snapshot of a :class:`CrafterEnv` (``get_state()``): ``env`` (the crafter
    :class:`~vlmcrafter.crafter.EnvState`), ``frame`` (the current observation), ``seeded`` and
    ``np_random`` (gymnasium's generator, which draws the seed of an unseeded ``reset``)."""

    def __init__(self, env, frame, seeded, np_random):
        self.env = env
        self.frame = frame
        self.seeded = seeded
        self.np_random = np_random

    def __repr__(self):
        return f"vlmcrafter.gym.CrafterState({self.env!r})"
