"""``VectorEnv``: n Crafter envs stepped in native threads, a ``gymnasium.vector.VectorEnv``.

Also ``vlmcrafter.crafter.VectorEnv`` (the same class). With gymnasium (>= 1.0) installed it
subclasses ``gymnasium.vector.VectorEnv`` and ``gymnasium.make_vec("vlmcrafter/Crafter-v1",
num_envs=n)`` returns it (the id's ``vector_entry_point`` is :func:`make_vec_env`); without
gymnasium it is the same env on a small stand-in base.
"""

import threading
import warnings

import numpy as np

from . import _native, _vector_state
from ._args import _crafter_assets_hint, _engine_seed, _is_int, _length, _pair, _textures_arg

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
    _batch_space = None

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


__all__ = ["VectorEnv", "VectorEnvState", "make_vec_env", "AUTORESET_MODES"]

VectorEnvState = _vector_state.VectorEnvState

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


if _gym is not None:

    class SeedError(_gym.error.Error, TypeError):
        """A seed that is not an int: gymnasium's ``error.Error`` (what ``SyncVectorEnv``
        raises) and a TypeError."""

    class SeedRangeError(_gym.error.Error, ValueError):
        """A negative seed: gymnasium's ``error.Error`` and a ValueError."""

else:

    class SeedError(TypeError):
        """A seed that is not an int."""

    class SeedRangeError(ValueError):
        """A negative seed."""


def _fresh_seed():
    # Fresh OS entropy, never numpy's global RNG (as gymnasium's unseeded envs).
    return int(np.random.default_rng().integers(0, 2**31 - 1))


def _check_seed(seed, where):
    """``seed`` as gymnasium's ``seeding.np_random`` takes it (an int >= 0, numpy ints too)."""
    if not _is_int(seed):
        raise SeedError(
            f"{where}: seed {seed!r} is a {type(seed).__name__}; seeds must be ints >= 0 or None "
            f"(gymnasium: Seed must be a python integer, actual type: {type(seed)})")
    if seed < 0:
        raise SeedRangeError(
            f"{where}: seed {int(seed)} is negative; seeds must be ints >= 0 or None "
            f"(gymnasium: Seed must be greater or equal to zero, actual value: {int(seed)})")
    return int(seed)


def _seeds(n, seed, where):
    """One seed (or None) per env from an int (env ``i``: ``seed + i``), a sequence of ``n``
    seeds or None, checked as gymnasium checks them."""
    if seed is None:
        return [None] * n
    if _is_int(seed):
        base = _check_seed(seed, where)
        return [base + i for i in range(n)]
    seeds = _seed_list(n, seed)
    return [None if s is None else _check_seed(s, f"{where}[{i}]") for i, s in enumerate(seeds)]


def _seed_list(n, seed):
    if isinstance(seed, (str, bytes)) or not hasattr(seed, "__len__"):
        raise SeedError(f"seed must be an int >= 0, a list of {n} seeds, or None; not {type(seed).__name__}")
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"seed has {len(seeds)} values for {n} envs: give one per env (None keeps an env's own sequence)")
    return seeds


def _actions(actions, n):
    """``actions`` as a contiguous int64 array of shape (n,): any integer array-like (strided,
    reversed, sliced, any integer dtype, a list)."""
    a = np.asarray(actions)
    if a.dtype.kind not in "iu":
        raise TypeError(
            f"actions must be integers 0..16 (one per env), got an array of {a.dtype}: pass e.g. "
            "envs.action_space.sample() or np.asarray(actions, dtype=np.int64)")
    if a.shape != (n,):
        raise ValueError(f"actions must have shape ({n},), one action per env; got shape {a.shape}")
    if a.dtype == np.int64 and a.flags.c_contiguous:
        return a
    if a.size and (a.max() > 16 or (a.dtype.kind == "i" and a.min() < 0)):
        bad = a.max() if a.max() > 16 else a.min()
        raise ValueError(f"action {int(bad)} is out of range: crafter's actions are ids 0..16")
    return np.ascontiguousarray(a, dtype=np.int64)


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


class _Release:
    """Releases a lock already taken, at the end of a ``with`` block."""

    __slots__ = ("lock",)

    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.lock.release()


