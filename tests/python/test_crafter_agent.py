"""examples/openrlhf/crafter_agent.py under the real OpenRLHF 0.11.2, against a live serve-env.

    scripts/openrlhf_check.sh     # pinned venv, a live `vlm-eval serve-env`, then this file
                                  # twice: CRAFTER_ENV=http, then CRAFTER_ENV=inprocess

The agent's backend is CRAFTER_ENV (http by default). With CRAFTER_ENV=inprocess the agent
plays its sessions in-process (`vlmcrafter.session`, the wheel installed into the venv) while the
server stays the oracle: every episode is replayed on it and must match, and
`check_backends_agree` drives the same seeds and replies through both backends side by side.

By hand: start `vlm-eval serve-env --port 0 --max-sessions 8` (the full-server checks fill it, so
keep --max-sessions small) and run

    CRAFTER_ENV_URL=http://ADDR .venv-openrlhf/bin/python tests/python/test_crafter_agent.py

Real code: OpenRLHF 0.11.2 (`_load_agent_executor` loads the agent file;
`RolloutRayActor.generate_responses` and `.generate` run `MultiTurnAgentExecutor.execute()`,
which tokenizes through `vlm_utils`; `datasets/prompts_dataset.py`'s `preprocess_data`
renders the prompt),
transformers 5.15.0's `Qwen2_5_VLProcessor` with `Qwen2Tokenizer` and `Qwen2VLImageProcessorPil`,
ray (imported for the `@ray.remote` actor class; no cluster is started, its methods are called on
a plain instance), Pillow, `make_dataset.py`, and the server.

Stand-ins, each for something that cannot run here:
* torch -> numpy (`install_numpy_torch`): torch's PyPI wheels need their CUDA libraries (several
  GB; CPU-only wheels live on another index, which is not reachable). Tensors are numpy arrays,
  and the processor returns numpy arrays where OpenRLHF asks for torch tensors.
* vllm -> `Engine` (`install_vllm`): vLLM needs torch and a GPU. `Engine` follows vLLM V1's
  output rules: it streams cumulative `RequestOutput`s, `token_ids` end with the stop token
  `<|im_end|>` and `.text` leaves it out (mode "vllm"), or `.text` keeps it as an engine that
  includes the stop string does (mode "stop_in_text"); `max_tokens` truncates with
  finish_reason "length". Like vLLM it refuses a prompt whose image placeholders do not match
  its images one to one, and a `max_tokens` below 1.
* Qwen's tokenizer and processor files -> a tiny byte-level BPE tokenizer built here with the
  `tokenizers` package, carrying Qwen's special tokens, and an image-processor config with
  Qwen2.5-VL's patch, merge and normalisation values (no hub access). The chat template is a
  ChatML template written here. The processor is built without a video processor
  (Qwen2VLVideoProcessor requires torch and torchvision).

Checks: the step contract (keys, types, one image per placeholder, the images equal the
server's frames), rewards and scores equal to a session driven directly with the same texts,
turn boundaries on Qwen's template (no doubled `<|im_end|>`) for both engine modes, no session
left open after a budget stop, an exception, a cancellation, a dropped instance or an executor
shutdown, and `reset` waiting out a full server (503, Retry-After) up to its bound. Plain
asserts; exits non-zero on the first failure.
"""

