"""A drop-in for ``crafter`` 1.8.3's ``Env``, plus a vectorised env (``VectorEnv``, from
:mod:`vlmcrafter.vector`).

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
from ._spaces import BaseClass, BoxSpace, DiscreteSpace
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


# The vector env lives in vector.py (it needs the helpers above); it is this module's VectorEnv too.
from .vector import VectorEnv  # noqa: E402
