"""Stable-Baselines3: :class:`CrafterVecEnv`, an SB3 ``VecEnv`` over the native vector env.

``CrafterVecEnv(n)`` steps ``n`` Crafter envs in native threads (:class:`vlmcrafter.vector.VectorEnv`
in gymnasium's ``SAME_STEP`` autoreset mode) and speaks SB3's ``VecEnv`` API exactly as SB3's own
``DummyVecEnv([lambda: gymnasium.make("vlmcrafter/Crafter-v1")] * n)`` does: the same
observations, rewards, dones and infos, step for step, for the same seeds. PPO, A2C and DQN
take it as they take ``DummyVecEnv``, and SB3's vector wrappers (``VecMonitor``,
``VecFrameStack``, ``VecTransposeImage``, ``VecNormalize``) go on top::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from vlmcrafter.sb3 import CrafterVecEnv

    env = VecMonitor(CrafterVecEnv(8, seed=0))
    PPO("CnnPolicy", env).learn(10_000)

stable-baselines3 is imported here only: ``import vlmcrafter`` never needs it, and importing
this module without it is one ImportError that says what to install.

The SB3 behaviour this follows, and where SB3 2.9.2 defines it:
  - ``VecEnv`` (``stable_baselines3/common/vec_env/base_vec_env.py``): ``reset()`` returns the
    observations only; ``seed(s)`` stores ``s + i`` for env ``i`` in ``_seeds``, used by the
    next ``reset()`` only; ``set_options`` likewise stores ``_options`` for the next reset;
    ``step`` is ``step_async`` then ``step_wait``; ``render()`` tiles ``get_images()``.
  - ``DummyVecEnv`` (``dummy_vec_env.py``): ``step_wait`` returns ``(obs, rewards float32,
    dones bool, infos)`` with ``dones = terminated or truncated``, ``info["TimeLimit.truncated"]
    = truncated and not terminated`` on every env, and on done the reset observation in ``obs``,
    the last one in ``info["terminal_observation"]`` and the reset info in ``reset_infos[i]``;
    ``reset()`` passes each env its seed from ``_seeds`` (None: the env goes on) and then
    clears the seeds and options; ``get_attr``/``env_method`` read the sub-envs' attributes
    (``get_wrapper_attr``) and ``set_attr`` sets one on the outermost wrapper.
"""

import numbers

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv as _SB3VecEnv
except ImportError as _e:  # pragma: no cover - the message is the point
    raise ImportError(
        "vlmcrafter.sb3 needs Stable-Baselines3 (2.x, with gymnasium >= 1.0): "
        "pip install stable-baselines3"
    ) from _e

from ._args import _is_int
from .vector import ACHIEVEMENT_NAMES, ITEM_NAMES, VectorEnv, make_vec_env

__all__ = ["CrafterVecEnv"]

#: The single env's ``metadata`` (``vlmcrafter.gym.CrafterEnv.metadata``), which ``DummyVecEnv``
#: takes as its own.
_METADATA = {"render_modes": ["rgb_array"], "render_fps": 10}
#: Sub-env methods that ``env_method`` calls (the single env's ``text`` and ``render``).
_METHODS = ("text", "render")


def _split_infos(infos, index=None):
    """The single env's ``info`` dict of each env in ``index`` (a list of ints; None: every
    env), from the native env's gymnasium ``infos`` (dict of arrays): the keys, order and types
    that ``vlmcrafter.gym.CrafterEnv`` gives (``inventory`` and ``achievements`` dicts of ints,
    ``discount`` and ``reward`` floats, ``semantic`` and ``player_pos`` arrays, ``text``)."""
    inventory, achievements = infos["inventory"], infos["achievements"]
    inv = np.stack([inventory[k] for k in ITEM_NAMES], axis=1)
    ach = np.stack([achievements[k] for k in ACHIEVEMENT_NAMES], axis=1)
    discount, reward, pos = infos["discount"], infos["reward"], infos["player_pos"]
    semantic, text = infos.get("semantic"), infos.get("text")
    if index is not None:
        inv, ach, discount, reward, pos = inv[index], ach[index], discount[index], reward[index], pos[index]
        semantic = None if semantic is None else semantic[index]
        text = None if text is None else text[index]
    rows = zip(inv.tolist(), ach.tolist(), discount.tolist(), list(pos), reward.tolist())
    if semantic is None and text is None:  # the default: one comprehension (the hot path)
        return [{"inventory": dict(zip(ITEM_NAMES, i)), "achievements": dict(zip(ACHIEVEMENT_NAMES, a)),
                 "discount": d, "player_pos": p, "reward": r} for i, a, d, p, r in rows]
    out = []
    for j, (i, a, d, p, r) in enumerate(rows):
        info = {"inventory": dict(zip(ITEM_NAMES, i)), "achievements": dict(zip(ACHIEVEMENT_NAMES, a)), "discount": d}
        if semantic is not None:
            info["semantic"] = semantic[j]
        info["player_pos"] = p
        info["reward"] = r
        if text is not None:
            info["text"] = text[j]
        out.append(info)
    return out


