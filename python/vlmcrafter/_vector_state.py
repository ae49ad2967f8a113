"""Copies and states of the native ``VectorEnv`` (private; :mod:`vlmcrafter.vector` documents
them): ``get_state``/``set_state`` of the whole env or of one sub-env, ``copy.deepcopy`` (a
native clone of every sub-env) and ``pickle`` (each sub-env's seed, episode count and the action
ids of its running episode, replayed on loading).

The functions taking an env expect its one-call guard to be held by the caller (``_enter``).
"""

import copy
import numbers
import threading

import numpy as np

from . import _native
from ._args import _crafter_assets_hint, _length, _pair, _textures_arg

#: The attributes of a VectorEnv that are its native side (made anew by copies, never copied).
_NATIVE_ATTRS = ("_core", "_obs", "_guard")
#: The constructor arguments a state must share with the env it is set on, in message order.
_CONFIG_KEYS = ("num_envs", "area", "view", "size", "reward", "length", "textures", "autoreset_mode")


def _config(kwargs, texture_source, num_envs):
    """What a state must share with an env to be set on it (num_envs None: one sub-env's)."""
    config = {
        "num_envs": num_envs,
        "area": _pair("area", kwargs["area"], False),
        "view": tuple(kwargs["view"]),
        "size": tuple(kwargs["size"]),
        "reward": bool(kwargs["reward"]),
        "length": _length(kwargs["length"]),
        "textures": texture_source,
        "autoreset_mode": kwargs["autoreset_mode"],
    }
    if num_envs is None:
        del config["num_envs"]
    return config


def _index(env, index, what):
    """``index`` (None: the whole env) checked: an int in ``0..num_envs-1``."""
    if index is None:
        return None
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (numbers.Integral, np.integer)):
        raise TypeError(f"{what}: index must be None (the whole env) or an int 0..{env.num_envs - 1} "
                        f"(one sub-env), not {type(index).__name__}")
    if not 0 <= index < env.num_envs:
        raise IndexError(f"{what}: env index {int(index)} is out of range for {env.num_envs} envs: "
                         f"use 0..{env.num_envs - 1}, or None for the whole env")
    return int(index)


class VectorEnvState:
    """A snapshot of a :class:`vlmcrafter.crafter.VectorEnv` (``get_state()``, the whole env) or
    of one of its sub-envs (``get_state(index)``), for ``set_state``: each sub-env's world, RNG,
    episode and step counts, pending autoreset, current frame and the seed gymnasium's
    ``np_random`` draws from. Planners branch from one state as often as they like (each
    ``set_state`` copies it). It can be deep-copied and pickled (pickling replays each sub-env's
    running episode on loading)."""

    def __init__(self, snapshot, kwargs, config, seeds, py, index):
        self._snapshot = snapshot
        self._kwargs = kwargs
        self._config = config
        self._seeds = seeds
        self._py = py
        self._index = index

    @property
    def whole(self):
        """True for the state of a whole env (``get_state()``), False for one sub-env's."""
        return self._index is None

    @property
    def index(self):
        """The sub-env this state was taken from (None for a whole env's state)."""
        return self._index

    @property
    def num_envs(self):
        """Sub-envs in the state (1 for one sub-env's)."""
        return len(self._seeds)

    @property
    def episodes(self):
        """Each sub-env's episode count (1 in the first episode)."""
        return [e for e, _ in self._snapshot.progress]

    @property
    def step_counts(self):
        """Steps taken in each sub-env's running episode."""
        return [s for _, s in self._snapshot.progress]

    def __deepcopy__(self, memo):
        # The native snapshot is immutable (set_state copies it): the copy may share it.
        return VectorEnvState(self._snapshot, copy.deepcopy(self._kwargs, memo), dict(self._config),
                              list(self._seeds), copy.deepcopy(self._py, memo), self._index)

    def __getstate__(self):
        return {"kwargs": self._kwargs, "seeds": self._seeds, "py": self._py, "index": self._index,
                "native": self._snapshot.encode()}

    def __setstate__(self, state):
        kwargs, seeds = state["kwargs"], state["seeds"]
        whole, envs = state["native"]
        # An env of the state's settings, one thread, to replay the sub-envs into a snapshot.
        core = _native_env(len(envs), kwargs)
        self._snapshot = core.decode(whole, envs)
        self._config = _config(kwargs, core.texture_source, None if whole is None else len(envs))
        core.close()
        self._kwargs, self._seeds, self._py, self._index = kwargs, seeds, state["py"], state["index"]

    def __repr__(self):
        where = "the whole env" if self._index is None else f"env {self._index}"
        return (f"vlmcrafter.vector.VectorEnvState({where}, num_envs={self.num_envs}, "
                f"episodes={self.episodes}, step_counts={self.step_counts})")


def _native_env(n, kwargs):
    """A native env of ``n`` sub-envs with ``kwargs``' settings and one thread."""
    return _native.VectorEnv(
        [0] * n, _pair("area", kwargs["area"], False), tuple(kwargs["view"]), tuple(kwargs["size"]),
        bool(kwargs["reward"]), _length(kwargs["length"]), 1, _textures_arg(kwargs["textures"]),
        _crafter_assets_hint() if kwargs["textures"] is None else None, bool(kwargs["fetch"]),
        kwargs["autoreset_mode"], None, False)


def _state_kwargs(env):
    """The constructor arguments a state keeps (to replay it when unpickled)."""
    keys = ("area", "view", "size", "reward", "length", "textures", "fetch", "autoreset_mode")
    return {k: env._kwargs[k] for k in keys}


