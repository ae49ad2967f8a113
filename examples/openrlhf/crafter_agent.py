"""Crafter as a multi-turn VLM environment for OpenRLHF, backed by `vlm-eval serve-env`.

Pass this file to OpenRLHF with `--train.agent_func_path examples/openrlhf/crafter_agent.py`.
Each dataset row's label is the Crafter seed (see docs/RL.md); its prompt already holds the
first observation and frame of that seed (built by `make_dataset.py`). Per episode:

* ``reset`` opens a server session for the label's seed (the same world the prompt shows);
* ``step`` sends the model's raw output to the server, which parses it exactly as the
  vlm-eval evaluator does (a reply with no usable action plays ``noop``), steps the game and
  returns rewards, the next observation and frame;
* the feedback is a Qwen-format user turn with one image placeholder per returned frame, and
  the frames come back as PIL images in ``environment_images``.

Configuration (environment variables, read when an episode starts):

  CRAFTER_ENV_URL          server address (default http://127.0.0.1:8000)
  CRAFTER_ENV_TOKEN        bearer token, if the server was started with --token
  CRAFTER_MAX_TURNS        model turns per episode before it is cut off (default 32)
  CRAFTER_EPISODE_LENGTH   game length in env steps (default: the server's)
  CRAFTER_IMAGE_SIZE       frame size in pixels (default: the server's)
  CRAFTER_OBS_FORMAT       text observation format, "state" or "balrog" (default: the server's)
  CRAFTER_TIMEOUT_S        HTTP timeout per request (default 60)

A label may also be a JSON object, e.g. ``{"seed": 7, "length": 200}``, which overrides the
length for that row.

Only the standard library talks to the server (urllib in a worker thread), so the file has
no dependency beyond what OpenRLHF already installs (torch, Pillow).
"""

import asyncio
import base64
import io
import json
import os
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

import torch
from PIL import Image

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

# Qwen2/2.5/3-VL chat markup. Adjust these three for another model family.
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
TURN_END = "<|im_end|>"
USER_TURN = "\n<|im_start|>user\n"
ASSISTANT_TURN = "<|im_end|>\n<|im_start|>assistant\n"


class CrafterServerError(RuntimeError):
    """The env server answered with an error (its JSON message is kept)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


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
            raise CrafterServerError(f"{method} {path}: HTTP {e.code}: {message}", e.code) from None

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


class AgentInstance(AgentInstanceBase):
    """One Crafter episode, bound to one server session."""

    def __init__(self, *args, **kwargs):
        self.client = CrafterClient(
            os.environ.get("CRAFTER_ENV_URL", "http://127.0.0.1:8000"),
            os.environ.get("CRAFTER_ENV_TOKEN") or None,
            float(os.environ.get("CRAFTER_TIMEOUT_S", "60")),
        )
        self.max_turns = _env_int("CRAFTER_MAX_TURNS") or 32
        self.session_id: Optional[str] = None
        self._clear()

    def _clear(self) -> None:
        self.turns = 0
        self.env_steps = 0
        self.total_reward = 0.0
        self.invalid = 0
        self.achievements = 0
        self.progression = 0.0
        self.died = 0.0
        self.env_error = 0.0

    async def reset(self, states: dict, **kwargs):
        """Open a session for the label's seed; the prompt (first frame) is used as is."""
        label = parse_label(states["label"])
        if self.session_id is not None:
            await asyncio.to_thread(self.client.close, self.session_id)
        options = {
            "length": label.get("length", _env_int("CRAFTER_EPISODE_LENGTH")),
            "image_size": _env_int("CRAFTER_IMAGE_SIZE"),
            "obs_format": os.environ.get("CRAFTER_OBS_FORMAT") or None,
            "frames": "none",  # the dataset prompt already carries the first frame
        }
        created = await asyncio.to_thread(self.client.create, label["seed"], **options)
        self.session_id = created["id"]
        self._clear()
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs) -> Dict[str, Any]:
        """Play the model's output; return OpenRLHF's step dict."""
        if self.session_id is None:
            raise RuntimeError("step() before reset()")
        try:
            result = await asyncio.to_thread(
                self.client.step, self.session_id, states["action_text"]
            )
        except CrafterServerError as e:
            if e.status not in (404, 409):
                raise
            # The session expired (idle timeout) or already ended: end this episode quietly.
            self.session_id = None
            self.env_error = 1.0
            return {
                "rewards": torch.tensor(0.0),
                "scores": torch.tensor(self.progression),
                "environment_feedback": "",
                "environment_images": [],
                "done": True,
                "extra_logs": self.logs(),
            }
        self.turns += 1
        self.env_steps = int(result["step"])
        self.total_reward += float(result["reward"])
        self.invalid += int(result["invalid"])
        self.achievements = len(result["achievements"])
        self.progression = float(result["progression"])
        self.died = float(result["termination"] == "death")
        done = bool(result["done"]) or self.turns >= self.max_turns
        action_text = states["action_text"]
        closed = action_text.rstrip().endswith(TURN_END)
        if done:
            await asyncio.to_thread(self.client.close, self.session_id)
            self.session_id = None
            # Close the model's turn if needed; nothing more is generated after this.
            feedback = "" if closed else TURN_END
            images: List[Image.Image] = []
        else:
            feedback = ("" if closed else TURN_END) + feedback_text(result, with_image=True)
            images = [decode_frame(result["frame_png_b64"])]
        return {
            "rewards": torch.tensor(float(result["reward"])),
            "scores": torch.tensor(self.progression),
            "environment_feedback": feedback,
            "environment_images": images,
            "done": done,
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
    """The class OpenRLHF loads from --train.agent_func_path."""

    def __init__(self):
        super().__init__(AgentInstance)
