"""``VectorEnv``: n Crafter envs stepped in native threads, a ``gymnasium.vector.VectorEnv``.

Also ``vlmcrafter.crafter.VectorEnv`` (the same class). With gymnasium (>= 1.0) installed it
subclasses ``gymnasium.vector.VectorEnv`` and ``gymnasium.make_vec("vlmcrafter/Crafter-v1",
num_envs=n)`` returns it (the id's ``vector_entry_point`` is :func:`make_vec_env`); without
gymnasium it is the same env on a small stand-in base.
"""

import numbers
import warnings

import numpy as np

from . import _native
from ._args import _crafter_assets_hint, _draw_seed, _engine_seed, _length, _pair, _textures_arg

ACTION_NAMES = tuple(_native.ACTION_NAMES)
ITEM_NAMES = tuple(_native.ITEM_NAMES)
ACHIEVEMENT_NAMES = tuple(_native.ACHIEVEMENT_NAMES)

try:
    import gymnasium as _gym
    from gymnasium.vector import AutoresetMode as _AutoresetMode
    from gymnasium.vector.utils import batch_space as _batch_space

    _Base = _gym.vector.VectorEnv
except ImportError:  # gymnasium is optional: the same env on a stand-in base
    _gym = None
    _AutoresetMode = None

    class _Base:
        """What this env uses of ``gymnasium.vector.VectorEnv`` when gymnasium is absent."""

        metadata = {}
        spec = None
        render_mode = None
        closed = False
        _np_random = None

        @property
        def np_random(self):
            if self._np_random is None:
                self._np_random = np.random.default_rng()
            return self._np_random

        @np_random.setter
        def np_random(self, value):
            self._np_random = value

        @property
        def unwrapped(self):
            return self


__all__ = ["VectorEnv", "make_vec_env", "AUTORESET_MODES"]

#: The autoreset modes' values (gymnasium's ``AutoresetMode`` values).
AUTORESET_MODES = ("NextStep", "SameStep", "Disabled")
_MODE_KEYS = {m.lower(): m for m in AUTORESET_MODES}
_TEXT_FORMATS = (None, "state", "balrog")


def _autoreset_value(mode):
    """``mode`` (an ``AutoresetMode``, its value or its name, any case) as its value."""
    if _AutoresetMode is not None and isinstance(mode, _AutoresetMode):
        return mode.value
    if isinstance(mode, str) and mode.replace("_", "").lower() in _MODE_KEYS:
        return _MODE_KEYS[mode.replace("_", "").lower()]
    raise ValueError(
        f"unknown autoreset_mode {mode!r}: use gymnasium's AutoresetMode.NEXT_STEP, SAME_STEP or "
        "DISABLED (or the strings 'NEXT_STEP', 'SAME_STEP', 'DISABLED')")


def _autoreset_mode(value):
    return _AutoresetMode(value) if _AutoresetMode is not None else value


def _is_int(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def _vector_seeds(n, seed):
    """The constructor's seeds: one per env, drawn as crafter draws where None."""
    if seed is None:
        return [_draw_seed() for _ in range(n)]
    if _is_int(seed):
        return [int(seed) + i for i in range(n)]
    seeds = _seed_list(n, seed)
    return [_draw_seed() if s is None else s for s in seeds]


def _seed_list(n, seed):
    if isinstance(seed, (str, bytes)) or not hasattr(seed, "__len__"):
        raise TypeError(f"seed must be an int, a list of {n} seeds, or None; not {type(seed).__name__}")
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"seed has {len(seeds)} values for {n} envs: give one per env (None keeps an env's own sequence)")
    return seeds


def _reset_mask(mask, n):
    """``options["reset_mask"]`` checked as gymnasium's vector envs check it."""
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"options['reset_mask'] must be a numpy bool array of shape ({n},), not {type(mask).__name__}")
    if mask.dtype != np.bool_:
        raise TypeError(f"options['reset_mask'] must have dtype bool, got {mask.dtype}: pass e.g. terminated | truncated")
    if mask.shape != (n,):
        raise ValueError(f"options['reset_mask'] must have shape ({n},), one flag per env; got {mask.shape}")
    if not mask.any():
        raise ValueError("options['reset_mask'] has no True value: mark at least one env to reset")
    return mask


