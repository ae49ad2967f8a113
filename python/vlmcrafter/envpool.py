"""EnvPool's asynchronous API for Crafter: ``send``/``recv`` with ``batch_size < num_envs``.

An EnvPool user's loop runs as written (EnvPool's Python interface:
https://envpool.readthedocs.io/en/latest/content/python_interface.html)::

    from vlmcrafter import envpool

    envs = envpool.make("Crafter-v1", env_type="gymnasium", num_envs=8, batch_size=4, seed=0)
    envs.async_reset()                       # every env resets in the background
    while True:
        obs, rew, term, trunc, info = envs.recv()   # the first 4 envs that finished
        env_id = info["env_id"]
        envs.send(policy(obs), env_id)              # they step while the policy runs on the next

``send`` hands the actions to native worker threads and returns at once; ``recv`` waits (the GIL
released; Ctrl-C raises KeyboardInterrupt, and what was in flight stays so) for the first
``batch_size`` envs whose step finished and returns them batched, in completion order (in
``env_id`` order when ``batch_size == num_envs``: then ``step`` is the synchronous vector
step). Each env plays exactly the episodes of ``vlmcrafter.crafter.VectorEnv``'s env with the
same seed and actions, whatever the order the envs finish in; an env whose episode ended is
reset by its next step, whose action is ignored (EnvPool's autoreset, gymnasium's NEXT_STEP).
"""


import numpy as np

from . import _native
from ._args import _crafter_assets_hint, _engine_seed, _is_int, _length, _pair, _textures_arg

__all__ = ["make", "make_gym", "make_gymnasium", "EnvPool", "TASK_IDS"]

#: The task ids ``make`` knows (with or without the ``vlmcrafter/`` namespace) and the ``reward``
#: each sets, as gymnasium's ids of this package (and crafter's own ids).
TASK_IDS = {"Crafter-v1": True, "CrafterReward-v1": True, "CrafterNoReward-v1": False}
_ENV_TYPES = ("gymnasium", "gym")
_TEXT_FORMATS = (None, "state", "balrog")
_N_ACTIONS = len(_native.ACTION_NAMES)


def _spaces(height, width):
    try:
        import gymnasium

        return (gymnasium.spaces.Box(0, 255, (height, width, 3), np.uint8),
                gymnasium.spaces.Discrete(_N_ACTIONS))
    except ImportError:
        from ._spaces import BoxSpace, DiscreteSpace

        return BoxSpace(0, 255, (height, width, 3), np.uint8), DiscreteSpace(_N_ACTIONS)


def _seed_list(seed, n):
    """EnvPool's ``seed``: an int (env ``i`` gets ``seed + i``) or one int per env."""
    if _is_int(seed):
        if seed < 0:
            raise ValueError(f"seed={int(seed)}: seeds must be ints >= 0")
        return [int(seed) + i for i in range(n)]
    if isinstance(seed, (str, bytes)) or not hasattr(seed, "__len__"):
        raise TypeError(f"seed must be an int >= 0 or a sequence of {n} ints (one per env), not {type(seed).__name__}")
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"seed has {len(seeds)} values for num_envs={n}: give exactly one seed per env")
    for i, s in enumerate(seeds):
        if not _is_int(s) or s < 0:
            raise TypeError(f"seed[{i}]={s!r}: seeds must be ints >= 0")
    return [int(s) for s in seeds]