def get_state(env, index):
    """``env.get_state(index)``: the whole env's state (index None) or sub-env ``index``'s."""
    index = _index(env, index, "get_state")
    snapshot = env._core.snapshot(index)
    kwargs = _state_kwargs(env)
    envs = range(env.num_envs) if index is None else [index]
    py = {"sub_rngs": [copy.deepcopy(env._sub_rngs[i]) for i in envs]}
    if index is None:
        py.update(has_reset=env._has_reset, np_random=copy.deepcopy(env.__dict__.get("_np_random")),
                  np_random_seed=env.__dict__.get("_np_random_seed"))
    config = _config(kwargs, env._core.texture_source, env.num_envs if index is None else None)
    return VectorEnvState(snapshot, kwargs, config, [env._seeds[i] for i in envs], py, index)


def set_state(env, state, index):
    """``env.set_state(state, index)``: checked first, so that a refused state leaves the env
    unchanged."""
    if not isinstance(state, VectorEnvState):
        raise TypeError(f"set_state takes a VectorEnvState (from envs.get_state() or envs.get_state(index)), "
                        f"not {type(state).__name__}")
    index = _index(env, index, "set_state")
    if index is None and not state.whole:
        raise ValueError(f"set_state: this is the state of one sub-env (get_state({state.index})): give the index "
                         "of the sub-env to set, set_state(state, index)")
    if index is not None and state.whole:
        raise ValueError("set_state: this is the state of a whole vector env (get_state()): set it without an "
                         "index, set_state(state), or take one sub-env's state with get_state(index)")
    mine = _config(_state_kwargs(env), env._core.texture_source, env.num_envs if index is None else None)
    theirs = state._config
    diff = [f"{k}={theirs[k]!r} (this env: {mine[k]!r})" for k in _CONFIG_KEYS if k in mine and mine[k] != theirs[k]]
    if diff:
        raise ValueError(f"set_state: the state is of another configuration: {', '.join(diff)}; use a state from "
                         "get_state() of a VectorEnv made with the same arguments")
    env._core.restore(state._snapshot, index)
    py = copy.deepcopy(state._py)
    if index is None:
        env._seeds = list(state._seeds)
        env._sub_rngs = py["sub_rngs"]
        env._has_reset = py["has_reset"]
        env._np_random, env._np_random_seed = py["np_random"], py["np_random_seed"]
    else:
        env._seeds[index] = state._seeds[0]
        env._sub_rngs[index] = py["sub_rngs"][0]


def call_states(env, name, args, kwargs):
    """``call("get_state")``: each sub-env's state; ``call("set_state", state)``: ``state`` (one
    sub-env's) set on every sub-env, as SyncVectorEnv calls each sub-env's ``set_state``."""
    n = env.num_envs
    if name == "get_state":
        if args or kwargs:
            raise TypeError("call('get_state') takes no arguments (each sub-env's state; envs.get_state(i) for one)")
        return tuple(get_state(env, i) for i in range(n))
    if len(args) + len(kwargs) != 1 or (kwargs and "state" not in kwargs):
        raise TypeError("call('set_state', state) takes one sub-env's state (from envs.get_state(i)), set on "
                        "every sub-env; envs.set_state(state, i) sets one")
    state = args[0] if args else kwargs["state"]
    for i in range(n):  # the first is checked before anything is set: a refused state changes nothing
        set_state(env, state, i)
    return (None,) * n


def deepcopy_env(env, memo):
    """``copy.deepcopy(env)``: a native clone of every sub-env; the Python attributes deep-copied."""
    with env._enter("deepcopy"):
        core = env._core.clone_env()
        new = env.__class__.__new__(env.__class__)
        memo[id(env)] = new
        for key, value in env.__dict__.items():
            if key not in _NATIVE_ATTRS:
                new.__dict__[key] = copy.deepcopy(value, memo)
    new._core, new._obs, new._guard = core, core.obs, threading.Lock()
    return new


#: The spaces, made anew from the arguments when unpickled (a batched Box holds four arrays of
#: the frames' size); their generators (``sample()``) are kept.
_SPACES = ("observation_space", "action_space", "single_observation_space", "single_action_space")


def pickled_env(env):
    """``env.__getstate__()``: the constructor's arguments, the Python attributes, the spaces'
    generators and the native state's pickled form."""
    with env._enter("pickle"):
        attrs = {k: v for k, v in env.__dict__.items() if k not in _NATIVE_ATTRS + _SPACES}
        rngs = {k: getattr(env.__dict__[k], "_np_random", None) for k in _SPACES if k in env.__dict__}
        return {"n": env.num_envs, "seeds": list(env._seeds), "kwargs": dict(env._kwargs), "attrs": attrs,
                "space_rngs": rngs, "native": env._core.snapshot(None).encode()}


def unpickle_env(env, state):
    """``env.__setstate__(state)``: made anew from its arguments, then every sub-env replayed."""
    env.__init__(state["n"], seed=state["seeds"], **state["kwargs"])
    if "native" not in state:  # a pickle of an earlier version: seeds and episode counts only
        env._core.episodes = state["episodes"]
        return
    env.__dict__.update(state["attrs"])
    for key, rng in state["space_rngs"].items():
        if rng is not None:
            getattr(env, key)._np_random = rng
    whole, envs = state["native"]
    env._core.restore(env._core.decode(whole, envs), None)