def _check_flag(crafter_info):
    if not isinstance(crafter_info, bool):
        raise TypeError(f"crafter_info={crafter_info!r}: must be True or False")


class CrafterVecEnv(_SB3VecEnv):
    """``num_envs`` Crafter envs stepped natively, as a Stable-Baselines3 ``VecEnv``.

    Args:
        num_envs: number of envs (at least 1).
        seed: None, or an int: env ``i`` plays crafter's episodes 1, 2, ... of seed ``seed + i``
            from the first ``reset()`` on (what SB3's ``make_vec_env(seed=)`` and
            ``vec_env.seed(seed)`` do). ``seed()`` reseeds at the next ``reset()``, as in SB3.
        crafter_info: True (the default): each ``infos[i]`` (and ``reset_infos[i]``) holds the
            single env's ``info`` keys, as ``DummyVecEnv`` gives them; False: only SB3's own
            keys (``TimeLimit.truncated``, ``terminal_observation``), which is what SB3's
            algorithms read and saves building ``n`` crafter dicts per step.
        **kwargs: the native env's arguments (:class:`vlmcrafter.vector.VectorEnv` and
            :func:`vlmcrafter.vector.make_vec_env`): ``area``, ``view``, ``size``, ``reward``,
            ``length``, ``max_episode_steps``, ``threads``, ``textures``, ``fetch``,
            ``render_mode`` (``"rgb_array"``), ``obs_text`` (adds ``info["text"]``) and
            ``semantic`` (adds crafter's ``info["semantic"]``; off by default, it costs a
            copy of the map per env and step). ``autoreset_mode`` is SAME_STEP, SB3's, and
            ``copy`` True: SB3's algorithms keep the previous step's observations.

    Observations are the native space's: uint8 ``(n, H, W, 3)`` (HWC; SB3's ``CnnPolicy``
    wraps the env in ``VecTransposeImage`` itself). ``infos[i]`` holds the single env's keys
    (``inventory``, ``achievements``, ``discount``, ``player_pos``, ``reward``; ``semantic``
    and ``text`` when asked), ``TimeLimit.truncated``, and on done ``terminal_observation``.
    SB3's reset ``options`` (``set_options``) are accepted and dropped at the next ``reset()``,
    as the single env ignores them. ``env_is_wrapped`` is False for every gymnasium wrapper:
    the sub-envs are slots of one native env, not gymnasium envs. ``vector_env`` is the native
    env (``finished_episodes()``, ``text(i)``, ``episodes``).
    """

    def __init__(self, num_envs=1, seed=None, *, crafter_info=True, **kwargs):
        _check_flag(crafter_info)
        mode = kwargs.pop("autoreset_mode", "SAME_STEP")
        if str(getattr(mode, "value", mode)).replace("_", "").lower() != "samestep":
            raise ValueError(
                f"autoreset_mode={mode!r}: an SB3 VecEnv resets an ended env in the same step "
                "(SAME_STEP), so CrafterVecEnv takes no other mode; leave autoreset_mode out")
        if kwargs.get("copy", True) is not True:
            raise ValueError(
                f"copy={kwargs['copy']!r}: SB3's algorithms keep the previous step's observations "
                "(PPO's _last_obs, replay buffers), so CrafterVecEnv always returns new arrays; "
                "leave copy out")
        if seed is not None and not _is_int(seed):
            raise TypeError(f"seed={seed!r}: give an int >= 0 (env i plays seed + i) or None, as SB3's make_vec_env(seed=)")
        if _is_int(seed) and seed < 0:
            raise ValueError(f"seed={int(seed)}: seeds are ints >= 0 (env i plays seed + i)")
        venv = make_vec_env(num_envs, autoreset_mode="SAME_STEP", seed=seed, **kwargs)
        self._attach(venv, crafter_info)
        if seed is not None:
            self.seed(int(seed))

    @classmethod
    def from_vector_env(cls, vector_env, *, crafter_info=True):
        """An SB3 VecEnv over an existing native :class:`vlmcrafter.vector.VectorEnv` made with
        ``autoreset_mode="SAME_STEP"`` (``gymnasium.make_vec("vlmcrafter/Crafter-v1",
        num_envs=n, autoreset_mode="SAME_STEP")`` too). The first ``reset()`` goes on with its
        seeds; it is closed with the adapter."""
        _check_flag(crafter_info)
        native = getattr(vector_env, "unwrapped", vector_env)
        if not isinstance(native, VectorEnv):
            raise TypeError(
                f"from_vector_env takes vlmcrafter's native VectorEnv, not {type(vector_env).__name__}: "
                "for other gymnasium envs use SB3's DummyVecEnv or SubprocVecEnv")
        if native is not vector_env:
            raise TypeError("from_vector_env: pass the native env itself, not a gymnasium wrapper of it "
                            "(SB3 sees only the native env's steps)")
        if str(getattr(native.autoreset_mode, "value", native.autoreset_mode)) != "SameStep":
            raise ValueError(
                f"from_vector_env: the env's autoreset_mode is {native.autoreset_mode!r}; SB3 needs "
                "SAME_STEP: make it with autoreset_mode='SAME_STEP'")
        if not native.copy:
            raise ValueError("from_vector_env: the env was made with copy=False; SB3's algorithms keep "
                             "the previous step's observations: make it with copy=True (the default)")
        out = cls.__new__(cls)
        out._attach(native, crafter_info)
        return out

    def _infos(self, infos, index=None):
        if self.crafter_info:
            return _split_infos(infos, index)
        return [{} for _ in range(self.num_envs if index is None else len(index))]

    def _attach(self, venv, crafter_info=True):
        self.crafter_info = crafter_info
        self.vector_env = venv
        self._attrs = [{} for _ in range(venv.num_envs)]
        self._actions = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self.metadata = dict(_METADATA)

    # -- reset and step -------------------------------------------------------------------

    def reset(self):
        """Reset every env (the seeds from ``seed()`` apply now, once; an env without one goes
        on with its own sequence); returns the observations ``(n, H, W, 3)``. Each env's reset
        info is in ``reset_infos``."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, infos = self.vector_env.reset(seed=seeds)
        self.reset_infos = self._infos(infos)
        # SB3: seeds and options are only used once (DummyVecEnv.reset).
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions):
        """Keep ``actions`` for :meth:`step_wait` (the native step runs there)."""
        self._actions = actions

    def step_wait(self):
        """Step every env with the actions of :meth:`step_async`; returns ``(obs, rewards,
        dones, infos)`` as ``DummyVecEnv`` does (see the class doc)."""
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions): call step(actions), or step_async first")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, infos = self.vector_env.step(actions)
        n = self.num_envs
        out = self._infos(infos)
        time_limit = (truncated & ~terminated).tolist()
        finals = {}
        if "final_obs" in infos:
            ended = np.flatnonzero(infos["_final_obs"]).tolist()
            finals = dict(zip(ended, self._infos(infos["final_info"], ended)))
        for i in range(n):
            info = finals.get(i)
            if info is None:
                out[i]["TimeLimit.truncated"] = time_limit[i]
                continue
            # Ended: the step's info is the episode's last; the new episode's first is the
            # reset info, and obs[i] its first frame (DummyVecEnv.step_wait).
            self.reset_infos[i] = out[i]
            info["TimeLimit.truncated"] = time_limit[i]
            info["terminal_observation"] = infos["final_obs"][i]
            out[i] = info
        return obs, rewards.astype(np.float32), terminated | truncated, out

    def close(self):
        """Close the native env (every later call raises RuntimeError "closed")."""
        self.vector_env.close()

    # -- images --------------------------------------------------------------------------

    def get_images(self):
        """Each env's current frame (``render_mode="rgb_array"``); Nones and a warning without
        a render mode, as ``DummyVecEnv``."""
        if self.render_mode != "rgb_array":
            import warnings

            warnings.warn(f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images.")
            return [None] * self.num_envs
        return list(self.vector_env.render())

    # -- sub-env attributes and methods ------------------------------------------------

    def _indices(self, indices):
        """SB3's indices (None: all; an int; an iterable of ints, negative from the end) as a
        list of env indices; an index out of range is an IndexError."""
        n = self.num_envs
        if indices is None:
            return list(range(n))
        if _is_int(indices):
            indices = [indices]
        out = []
        for i in indices:
            if not isinstance(i, (numbers.Integral, np.integer)) or isinstance(i, (bool, np.bool_)):
                raise TypeError(f"indices: {i!r} is not an int (env indices 0..{n - 1})")
            if not -n <= i < n:
                raise IndexError(f"indices: env {int(i)} out of range for {n} envs")
            out.append(int(i) % n)
        return out

    def get_attr(self, attr_name, indices=None):
        """The attribute ``attr_name`` of each env in ``indices`` (a list): one set with
        :meth:`set_attr`, else what the native env's ``get_attr`` answers for its sub-envs
        (``observation_space``, ``action_space``, ``render_mode``, ``obs_text``, ``metadata``,
        ``spec``, ``np_random``, ...); any other name is an AttributeError."""
        index = self._indices(indices)
        own = [self._attrs[i] for i in index]
        if own and all(attr_name in a for a in own):
            return [a[attr_name] for a in own]
        values = self.vector_env.get_attr(attr_name)
        return [self._attrs[i][attr_name] if attr_name in self._attrs[i] else values[i] for i in index]

    def set_attr(self, attr_name, value, indices=None):
        """Set ``attr_name`` to ``value`` for each env in ``indices``, read back by
        :meth:`get_attr` (``DummyVecEnv`` sets it on each env's outermost wrapper). The native
        sub-envs' own attributes are read-only: setting one is an AttributeError."""
        index = self._indices(indices)
        try:
            self.vector_env.get_attr(attr_name)
        except AttributeError:
            pass
        else:
            raise AttributeError(f"set_attr({attr_name!r}): {attr_name!r} is read-only in the native vector env")
        for i in index:
            self._attrs[i][attr_name] = value

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        """Call ``method_name`` of each env in ``indices``: the single env's ``text(fmt)`` and
        ``render()``, or a callable set with :meth:`set_attr`; a list of the results."""
        index = self._indices(indices)
        results = []
        for i in index:
            if method_name in self._attrs[i]:
                results.append(self._attrs[i][method_name](*method_args, **method_kwargs))
            elif method_name == "text":
                results.append(self.vector_env.text(i, *method_args, **method_kwargs))
            elif method_name == "render":
                if method_args or method_kwargs:
                    raise TypeError("env_method('render') takes no arguments (the single env's render())")
                results.append(self.vector_env.obs[i].copy() if self.render_mode is not None else None)
            else:
                try:
                    self.vector_env.get_attr(method_name)
                except AttributeError:
                    raise AttributeError(
                        f"env_method({method_name!r}): the sub-envs have no such method; they answer "
                        f"{', '.join(_METHODS)}") from None
                raise TypeError(f"env_method({method_name!r}): {method_name!r} is an attribute, not a method: use get_attr")
        return results

    def env_is_wrapped(self, wrapper_class, indices=None):
        """False for each env in ``indices``: no gymnasium wrapper wraps the native sub-envs
        (wrap the whole VecEnv in SB3's ``VecMonitor`` for episode statistics)."""
        return [False] * len(self._indices(indices))

    def __repr__(self):
        return f"vlmcrafter.sb3.CrafterVecEnv({self.vector_env!r})"
