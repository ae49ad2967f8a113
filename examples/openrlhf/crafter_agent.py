"""Crafter as a multi-turn VLM environment for OpenRLHF, backed by `vlm-eval serve-env` or in-process.

Pass this file to OpenRLHF with `--train.agent_func_path examples/openrlhf/crafter_agent.py`.
Each dataset row's label is the Crafter seed (see docs/RL.md); its prompt already holds the
first observation and frame of that seed (built by `make_dataset.py`). Per episode:

* ``reset`` opens a session for the label's seed (the same world the prompt shows);
* ``step`` hands the model's raw output to the session, which parses it exactly as the
  vlm-eval evaluator does (a reply with no usable action plays ``noop``), steps the game and
  returns rewards, the next observation and frame;
* the feedback is a Qwen-format user turn with one image placeholder per returned frame, and
  the frames come back as PIL images in ``environment_images``.

Where sessions run is one setting, CRAFTER_ENV: ``http`` (the default) talks to a
``vlm-eval serve-env`` server; ``inprocess`` plays them in this process with the ``vlm-eval``
Python package (``vlmcrafter``, docs/PYTHON.md; ``vlmcrafter.session``, imported only then): the same
parser, rules, rewards, observations and frames as the server, with no server, no HTTP and no
PNG round trip. The HTTP path needs nothing beyond the standard library.

Configuration (environment variables, read when an episode starts):

  CRAFTER_ENV              ``http`` (default) or ``inprocess``
  CRAFTER_ENV_URL          server address (default http://127.0.0.1:8000; http only)
  CRAFTER_ENV_TOKEN        bearer token, if the server was started with --token
  CRAFTER_MAX_TURNS        model turns per episode before it is cut off (default 32)
  CRAFTER_EPISODE_LENGTH   game length in env steps (default: the server's)
  CRAFTER_IMAGE_SIZE       frame size in pixels (default: the server's)
  CRAFTER_OBS_FORMAT       text observation format, "state" or "balrog" (default: the server's)
  CRAFTER_PROTOCOL         how replies are parsed, "tool" or "text" (default: the server's)
  CRAFTER_MAX_ACTIONS      actions taken from one reply at most, tool protocol (default: the
                           server's)
  CRAFTER_TIMEOUT_S        HTTP timeout per request (default 60)
  CRAFTER_RESET_WAIT_S     how long ``reset`` keeps retrying while the server is full (503),
                           honouring its Retry-After (default 120; 0: fail at once)

In-process, "the server's" defaults are serve-env's own (64 px, "state", "tool", 8 actions,
10000 steps), so set CRAFTER_PROTOCOL=text where the server would run with --protocol text.

A label may also be a JSON object, e.g. ``{"seed": 7, "length": 200}``, which overrides the
length for that row.

Turn boundaries follow Qwen's chat template whatever the engine returns. OpenRLHF appends the
engine's raw ``token_ids``, which under vLLM end with the stop token ``<|im_end|>`` while
``.text`` leaves it out; so the feedback never puts an ``<|im_end|>`` before the user turn: it
starts with ``"\\n<|im_start|>user\\n"``, as OpenRLHF's own VLM example does.

Sessions are closed however an episode ends: on ``done``; when ``execute()`` stops early (the
context budget ``max_length`` is spent, an exception, cancellation), by ``AgentExecutor``'s
``execute`` wrapper; by a finalizer when an instance is dropped; and by
``AgentExecutor.shutdown()`` and at interpreter exit for whatever is still open. The server's
``--idle-timeout`` is the last resort (a killed process runs none of these). In-process
sessions are closed the same ways, which frees their memory.

Only the standard library talks to the server (urllib in a worker thread), so the file has
no dependency beyond what OpenRLHF already installs (torch, Pillow); CRAFTER_ENV=inprocess adds
the ``vlm-eval`` package.
"""

import asyncio
import base64
import contextvars
import io
import json
import os
import threading
import urllib.error
import urllib.request
import weakref
from typing import Any, Callable, Dict, List, Optional

import torch
from PIL import Image

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

# Qwen2/2.5/3-VL chat markup. Adjust these for another model family. The model's own turn
# end (<|im_end|>) is not here: it is the engine's stop token, already in the generated tokens.
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
USER_TURN = "\n<|im_start|>user\n"
ASSISTANT_TURN = "<|im_end|>\n<|im_start|>assistant\n"

