"""Run examples/openrlhf/crafter_agent.py against a live `vlm-eval serve-env`.

    CRAFTER_ENV_URL=http://127.0.0.1:8000 python tests/python/test_crafter_agent.py

OpenRLHF's base classes (and torch, when it is not installed) are replaced by small stand-ins
in sys.modules, so only Pillow is needed. Two seeds x 5 turns: checks the step dict's keys and
types, one image placeholder per returned frame, frames and rewards equal to a session driven
directly over HTTP with the same texts, the turn cap, the episode length, and that finished
episodes close their session. Plain asserts; exits non-zero on the first failure.
"""

import abc
import asyncio
import base64
import importlib.util
import io
import json
import os
import sys
import types
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT_FILE = ROOT / "examples" / "openrlhf" / "crafter_agent.py"
PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def install_stand_ins() -> None:
    """Minimal openrlhf.utils.agent (and torch) with the shapes crafter_agent.py relies on."""

    class AgentInstanceBase(abc.ABC):
        @abc.abstractmethod
        def __init__(self, *args, **kwargs):
            pass

        async def reset(self, states: dict, **kwargs):
            return states

        @abc.abstractmethod
        async def step(self, states: dict, **kwargs):
            raise NotImplementedError

    class MultiTurnAgentExecutor:
        def __init__(self, agent_instance_cls):
            assert issubclass(agent_instance_cls, AgentInstanceBase)
            self.agent_instance_cls = agent_instance_cls

    agent = types.ModuleType("openrlhf.utils.agent")
    agent.AgentInstanceBase = AgentInstanceBase
    agent.MultiTurnAgentExecutor = MultiTurnAgentExecutor
    utils = types.ModuleType("openrlhf.utils")
    utils.agent = agent
    root = types.ModuleType("openrlhf")
    root.utils = utils
    sys.modules.update({"openrlhf": root, "openrlhf.utils": utils, "openrlhf.utils.agent": agent})

    try:
        import torch  # noqa: F401
    except ImportError:

        class Tensor:
            def __init__(self, value):
                self.value = float(value)

            def item(self) -> float:
                return self.value

        fake = types.ModuleType("torch")
        fake.Tensor = Tensor
        fake.tensor = lambda value, **kw: Tensor(value)
        sys.modules["torch"] = fake


