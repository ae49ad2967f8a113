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

import copy

import numpy as np

from .. import _native
from .._args import _crafter_assets_hint, _draw_seed, _engine_seed, _length, _pair, _textures_arg
from .._spaces import BaseClass, BoxSpace, DiscreteSpace
from ..recorder import Recorder
from ..vector import VectorEnv
from . import constants

__all__ = ["Env", "EnvState", "VectorEnv", "Recorder", "ACTION_NAMES", "ITEM_NAMES", "ACHIEVEMENT_NAMES", "constants"]

#: crafter's action names, by id (0..16).
ACTION_NAMES = tuple(_native.ACTION_NAMES)
#: Inventory item names in crafter's order (the keys of ``info["inventory"]``).
ITEM_NAMES = tuple(_native.ITEM_NAMES)
#: Achievement names in crafter's order (the keys of ``info["achievements"]``).
ACHIEVEMENT_NAMES = tuple(_native.ACHIEVEMENT_NAMES)

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

    Copies continue the same episode exactly, as crafter's ``copy.deepcopy`` does: ``deepcopy``
    clones the native state (the world, its RNG, the episode and step counts), and ``pickle``
    keeps the constructor arguments, the seed (a drawn one too), the episode count and the
    calls since the last ``reset`` (a byte per step), which it replays on loading (about 0.1 s
    for a 10,000-step episode). ``get_state()``/``set_state()`` do the same in process, for
    planners (see :class:`EnvState`).
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

    def get_state(self):
        """The env's current state (an :class:`EnvState`): the world, its RNG, the episode and
        step counts. ``set_state`` of it, on this env or another with the same arguments,
        continues from exactly here; the state itself is not changed by either env."""
        return EnvState(self._core.clone_env(), self._ctor_kwargs())

    def set_state(self, state):
        """Continue from ``state`` (from ``get_state()`` of an env with the same ``area``,
        ``view``, ``size``, ``reward``, ``length`` and textures; the seed comes with the state).
        A state of another configuration is a ValueError naming the difference, and leaves this
        env unchanged."""
        if not isinstance(state, EnvState):
            raise TypeError(f"set_state takes an EnvState (from get_state()), not {type(state).__name__}")
        mine, theirs = _config(self._ctor_kwargs(), self._core), _config(state._kwargs, state._core)
        diff = [f"{k}={theirs[k]!r} (this env: {mine[k]!r})" for k in mine if mine[k] != theirs[k]]
        if diff:
            raise ValueError(f"set_state: the state is of another configuration: {', '.join(diff)}; "
                             "use a state from get_state() of an env made with the same arguments")
        self._core = state._core.clone_env()
        self._seed = state._kwargs["seed"]

    def __deepcopy__(self, memo):
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = self._core.clone_env() if key == "_core" else copy.deepcopy(value, memo)
        return new

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
        return _core_state(self._ctor_kwargs(), self._core)

    def __setstate__(self, state):
        self.__init__(**state["kwargs"])
        _restore_core(self._core, state)

    def __repr__(self):
        k = self._ctor_kwargs()
        return (
            f"vlmcrafter.crafter.Env(area={tuple(k['area'])!r}, view={k['view']!r}, size={k['size']!r}, "
            f"reward={k['reward']!r}, length={k['length']!r}, seed={k['seed']!r})"
        )


def _core_state(kwargs, core):
    # The pickled form of a native env: its arguments, episode count and calls since reset.
    return {"kwargs": kwargs, "episode": core.episode, "history": core.history()}


def _restore_core(core, state):
    if state.get("history") is None:  # never reset (or a pickle of an older version)
        core.episode = state["episode"]
    else:
        core.replay(state["episode"], state["history"])


def _config(kwargs, core):
    """What a state must share with an env to be set on it (everything but the seed)."""
    return {
        "area": _pair("area", kwargs["area"], False),
        "view": tuple(kwargs["view"]),
        "size": tuple(kwargs["size"]),
        "reward": bool(kwargs["reward"]),
        "length": _length(kwargs["length"]),
        "textures": core.texture_source,
    }


class EnvState:
    """A snapshot of a :class:`Env` (``Env.get_state()``) for ``Env.set_state``: planners and
    tree searches branch from it as often as they like (each ``set_state`` copies it). It can
    be deep-copied and pickled (pickling replays the episode's calls on loading)."""

    def __init__(self, core, kwargs):
        self._core = core
        self._kwargs = kwargs

    @property
    def episode(self):
        """The episode count of the state (1 in the first episode)."""
        return self._core.episode

    @property
    def step_count(self):
        """Steps taken in the state's episode."""
        return self._core.step_count

    def __deepcopy__(self, memo):
        return EnvState(self._core.clone_env(), copy.deepcopy(self._kwargs, memo))

    def __getstate__(self):
        return _core_state(self._kwargs, self._core)

    def __setstate__(self, state):
        env = Env(**state["kwargs"])
        _restore_core(env._core, state)
        self._core = env._core
        self._kwargs = state["kwargs"]

    def __repr__(self):
        return f"vlmcrafter.crafter.EnvState(seed={self._kwargs['seed']!r}, episode={self.episode}, step={self.step_count})"

