"""A drop-in for ``crafter`` 1.8.3's ``Env``, plus a vectorised env.

``from vlmcrafter import crafter`` instead of ``import crafter``: ``crafter.Env`` takes the same
arguments and gives, for the same seed and actions, the same frames byte for byte, the same
rewards and the same ``info`` as crafter 1.8.3, hundreds of times faster (the engine is a Rust
twin of crafter's). The one documented difference from stock crafter: chunk balancing picks
despawn candidates in creation order (stock crafter iterates a Python set there, so it is not
reproducible even against itself).

Frames use crafter's own textures: ``textures=`` names crafter's ``assets`` folder; by default
they are found as the ``vlm-eval`` CLI finds them ($CRAFTER_ASSETS, an installed ``crafter``
package, the per-user cache) or, with ``fetch=True``, downloaded once into the cache (``pip
download crafter==1.8.3``, every file checked against its sha256). ``textures="builtin"`` uses
vlm-eval's own sprites (frames then differ from crafter's).
"""

import math
import numbers
import os

import numpy as np

from . import _native
from ._spaces import BaseClass, BoxSpace, DiscreteSpace, multi_discrete, next_step_mode
from .recorder import Recorder

__all__ = ["Env", "VectorEnv", "Recorder", "ACTION_NAMES", "ITEM_NAMES", "ACHIEVEMENT_NAMES"]

#: crafter's action names, by id (0..16).
ACTION_NAMES = tuple(_native.ACTION_NAMES)
#: Inventory item names in crafter's order (the keys of ``info["inventory"]``).
ITEM_NAMES = tuple(_native.ITEM_NAMES)
#: Achievement names in crafter's order (the keys of ``info["achievements"]``).
ACHIEVEMENT_NAMES = tuple(_native.ACHIEVEMENT_NAMES)

_HINT = []


def _crafter_assets_hint():
    """The assets folder of a ``crafter`` package this interpreter can import, found without
    importing it (None when there is none)."""
    if not _HINT:
        folder = None
        try:
            import importlib.util

            spec = importlib.util.find_spec("crafter")
            for loc in (spec.submodule_search_locations or []) if spec else []:
                if os.path.isdir(os.path.join(loc, "assets")):
                    folder = os.path.join(loc, "assets")
                    break
        except (ImportError, ValueError):
            folder = None
        _HINT.append(folder)
    return _HINT[0]