def load_agent():
    spec = importlib.util.spec_from_file_location("crafter_agent", AGENT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def http(method: str, url: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


TURNS = [
    '<tool_call>\n{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}\n</tool_call><|im_end|>',
    "The tree is north.\nACTION: move_up\nACTION: do<|im_end|>",
    "I am not sure what to do.<|im_end|>",
    '<tool_call>{"name": "interact_many", "arguments": {"actions": ["do", "do", "move_right"]}}</tool_call>',
    "move_down<|im_end|>",
]


def check_episode(mod, url: str, label, seed: int, length=None):
    """Play TURNS through the agent and, in lockstep, through a direct session."""
    from PIL import Image

    inst = mod.AgentExecutor().agent_instance_cls()
    prompt = "<|im_start|>user\nfirst frame here<|im_end|>\n<|im_start|>assistant\n"
    reset = asyncio.run(inst.reset({"observation": prompt, "label": label}))
    assert reset == {"observation": prompt}, reset
    agent_session = inst.session_id
    assert isinstance(agent_session, str) and agent_session

    body = {"seed": seed}
    if length is not None:
        body["length"] = length
    status, direct = http("POST", f"{url}/v1/sessions", body)
    assert status == 200, direct
    direct_id = direct["id"]

    done_at = None
    for turn, text in enumerate(TURNS, start=1):
        out = asyncio.run(inst.step({"observation_text": prompt, "action_text": text, "label": label}))
        status, ref = http("POST", f"{url}/v1/sessions/{direct_id}/step", {"text": text})
        assert status == 200, ref

        for key in ("rewards", "scores", "environment_feedback", "environment_images", "done", "extra_logs"):
            assert key in out, f"missing {key}"
        reward = out["rewards"].item()
        assert isinstance(reward, float)
        assert abs(reward - ref["reward"]) < 1e-9, (turn, reward, ref["reward"])
        score = out["scores"].item()
        assert abs(score - ref["progression"]) < 1e-12 and 0.0 <= score <= 1.0
        assert isinstance(out["done"], bool)
        feedback = out["environment_feedback"]
        images = out["environment_images"]
        assert isinstance(feedback, str) and isinstance(images, list)
        assert feedback.count(PLACEHOLDER) == len(images), (feedback, len(images))
        logs = out["extra_logs"]
        assert logs["steps"] == ref["step"] and logs["turns"] == turn
        assert logs["achievements"] == len(ref["achievements"])
        assert all(isinstance(v, float) for v in logs.values()), logs

        expect_done = ref["done"] or turn == 5
        assert out["done"] == expect_done, (turn, out["done"], ref["done"])
        if out["done"]:
            assert images == [] and PLACEHOLDER not in feedback
            assert inst.session_id is None
            done_at = turn
            break
        assert len(images) == 1
        img = images[0]
        assert isinstance(img, Image.Image) and img.mode == "RGB" and img.size == (64, 64)
        ref_img = Image.open(io.BytesIO(base64.b64decode(ref["frame_png_b64"]))).convert("RGB")
        assert img.tobytes() == ref_img.tobytes(), f"turn {turn}: frame differs"
        # A Qwen user turn that ends by opening the assistant's next turn.
        prefix = "" if text.endswith("<|im_end|>") else "<|im_end|>"
        assert feedback.startswith(prefix + "\n<|im_start|>user\n"), feedback[:60]
        assert feedback.endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert ref["observation"] in feedback
        assert ("no valid action" in feedback) == ref["invalid"]
        assert f"Executed {len(ref['actions'])} action(s)" in feedback

    assert done_at is not None, "the episode never ended"
    # The agent closed its session; the direct one is still there until we close it.
    status, err = http("POST", f"{url}/v1/sessions/{agent_session}/step", {"actions": ["noop"]})
    assert status == 404 and "error" in err, (status, err)
    status, _ = http("DELETE", f"{url}/v1/sessions/{direct_id}")
    assert status == 200
    return done_at


def main() -> int:
    url = os.environ.get("CRAFTER_ENV_URL")
    if not url:
        print("set CRAFTER_ENV_URL to a running `vlm-eval serve-env` address", file=sys.stderr)
        return 2
    install_stand_ins()
    os.environ["CRAFTER_ENV_URL"] = url
    os.environ["CRAFTER_MAX_TURNS"] = "5"
    mod = load_agent()

    assert mod.parse_label("7") == {"seed": 7}
    assert mod.parse_label(7) == {"seed": 7}
    assert mod.parse_label('{"seed": 3, "length": 9}') == {"seed": 3, "length": 9}
    try:
        mod.parse_label("{}")
        raise AssertionError("a label without a seed was accepted")
    except ValueError:
        pass

    # Seed 3: runs all 5 turns and is cut off by CRAFTER_MAX_TURNS.
    assert check_episode(mod, url, "3", 3) == 5
    # Seed 8 with a 6-step game: the game ends (length) before the turn cap.
    ended = check_episode(mod, url, json.dumps({"seed": 8, "length": 6}), 8, length=6)
    assert ended < 5, ended

    # A session that vanished (e.g. idle expiry) ends the episode instead of crashing.
    inst = mod.AgentInstance()
    asyncio.run(inst.reset({"observation": "p", "label": "1"}))
    http("DELETE", f"{url}/v1/sessions/{inst.session_id}")
    out = asyncio.run(inst.step({"observation_text": "p", "action_text": "do", "label": "1"}))
    assert out["done"] is True and out["extra_logs"]["env_error"] == 1.0
    print("all agent checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
