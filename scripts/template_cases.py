#!/usr/bin/env python3
"""Render chat-template test cases with transformers (jinja2), for vlm-eval's minijinja check.

For each template file given, renders a fixed set of conversations through transformers'
apply_chat_template and writes them, with the template text, to one JSON file that
crates/local/tests/it/local_qwen35.rs (`chat_template_cases_render_like_jinja2`) renders again through
vlm-eval's ChatTokenizer and compares byte for byte.

The conversations are the shapes vlm-eval sends (a system prompt, tools, turns with images
and text, earlier replies with reasoning and tool calls, tool results) plus the corners a
published template handles: thinking written inline in an earlier reply, several calls with
arguments of every JSON type, consecutive tool results, an empty reply, and a request the
template must refuse (an image in the system message). Each is rendered with
enable_thinking unset, true and false.

Committed: crates/local/tests/fixtures/chat-templates/qwen35_like.json, from qwen35_like.jinja (written
here with the features and output format of Qwen3.5's published template). To check a real
checkpoint's template the same way (its file stays on your machine):

  .venv-torch/bin/python scripts/template_cases.py --template CKPT/chat_template.jinja \\
      --out /tmp/my_template.json
  VLM_EVAL_TEMPLATE_CASES=/tmp/my_template.json cargo test -p vlm-eval-local --test it chat_template

Needs transformers 5.23.0 (any torch); uses the tiny fixture's tokenizer only to call
apply_chat_template (the rendering does not depend on the vocabulary).
"""
import argparse
import copy
import json
import os

from transformers import PreTrainedTokenizerFast

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

TOOLS = [{"type": "function", "function": {
    "name": "interact_many", "description": "Take game actions in order.",
    "parameters": {"type": "object", "properties": {"actions": {
        "type": "array", "items": {"type": "string", "enum": ["noop", "move_left", "do"]},
        "description": "The actions' names."}}, "required": ["actions"]}}}]

FIRST = [{"role": "system", "content": "You play Crafter."},
         {"role": "user", "content": "What now? Inventory: wood 2."}]

MULTI = [
    {"role": "system", "content": "You play Crafter."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Step 1. What now?"}]},
    {"role": "assistant", "content": "I will collect wood.", "reasoning_content": "A tree is near."},
    {"role": "user", "content": [{"type": "text", "text": "Step 2:"}, {"type": "image"}]},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "interact_many", "arguments": {"actions": ["do", "noop"]}}}]},
    {"role": "tool", "content": "ok: 2 actions"},
    {"role": "user", "content": "And now?"},
]

CORNERS = copy.deepcopy(MULTI)
CORNERS.insert(3, {"role": "assistant", "content": "<think>\nplan: go left\n</think>\n\nMoving left."})
CORNERS.insert(4, {"role": "user", "content": "ok"})
CORNERS += [
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "interact_many", "arguments": {
            "actions": ["move_left"], "n": 3, "why": "tree\nthere", "fast": True, "w": 0.5,
            "none": None, "opts": {"a": [1, "b"]}}}},
        {"type": "function", "function": {"name": "interact_many", "arguments": {"actions": []}}}]},
    {"role": "tool", "content": "ok: 1 action"},
    {"role": "tool", "content": [{"type": "text", "text": "ok: 0 actions"}]},
]

SYSTEM_IMAGE = [{"role": "system", "content": [{"type": "image"}, {"type": "text", "text": "Look."}]},
                {"role": "user", "content": "Hi."}]

CONVERSATIONS = [("tools", FIRST, TOOLS), ("multi_turn_images", MULTI, None),
                 ("multi_turn_tools", MULTI, TOOLS), ("corners_tools", CORNERS, TOOLS),
                 ("corners", CORNERS, None), ("system_image_refused", SYSTEM_IMAGE, None)]


def render(tok, template, messages, tools, think):
    kw = {} if think is None else {"enable_thinking": think}
    try:
        return {"text": tok.apply_chat_template(messages, tools=tools, chat_template=template,
                                                tokenize=False, add_generation_prompt=True, **kw)}
    except Exception as e:  # the template's raise_exception: vlm-eval must refuse it too
        return {"error": str(e)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--template", action="append", required=True, help="a chat_template.jinja")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args()
    tok = PreTrainedTokenizerFast.from_pretrained(os.path.join(ROOT, "crates", "local", "tests", "fixtures", "tiny-qwen35"))
    out = []
    for path in args.template:
        with open(path) as f:
            template = f.read()
        cases = []
        for name, messages, tools in CONVERSATIONS:
            for think in (None, True, False):
                case = {"name": name, "messages": messages, "tools": tools, "enable_thinking": think}
                case.update(render(tok, template, messages, tools, think))
                cases.append(case)
        out.append({"template_name": os.path.basename(path), "template": template, "cases": cases})
        refused = sum("error" in c for c in cases)
        print(f"{path}: {len(cases)} cases ({refused} refused by the template)")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