def _pair(name, value, scalar_ok):
    """``value`` as a pair of ints; an int gives ``(value, value)`` where crafter allows it."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a pair of ints (width, height), not {type(value).__name__}")
    if scalar_ok and not hasattr(value, "__len__"):
        value = (value, value)
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{name} must be a pair of ints (width, height), not {type(value).__name__}") from None
    if len(items) != 2:
        raise ValueError(f"{name} must have 2 values (width, height), got {len(items)}")
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
            raise TypeError(f"{name} must hold ints, got {type(v).__name__} in {value!r}")
        out.append(int(v))
    if out[0] <= 0 or out[1] <= 0:
        raise ValueError(f"{name}={tuple(out)}: both sides must be positive")
    return tuple(out)


def _length(length):
    """crafter's ``length`` rule as the engine's: falsy means unlimited (None); any other value
    ends the episode once the step count reaches it (so a negative one ends it at step 1)."""
    if not length:
        return None
    if not isinstance(length, (numbers.Real, np.number)) or isinstance(length, complex):
        raise TypeError(f"length must be an int or None, not {type(length).__name__}")
    steps = math.ceil(length)
    if steps <= 0:
        return 1
    return None if steps >= 2**32 else steps


def _draw_seed():
    # Exactly crafter's draw, from numpy's global RNG (np.random.seed makes it reproducible).
    return np.random.randint(0, 2**31 - 1)


def _engine_seed(seed):
    # crafter's world seed is hash((seed, episode)) % (2**31 - 1); a tuple hashes its items'
    # hashes, so hash(seed) stands in for any hashable seed (ints of any size, numpy ints...).
    try:
        return hash(seed)
    except TypeError:
        raise TypeError(f"seed must be an int (or None), not {type(seed).__name__}") from None


def _textures_arg(textures):
    if textures is None:
        return None
    return os.fspath(textures)


class Env(BaseClass):
    """crafter 1.8.3's ``Env``, natively: same constructor, seeding, frames, rewards and info.

    Args:
        area: world size in tiles (width, height).
        view: view in tiles (columns, rows; an int for both), inventory rows included.
        size: frame size in pixels (width, height; an int for both); each side at least the view.
        reward: when False, ``step`` returns reward 0.0 (``info["reward"]`` keeps the real one).
        length: episode length in steps; None or 0 for unlimited.
        seed: env seed; episode ``e`` (1, 2, ... per ``reset``) plays world seed
            ``hash((seed, e)) % (2**31 - 1)`` as in crafter. None draws one from numpy's global
            RNG exactly as crafter does.
        textures: crafter's ``assets`` folder, ``"builtin"`` for vlm-eval's own sprites, or None
            to find crafter's (see the module doc).
        fetch: with ``textures=None``, download crafter's textures once when they are nowhere
            on this machine; when False (or the download fails) a missing set is a RuntimeError.

    ``step`` after ``done`` does what crafter does: the same episode goes on (a dead player
    stays dead, ``done`` stays True); call ``reset`` to start the next one. Where crafter's
    ``done`` would be ``None`` or ``0`` (no length limit, not dead) this returns ``False``.

    Pickling keeps the constructor arguments, the seed (a drawn one too) and the episode count;
    not the world: an unpickled env needs ``reset()``, which starts the episode the original's
    next ``reset()`` would have started.
    """

    def __init__(
        self,
        area=(64, 64),
        view=(9, 9),
        size=(64, 64),
        reward=True,
        length=10000,
        seed=None,
        *,
        textures=None,
        fetch=True,
    ):
        seed = _draw_seed() if seed is None else seed
        self._area = area
        self._view = np.array(_pair("view", view, True))
        self._size = np.array(_pair("size", size, True))
        self._reward = reward
        self._length = length
        self._seed = seed
        self._textures = textures
        self._fetch = bool(fetch)
        self._core = _native.Env(
            _pair("area", area, False),
            tuple(int(v) for v in self._view),
            tuple(int(v) for v in self._size),
            bool(reward),
            _length(length),
            _engine_seed(seed),
            _textures_arg(textures),
            _crafter_assets_hint() if textures is None else None,
            self._fetch,
        )
        # Some libraries expect these attributes to be set (as crafter sets them).
        self.reward_range = None
        self.metadata = None

    @property
    def observation_space(self):
        """``Box(0, 255, (size[0], size[1], 3), uint8)``, shaped as crafter declares it."""
        return BoxSpace(0, 255, tuple(int(v) for v in self._size) + (3,), np.uint8)

    @property
    def action_space(self):
        """``Discrete(17)``."""
        return DiscreteSpace(len(ACTION_NAMES))

    @property
    def action_names(self):
        """crafter's action names, by id."""
        return list(ACTION_NAMES)

    def reset(self):
        """Start the next episode; returns its first frame, uint8 ``(H, W, 3)``."""
        return self._core.reset()

    def step(self, action):
        """Apply ``action`` (an int 0..16); returns ``(obs, reward, done, info)``.

        ``info`` holds crafter's keys and types: ``inventory`` and ``achievements`` (dicts of
        ints), ``discount`` (float, 0.0 once dead), ``semantic`` (uint8 ``area``-shaped map,
        [x][y]), ``player_pos`` (int64 ``(2,)``) and ``reward`` (float).
        """
        return self._core.step(action)

    def render(self, size=None):
        """The current frame, re-rendered (at night this draws the game RNG, as crafter does),
        at the env's size or at ``size`` (width, height)."""
        if size is None or (hasattr(size, "__len__") and len(size) == 0):
            return self._core.render(None)
        return self._core.render(_pair("size", size, True))

    def text(self, fmt="state"):
        """The text observation of the current state that the ``vlm-eval`` CLI sends to models:
        ``"state"`` (vlm-eval's status and map) or ``"balrog"`` (BALROG's text)."""
        return self._core.text(fmt)

    def close(self):
        """Nothing to release (as crafter's gym ``close``); the env stays usable."""

    @property
    def episode(self):
        """Episodes started so far (1 after the first ``reset``)."""
        return self._core.episode

    @property
    def texture_source(self):
        """``"builtin"`` or the folder crafter's textures were read from."""
        return self._core.texture_source

    def _ctor_kwargs(self):
        return dict(
            area=self._area,
            view=tuple(int(v) for v in self._view),
            size=tuple(int(v) for v in self._size),
            reward=self._reward,
            length=self._length,
            seed=self._seed,
            textures=self._textures,
            fetch=self._fetch,
        )

    def __getstate__(self):
        return {"kwargs": self._ctor_kwargs(), "episode": self._core.episode}

    def __setstate__(self, state):
        self.__init__(**state["kwargs"])
        self._core.episode = state["episode"]

    def __repr__(self):
        k = self._ctor_kwargs()
        return (
            f"vlmcrafter.crafter.Env(area={tuple(k['area'])!r}, view={k['view']!r}, size={k['size']!r}, "
            f"reward={k['reward']!r}, length={k['length']!r}, seed={k['seed']!r})"
        )