class EnvPool:
    """``num_envs`` Crafter envs behind EnvPool's API (make it with :func:`make`).

    ``observation_space`` and ``action_space`` describe ONE env, as EnvPool's do (a
    ``(H, W, 3)`` uint8 Box and ``Discrete(17)``; also ``single_observation_space`` and
    ``single_action_space``); every array ``recv`` returns has ``batch_size`` rows.

    - ``async_reset()``: reset every env in the background; the next ``recv()`` calls return
      their first frames (reward 0, ``terminated``/``truncated`` False).
    - ``send(action, env_id=None)``: queue ``action[k]`` (ints 0..16) for env ``env_id[k]`` and
      return at once. ``env_id`` None means every env (then ``len(action) == num_envs``); the
      dict form ``send({"action": a, "env_id": ids})`` works too. An env may have one action
      in flight: send its next one after ``recv`` returned it.
    - ``recv()``: ``(obs, rew, terminated, truncated, info)`` of the first ``batch_size`` envs
      that finished: ``obs`` uint8 ``(B, H, W, 3)``, ``rew`` float64, the flags bool; ``info``
      holds ``info["env_id"]`` (int32, the rows' env ids), ``info["elapsed_step"]`` (int32, the
      step count of each env's episode) and the synchronous vector env's infos for those rows
      (``inventory``, ``achievements``, ``discount``, ``player_pos``, ``reward``, ``text`` with
      ``obs_text``, ``semantic`` with ``semantic=True``, each with its ``_key`` mask). Every
      array is new (a replay buffer may keep it): there is no ``copy=`` here.
    - ``step(action, env_id=None)``: ``send`` then ``recv``.
    - ``reset(env_id=None)``: reset those envs (all by default; or ``options={"reset_mask":
      mask}``) and return ``(obs, info)`` for them, in env id order. Refused while any env is
      in flight (as EnvPool says, a reset is undefined in async mode: use ``async_reset``).
    - ``close()``: from any thread; the workers stop after their current step, a ``recv``
      waiting in another thread raises, every later call raises RuntimeError "closed".

    Bad input (an ``env_id`` that is not an int, out of range, repeated, or already in flight,
    actions of the wrong length or dtype, ``send`` before ``async_reset``, ``recv`` with nothing
    in flight) raises one TypeError, ValueError or RuntimeError naming the argument and the
    fix, and leaves the pool unchanged. One thread at a time: a second thread's call raises.
    """

    def __init__(self, task_id, num_envs, batch_size, num_threads, seed, max_episode_steps, *, area, view, size,
                 reward, length, textures, fetch, obs_text, semantic):
        self.task_id = task_id
        self.num_envs = num_envs
        self.batch_size = batch_size
        self.seeds = _seed_list(seed, num_envs)
        view_pair, size_pair = _pair("view", view, True), _pair("size", size, True)
        steps = _length(length)
        if max_episode_steps is not None:
            steps = max_episode_steps if steps is None else min(steps, max_episode_steps)
        self._core = _native.AsyncVectorEnv(
            [_engine_seed(s) for s in self.seeds], _pair("area", area, False), view_pair, size_pair,
            bool(reward), steps, batch_size, num_threads, _textures_arg(textures),
            _crafter_assets_hint() if textures is None else None, bool(fetch), obs_text, bool(semantic))
        self.config = {"task_id": task_id, "num_envs": num_envs, "batch_size": batch_size,
                       "num_threads": self._core.threads, "seed": seed, "max_episode_steps": steps,
                       "area": tuple(area), "view": view_pair, "size": size_pair, "reward": bool(reward),
                       "obs_text": obs_text, "semantic": bool(semantic)}
        width, height = size_pair
        self.observation_space, self.action_space = _spaces(height, width)
        self.single_observation_space, self.single_action_space = self.observation_space, self.action_space
        self.all_env_ids = np.arange(num_envs, dtype=np.int32)
        try:
            from gymnasium.vector import AutoresetMode

            self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        except ImportError:
            self.metadata = {"autoreset_mode": "NextStep"}

    @property
    def is_async(self):
        """True when ``batch_size < num_envs`` (EnvPool's ``is_async``)."""
        return self.batch_size < self.num_envs

    @property
    def closed(self):
        return self._core.closed

    @property
    def in_flight(self):
        """The env ids sent (or reset) whose results ``recv`` has not returned yet (sorted)."""
        return self._core.in_flight()

    def _env_ids(self, env_id, what):
        """``env_id`` as an int64 array of ids 0..num_envs-1 (None: every env)."""
        if env_id is None:
            return self.all_env_ids.astype(np.int64)
        if _is_int(env_id):
            env_id = [env_id]
        ids = np.asarray(env_id)
        if ids.dtype.kind not in "iu" or ids.ndim != 1:
            raise TypeError(
                f"{what}: env_id must be a 1-d array of ints 0..{self.num_envs - 1} (the info['env_id'] "
                f"that recv() returned), got {ids.dtype} of shape {ids.shape}")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.num_envs):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise ValueError(f"{what}: env_id {bad} is out of range for num_envs={self.num_envs}: use ids "
                             f"0..{self.num_envs - 1} (recv() returns them in info['env_id'])")
        return np.ascontiguousarray(ids, dtype=np.int64)

    def _actions(self, action, count):
        a = np.asarray(action)
        if a.dtype.kind not in "iu":
            raise TypeError(f"send(): action must be ints 0..{_N_ACTIONS - 1} (one per env_id), got an array of "
                            f"{a.dtype}: pass e.g. np.asarray(actions, dtype=np.int32)")
        if a.shape != (count,):
            raise ValueError(f"send(): action has shape {a.shape} for {count} env_ids: pass one action per env_id "
                             f"(env_id=None means all num_envs={self.num_envs} envs)")
        if a.size and (int(a.min()) < 0 or int(a.max()) >= _N_ACTIONS):
            bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
            raise ValueError(f"send(): action {bad} is out of range: crafter's actions are ids 0..{_N_ACTIONS - 1}")
        return np.ascontiguousarray(a, dtype=np.int64)

    def async_reset(self):
        """Reset every env in the background (refused while any env is in flight)."""
        self._core.reset_send(None)

    def send(self, action, env_id=None):
        """Queue ``action[k]`` for env ``env_id[k]`` and return at once."""
        if isinstance(action, dict):
            if env_id is not None:
                raise TypeError("send(): give env_id in the action dict or as the argument, not both")
            unknown = sorted(set(action) - {"action", "env_id"})
            if unknown or "action" not in action:
                raise ValueError(f"send(): a dict action holds 'action' (and 'env_id'); got keys {sorted(action)}")
            action, env_id = action["action"], action.get("env_id")
        ids = self._env_ids(env_id, "send()")
        self._core.send(self._actions(action, len(ids)), ids)

    def recv(self):
        """The first ``batch_size`` envs that finished: ``(obs, rew, terminated, truncated, info)``."""
        return self._core.recv(None, self.batch_size == self.num_envs)

    def step(self, action, env_id=None):
        """``send(action, env_id)`` then ``recv()``."""
        self.send(action, env_id)
        return self.recv()

    def reset(self, env_id=None, *, seed=None, options=None):
        """Reset the envs ``env_id`` (all when None) and return ``(obs, info)`` in env id order."""
        if seed is not None:
            raise ValueError("reset(seed=...): a pool's seeds are fixed by make(seed=...), as EnvPool's are: "
                             "make a new pool to change them")
        if options:
            unknown = sorted(set(options) - {"reset_mask"})
            if unknown:
                raise ValueError(f"reset(options=...): unknown options {unknown}: only 'reset_mask' is supported")
            mask = np.asarray(options["reset_mask"])
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,) or not mask.any():
                raise ValueError(f"reset(options={{'reset_mask': ...}}): give a bool array of shape ({self.num_envs},) "
                                 "with at least one True")
            if env_id is not None:
                raise ValueError("reset(): pass either env_id or options['reset_mask'], not both")
            env_id = np.flatnonzero(mask)
        ids = self._env_ids(env_id, "reset()")
        if not ids.size:
            raise ValueError("reset(): env_id is empty: give at least one env to reset")
        self._core.reset_send([int(i) for i in ids])
        obs, _, _, _, info = self._core.recv(len(ids), True)
        return obs, info

    def close(self, **kwargs):
        """Close the pool (any thread); closing again does nothing."""
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return self.num_envs

    def __repr__(self):
        return (f"vlmcrafter.envpool.EnvPool(task_id={self.task_id!r}, num_envs={self.num_envs}, "
                f"batch_size={self.batch_size}, num_threads={self._core.threads}, seed={self.config['seed']!r})")


