"""The requests BALROG's naive agent sends, built by BALROG's own code, compared with ours.

    python balrog_requests.py SHARED_BALROG_DIR CASE.json

CASE.json: {"seed": S, "steps": N, "model": NAME, "replies": [...], "ours": [request bodies]}.
Runs BALROG's `Evaluator.run_episode` (balrog/evaluator.py) with its `NaiveAgent`
(balrog/agents/naive.py), the `HistoryPromptBuilder` from `create_prompt_builder`
(balrog/prompt_builder), its `OpenAIWrapper` (balrog/client.py: message conversion, request
arguments, reply stripping), its `EnvWrapper` (balrog/environments/env_wrapper.py: the validity
check) and its Crafter language wrapper (balrog/environments/crafter: observations and the
instruction prompt), on Python crafter 1.8.3 with creation-order balancing as
SHARED_BALROG_DIR/balrog_reference.py applies it, and BALROG's default configuration
(config.yaml) with max_image_history 1, as its VLM leaderboard runs used.

Stand-ins for what is not BALROG's Crafter path or cannot run here (no network, no extra
packages): the OpenAI SDK client (a fake whose `chat.completions.create` records its keyword
arguments and answers the scripted replies), google.genai / anthropic / openai imports,
gymnasium.Wrapper, omegaconf, tqdm, BaseAgent (stores the client factory and prompt builder),
FewShotAgent, InContextDataset, get_unique_seed, and `make_env` (crafter.Env, the language
wrapper, and a gym-0.21-to-gymnasium step adapter, as BALROG builds the env).

Prints one JSON object: {"compared": n, "mismatches": [...], "invalid": [bool per step]}.
Images are compared by their decoded RGB pixels (PNG encoders differ byte-wise).
"""
import base64
import hashlib
import io
import json
import os
import sys
import tempfile
import types


class Cfg(dict):
    """A dict with attribute access, like OmegaConf's DictConfig for the keys used."""

    def __getattr__(self, k):
        try:
            v = self[k]
        except KeyError as e:
            raise AttributeError(k) from e
        return Cfg(v) if isinstance(v, dict) and not isinstance(v, Cfg) else v


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def install_stubs(shared):
    ref = os.path.join(shared, "reference")
    import crafter  # noqa: F401  (before the gym stub, as balrog_reference.py does)
    sys.path.insert(0, os.path.join(shared, "stubs"))
    sys.path.insert(0, shared)
    import balrog
    import balrog.environments
    balrog.__path__.append(os.path.join(ref, "balrog"))
    balrog.environments.__path__.append(os.path.join(ref, "balrog", "environments"))

    class Wrapper:
        def __init__(self, env):
            self.env = env

    module("gymnasium", Wrapper=Wrapper)
    module("omegaconf", OmegaConf=types.SimpleNamespace(to_container=lambda c, resolve=True: dict(c)))

    class Tqdm:
        def __init__(self, total=0, **kw):
            self.n, self.total = 0, total

        def update(self, k=1):
            self.n += k

        def set_postfix_str(self, s):
            pass

        def set_description(self, s):
            pass

        def close(self):
            pass

    module("tqdm", tqdm=Tqdm)
    google = module("google")
    genai = module("google.genai", types=module("google.genai.types"))
    google.genai = genai
    module("anthropic", Anthropic=object)
    module("openai", OpenAI=object)

    class BaseAgent:
        def __init__(self, client_factory, prompt_builder):
            self.client_factory = client_factory
            self.prompt_builder = prompt_builder

        def reset(self):
            self.prompt_builder.reset()

    module("balrog.agents.base", BaseAgent=BaseAgent)
    module("balrog.agents.few_shot", FewShotAgent=type("FewShotAgent", (), {}))
    module("balrog.dataset", InContextDataset=lambda *a, **k: None)
    module("balrog.utils", get_unique_seed=lambda process_num=None, episode_idx=0: 0)