class VectorEnv(_Base):
    """``n`` Crafter envs stepped together in native threads with the GIL released; with
    gymnasium installed, a ``gymnasium.vector.VectorEnv``.

    Args:
        n: number of envs (at least 1).
        area, view, size, reward, length, textures, fetch: as for :class:`vlmcrafter.crafter.Env`,
            shared by all.
        seed: an int >= 0 (env ``i`` uses ``seed + i``), a sequence of ``n`` such seeds (a None in
            it is drawn), or None (each drawn from fresh OS entropy; numpy's global RNG is never
            touched). The first ``reset()`` starts these seeds' episode 1; ``reset(seed=...)``
            reseeds.
        threads: worker threads, 1..min(n, 256); None uses the available cores (at most n).
        autoreset_mode: gymnasium's ``AutoresetMode`` (or its name): ``NEXT_STEP`` (default),
            ``SAME_STEP`` or ``DISABLED``; ``metadata["autoreset_mode"]`` holds it.
        render_mode: None or ``"rgb_array"`` (``render()`` returns each env's current frame).
        obs_text: None, ``"state"`` or ``"balrog"``: add each env's text observation of its
            current state as ``infos["text"]`` (object array of str, made on the worker threads).
        copy: as gymnasium's ``SyncVectorEnv(copy=)``: True (the default) returns a new
            observation array from every ``reset`` and ``step`` (a replay buffer may keep it);
            False returns the env's one frame buffer, overwritten in place by the next call
            (fastest: copy what you keep).
        semantic: add crafter's ``semantic`` map to the infos (uint8 ``(n, area[0], area[1])``,
            as ``SyncVectorEnv`` gives it); off by default because it costs a copy of the map per
            env and step.

    Env ``i`` plays exactly the episodes a single :class:`vlmcrafter.crafter.Env` with its seed
    plays (and ``gymnasium.make`` of the id with ``reset(seed=)``): the same frames, rewards and
    states byte for byte, in every autoreset mode.

    ``step(actions)`` takes any integer array-like of ``n`` actions and returns ``(obs, rewards,
    terminated, truncated, infos)``: ``rewards`` float64 ``(n,)``, ``terminated`` bool ``(n,)``
    (the player died: crafter's discount 0), ``truncated`` bool ``(n,)`` (``length`` reached
    alive). ``infos`` has exactly the keys, dtypes, shapes and nesting that gymnasium's
    ``SyncVectorEnv`` over the single env gives (``semantic`` only with ``semantic=True``):
    ``inventory`` and ``achievements`` are dicts of int64 ``(n,)`` arrays by crafter's names,
    each with its ``_name`` mask; ``discount`` and ``reward`` (crafter's ``info["reward"]``, the
    real reward even with ``reward=False``; 0 after a reset) float64 ``(n,)``; ``player_pos``
    int64 ``(n, 2)``; ``text`` with ``obs_text``; every key with its ``_key`` bool mask.
    ``reset`` returns the same keys (masked to the envs it reset).

    Autoreset (gymnasium 1.x, https://farama.org/Vector-Autoreset-Mode):
      - ``NEXT_STEP``: the step that ends an env's episode returns its last frame and infos; the
        env's NEXT ``step`` ignores its action, resets it and returns the new episode's first
        frame with reward 0, terminated and truncated False.
      - ``SAME_STEP``: the step that ends an episode resets the env at once: ``obs`` and
        ``infos`` are the new episode's first; rewards and flags are the ending step's; the
        ended episodes' last frames are ``infos["final_obs"]`` (an object array of ``n``: each
        ended env's ``(H, W, 3)`` frame, None for the others, as gymnasium's) and their infos ``infos["final_info"]`` (the same tree, masked to
        the ended envs), with masks ``infos["_final_obs"]`` / ``infos["_final_info"]``; these
        keys appear only when some env ended.
      - ``DISABLED``: ended envs wait (stepping one is a RuntimeError) until
        ``reset(options={"reset_mask": mask})`` resets the masked envs (the others keep their
        state and frame).

    Ctrl-C (any Python signal handler that raises) stops a running ``step`` or ``reset`` within
    a few tens of ms and raises its KeyboardInterrupt; the env stays open but waits for a
    ``reset()`` (``step`` raises until then). One call at a time: a call from a second thread
    while one runs raises RuntimeError naming the env; ``close()`` works from any thread (it
    stops a running call) and every later call raises "closed".

    Copies continue every sub-env's episode exactly, as crafter's ``copy.deepcopy`` does for one
    env: ``copy.deepcopy(envs)`` clones every sub-env natively (world, RNG, episode and step
    counts, pending autoreset, frames, the seeds gymnasium's ``np_random`` draws), and ``pickle``
    keeps the arguments, seeds, episode counts and each running episode's actions, replayed on
    loading. ``get_state()`` / ``set_state(state)`` do the same in process for the whole env, and
    ``get_state(index)`` / ``set_state(state, index)`` for one sub-env (planners; see
    :class:`VectorEnvState`).
    """

    #: Names of ``infos["inventory"]``'s entries, in crafter's order.
    inventory_names = ITEM_NAMES
    #: Names of ``infos["achievements"]``'s entries, in crafter's order.
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
        copy=True,
        semantic=False,
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
        for name, value in (("copy", copy), ("semantic", semantic)):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{name}={value!r}: must be True or False")
        mode = _autoreset_value(autoreset_mode)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r}: use None or 'rgb_array'")
        if obs_text not in _TEXT_FORMATS:
            raise ValueError(f"obs_text={obs_text!r}: use None, 'state' or 'balrog'")
        self.num_envs = n
        self._seeds = [_fresh_seed() if s is None else s for s in _seeds(n, seed, "seed")]
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
            copy=bool(copy),
            semantic=bool(semantic),
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
            obs_text,
            bool(semantic),
        )
        self._obs = self._core.obs
        self._guard = threading.Lock()
        self._sub_rngs = [None] * n
        self._has_reset = False
        self.copy = bool(copy)
        self.semantic = bool(semantic)
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

    def _enter(self, what):
        """Take the env for one call: RuntimeError when it is closed or another thread is in it."""
        if self.closed or self._core.closed:
            raise RuntimeError(f"{what}: this VectorEnv (num_envs={self.num_envs}) is closed: make a new one to go on")
        if not self._guard.acquire(blocking=False):
            raise RuntimeError(
                f"{what}: this VectorEnv (num_envs={self.num_envs}, id 0x{id(self):x}) is busy: another thread "
                "is calling it right now. One vector env serves one thread at a time: give each thread "
                "its own env, or share it behind a lock")
        return _Release(self._guard)

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
        """The env's frame buffer ``(n, H, W, 3)``, overwritten by every call (what ``reset``
        and ``step`` return with ``copy=False``; with ``copy=True`` they return copies of it)."""
        return self._obs

    @property
    def episodes(self):
        """Episodes started so far by each env; settable (a list of n ints, or one int for all:
        the next reset of env ``i`` starts episode ``value + 1``)."""
        return self._core.episodes

    @episodes.setter
    def episodes(self, values):
        if _is_int(values):
            values = [values] * self.num_envs
        values = list(values)
        if len(values) != self.num_envs or not all(_is_int(v) for v in values):
            raise ValueError(f"episodes: give {self.num_envs} ints (one per env) or one int for all; got {values!r}")
        with self._enter("episodes"):
            self._core.episodes = [int(v) for v in values]

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

        ``seed``: None (each env goes on with its own seed's next episode), an int >= 0 (env
        ``i`` starts episode 1 of seed ``seed + i``, as ``SyncVectorEnv`` seeds its envs), or a
        list of ``n`` such seeds (None in it: that env goes on). Other seeds raise gymnasium's
        ``error.Error`` as ``SyncVectorEnv`` does (here also a TypeError or ValueError). An int
        also seeds :attr:`np_random`. ``options["reset_mask"]``: a bool array ``(n,)`` with at
        least one True; only those envs reset (seeds for the others are ignored), and ``infos``
        is masked to them. ``options`` is not modified.
        """
        with self._enter("reset()"):
            n = self.num_envs
            seeds = _seeds(n, seed, "reset(seed=...)")
            mask = None
            if options is not None and "reset_mask" in options:
                mask = _reset_mask(options["reset_mask"], n)
            if _is_int(seed) and _gym is not None:
                from gymnasium.utils import seeding

                self._np_random, self._np_random_seed = seeding.np_random(int(seed))
            for i, s in enumerate(seeds):
                if s is not None and (mask is None or mask[i]):
                    self._core.reseed(i, _engine_seed(s))
                    self._seeds[i] = s
                    self._sub_rngs[i] = ("seed", s)
            infos = self._core.reset(None if mask is None else mask.tolist())
            self._has_reset = True
            return (self._obs.copy() if self.copy else self._obs), infos

    def step(self, actions):
        """Step env ``i`` with ``actions[i]`` (ints 0..16, any integer array-like of shape
        (n,)); returns ``(obs, rewards, terminated, truncated, infos)`` (see the class doc)."""
        with self._enter("step()"):
            a = _actions(actions, self.num_envs)
            rewards, terminated, truncated, infos, ended = self._core.step(a)
            if ended is not None:
                done, frames, final_info = ended
                final_obs = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    final_obs[i] = frames[i]
                infos["final_obs"] = final_obs
                infos["_final_obs"] = done
                infos["final_info"] = final_info
                infos["_final_info"] = done.copy()
            return (self._obs.copy() if self.copy else self._obs), rewards, terminated, truncated, infos

    def render(self):
        """Each env's current frame (a tuple of ``(H, W, 3)`` copies) with
        ``render_mode="rgb_array"``; None (and a warning) without a render mode."""
        if self.render_mode is None:
            warnings.warn("render() without render_mode: pass render_mode='rgb_array'", stacklevel=2)
            return None
        with self._enter("render()"):
            return tuple(frame.copy() for frame in self._obs)

    def text(self, index, fmt="state"):
        """The text observation (``"state"`` or ``"balrog"``) of env ``index``'s current state
        (``index`` in ``0..num_envs-1``; anything else is an IndexError, as for a list)."""
        if not _is_int(index):
            raise TypeError(f"text(index): index must be an int 0..{self.num_envs - 1}, not {type(index).__name__}")
        if not 0 <= index < self.num_envs:
            raise IndexError(f"text({index}): env index out of range 0..{self.num_envs - 1}")
        with self._enter("text()"):
            return self._core.text(int(index), fmt)

    def semantic_map(self, index):
        """crafter's semantic map of env ``index``'s current state (uint8, area-shaped,
        [x][y]; the single env's ``info["semantic"]``)."""
        if not _is_int(index):
            raise TypeError(f"index must be an int 0..{self.num_envs - 1}, not {type(index).__name__}")
        with self._enter("semantic_map()"):
            return self._core.semantic(int(index))

    def get_state(self, index=None):
        """The state of the whole env (``index`` None) or of sub-env ``index`` (after the first
        ``reset``): a :class:`VectorEnvState` for :meth:`set_state`. The state is not changed by
        either env afterwards."""
        with self._enter("get_state()"):
            return _vector_state.get_state(self, index)

    def set_state(self, state, index=None):
        """Continue from ``state``: a whole env's (``get_state()``, index None) on an env made with
        the same ``n``, ``area``, ``view``, ``size``, ``reward``, ``length``, textures and
        ``autoreset_mode``, or one sub-env's (``get_state(i)``, of any env with those settings
        but ``n``) into sub-env ``index``. The seeds come with the state; ``copy``, ``threads``,
        ``obs_text`` and ``semantic`` may differ. Another configuration is a ValueError naming
        the difference; any refusal leaves the env unchanged."""
        with self._enter("set_state()"):
            _vector_state.set_state(self, state, index)

    # -- gymnasium's call / get_attr / set_attr: the names SyncVectorEnv's sub-envs answer ----

    def _sub_rng(self, i):
        """Sub-env ``i``'s ``np_random`` (gymnasium's, seeded by ``reset(seed=)`` as the
        single env's is; fresh entropy until then), made on first use."""
        if not isinstance(self._sub_rngs[i], tuple) or self._sub_rngs[i][0] != "rng":
            seed = self._sub_rngs[i][1] if isinstance(self._sub_rngs[i], tuple) else None
            if _gym is not None:
                from gymnasium.utils import seeding

                self._sub_rngs[i] = ("rng",) + seeding.np_random(seed)
            else:
                sequence = np.random.SeedSequence(seed)
                self._sub_rngs[i] = ("rng", np.random.default_rng(sequence), sequence.entropy)
        return self._sub_rngs[i]

    _CALLS = {
        "text": lambda self, i, fmt="state": self._core.text(i, fmt),
        "render": lambda self, i: self._obs[i].copy() if self.render_mode is not None else None,
    }
    _VALUES = {
        "observation_space": lambda self, i: self.single_observation_space,
        "action_space": lambda self, i: self.single_action_space,
        "render_mode": lambda self, i: self.render_mode,
        "obs_text": lambda self, i: self.obs_text,
        "metadata": lambda self, i: {"render_modes": ["rgb_array"], "render_fps": 10},
        "spec": lambda self, i: self.spec,
        "unwrapped": lambda self, i: self,
        "np_random": lambda self, i: self._sub_rng(i)[1],
        "np_random_seed": lambda self, i: self._sub_rng(i)[2],
        "has_reset": lambda self, i: self._has_reset,
    }
    #: What SyncVectorEnv's sub-envs answer that this env answers on itself instead.
    _VECTOR_ONLY = ("reset", "step", "close")
    #: The sub-envs' states, one per sub-env (SyncVectorEnv's sub-envs answer them one by one).
    _STATES = ("get_state", "set_state")

    def _known(self):
        return sorted(set(self._CALLS) | set(self._VALUES) | set(self._STATES))

    def call(self, name, *args, **kwargs):
        """Call ``name`` on every sub-env (a tuple of n results), answering the names gymnasium's
        ``SyncVectorEnv`` answers over the single env: the methods ``text(fmt)`` and
        ``render()``, and the attributes (args ignored) ``observation_space``,
        ``action_space``, ``render_mode``, ``obs_text``, ``metadata``, ``spec``, ``unwrapped``
        (this env), ``has_reset``, ``np_random`` and ``np_random_seed`` (each sub-env's
        generator, seeded as the single env's by ``reset(seed=)``). ``reset``, ``step`` and
        ``close`` are the vector env's own methods. ``get_state`` gives each sub-env's
        :class:`VectorEnvState` (``get_state(i)``), and ``call("set_state", state)`` sets one
        sub-env's state on every sub-env (``set_state(state, i)`` for each ``i``), as
        ``SyncVectorEnv`` calls each sub-env's; any other name is an AttributeError."""
        if name in self._VECTOR_ONLY:
            raise AttributeError(f"call({name!r}): the native vector env has no separate sub-envs; call envs.{name}() itself")
        with self._enter(f"call({name!r})"):
            if name in self._STATES:
                return _vector_state.call_states(self, name, args, kwargs)
            if name in self._CALLS:
                return tuple(self._CALLS[name](self, i, *args, **kwargs) for i in range(self.num_envs))
            if name in self._VALUES:
                return tuple(self._VALUES[name](self, i) for i in range(self.num_envs))
        raise AttributeError(f"{name!r}: the sub-envs have no such attribute; call/get_attr know {', '.join(self._known())}")

    def get_attr(self, name):
        """The attribute ``name`` of every sub-env (a tuple; see :meth:`call`)."""
        return self.call(name)

    def set_attr(self, name, values):
        """gymnasium's ``set_attr``: the sub-envs' attributes are read-only here, so this raises
        AttributeError (a wrong name too); ``episodes`` is settable on the env itself."""
        if name in self._known():
            raise AttributeError(f"set_attr({name!r}): {name!r} is read-only in the native vector env")
        raise AttributeError(f"set_attr({name!r}): the sub-envs have no such attribute; set the episode counts with envs.episodes = [...]")

    def close(self, **kwargs):
        """Close the env, from any thread: a call running in another thread stops and raises;
        every later call raises RuntimeError "closed". Closing again does nothing."""
        if self.closed:
            return
        self.closed = True
        self._core.close()

    def __len__(self):
        return self.num_envs

    def __deepcopy__(self, memo):
        return _vector_state.deepcopy_env(self, memo)

    def __getstate__(self):
        return _vector_state.pickled_env(self)

    def __setstate__(self, state):
        _vector_state.unpickle_env(self, state)

    def __repr__(self):
        k = self._kwargs
        return (
            f"vlmcrafter.crafter.VectorEnv({self.num_envs}, area={tuple(k['area'])!r}, view={k['view']!r}, "
            f"size={k['size']!r}, reward={k['reward']!r}, length={k['length']!r}, "
            f"seed={self._seeds[0]!r}..., threads={self.threads}, autoreset_mode={k['autoreset_mode']!r}, "
            f"copy={k['copy']!r})"
        )


def make_vec_env(num_envs=1, max_episode_steps=None, **kwargs):
    """The ``vector_entry_point`` of ``vlmcrafter/Crafter-v1``: ``gymnasium.make_vec(ID,
    num_envs=n, **kwargs)`` gives ``VectorEnv(n, **kwargs)`` (``autoreset_mode=``,
    ``threads=``, ``seed=``, ``copy=``, ``semantic=`` and the env's arguments go in
    ``kwargs``).

    ``max_episode_steps`` (gymnasium passes the id's 10000 unless given) does what gymnasium's
    ``TimeLimit`` does to each env of ``SyncVectorEnv``: an episode still alive after that many
    steps is truncated. Here it caps crafter's own ``length`` (the env runs
    ``min(length, max_episode_steps)`` steps; None or -1 leaves ``length`` alone)."""
    if max_episode_steps is not None and max_episode_steps != -1:
        if not _is_int(max_episode_steps) or max_episode_steps < 1:
            raise ValueError(
                f"max_episode_steps={max_episode_steps!r}: give an int >= 1 (episodes are truncated after "
                "that many steps), or None or -1 for crafter's own length=")
        own = _length(kwargs.get("length", 10000))  # None: unlimited
        kwargs["length"] = int(max_episode_steps) if own is None else min(own, int(max_episode_steps))
    return VectorEnv(num_envs, **kwargs)