# Longest single wait on a 503's Retry-After, seconds.
MAX_RETRY_AFTER_S = 30.0


class CrafterServerError(RuntimeError):
    """The env server answered with an error (its JSON message is kept)."""

    def __init__(self, message: str, status: int, retry_after: Optional[float] = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After in seconds (the server sends an integer); None if absent or a date."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class CrafterClient:
    """A tiny blocking client for the vlm-eval env server."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: Optional[dict] = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw).get("error", raw.decode(errors="replace"))
            except ValueError:
                message = raw.decode(errors="replace")
            raise CrafterServerError(
                f"{method} {path}: HTTP {e.code}: {message}",
                e.code,
                _retry_after(e.headers.get("Retry-After") if e.headers else None),
            ) from None

    def create(self, seed: int, **options: Any) -> dict:
        body = {"seed": seed}
        body.update({k: v for k, v in options.items() if v is not None})
        return self.request("POST", "/v1/sessions", body)

    def step(self, session_id: str, text: str) -> dict:
        return self.request("POST", f"/v1/sessions/{session_id}/step", {"text": text})

    def close(self, session_id: str) -> None:
        try:
            self.request("DELETE", f"/v1/sessions/{session_id}")
        except (CrafterServerError, OSError):
            pass  # already expired or closed; nothing to free


class InProcessClient:
    """The three calls of :class:`CrafterClient`, answered in this process by
    ``vlmcrafter.session.Session`` (CRAFTER_ENV=inprocess). Errors keep the server's statuses: an
    unknown session is 404, a finished one 409, bad options 400."""

    # Open sessions of every client in this process, by id.
    _sessions: Dict[str, Any] = {}
    _lock = threading.Lock()

    def __init__(self):
        try:
            from vlmcrafter.session import Session, SessionOver
        except ImportError as e:
            raise ImportError(
                f"CRAFTER_ENV=inprocess needs the vlmcrafter Python package ({e}): "
                "pip install . in a vlm-eval checkout (docs/PYTHON.md), or set CRAFTER_ENV=http and run `vlm-eval serve-env`"
            ) from None
        self._session_cls, self._over = Session, SessionOver

    @classmethod
    def open_count(cls) -> int:
        """Sessions open in this process."""
        with cls._lock:
            return len(cls._sessions)

    def create(self, seed: int, **options: Any) -> dict:
        frames = options.pop("frames", None) or "last"
        try:
            session = self._session_cls(seed, **{k: v for k, v in options.items() if v is not None})
            created = session.reset(frames=frames)
        except (TypeError, ValueError) as e:
            raise CrafterServerError(f"new session: {e}", 400) from None
        with self._lock:
            self._sessions[session.id] = session
        return created

    def step(self, session_id: str, text: str) -> dict:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise CrafterServerError(f"step: no session {session_id!r} (closed)", 404)
        try:
            return session.step(text)
        except self._over as e:
            raise CrafterServerError(f"step: {e}", 409) from None

    def close(self, session_id: str) -> None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.close()


def make_client():
    """The backend CRAFTER_ENV names: a server client (``http``) or in-process sessions."""
    backend = os.environ.get("CRAFTER_ENV", "").strip().lower() or "http"
    if backend == "http":
        return CrafterClient(
            os.environ.get("CRAFTER_ENV_URL", "http://127.0.0.1:8000"),
            os.environ.get("CRAFTER_ENV_TOKEN") or None,
            float(os.environ.get("CRAFTER_TIMEOUT_S", "60")),
        )
    if backend == "inprocess":
        return InProcessClient()
    raise ValueError(f"CRAFTER_ENV must be http or inprocess, not {backend!r}")


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name, "").strip()
    return int(value) if value else None


def parse_label(label: Any) -> Dict[str, Any]:
    """A label is a seed ("7", 7) or a JSON object with "seed" and optional "length"."""
    if isinstance(label, dict):
        parsed = dict(label)
    elif isinstance(label, (int, float)) and not isinstance(label, bool):
        parsed = {"seed": int(label)}
    else:
        text = str(label).strip()
        parsed = json.loads(text) if text.startswith("{") else {"seed": int(text)}
    if "seed" not in parsed:
        raise ValueError(f"label {label!r} has no seed")
    parsed["seed"] = int(parsed["seed"])
    return parsed


def decode_frame(b64_png: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64_png))).convert("RGB")


def frame_image(result: dict) -> Image.Image:
    """The frame of a step result: a base64 PNG from the server, an array in-process."""
    if "frame" in result:
        return Image.fromarray(result["frame"])
    return decode_frame(result["frame_png_b64"])


def feedback_text(result: dict, with_image: bool) -> str:
    """The next user turn: what was executed, the evaluator's note, the observation, the frame."""
    lines = [f"Executed {len(result['actions'])} action(s): {', '.join(result['actions'])}."]
    if result.get("unlocked"):
        lines.append("Unlocked: " + ", ".join(result["unlocked"]) + ".")
    if result.get("note"):
        lines.append(result["note"])
    lines.append("")
    lines.append(result["observation"])
    body = "\n".join(lines)
    if with_image:
        body += "\n" + IMAGE_PLACEHOLDER
    return USER_TURN + body + ASSISTANT_TURN


class _Lease:
    """The server session an episode holds; closed once, from whichever path ends it first.

    Kept apart from the instance so that a finalizer can close it without keeping the instance
    alive.
    """

    def __init__(self, client: CrafterClient):
        self.client = client
        self.session_id: Optional[str] = None
        # A session was opened and has been closed since (by whoever ended the episode).
        self.ended = False
        self._lock = threading.Lock()

    def open(self, session_id: str) -> None:
        with self._lock:
            self.session_id, self.ended = session_id, False

    def take(self) -> Optional[str]:
        with self._lock:
            sid, self.session_id = self.session_id, None
            self.ended = self.ended or sid is not None
        return sid

    def close(self) -> None:
        """Close the session if one is open (blocking; safe to call any number of times)."""
        sid = self.take()
        if sid is not None:
            self.client.close(sid)


# Set by AgentExecutor.execute for the asyncio task it runs in: called with each AgentInstance
# that OpenRLHF's execute() creates there.
_REGISTER: contextvars.ContextVar[Optional[Callable[["AgentInstance"], None]]] = (
    contextvars.ContextVar("crafter_agent_register", default=None)
)


class AgentInstance(AgentInstanceBase):
    """One Crafter episode, bound to one session (on the server, or in-process)."""

    def __init__(self, *args, **kwargs):
        self.client = make_client()
        self.max_turns = _env_int("CRAFTER_MAX_TURNS") or 32
        wait = os.environ.get("CRAFTER_RESET_WAIT_S", "").strip()
        self.reset_wait_s = float(wait) if wait else 120.0
        self._lease = _Lease(self.client)
        # Closes the session when the instance is garbage-collected, and at interpreter exit
        # for instances still alive then.
        self._finalizer = weakref.finalize(self, self._lease.close)
        register = _REGISTER.get()
        if register is not None:
            register(self)
        self._clear()

    @property
    def session_id(self) -> Optional[str]:
        """The open server session, or None."""
        return self._lease.session_id

    def _clear(self) -> None:
        self.turns = 0
        self.env_steps = 0
        self.total_reward = 0.0
        self.invalid = 0
        self.achievements = 0
        self.progression = 0.0
        self.died = 0.0
        self.env_error = 0.0

    async def aclose(self) -> None:
        """Close the session if it is still open. Survives the caller's cancellation: the
        close runs in a thread and finishes even if this await is cancelled."""
        if self._lease.session_id is not None:
            await asyncio.shield(asyncio.to_thread(self._lease.close))

    def _open_blocking(self, seed: int, options: Dict[str, Any]) -> dict:
        created = self.client.create(seed, **options)
        # Recorded in the worker thread, so that a session created after the caller was
        # cancelled is still known, and closed by the finalizer.
        self._lease.open(created["id"])
        return created

    async def _open(self, seed: int, options: Dict[str, Any]) -> dict:
        """POST /v1/sessions; while the server is full (503), wait as its Retry-After says
        and try again, for at most CRAFTER_RESET_WAIT_S seconds in all."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reset_wait_s
        while True:
            try:
                return await asyncio.to_thread(self._open_blocking, seed, options)
            except CrafterServerError as e:
                if e.status != 503:
                    raise
                left = deadline - loop.time()
                if left <= 0:
                    raise CrafterServerError(
                        f"{e} (still full after waiting {self.reset_wait_s:g} s: size the server's "
                        "--max-sessions for rollout batch x samples per prompt, see docs/RL.md, "
                        "or raise CRAFTER_RESET_WAIT_S)",
                        e.status,
                        e.retry_after,
                    ) from None
                wait = 1.0 if e.retry_after is None else e.retry_after
                await asyncio.sleep(min(wait, MAX_RETRY_AFTER_S, left))

    async def reset(self, states: dict, **kwargs):
        """Open a session for the label's seed; the prompt (first frame) is used as is."""
        label = parse_label(states["label"])
        await self.aclose()
        options = {
            "length": label.get("length", _env_int("CRAFTER_EPISODE_LENGTH")),
            "image_size": _env_int("CRAFTER_IMAGE_SIZE"),
            "obs_format": os.environ.get("CRAFTER_OBS_FORMAT") or None,
            "protocol": os.environ.get("CRAFTER_PROTOCOL") or None,
            "max_actions": _env_int("CRAFTER_MAX_ACTIONS"),
            "frames": "none",  # the dataset prompt already carries the first frame
        }
        await self._open(label["seed"], options)
        self._clear()
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs) -> Dict[str, Any]:
        """Play the model's output; return OpenRLHF's step dict."""
        session_id = self._lease.session_id
        if session_id is None:
            if not self._lease.ended:
                raise RuntimeError("step() before reset()")
            return self._lost()  # closed under us, e.g. by AgentExecutor.shutdown()
        try:
            result = await asyncio.to_thread(self.client.step, session_id, states["action_text"])
        except CrafterServerError as e:
            if e.status not in (404, 409):
                raise
            # The session expired (idle timeout) or already ended: end this episode quietly.
            self._lease.take()
            return self._lost()
        self.turns += 1
        self.env_steps = int(result["step"])
        self.total_reward += float(result["reward"])
        self.invalid += int(result["invalid"])
        self.achievements = len(result["achievements"])
        self.progression = float(result["progression"])
        self.died = float(result["termination"] == "death")
        done = bool(result["done"]) or self.turns >= self.max_turns
        if done:
            await self.aclose()
            # Nothing follows the model's last turn: its tokens already end with the stop token.
            feedback = ""
            images: List[Image.Image] = []
        else:
            # No <|im_end|> in front: the engine's tokens for this turn already end with it
            # (vLLM's .text leaves it out, its token_ids do not; OpenRLHF appends the tokens).
            feedback = feedback_text(result, with_image=True)
            images = [frame_image(result)]
        return {
            "rewards": torch.tensor(float(result["reward"])),
            "scores": torch.tensor(self.progression),
            "environment_feedback": feedback,
            "environment_images": images,
            "done": done,
            "extra_logs": self.logs(),
        }

    def _lost(self) -> Dict[str, Any]:
        """End an episode whose session is gone, with env_error = 1 and no reward."""
        self.env_error = 1.0
        return {
            "rewards": torch.tensor(0.0),
            "scores": torch.tensor(self.progression),
            "environment_feedback": "",
            "environment_images": [],
            "done": True,
            "extra_logs": self.logs(),
        }

    def logs(self) -> Dict[str, float]:
        """Per-episode figures for OpenRLHF's logger (same keys on every step)."""
        return {
            "achievements": float(self.achievements),
            "progression": self.progression,
            "steps": float(self.env_steps),
            "turns": float(self.turns),
            "invalid_replies": float(self.invalid),
            "episode_return": self.total_reward,
            "died": self.died,
            "env_error": self.env_error,
        }


class AgentExecutor(MultiTurnAgentExecutor):
    """The class OpenRLHF loads from --train.agent_func_path.

    OpenRLHF's ``execute()`` creates one AgentInstance per sample and drops it when it returns;
    it returns early, without ``done``, when the context budget (``max_length``) is spent, and
    it can raise or be cancelled. This wrapper closes the sessions of the instances it created
    on every one of those paths.
    """

    def __init__(self):
        super().__init__(AgentInstance)
        self._instances: "weakref.WeakSet[AgentInstance]" = weakref.WeakSet()

    async def execute(self, *args, **kwargs):
        created: List[AgentInstance] = []

        def register(instance: AgentInstance) -> None:
            created.append(instance)
            self._instances.add(instance)

        token = _REGISTER.set(register)
        try:
            return await super().execute(*args, **kwargs)
        finally:
            _REGISTER.reset(token)
            for instance in created:
                await instance.aclose()

    def shutdown(self) -> None:
        """Close every session still held by an instance this executor created, including
        episodes still running (their next step then ends them with env_error = 1)."""
        for instance in list(self._instances):
            instance._lease.close()