def main():
    shared, case_path = sys.argv[1], sys.argv[2]
    case = json.load(open(case_path))
    install_stubs(shared)
    import crafter
    import balrog_reference
    import balrog.environments as envs
    from balrog.environments.crafter import env as crafter_env
    from balrog.environments.env_wrapper import EnvWrapper

    class Gymnasium:
        """gym 0.21's 4-tuple steps as gymnasium's 5-tuple, reset returning (obs, info)."""

        def __init__(self, env):
            self.env = env

        def __getattr__(self, k):
            return getattr(self.env, k)

        def reset(self, seed=None):
            return self.env.reset(), {}

        def step(self, action):
            obs, reward, done, info = self.env.step(action)
            return obs, reward, done, False, info

    def make_env(env_name, task, config):
        kw = config.envs.crafter_kwargs
        env = crafter.Env(area=tuple(kw.area), view=tuple(kw.view), size=tuple(kw.size),
                          reward=kw.reward, seed=case["seed"])
        balrog_reference.creation_order_balancing(env)
        lang = crafter_env.CrafterLanguageWrapper(env, task, max_episode_steps=kw.max_episode_steps)
        return EnvWrapper(Gymnasium(lang), env_name, task)

    envs.make_env = make_env
    from balrog.agents.naive import NaiveAgent
    from balrog.client import OpenAIWrapper
    from balrog.evaluator import Evaluator
    from balrog.prompt_builder import create_prompt_builder

    config = Cfg({
        "agent": {"type": "naive", "max_text_history": 16, "max_image_history": 1,
                  "max_cot_history": 1, "cache_icl": False},
        "eval": {"num_episodes": {"crafter": 1}, "num_workers": 1,
                 "max_steps_per_episode": case["steps"], "save_images": False,
                 "feedback_on_invalid_action": True, "icl_episodes": 1},
        "client": {"client_name": "openai", "model_id": case["model"], "base_url": None,
                   "generate_kwargs": {"temperature": 1.0, "max_tokens": 8192},
                   "timeout": 60, "max_retries": 5, "delay": 2, "alternate_roles": False},
        "envs": {"names": "crafter", "env_kwargs": {"seed": case["seed"]},
                 "crafter_kwargs": {"area": [64, 64], "view": [9, 9], "size": [256, 256],
                                    "reward": True, "seed": None, "max_episode_steps": 2000}},
        "tasks": {"crafter_tasks": ["default"]},
    })
    sent = []
    replies = iter(case["replies"])

    class Completions:
        def create(self, **kwargs):
            sent.append(kwargs)
            text = next(replies)
            msg = types.SimpleNamespace(content=text)
            return types.SimpleNamespace(
                choices=[types.SimpleNamespace(message=msg, finish_reason="stop")],
                usage=types.SimpleNamespace(prompt_tokens=1, completion_tokens=1))

    def client_factory():
        c = OpenAIWrapper(config.client)
        c.client = types.SimpleNamespace(chat=types.SimpleNamespace(completions=Completions()))
        c._initialized = True
        return c

    agent = NaiveAgent(client_factory, create_prompt_builder(config.agent))
    with tempfile.TemporaryDirectory() as out:
        evaluator = Evaluator("crafter", config, output_dir=out)
        log = evaluator.run_episode("default", agent, process_num=0, episode_idx=0)
    invalid = [c for c in log["failed_candidates"]]

    def pixels(url):
        from PIL import Image
        data = base64.b64decode(url.split(",", 1)[1])
        img = Image.open(io.BytesIO(data)).convert("RGB")
        return {"image_rgb_sha256": hashlib.sha256(img.tobytes()).hexdigest(), "size": img.size}

    def normal(v):
        if isinstance(v, dict):
            if v.get("type") == "image_url":
                return {"type": "image_url", "pixels": pixels(v["image_url"]["url"]),
                        "keys": sorted(v["image_url"].keys())}
            return {k: normal(x) for k, x in v.items()}
        if isinstance(v, list):
            return [normal(x) for x in v]
        return v

    mismatches = []
    for i, (ours, theirs) in enumerate(zip(case["ours"], sent)):
        a, b = normal(ours), normal(theirs)
        if a != b:
            detail = {"request": i, "ours_keys": sorted(a), "balrog_keys": sorted(b)}
            am, bm = a.get("messages", []), b.get("messages", [])
            detail["messages"] = [len(am), len(bm)]
            for j, (x, y) in enumerate(zip(am, bm)):
                if x != y:
                    detail["first_message"] = j
                    detail["ours"] = x
                    detail["balrog"] = y
                    break
            for k in set(a) | set(b):
                if k != "messages" and a.get(k) != b.get(k):
                    detail.setdefault("fields", []).append([k, a.get(k), b.get(k)])
            mismatches.append(detail)
    print(json.dumps({"compared": min(len(case["ours"]), len(sent)), "ours": len(case["ours"]),
                      "balrog": len(sent), "mismatches": mismatches[:3],
                      "mismatch_count": len(mismatches), "failed_candidates": invalid,
                      "num_steps": log["num_steps"], "score": log["score"]}))


if __name__ == "__main__":
    main()
