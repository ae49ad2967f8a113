"""serve-env's sessions in-process: one seeded Crafter episode played from a model's raw text.

``vlm-eval serve-env`` serves episodes over HTTP (docs/RL.md). :class:`Session` plays the same
episode without a server: the same world (episode 1 of the seed, as ``vlm-eval run`` plays it),
the same reply parser (``vlmcrafter._native.judge_reply``, the evaluator's), the same rules per
step (a reply with no usable action plays one ``noop`` and sets ``invalid`` and ``note``; the
actions run in order and stop when the episode ends) and the same documents::

    from vlmcrafter.session import Session

    s = Session(7)                      # serve-env's defaults: 64 px, "state", tool protocol
    first = s.reset()                   # as POST /v1/sessions answers
    r = s.step('<tool_call>{"name": "interact_many", "arguments": {"actions": ["do"]}}</tool_call>')
    r["reward"], r["done"], r["observation"], r["frame"]       # as POST .../step answers

The dicts have serve-env's keys and values, with two differences: frames are numpy arrays
(``uint8``, ``(H, W, 3)``) under ``frame`` (and ``frames`` with ``frames="all"``) instead of
base64 PNGs under ``frame_png_b64`` / ``frames_png_b64``; and with ``obs_format="balrog"`` the
``balrog`` object (BALROG's two texts apart) is left out (``observation`` holds them joined, as
serve-env's does). Stepping a finished episode raises :class:`SessionOver` (serve-env answers
409). Presets and BALROG's feedback are not offered here.
"""

import json
import numbers
import secrets

from . import _native
from .crafter import ACHIEVEMENT_NAMES, ACTION_NAMES, ITEM_NAMES, Env

__all__ = ["Session", "SessionOver", "INVALID_NOTE"]

#: The note serve-env (and the evaluator) puts before the next observation after a reply with
#: no usable action.
INVALID_NOTE = _native.INVALID_NOTE

# serve-env's limits (src/serve/api.rs).
_MAX_ACTIONS_PER_REQUEST = 1024
_CHOICES = {
    "obs_format": ("state", "balrog"),
    "protocol": ("tool", "text"),
    "parser": ("lenient", "strict", "balrog"),
    "frames": ("last", "all", "none"),
}
# What crafter's player starts with (crafter/objects.py, Player.__init__).
_START_VITALS = 9


class SessionOver(RuntimeError):
    """The episode has ended (death or length); start a new :class:`Session`."""


def _choice(field, value):
    if value not in _CHOICES[field]:
        raise ValueError(f"{field} must be one of {', '.join(map(repr, _CHOICES[field]))}; got {value!r}")
    return value