import asyncio
import base64
import gc
import importlib.machinery
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request
import uuid
from importlib.metadata import version
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
AGENT_FILE = ROOT / "examples" / "openrlhf" / "crafter_agent.py"
MAKE_DATASET = ROOT / "examples" / "openrlhf" / "make_dataset.py"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
SPECIAL_TOKENS = [
    "<|endoftext|>",
    IM_START,
    IM_END,
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# ChatML as Qwen2.5-VL renders it (one placeholder per image), without Qwen's default system
# prompt; written here, since Qwen's own template comes from the hub.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# The model's turns, in order (the engine adds the stop token).
REPLIES = [
    '<tool_call>\n{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}\n</tool_call>',
    "The tree is north.\nACTION: move_up\nACTION: do",
    "I am not sure what to do.",
    '<tool_call>{"name": "interact_many", "arguments": {"actions": ["do", "do", "move_right"]}}</tool_call>',
    "move_down",
]
MAX_TURNS = 5
RESULT_KEYS = {
    "prompt",
    "label",
    "images",
    "mm_train_inputs",
    "reward",
    "scores",
    "observation_tokens",
    "action_ranges",
    "rollout_log_probs",
    "truncated",
    "extra_logs",
}
LOG_KEYS = {
    "achievements",
    "progression",
    "steps",
    "turns",
    "invalid_replies",
    "episode_return",
    "died",
    "env_error",
}


# ---------------------------------------------------------------------------------------------
# Stand-ins and the processor


class Tensor(np.ndarray):
    """A torch tensor stand-in: a numpy array with the one method OpenRLHF calls that numpy
    lacks (`clone`)."""

    def clone(self):
        return np.array(self).view(Tensor)


def as_tensor(value, dtype=None) -> Tensor:
    return np.asarray(value, dtype=dtype).view(Tensor)


def install_numpy_torch() -> None:
    """`torch` for the modules imported here: torch's PyPI wheels need their CUDA libraries."""
    torch = types.ModuleType("torch")
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    torch.Tensor = Tensor
    torch.tensor = as_tensor
    torch.from_numpy = as_tensor
    torch.is_tensor = lambda x: isinstance(x, Tensor)
    torch.cat = lambda tensors, dim=0: as_tensor(np.concatenate(tensors, axis=dim))
    torch.dtype = np.dtype
    torch.long, torch.float32, torch.float16 = np.int64, np.float32, np.float16
    torch.bfloat16 = None  # numpy has none; only named by code that does not run here
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    nn.functional = functional
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")
    data.Dataset = object
    utils.data = data
    torch.nn, torch.utils = nn, utils
    sys.modules.update(
        {
            "torch": torch,
            "torch.nn": nn,
            "torch.nn.functional": functional,
            "torch.utils": utils,
            "torch.utils.data": data,
        }
    )


class SamplingParams:
    """vllm.SamplingParams with the fields OpenRLHF 0.11.2's samples generator sets."""

    def __init__(self, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=None, min_tokens=1,
                 skip_special_tokens=False, logprobs=None):
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.max_tokens, self.min_tokens = max_tokens, min_tokens
        self.skip_special_tokens, self.logprobs = skip_special_tokens, logprobs


def install_vllm() -> None:
    """What `openrlhf.trainer.ray.vllm_engine` imports from vllm: vLLM needs torch and a GPU."""
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "0.29.0"  # the version openrlhf 0.11.2's [vllm] extra pins
    vllm.SamplingParams = SamplingParams
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = dict  # a TypedDict in vLLM: a plain dict at run time
    utils = types.ModuleType("vllm.utils")
    utils.random_uuid = lambda: uuid.uuid4().hex
    vllm.inputs, vllm.utils = inputs, utils
    sys.modules.update({"vllm": vllm, "vllm.inputs": inputs, "vllm.utils": utils})


def build_processor(directory: Path):
    """A Qwen2.5-VL processor from files written here (no hub): the real transformers classes."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoTokenizer, Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer",
        "eos_token": IM_END,
        "pad_token": "<|endoftext|>",
        "model_max_length": 131072,
    }))
    (directory / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessor",
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
    }))

    class Processor(Qwen2_5_VLProcessor):
        """Qwen2_5_VLProcessor without the video processor (it requires torch and
        torchvision), answering a request for torch tensors with numpy-backed ones (the
        numpy stand-in for torch)."""

        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template)

        def __call__(self, *args, **kwargs):
            pt = kwargs.get("return_tensors") == "pt"
            if pt:
                kwargs["return_tensors"] = "np"
            out = super().__call__(*args, **kwargs)
            if pt:
                for key, value in list(out.items()):
                    if isinstance(value, np.ndarray):
                        out[key] = value.view(Tensor)
            return out

    return Processor(
        image_processor=Qwen2VLImageProcessorPil.from_pretrained(str(directory)),
        tokenizer=AutoTokenizer.from_pretrained(str(directory)),
        chat_template=CHAT_TEMPLATE,
    )


class Completion:
    def __init__(self, text, token_ids, finish_reason, logprobs):
        self.index, self.text, self.token_ids = 0, text, token_ids
        self.finish_reason, self.logprobs = finish_reason, logprobs


class RequestOutput:
    def __init__(self, request_id, prompt_token_ids, completion, finished):
        self.request_id, self.prompt_token_ids = request_id, prompt_token_ids
        self.outputs, self.finished = [completion], finished


class Logprob:
    def __init__(self, logprob):
        self.logprob, self.rank, self.decoded_token = logprob, 1, None


class Engine:
    """The vLLM AsyncLLM stand-in behind `RolloutRayActor.llm` (see the module docstring).

    Turn k of an episode (k = assistant turns in the prompt) answers REPLIES[k-1]. `fail_at`
    raises at that turn; `hold_at` waits there until `release` is set.
    """

    def __init__(self, processor, mode="vllm", fail_at=None, hold_at=None):
        assert mode in ("vllm", "stop_in_text")
        self.tok = processor.tokenizer
        self.mode, self.fail_at, self.hold_at = mode, fail_at, hold_at
        ids = self.tok.convert_tokens_to_ids
        self.stop_id, self.pad_id = ids(IM_END), ids("<|image_pad|>")
        self.vs_id, self.ve_id = ids("<|vision_start|>"), ids("<|vision_end|>")
        self.texts = {}  # turn -> the text returned (the same for every sample)
        self.held = 0
        self.release = asyncio.Event()

    async def generate(self, prompt, sampling_params, request_id):
        ids = list(prompt["prompt_token_ids"])
        images = (prompt.get("multi_modal_data") or {}).get("image") or []
        # vLLM expands each placeholder itself: exactly one <|image_pad|> per image, inside
        # <|vision_start|> <|vision_end|> (RolloutRayActor.generate collapses the expanded ones).
        pads = [i for i, t in enumerate(ids) if t == self.pad_id]
        if len(pads) != len(images):
            raise ValueError(f"{len(pads)} image placeholders for {len(images)} images")
        for i in pads:
            assert ids[i - 1] == self.vs_id and ids[i + 1] == self.ve_id, "placeholder markup"
        if sampling_params.max_tokens is None or sampling_params.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {sampling_params.max_tokens}")
        turn = self.tok.decode(ids, skip_special_tokens=False).count(IM_START + "assistant\n")
        if turn == self.fail_at:
            raise RuntimeError(f"engine failure at turn {turn}")
        if turn == self.hold_at:
            self.held += 1
            await self.release.wait()
        reply = REPLIES[(turn - 1) % len(REPLIES)]
        tokens = self.tok(reply, add_special_tokens=False)["input_ids"] + [self.stop_id]
        if len(tokens) <= sampling_params.max_tokens:
            finish = "stop"
            text = reply + (IM_END if self.mode == "stop_in_text" else "")
        else:
            finish = "length"
            tokens = tokens[: sampling_params.max_tokens]
            text = self.tok.decode(tokens, skip_special_tokens=False)
        self.texts.setdefault(turn, text)
        logprobs = None
        if sampling_params.logprobs is not None:
            logprobs = [{t: Logprob(-0.5)} for t in tokens]
        # Cumulative outputs, as vLLM streams them; the caller keeps the last one.
        half = len(tokens) // 2
        yield RequestOutput(
            request_id, ids,
            Completion(self.tok.decode(tokens[:half]), tokens[:half], None,
                       None if logprobs is None else logprobs[:half]),
            False,
        )
        await asyncio.sleep(0)
        yield RequestOutput(request_id, ids, Completion(text, tokens, finish, logprobs), True)


# ---------------------------------------------------------------------------------------------
# Server helpers


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


def metrics(url: str) -> dict:
    status, m = http("GET", url + "/metrics")
    assert status == 200, m
    return m


def png_rgb(b64: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB")


def replay(url: str, seed: int, length, texts):
    """Play `texts` on a fresh session driven directly: the server's own trajectory."""
    body = {"seed": seed}
    if length is not None:
        body["length"] = length
    status, created = http("POST", f"{url}/v1/sessions", body)
    assert status == 200, created
    steps = []
    for text in texts:
        status, step = http("POST", f"{url}/v1/sessions/{created['id']}/step", {"text": text})
        assert status == 200, step
        steps.append(step)
        if step["done"]:
            break
    status, _ = http("DELETE", f"{url}/v1/sessions/{created['id']}")
    assert status == 200
    return created, steps


# ---------------------------------------------------------------------------------------------
# Checks


def check_template(text: str, turns: int) -> None:
    """The transcript is ChatML turn by turn: each turn closes with exactly one <|im_end|>."""
    assert IM_END + IM_END not in text, "doubled <|im_end|>"
    parts = text.split(IM_START)
    assert parts[0] == "", parts[0][:80]
    roles = []
    for i, part in enumerate(parts[1:], start=1):
        role, _, body = part.partition("\n")
        roles.append(role)
        assert role in ("system", "user", "assistant"), role
        n = body.count(IM_END)
        assert n == 1, f"turn {i} ({role}) has {n} <|im_end|>: {body[-80:]!r}"
        if i < len(parts) - 1:
            assert body.endswith(IM_END + "\n"), f"turn {i} ({role}) ends {body[-40:]!r}"
        else:
            assert role == "assistant" and body.endswith(IM_END), f"last turn ends {body[-40:]!r}"
    expected = ["system", "user"] + ["assistant", "user"] * (turns - 1) + ["assistant"]
    assert roles == expected, roles


def check_result(res, *, processor, engine, url, seed, length, first_frame, label):
    """One finished episode against the contract and the server's own trajectory."""
    tok = processor.tokenizer
    assert set(res) == RESULT_KEYS, sorted(res)
    assert res["label"] == label
    assert isinstance(res["reward"], float)
    score = float(res["scores"])
    assert isinstance(res["scores"], Tensor) and res["scores"].shape == ()
    assert res["truncated"] is False
    logs = res["extra_logs"]
    assert set(logs) == LOG_KEYS and all(isinstance(v, float) for v in logs.values()), logs
    turns = int(logs["turns"])
    assert len(res["action_ranges"]) == turns >= 1

    # The server's own trajectory for the texts the engine returned.
    texts = [engine.texts[t] for t in range(1, turns + 1)]
    created, steps = replay(url, seed, length, texts)
    assert len(steps) == turns
    last = steps[-1]
    assert last["done"] or turns == MAX_TURNS, (turns, last["done"])
    assert abs(res["reward"] - sum(s["reward"] for s in steps)) < 1e-9
    assert abs(score - last["progression"]) < 1e-12 and 0.0 <= score <= 1.0
    assert logs["steps"] == last["step"] and logs["achievements"] == len(last["achievements"])
    assert logs["invalid_replies"] == sum(s["invalid"] for s in steps)
    assert abs(logs["episode_return"] - res["reward"]) < 1e-9
    assert logs["env_error"] == 0.0

    # Tokens: prompt, then per turn the engine's tokens (ending with the stop token) and the
    # feedback; the transcript follows the template and shows each observation in order.
    obs = res["observation_tokens"]
    text = tok.decode(obs, skip_special_tokens=False)
    check_template(text, turns)
    for (start, end), sent in zip(res["action_ranges"], texts):
        action = tok.decode(obs[start:end], skip_special_tokens=False)
        assert action == (sent if sent.endswith(IM_END) else sent + IM_END), (action, sent)
        assert obs[end - 1] == engine.stop_id
    at = 0
    for step in steps[:-1]:
        at = text.index(step["observation"], at)
        assert f"Executed {len(step['actions'])} action(s)" in text
    assert res["rollout_log_probs"] is None or len(res["rollout_log_probs"]) == len(obs)

    # Images: the first frame, then one per non-final turn; one placeholder each, expanded to
    # the image's token count; pixel values equal the processor applied to the server's frames.
    frames = [first_frame] + [png_rgb(s["frame_png_b64"]) for s in steps[:-1]]
    assert png_rgb(created["frame_png_b64"]).tobytes() == first_frame.tobytes()
    mm = res["mm_train_inputs"]
    grid = np.asarray(mm["image_grid_thw"])
    assert grid.shape == (len(frames), 3), grid.shape
    assert text.count("<|vision_start|>") == text.count("<|vision_end|>") == len(frames)
    vs = tok.convert_tokens_to_ids("<|vision_start|>")
    starts = [i for i, t in enumerate(obs) if t == vs]
    for i, g in zip(starts, grid):
        n = int(np.prod(g)) // processor.image_processor.merge_size**2
        assert obs[i + 1 : i + 1 + n] == [engine.pad_id] * n and obs[i + 1 + n] == engine.ve_id
    expected = processor.image_processor(frames, return_tensors="np")
    assert np.array_equal(np.asarray(mm["pixel_values"]), expected["pixel_values"])
    assert np.array_equal(grid, expected["image_grid_thw"])
    return turns, last


async def wait_for(predicate, what: str, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


BACKEND = os.environ.get("CRAFTER_ENV", "").strip().lower() or "http"
AGENT = None  # the loaded agent module's globals (set by main_async)


def open_sessions(url: str) -> int:
    """Sessions the agent holds open: on the server, or in this process."""
    if BACKEND == "inprocess":
        return AGENT.InProcessClient.open_count()
    return metrics(url)["sessions_open"]


async def check_backends_agree(agent, url: str) -> None:
    """The same seeds and model replies through an http and an in-process AgentInstance: the
    same rewards, scores, done, feedback (executed actions, unlocks, the invalid-reply note,
    the observation), images and logs, step by step."""
    replies = REPLIES + [
        "ACTION: Move West",
        "\x00\x01 }{ not json [[[",
        '{"actions": ["place_table", "make_wood_pickaxe", "sleep"',
        "",
    ]
    for label in ("3", json.dumps({"seed": 8, "length": 6}), "-1", "123456789012"):
        pair = []
        for backend in ("http", "inprocess"):
            os.environ["CRAFTER_ENV"] = backend
            try:
                inst = agent.AgentInstance()
            finally:
                os.environ["CRAFTER_ENV"] = BACKEND
            assert type(inst.client).__name__ == ("CrafterClient" if backend == "http" else "InProcessClient")
            await inst.reset({"observation": "p", "label": label})
            outs = []
            for text in replies:
                out = await inst.step({"observation_text": "p", "action_text": text, "label": label})
                outs.append(out)
                if out["done"]:
                    break
            await inst.aclose()
            pair.append(outs)
        http_outs, local_outs = pair
        assert len(http_outs) == len(local_outs), (label, len(http_outs), len(local_outs))
        for turn, (h, i) in enumerate(zip(http_outs, local_outs), start=1):
            where = f"label {label} turn {turn}"
            assert set(h) == set(i), where
            assert float(h["rewards"]) == float(i["rewards"]), (where, h["rewards"], i["rewards"])
            assert float(h["scores"]) == float(i["scores"]), where
            assert h["done"] == i["done"], where
            assert h["environment_feedback"] == i["environment_feedback"], where
            assert h["extra_logs"] == i["extra_logs"], (where, h["extra_logs"], i["extra_logs"])
            assert len(h["environment_images"]) == len(i["environment_images"]), where
            for a, b in zip(h["environment_images"], i["environment_images"]):
                assert a.size == b.size and a.tobytes() == b.tobytes(), f"{where}: frames differ"
        print(f"backends agree on label {label}: {len(http_outs)} turn(s)", flush=True)


async def main_async(url: str, tmp: Path) -> None:
    import transformers.utils

    processor = build_processor(tmp / "processor")
    assert not transformers.utils.is_torch_available()
    install_numpy_torch()
    install_vllm()
    # The real OpenRLHF modules (imported after the stand-ins they import).
    import openrlhf
    from openrlhf.trainer.ray.vllm_engine import RolloutRayActor, _load_agent_executor
    from openrlhf.utils.agent import AgentExecutorBase

    print(f"openrlhf {version('openrlhf')} from {Path(openrlhf.__file__).parent}", flush=True)
    # openrlhf.datasets' __init__ also imports its SFT/reward datasets, which need HF `datasets`
    # (pyarrow, pandas); the prompt module itself needs none of that, so load it on its own.
    spec = importlib.util.spec_from_file_location(
        "prompts_dataset", Path(openrlhf.__file__).parent / "datasets" / "prompts_dataset.py"
    )
    prompts_dataset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prompts_dataset)
    preprocess_data = prompts_dataset.preprocess_data
    executor = _load_agent_executor(str(AGENT_FILE))
    assert isinstance(executor, AgentExecutorBase)
    # The loader does not register the module; its globals are reachable from its classes.
    agent = types.SimpleNamespace(**type(executor).__init__.__globals__)
    global AGENT
    AGENT = agent
    print(f"agent backend: CRAFTER_ENV={BACKEND}", flush=True)

    def actor(engine):
        """A RolloutRayActor without Ray or vLLM: the decorated class, its real methods."""
        cls = RolloutRayActor.__ray_metadata__.modified_class
        a = cls.__new__(cls)
        a.executor, a.llm = executor, engine
        a._mm_pad_token_ids = {processor.image_token_id, processor.video_token_id}
        return a

    # The dataset as make_dataset.py writes it, rendered the way OpenRLHF renders prompts.
    subprocess.run(
        [sys.executable, str(MAKE_DATASET), "--url", url, "--seeds", "3,8",
         "--out", str(tmp / "data")],
        check=True,
    )
    rows = [json.loads(line) for line in (tmp / "data" / "train.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows] == ["3", "8"]
    rows[1]["label"] = json.dumps({"seed": 8, "length": 6})  # a 6-step game ends before the cap
    prompts = []
    for row in rows:
        prompt, label = preprocess_data(row, input_key="prompt", label_key="label",
                                        apply_chat_template=processor.apply_chat_template)
        assert prompt.count(PLACEHOLDER) == len(row["images"]) == 1
        assert prompt.startswith(IM_START + "system\n")
        assert prompt.endswith(IM_START + "assistant\n")
        first = Image.open(row["images"][0]).convert("RGB")
        prompts.append((prompt, label, row["images"], first))
    base = metrics(url)
    assert base["sessions_open"] == 0, base

    # -- vLLM's outputs (text without the stop token); two seeds x two samples at once.
    engine = Engine(processor, mode="vllm")
    a = actor(engine)
    big = 1 << 16
    results = await asyncio.gather(*[
        a.generate_responses(prompt, label, SamplingParams(max_tokens=None, logprobs=1), big,
                             processor, num_samples=2, images=images)
        for prompt, label, images, _ in prompts
    ])
    ended = {}
    for (prompt, label, images, first), group in zip(prompts, results):
        assert len(group) == 2
        seed = agent.parse_label(label)["seed"]
        length = agent.parse_label(label).get("length")
        for res in group:
            assert res["prompt"] == prompt and res["images"] == images
            ended[seed] = check_result(res, processor=processor, engine=engine, url=url, seed=seed,
                                       length=length, first_frame=first, label=label)
        assert group[0]["observation_tokens"] == group[1]["observation_tokens"]
    assert ended[3][0] == MAX_TURNS and not ended[3][1]["done"], "seed 3 is cut off by the turn cap"
    assert ended[8][0] < MAX_TURNS and ended[8][1]["termination"] == "length", ended[8]
    assert open_sessions(url) == 0, "finished episodes left sessions open"
    assert not any(t.endswith(IM_END) for t in engine.texts.values()), engine.texts
    print("vLLM-style outputs: contract, trajectories and template hold", flush=True)

    # -- An engine whose text keeps the stop token: still exactly one per turn.
    engine2 = Engine(processor, mode="stop_in_text")
    prompt, label, images, first = prompts[0]
    (res,) = await actor(engine2).generate_responses(
        prompt, label, SamplingParams(), big, processor, num_samples=1, images=images)
    check_result(res, processor=processor, engine=engine2, url=url, seed=3, length=None,
                 first_frame=first, label=label)
    assert all(t.endswith(IM_END) for t in engine2.texts.values()), engine2.texts
    print("stop token in the text: template holds", flush=True)

    # -- Budget stop: the context budget runs out in turn 2 (the reply is cut); execute()
    # returns without done, and no session stays open.
    ref = results[0][0]
    budget = ref["action_ranges"][1][1] - 3
    before = metrics(url)
    cut = await actor(Engine(processor)).generate_responses(prompt, label, SamplingParams(), budget,
                                                           processor, num_samples=2, images=images)
    for res in cut:
        assert res["truncated"] is True and res["extra_logs"]["turns"] == 2.0, res["extra_logs"]
        assert len(res["observation_tokens"]) > budget
    left = open_sessions(url)
    assert left == 0, f"a budget stop left {left} session(s) open"
    if BACKEND == "http":
        m = metrics(url)
        # Closed by the agent (DELETE before the episode ended), not left to the idle timeout.
        assert m["sessions_closed_unfinished"] == before["sessions_closed_unfinished"] + 2, m
        assert m["sessions_expired"] == before["sessions_expired"] == 0, m
    print("budget stop: no session left open", flush=True)

    # -- An exception in the engine fails the batch but closes its sessions.
    try:
        await actor(Engine(processor, fail_at=2)).generate_responses(
            prompt, label, SamplingParams(), big, processor, num_samples=2, images=images)
        raise AssertionError("the engine failure did not propagate")
    except RuntimeError as e:
        assert "engine failure at turn 2" in str(e), e
    await wait_for(lambda: open_sessions(url) == 0, "sessions closed after an exception")
    print("exception: sessions closed", flush=True)

    # -- Cancellation mid-episode closes the sessions.
    held = Engine(processor, hold_at=2)
    task = asyncio.create_task(actor(held).generate_responses(
        prompt, label, SamplingParams(), big, processor, num_samples=2, images=images))
    await wait_for(lambda: held.held == 2, "both samples at turn 2")
    assert open_sessions(url) == 2
    task.cancel()
    try:
        await task
        raise AssertionError("the cancelled batch returned")
    except asyncio.CancelledError:
        pass
    await wait_for(lambda: open_sessions(url) == 0, "sessions closed after cancellation")
    print("cancellation: sessions closed", flush=True)

    # -- Executor shutdown closes running episodes' sessions; they then end with env_error.
    held = Engine(processor, hold_at=2)
    task = asyncio.create_task(actor(held).generate_responses(
        prompt, label, SamplingParams(), big, processor, num_samples=2, images=images))
    await wait_for(lambda: held.held == 2, "both samples at turn 2")
    assert open_sessions(url) == 2
    await asyncio.to_thread(executor.shutdown)
    assert open_sessions(url) == 0, "shutdown left sessions open"
    held.release.set()
    for res in await task:
        assert res["extra_logs"]["env_error"] == 1.0 and res["extra_logs"]["turns"] == 1.0
    print("executor shutdown: sessions closed", flush=True)

    # -- A dropped instance (used outside execute()) is closed by its finalizer.
    inst = executor.agent_instance_cls()
    await inst.reset({"observation": prompt, "label": "5"})
    assert open_sessions(url) == 1
    del inst
    gc.collect()
    assert open_sessions(url) == 0, "the finalizer did not close the session"

    # -- A session that vanished (idle expiry, restart) ends the episode instead of raising.
    inst = executor.agent_instance_cls()
    await inst.reset({"observation": "p", "label": "1"})
    inst.client.close(inst.session_id)  # behind the agent's back: it still holds the id
    out = await inst.step({"observation_text": "p", "action_text": "do", "label": "1"})
    assert out["done"] is True and out["extra_logs"]["env_error"] == 1.0
    assert out["environment_feedback"] == "" and out["environment_images"] == []
    del inst

    if BACKEND == "http":
        await check_full_server(agent, executor, url, base)
    else:
        # In-process sessions have no server to fill; the backends must agree.
        await check_backends_agree(agent, url)
        assert open_sessions(url) == 0

    # -- The agent's pieces.
    assert agent.parse_label("7") == {"seed": 7}
    assert agent.parse_label(7) == {"seed": 7}
    assert agent.parse_label('{"seed": 3, "length": 9}') == {"seed": 3, "length": 9}
    try:
        agent.parse_label("{}")
        raise AssertionError("a label without a seed was accepted")
    except ValueError:
        pass

    m = metrics(url)
    assert m["sessions_open"] == 0 and m["sessions_expired"] == 0, m
    assert m["sessions_open_finished"] == 0, m
    assert m["resets"] == m["sessions_open"] + m["sessions_closed"] + m["sessions_expired"], m


async def check_full_server(agent, executor, url: str, base: dict) -> None:
    """A full server: reset waits out the 503 (Retry-After), then gives up at its bound."""
    m = metrics(url)
    fill = m["max_sessions"] - m["sessions_open"]
    assert 0 < fill <= 16, f"start the server with a small --max-sessions (got {m['max_sessions']})"
    direct = []
    for i in range(fill):
        status, s = http("POST", f"{url}/v1/sessions", {"seed": 100 + i, "frames": "none"})
        assert status == 200, s
        direct.append(s["id"])
    inst = executor.agent_instance_cls()
    t0 = time.monotonic()
    waiting = asyncio.create_task(inst.reset({"observation": "p", "label": "2"}))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "reset did not wait for a free slot"
    http("DELETE", f"{url}/v1/sessions/{direct.pop()}")
    await waiting
    waited = time.monotonic() - t0
    assert inst.session_id is not None and 0.9 <= waited < 10, waited
    other = executor.agent_instance_cls()
    other.reset_wait_s = 1.5
    t0 = time.monotonic()
    try:
        await other.reset({"observation": "p", "label": "4"})
        raise AssertionError("reset on a full server succeeded")
    except agent.CrafterServerError as e:
        assert e.status == 503 and "still full after waiting 1.5 s" in str(e), e
    waited = time.monotonic() - t0
    assert 1.4 <= waited < 5, waited
    assert metrics(url)["sessions_rejected_full"] >= base["sessions_rejected_full"] + 3
    for sid in direct:
        http("DELETE", f"{url}/v1/sessions/{sid}")
    await inst.aclose()
    print(f"full server: reset waited for a slot, gave up after {waited:.1f} s", flush=True)


def main() -> int:
    url = os.environ.get("CRAFTER_ENV_URL")
    if not url:
        print("set CRAFTER_ENV_URL to a running `vlm-eval serve-env --max-sessions 8` address",
              file=sys.stderr)
        return 2
    url = url.rstrip("/")
    os.environ["CRAFTER_MAX_TURNS"] = str(MAX_TURNS)
    os.environ["CRAFTER_RESET_WAIT_S"] = "10"
    with tempfile.TemporaryDirectory(prefix="crafter-agent-test-") as tmp:
        asyncio.run(main_async(url, Path(tmp)))
    print(f"all agent checks passed (CRAFTER_ENV={BACKEND})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