class VectorEnv(_Base):
    """``n`` Crafter envs stepped together in native threads with the GIL released; with
    gymnasium installed, a ``gymnasium.vector.VectorEnv``.

    Args:
        n: number of envs (at least 1).
        area, view, size, reward, length, textures, fetch: as for :class:`vlmcrafter.crafter.Env`,
            shared by all.
        seed: an int (env ``i`` uses ``seed + i``), a sequence of ``n`` seeds (a None in it is
            drawn), or None (each drawn from numpy's global RNG, as crafter draws). The first
            ``reset()`` starts these seeds' episode 1; ``reset(seed=...)`` reseeds.
        threads: worker threads, 1..min(n, 256); None uses the available cores (at most n).
        autoreset_mode: gymnasium's ``AutoresetMode`` (or its name): ``NEXT_STEP`` (default),
            ``SAME_STEP`` or ``DISABLED``; ``metadata["autoreset_mode"]`` holds it.
        render_mode: None or ``"rgb_array"`` (``render()`` returns each env's current frame).
        obs_text: None, ``"state"`` or ``"balrog"``: add each env's text observation of its
            current state as ``infos["text"]`` (object array of str; costs a few µs per env).

    Env ``i`` plays exactly the episodes a single :class:`vlmcrafter.crafter.Env` with its seed
    plays (and ``gymnasium.make`` of the id with ``reset(seed=)``): the same frames, rewards and
    states byte for byte, in every autoreset mode.

    Frames are written into ONE preallocated uint8 array ``(n, H, W, 3)`` owned by the env:
    ``reset()`` and every ``step()`` return that same array object, overwritten in place (copy
    it to keep a frame). Rewards, flags and infos are fresh arrays each step.

    ``step(actions)`` returns ``(obs, rewards, terminated, truncated, infos)``: ``rewards``
    float64 ``(n,)``, ``terminated`` bool ``(n,)`` (the player died: crafter's discount 0),
    ``truncated`` bool ``(n,)`` (``length`` reached alive). ``infos`` is gymnasium's dict of
    arrays, each key with its ``_key`` bool mask: ``reward`` float64 (crafter's
    ``info["reward"]``, the real reward even with ``reward=False``; 0 after a reset),
    ``discount`` float32, ``player_pos`` int64 ``(n, 2)``, ``inventory`` int32 ``(n, 16)``
    (columns :attr:`inventory_names`) and ``achievements`` int32 ``(n, 22)`` (columns
    :attr:`achievement_names`: crafter's counts so far this episode). ``reset`` returns the
    same keys (masked to the envs it reset). The semantic map is on demand:
    ``call("semantic")``.

    Autoreset (gymnasium 1.x, https://farama.org/Vector-Autoreset-Mode):
      - ``NEXT_STEP``: the step that ends an env's episode returns its last frame and infos; the
        env's NEXT ``step`` ignores its action, resets it and returns the new episode's first
        frame with reward 0, terminated and truncated False.
      - ``SAME_STEP``: the step that ends an episode resets the env at once: ``obs`` and
        ``infos`` are the new episode's first; rewards and flags are the ending step's; the
        ended episode's last frame is ``infos["final_obs"][i]`` and its infos are
        ``infos["final_info"]`` (same keys, n-shaped, masked to the ended envs), with masks
        ``infos["_final_obs"]`` / ``infos["_final_info"]``; these keys appear only when some env
        ended.
      - ``DISABLED``: ended envs wait (stepping one is a RuntimeError) until
        ``reset(options={"reset_mask": mask})`` resets the masked envs (the others keep their
        state and frame).

    Pickling keeps the constructor arguments, every env's seed and episode count; an unpickled
    vector env needs ``reset()``.
    """

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
        autoreset_mode="NEXT_STEP",
        render_mode=None,
        obs_text=None,
    ):
        if not _is_int(n):
            raise TypeError(f"n must be an int (the number of envs), not {type(n).__name__}")
        n = int(n)
        if n <= 0:
            raise ValueError(f"n={n}: a VectorEnv needs at least one env")
        if threads is not None:
            if not _is_int(threads):
                raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
            threads = int(threads)
        mode = _autoreset_value(autoreset_mode)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r}: use None or 'rgb_array'")
        if obs_text not in _TEXT_FORMATS:
            raise ValueError(f"obs_text={obs_text!r}: use None, 'state' or 'balrog'")
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
            autoreset_mode=mode,
            render_mode=render_mode,
            obs_text=obs_text,
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
            mode,
        )
        self._obs = self._core.obs
        self.autoreset_mode = _autoreset_mode(mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": ["rgb_array"], "render_fps": 10}
        self.render_mode = render_mode
        self.obs_text = obs_text
        self.closed = False
        width, height = size_pair
        if _gym is not None:
            self.single_observation_space = _gym.spaces.Box(0, 255, (height, width, 3), np.uint8)
            self.single_action_space = _gym.spaces.Discrete(len(ACTION_NAMES))
            self.observation_space = _batch_space(self.single_observation_space, n)
            self.action_space = _batch_space(self.single_action_space, n)
        else:
            from ._spaces import BoxSpace, DiscreteSpace, multi_discrete

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
        """Each env's seed (the constructor's, or the last ``reset(seed=...)``'s)."""
        return list(self._seeds)

    @property
    def obs(self):
        """The frame buffer ``(n, H, W, 3)`` (the array ``reset`` and ``step`` return)."""
        return self._obs

    @property
    def episodes(self):
        """Episodes started so far by each env."""
        return self._core.episodes

    def finished_episodes(self):
        """The episodes that ended on the last ``step``, counted as crafter's ``Recorder``
        counts them: a list of ``(index, length, reward, achievements)`` in env order, or None
        when none ended (and after a ``reset``). ``length`` is the episode's steps (the reset
        not counted), ``reward`` the float sum of its real rewards (crafter's
        ``info["reward"]``, also under ``reward=False``), ``achievements`` its 22 counts in
        :attr:`achievement_names` order. The same in every autoreset mode; it costs nothing
        when no episode ended (:class:`vlmcrafter.recorder.VectorRecorder` reads it)."""
        return self._core.finished()

    def reset(self, *, seed=None, options=None):
        """Start the next episode of every env (or of the envs ``options["reset_mask"]`` marks);
        returns ``(obs, infos)``.

        ``seed``: None (each env goes on with its own seed's next episode), an int (env ``i``
        starts episode 1 of seed ``seed + i``, as ``SyncVectorEnv`` seeds its envs), or a list
        of ``n`` seeds (None in it: that env goes on). An int also seeds :attr:`np_random`.
        ``options["reset_mask"]``: a bool array ``(n,)`` with at least one True; only those envs
        reset (seeds for the others are ignored), and ``infos`` is masked to them. ``options``
        is not modified.
        """
        n = self.num_envs
        seeds = [None] * n if seed is None else [int(seed) + i for i in range(n)] if _is_int(seed) else _seed_list(n, seed)
        mask = None
        if options is not None and "reset_mask" in options:
            mask = _reset_mask(options["reset_mask"], n)
        engine = [None if s is None else _engine_seed(s) for s in seeds]
        if _is_int(seed) and _gym is not None:
            from gymnasium.utils import seeding

            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        for i, e in enumerate(engine):
            if e is not None and (mask is None or mask[i]):
                self._core.reseed(i, e)
                self._seeds[i] = seeds[i]
        infos = self._core.reset(None if mask is None else mask.tolist())
        if self.obs_text is not None:
            self._add_text(infos, mask)
        return self._obs, infos

    def step(self, actions):
        """Step env ``i`` with ``actions[i]`` (ints 0..16, any int array-like of shape (n,));
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
        rewards, terminated, truncated, infos, ended = self._core.step(a)
        if ended is not None:
            index, frames, final_info = ended
            final_obs = np.full(self.num_envs, None, dtype=object)
            for j, i in enumerate(index):
                final_obs[i] = frames[j]
            done = np.zeros(self.num_envs, dtype=np.bool_)
            done[index] = True
            infos["final_obs"] = final_obs
            infos["_final_obs"] = done
            infos["final_info"] = final_info
            infos["_final_info"] = done.copy()
        if self.obs_text is not None:
            self._add_text(infos, None)
        return self._obs, rewards, terminated, truncated, infos

    def _add_text(self, infos, mask):
        fmt = self.obs_text
        text = np.full(self.num_envs, None, dtype=object)
        for i in range(self.num_envs):
            if mask is None or mask[i]:
                text[i] = self._core.text(i, fmt)
        infos["text"] = text
        infos["_text"] = np.ones(self.num_envs, dtype=np.bool_) if mask is None else mask.copy()

    def render(self):
        """Each env's current frame (a tuple of ``(H, W, 3)`` copies) with
        ``render_mode="rgb_array"``; None (and a warning) without a render mode."""
        if self.render_mode is None:
            warnings.warn("render() without render_mode: pass render_mode='rgb_array'", stacklevel=2)
            return None
        return tuple(frame.copy() for frame in self._obs)

    def text(self, index, fmt="state"):
        """The text observation (``"state"`` or ``"balrog"``) of env ``index``'s current state
        (``index`` in ``0..num_envs-1``; anything else is an IndexError, as for a list)."""
        if not _is_int(index):
            raise TypeError(f"text(index): index must be an int 0..{self.num_envs - 1}, not {type(index).__name__}")
        if not 0 <= index < self.num_envs:
            raise IndexError(f"text({index}): env index out of range 0..{self.num_envs - 1}")
        return self._core.text(int(index), fmt)

    # -- gymnasium's call / get_attr / set_attr, over the sub-envs --------------------------

    _CALLS = {
        "text": lambda self, i, *a, **k: self._core.text(i, *a, **k),
        "semantic": lambda self, i: self._core.semantic(i),
        "render": lambda self, i: self._obs[i].copy(),
    }
    _PER_ENV = {
        "episode": lambda self: self._core.episodes,
        "seed": lambda self: list(self._seeds),
    }
    _SHARED = {
        "observation_space": lambda self: self.single_observation_space,
        "action_space": lambda self: self.single_action_space,
        "render_mode": lambda self: self.render_mode,
        "obs_text": lambda self: self.obs_text,
        "action_names": lambda self: list(ACTION_NAMES),
        "area": lambda self: self._kwargs["area"],
        "view": lambda self: self._kwargs["view"],
        "size": lambda self: self._kwargs["size"],
        "reward": lambda self: self._kwargs["reward"],
        "length": lambda self: self._kwargs["length"],
    }
    _SETTABLE = ("episode",)

    def _known(self):
        return sorted(set(self._CALLS) | set(self._PER_ENV) | set(self._SHARED))

    def call(self, name, *args, **kwargs):
        """Call ``name`` on every sub-env: a tuple of n results. Methods: ``text(fmt)``,
        ``semantic()`` (uint8 area-shaped map, [x][y]), ``render()``; attributes (args
        ignored, as gymnasium does): ``episode``, ``seed``, and the shared ``observation_space``,
        ``action_space``, ``render_mode``, ``obs_text``, ``action_names``, ``area``, ``view``,
        ``size``, ``reward``, ``length``. Any other name is an AttributeError."""
        n = self.num_envs
        if name in self._CALLS:
            return tuple(self._CALLS[name](self, i, *args, **kwargs) for i in range(n))
        if name in self._PER_ENV:
            return tuple(self._PER_ENV[name](self))
        if name in self._SHARED:
            value = self._SHARED[name](self)
            return tuple(value for _ in range(n))
        raise AttributeError(f"{name!r}: the sub-envs have no such attribute; call/get_attr know {', '.join(self._known())}")

    def get_attr(self, name):
        """The attribute ``name`` of every sub-env (a tuple; see :meth:`call`)."""
        return self.call(name)

    def set_attr(self, name, values):
        """Set attribute ``name`` of every sub-env: ``values`` a list/tuple of n values, or one
        value for all. Settable: ``episode`` (the episode count; the next reset of that env
        starts episode ``value + 1``). Any other name is an AttributeError, a wrong number of
        values a ValueError; either way nothing changes."""
        if name not in self._SETTABLE:
            if name in self._known():
                raise AttributeError(f"{name!r} is read-only; set_attr can set {', '.join(self._SETTABLE)}")
            raise AttributeError(f"{name!r}: the sub-envs have no such attribute; set_attr can set {', '.join(self._SETTABLE)}")
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr({name!r}): got {len(values)} values for {self.num_envs} envs; give one per env or a single value")
        if not all(_is_int(v) for v in values):
            raise TypeError(f"set_attr({name!r}): values must be ints, got {values!r}")
        self._core.episodes = [int(v) for v in values]

    def close(self, **kwargs):
        """Stop the worker threads and free the envs; stepping afterwards is a RuntimeError.
        Closing again does nothing."""
        if self.closed:
            return
        self._core.close()
        self.closed = True

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
            f"seed={self._seeds[0]!r}..., threads={self.threads}, autoreset_mode={k['autoreset_mode']!r})"
        )


def make_vec_env(num_envs=1, max_episode_steps=None, **kwargs):
    """The ``vector_entry_point`` of ``vlmcrafter/Crafter-v1``: ``gymnasium.make_vec(ID,
    num_envs=n, **kwargs)`` gives ``VectorEnv(n, **kwargs)`` (``autoreset_mode=``,
    ``threads=``, ``seed=`` and the env's arguments go in ``kwargs``).

    ``max_episode_steps`` (gymnasium passes the id's 10000 unless given) does what gymnasium's
    ``TimeLimit`` does to each env of ``SyncVectorEnv``: an episode still alive after that many
    steps is truncated. Here it caps crafter's own ``length`` (the env runs
    ``min(length, max_episode_steps)`` steps; None or -1 leaves ``length`` alone)."""
    if max_episode_steps is not None and max_episode_steps != -1:
        if isinstance(max_episode_steps, (bool, np.bool_)) or not isinstance(max_episode_steps, (numbers.Integral, np.integer)) \
                or max_episode_steps < 1:
            raise ValueError(
                f"max_episode_steps={max_episode_steps!r}: give an int >= 1 (episodes are truncated after "
                "that many steps), or None or -1 for crafter's own length=")
        own = _length(kwargs.get("length", 10000))  # None: unlimited
        kwargs["length"] = int(max_episode_steps) if own is None else min(own, int(max_episode_steps))
    return VectorEnv(num_envs, **kwargs)