def _vector_seeds(n, seed):
    if seed is None:
        return [_draw_seed() for _ in range(n)]
    if isinstance(seed, (numbers.Integral, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        return [int(seed) + i for i in range(n)]
    if isinstance(seed, (str, bytes)) or not hasattr(seed, "__len__"):
        raise TypeError(f"seed must be an int, a sequence of n seeds, or None; not {type(seed).__name__}")
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"seed has {len(seeds)} values for n={n} envs: give one per env")
    return [_draw_seed() if s is None else s for s in seeds]


class VectorEnv:
    """``n`` Crafter envs stepped together in native threads, with the GIL released.

    Args:
        n: number of envs (at least 1).
        area, view, size, reward, length, textures, fetch: as for :class:`Env`, shared by all.
        seed: an int (env ``i`` uses ``seed + i``), a sequence of ``n`` seeds (env ``i`` uses
            ``seed[i]``; a None in it is drawn), or None (each env's drawn as crafter draws).
        threads: worker threads, 1..min(n, 256); None uses the available cores (at most n).

    Env ``i`` plays exactly the episodes a single :class:`Env` with its seed plays: the same
    frames, rewards and states byte for byte.

    Frames are written into ONE preallocated uint8 array ``(n, H, W, 3)`` owned by the env:
    ``reset()`` and every ``step()`` return that same array object, overwritten in place (copy
    it to keep a frame). Rewards, flags and infos are fresh arrays each step.

    ``step(actions)`` returns ``(obs, rewards, terminated, truncated, infos)``: ``rewards``
    float32 ``(n,)``, ``terminated`` bool ``(n,)`` (the player died: crafter's discount 0),
    ``truncated`` bool ``(n,)`` (``length`` reached alive), and ``infos`` a dict of arrays:
    ``discount`` float32 ``(n,)``, ``player_pos`` int64 ``(n, 2)``, ``inventory`` int32
    ``(n, 16)`` (columns named by :attr:`inventory_names`) and ``achievements`` int32
    ``(n, 22)`` (columns named by :attr:`achievement_names`).

    Autoreset follows gymnasium 1.x's ``next_step`` mode (``autoreset_mode``): after an env's
    episode ends, its NEXT ``step`` ignores its action, resets it and returns the new episode's
    first frame with reward 0, terminated and truncated False, and the new episode's infos.

    Pickling keeps the constructor arguments, every env's seed and episode count; an unpickled
    vector env needs ``reset()``.
    """

    #: gymnasium 1.x's autoreset mode this env follows.
    autoreset_mode = next_step_mode()
    metadata = {"autoreset_mode": autoreset_mode, "render_modes": []}
    #: Column names of ``infos["inventory"]``.
    inventory_names = ITEM_NAMES
    #: Column names of ``infos["achievements"]``.
    achievement_names = ACHIEVEMENT_NAMES
    #: crafter's action names, by id.
    action_names = ACTION_NAMES

    def __init__(
        self,
        n,
        area=(64, 64),
        view=(9, 9),
        size=(64, 64),
        reward=True,
        length=10000,
        seed=None,
        *,
        threads=None,
        textures=None,
        fetch=True,
    ):
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (numbers.Integral, np.integer)):
            raise TypeError(f"n must be an int (the number of envs), not {type(n).__name__}")
        n = int(n)
        if n <= 0:
            raise ValueError(f"n={n}: a VectorEnv needs at least one env")
        if threads is not None:
            if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (numbers.Integral, np.integer)):
                raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
            threads = int(threads)
        self.num_envs = n
        self._seeds = _vector_seeds(n, seed)
        view_pair = _pair("view", view, True)
        size_pair = _pair("size", size, True)
        self._kwargs = dict(
            area=area,
            view=view_pair,
            size=size_pair,
            reward=reward,
            length=length,
            threads=threads,
            textures=textures,
            fetch=bool(fetch),
        )
        self._core = _native.VectorEnv(
            [_engine_seed(s) for s in self._seeds],
            _pair("area", area, False),
            view_pair,
            size_pair,
            bool(reward),
            _length(length),
            threads,
            _textures_arg(textures),
            _crafter_assets_hint() if textures is None else None,
            bool(fetch),
        )
        self._obs = self._core.obs
        width, height = size_pair
        self.single_observation_space = BoxSpace(0, 255, (height, width, 3), np.uint8)
        self.single_action_space = DiscreteSpace(len(ACTION_NAMES))
        self.observation_space = BoxSpace(0, 255, (n, height, width, 3), np.uint8)
        self.action_space = multi_discrete([len(ACTION_NAMES)] * n)

    @property
    def threads(self):
        """Worker threads stepping the envs."""
        return self._core.threads

    @property
    def seeds(self):
        """Each env's seed."""
        return list(self._seeds)

    @property
    def obs(self):
        """The frame buffer ``(n, H, W, 3)`` (the array ``reset`` and ``step`` return)."""
        return self._obs

    def reset(self):
        """Start every env's next episode; returns the frame buffer ``(n, H, W, 3)``."""
        return self._core.reset()

    def step(self, actions):
        """Step env ``i`` with ``actions[i]`` (ints 0..16, any int array-like of length n);
        returns ``(obs, rewards, terminated, truncated, infos)`` (see the class doc)."""
        a = np.asarray(actions)
        if a.dtype.kind not in "iu":
            raise TypeError(f"actions must be ints 0..16, got an array of {a.dtype}")
        if a.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), one per env; got {a.shape}")
        if a.dtype != np.int64:
            if a.dtype.kind == "u" and a.size and a.max() > 16:
                raise ValueError(f"action {int(a.max())} is out of range: crafter's actions are ids 0..16")
            a = a.astype(np.int64)
        rewards, terminated, truncated, infos = self._core.step(a)
        return self._obs, rewards, terminated, truncated, infos

    def text(self, index, fmt="state"):
        """The text observation (``"state"`` or ``"balrog"``) of env ``index``'s current state."""
        return self._core.text(index, fmt)

    @property
    def episodes(self):
        """Episodes started so far by each env."""
        return self._core.episodes

    def close(self):
        """Stop the worker threads and free the envs; stepping afterwards is a RuntimeError."""
        self._core.close()

    def __len__(self):
        return self.num_envs

    def __getstate__(self):
        return {"n": self.num_envs, "seeds": list(self._seeds), "kwargs": dict(self._kwargs), "episodes": self._core.episodes}

    def __setstate__(self, state):
        self.__init__(state["n"], seed=state["seeds"], **state["kwargs"])
        self._core.episodes = state["episodes"]

    def __repr__(self):
        k = self._kwargs
        return (
            f"vlmcrafter.crafter.VectorEnv({self.num_envs}, area={tuple(k['area'])!r}, view={k['view']!r}, "
            f"size={k['size']!r}, reward={k['reward']!r}, length={k['length']!r}, "
            f"seed={self._seeds[0]!r}..., threads={self.threads})"
        )