def make(task_id="Crafter-v1", env_type="gymnasium", num_envs=1, batch_size=None, num_threads=None, seed=42,
         max_episode_steps=None, *, area=(64, 64), view=(9, 9), size=(64, 64), reward=None, length=10000,
         textures=None, fetch=True, obs_text=None, semantic=False):
    """An :class:`EnvPool` of ``num_envs`` Crafter envs, as ``envpool.make`` makes one.

    ``task_id``: ``"Crafter-v1"`` (or ``CrafterReward-v1``, ``CrafterNoReward-v1``; the
    ``vlmcrafter/`` prefix is optional). ``env_type``: ``"gymnasium"`` or ``"gym"`` (both give
    the gymnasium 5-tuple API, as EnvPool's gym wrapper does); ``"dm"`` is not supported.
    ``batch_size``: how many envs ``recv`` returns (default ``num_envs``: synchronous).
    ``num_threads``: worker threads (default ``min(batch_size, the available cores)``; EnvPool's
    default is ``batch_size``). ``seed``: an int (env ``i`` gets ``seed + i``, as EnvPool and
    ``vlmcrafter.crafter.VectorEnv`` seed them; default 42, EnvPool's) or one int per env.
    ``max_episode_steps``: caps crafter's ``length`` (episodes are truncated after that many
    steps). The keyword-only arguments are ``vlmcrafter.crafter.VectorEnv``'s (``reward``: the
    task's unless given).
    """
    if not isinstance(task_id, str):
        raise TypeError(f"task_id must be a str such as 'Crafter-v1', not {type(task_id).__name__}")
    name = task_id[len("vlmcrafter/"):] if task_id.startswith("vlmcrafter/") else task_id
    if name not in TASK_IDS:
        raise ValueError(f"unknown task_id {task_id!r}: use one of {sorted(TASK_IDS)}")
    if env_type not in _ENV_TYPES:
        raise ValueError(f"env_type={env_type!r}: vlmcrafter's pool has the gymnasium API only: use "
                         "env_type='gymnasium' (or 'gym', the same API)")
    if not _is_int(num_envs):
        raise TypeError(f"num_envs must be an int (the number of envs), not {type(num_envs).__name__}")
    for arg, value in (("batch_size", batch_size), ("num_threads", num_threads),
                       ("max_episode_steps", max_episode_steps)):
        if value is not None and not _is_int(value):
            raise TypeError(f"{arg} must be an int, not {type(value).__name__}")
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs}: a pool needs at least one env")
    batch_size = num_envs if batch_size is None else int(batch_size)
    if not 1 <= batch_size <= num_envs:
        raise ValueError(f"batch_size={batch_size}: must be between 1 and num_envs={num_envs} "
                         "(recv() returns that many envs)")
    if max_episode_steps is not None and max_episode_steps < 1:
        raise ValueError(f"max_episode_steps={max_episode_steps}: give an int >= 1, or None for crafter's length")
    if obs_text not in _TEXT_FORMATS:
        raise ValueError(f"obs_text={obs_text!r}: use None, 'state' or 'balrog'")
    return EnvPool(name, int(num_envs), batch_size, None if num_threads is None else int(num_threads), seed,
                   None if max_episode_steps is None else int(max_episode_steps), area=area, view=view, size=size,
                   reward=TASK_IDS[name] if reward is None else reward, length=length, textures=textures,
                   fetch=fetch, obs_text=obs_text, semantic=semantic)


def make_gymnasium(task_id="Crafter-v1", **kwargs):
    """``make(task_id, env_type="gymnasium", **kwargs)`` (EnvPool's shortcut)."""
    return make(task_id, env_type="gymnasium", **kwargs)


def make_gym(task_id="Crafter-v1", **kwargs):
    """``make(task_id, env_type="gym", **kwargs)`` (EnvPool's shortcut; the same API)."""
    return make(task_id, env_type="gym", **kwargs)