def _int(field, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{field} {value} is out of range: use {lo}..={hi}")
    return value


def _action_id(a):
    if isinstance(a, str):
        name = a.strip()
        if name in ACTION_NAMES:
            return ACTION_NAMES.index(name)
    elif isinstance(a, numbers.Integral) and not isinstance(a, bool) and 0 <= a < len(ACTION_NAMES):
        return int(a)
    shown = repr(a)
    shown = shown if len(shown) <= 60 else shown[:60] + "…"
    raise ValueError(
        f"unknown action {shown}: use a canonical name ({', '.join(ACTION_NAMES)}) or an id "
        f"0..={len(ACTION_NAMES) - 1}, or pass the model's output as text"
    )


class Session:
    """One Crafter episode played as ``vlm-eval serve-env`` plays a session.

    Args:
        seed: env seed, an int in -2**63..2**63-1; the episode is episode 1 of it, as in
            ``vlm-eval run`` (world seed ``hash((seed, 1)) % (2**31 - 1)``).
        image_size: frame size in pixels (square), 9..=1024.
        obs_format: the text observation, ``"state"`` or ``"balrog"``.
        length: episode length in env steps (0: unlimited).
        protocol: how ``step`` texts are parsed: ``"tool"`` (up to ``max_actions`` actions) or
            ``"text"`` (one action).
        max_actions: cap on actions taken from one text (1..=64; 1 under ``"text"``).
        parser: ``"lenient"``, ``"strict"`` or ``"balrog"`` (as serve-env's ``parser``).
        textures, fetch: crafter's textures, as for :class:`vlmcrafter.crafter.Env`.

    The defaults are serve-env's. Bad values raise ``ValueError`` or ``TypeError``.
    """

    def __init__(
        self,
        seed,
        *,
        image_size=64,
        obs_format="state",
        length=10000,
        protocol="tool",
        max_actions=8,
        parser="lenient",
        textures=None,
        fetch=True,
    ):
        seed = _int("seed", seed, -(2**63), 2**63 - 1)
        image_size = _int("image_size", image_size, 9, 1024)
        length = _int("length", length, 0, 2**32 - 1)
        protocol = _choice("protocol", protocol)
        max_actions = _int("max_actions", max_actions, 1, 64)
        # serve-env's options document, key for key.
        self.options = {
            "seed": seed,
            "image_size": image_size,
            "obs_format": _choice("obs_format", obs_format),
            "length": length,
            "protocol": protocol,
            "max_actions": 1 if protocol == "text" else max_actions,
            "preset": "vlm-eval",
            "parser": _choice("parser", parser),
            "feedback": "vlm-eval",
            "reset_noop": False,
            "render_twice": False,
        }
        self._textures = textures
        self._fetch = fetch
        #: An id like serve-env's (20 hex digits); nothing looks it up.
        self.id = secrets.token_hex(10)
        self._env = None
        self._termination = None
        self._closed = False

    @property
    def seed(self):
        return self.options["seed"]

    @property
    def world_seed(self):
        """This episode's world seed, as crafter derives it."""
        return hash((self.seed, 1)) % (2**31 - 1)

    @property
    def done(self):
        return self._termination is not None

    def reset(self, frames="last"):
        """Start (or restart) the episode; returns what serve-env's ``POST /v1/sessions``
        answers: ``id``, ``seed``, ``world_seed``, ``options`` and the state (``step``,
        ``vitals``, ``inventory``, ``achievements``, ``score``, ``progression``, ``done``,
        ``termination``, ``observation``, and ``frame`` unless ``frames="none"``)."""
        if _choice("frames", frames) == "all":
            raise ValueError("frames must be one of 'last', 'none' for reset()")
        self._check_open("reset()")
        o = self.options
        self._env = Env(
            size=(o["image_size"], o["image_size"]),
            length=o["length"] or None,
            seed=o["seed"],
            textures=self._textures,
            fetch=self._fetch,
        )
        self._frame = self._env.reset()
        self._steps = 0
        self._termination = None
        self._unlocked = set()
        items = {name: (_START_VITALS if i < 4 else 0) for i, name in enumerate(ITEM_NAMES)}
        self._inventory = items
        out = {"id": self.id, "seed": o["seed"], "world_seed": self.world_seed, "options": dict(o)}
        out.update(self._state(frames))
        return out

    def step(self, text=None, *, actions=None, frames="last"):
        """Play one model turn; returns what serve-env's ``POST /v1/sessions/{id}/step``
        answers.

        Give either ``text`` (the model's raw output: parsed as the evaluator parses it; no
        usable action plays one ``noop`` and sets ``invalid`` and ``note``) or ``actions``
        (names or ids 0..=16, at most 1024). The actions run in order and stop when the
        episode ends. ``frames``: ``"last"`` (``frame``), ``"all"`` (also ``frames``, one per
        executed step) or ``"none"``.
        """
        frames = _choice("frames", frames)
        self._check_open("step()")
        if self._env is None:
            raise RuntimeError("step() before reset(): call reset() first")
        if self._termination is not None:
            raise SessionOver(
                f"the episode is over ({self._termination} at step {self._steps}); "
                "start a new Session"
            )
        parsed, invalid = None, False
        if text is not None and actions is not None:
            raise ValueError("pass either text (the model's raw output) or actions, not both")
        if text is not None:
            if not isinstance(text, str):
                raise TypeError(f"text must be a str, not {type(text).__name__}")
            o = self.options
            ids, outcome, parsed_json = _native.judge_reply(
                text, protocol=o["protocol"], max_actions=o["max_actions"], mode=o["parser"]
            )
            parsed = json.loads(parsed_json)
            invalid = outcome == "invalid"
            ids = [0] if invalid else list(ids)
        elif actions is not None:
            if isinstance(actions, (str, bytes)) or not hasattr(actions, "__len__"):
                raise TypeError("actions must be a list of action names or ids")
            if not actions:
                raise ValueError("actions is empty: give at least one action")
            if len(actions) > _MAX_ACTIONS_PER_REQUEST:
                raise ValueError(
                    f"actions has {len(actions)} entries; at most {_MAX_ACTIONS_PER_REQUEST} per step"
                )
            ids = [_action_id(a) for a in actions]
        else:
            raise ValueError("give text (the model's raw output) or actions, e.g. ['move_left', 'do']")

        executed, rewards, unlocked = [], [], []
        every = [] if frames == "all" else None
        for a in ids:
            obs, reward, done, info = self._env.step(a)
            self._frame = obs
            self._steps += 1
            self._inventory = info["inventory"]
            executed.append(ACTION_NAMES[a])
            rewards.append(float(reward))
            for name in ACHIEVEMENT_NAMES:
                if info["achievements"][name] > 0 and name not in self._unlocked:
                    self._unlocked.add(name)
                    unlocked.append(name)
            if every is not None:
                every.append(obs)
            if done:
                self._termination = "death" if info["discount"] == 0 else "length"
                break
        total = 0.0
        for r in rewards:
            total += r
        out = {
            "id": self.id,
            "actions": executed,
            "rewards": rewards,
            "reward": total,
            "unlocked": unlocked,
            "invalid": invalid,
            "note": INVALID_NOTE if invalid else None,
        }
        if parsed is not None:
            out["parsed"] = parsed
        out.update(self._state(frames))
        if every is not None:
            out["frames"] = every
        return out

    def close(self):
        """Drop the episode (serve-env's ``DELETE``); returns ``{"id", "closed", "step"}``.
        Every later ``reset`` or ``step`` raises a RuntimeError saying the session is closed;
        ``close`` again returns the same answer."""
        if not self._closed:
            self._closed_step = self._steps if self._env is not None else None
        self._closed = True
        self._env = None
        return {"id": self.id, "closed": True, "step": self._closed_step}

    def _check_open(self, call):
        if self._closed:
            raise RuntimeError(f"{call} on a closed Session (close() ended it): start a new Session")

    def _state(self, frames):
        inv = self._inventory
        achievements = [n for n in ACHIEVEMENT_NAMES if n in self._unlocked]
        out = {
            "step": self._steps,
            "vitals": {k: int(inv[k]) for k in ITEM_NAMES[:4]},
            "inventory": {k: int(inv[k]) for k in ITEM_NAMES[4:]},
            "achievements": achievements,
            "score": len(achievements),
            "progression": len(achievements) / len(ACHIEVEMENT_NAMES),
            "done": self._termination is not None,
            "termination": self._termination,
            "observation": self._env.text(self.options["obs_format"]),
        }
        if frames != "none":
            out["frame"] = self._frame
        return out

    def __repr__(self):
        o = self.options
        return (
            f"vlmcrafter.session.Session({o['seed']!r}, image_size={o['image_size']!r}, "
            f"obs_format={o['obs_format']!r}, length={o['length']!r}, protocol={o['protocol']!r}, "
            f"max_actions={o['max_actions']!r}, parser={o['parser']!r})"
        )
