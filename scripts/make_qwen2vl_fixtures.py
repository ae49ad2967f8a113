#!/usr/bin/env python3
"""Build the tiny random-weight Qwen2-VL fixture used by the local-model tests.

Writes into crates/local/tests/fixtures/tiny-qwen2vl/ (about 1-2 MB, committed; CI never runs this):
  config.json, model.safetensors, generation_config.json     tiny Qwen2-VL (transformers layout)
  tokenizer.json, tokenizer_config.json, chat_template.jinja  byte-level BPE trained offline here
  preprocessor_config.json                                    Qwen2VLImageProcessorPil defaults
  image_64.png, image_56x112.png, image_90x70.png             the test images (lossless)
  tools_request.json                                          a text-only request with one tool
  reference.safetensors   one 64x64 image (resized to 56x56 -> 4 image tokens)
  reference2.safetensors  two images (56x112 exact size, 90x70 resized) with text between them
Each reference holds input_ids, pixel_values, image_grid_thw, position_ids, rope_deltas,
image_embeds, logits (prefill, f32) and greedy_ids (prompt + 8 greedy tokens, no EOS stop);
reference.safetensors also holds tools_input_ids (tools_request.json through the chat template).

How to run (needs torch + transformers; CPU is enough, about 10 s):
  python3 -m venv /work/venv-torch
  /work/venv-torch/bin/pip install torch transformers tokenizers safetensors pillow numpy
  /work/venv-torch/bin/python scripts/make_qwen2vl_fixtures.py [OUT_DIR]

The image processor is Qwen2VLImageProcessorPil on purpose: with torchvision installed
transformers would otherwise pick the "fast" processor, whose resize differs from PIL's.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "crates", "local", "tests", "fixtures", "tiny-qwen2vl")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(1234)

# ---------------------------------------------------------------- tokenizer
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>"]
# The pre-tokenizer regex of Qwen2's tokenizer.json.
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
bpe = Tokenizer(models.BPE())
bpe.normalizer = normalizers.NFC()
bpe.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
bpe.decoder = decoders.ByteLevel()
bpe.post_processor = processors.ByteLevel(trim_offsets=False)
corpus = [
    "You are a helpful assistant playing a survival game.",
    "Describe the image. What do you see in this picture?",
    "The player stands on grass next to a tree, water and stone.",
    "Actions: noop, move_left, move_right, move_up, move_down, do, sleep, place_stone.",
    "<tool_call>{\"name\": \"act\", \"arguments\": {\"action\": \"do\"}}</tool_call>",
    "Inventory: wood 2, sapling 1. Health 9, food 8, drink 7, energy 9.",
    "Don't click 12 buttons!\n\n  ok",
]
trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
bpe.train_from_iterator(corpus * 40, trainer)
ID = {s: bpe.token_to_id(s) for s in SPECIALS}

# ChatML like Qwen2-VL's, plus a tools section in the system message like Qwen2.5's.
# HF renders templates with trim_blocks (the newline right after a block tag is dropped), so text
# that must start with a newline after a tag is emitted through {{ "..." }}.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}"
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% else %}You are a helpful assistant.{% endif %}"
    "{{ '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}"
    "{{ '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{% elif messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if tools and loop.first and message['role'] == 'system' %}{% continue %}{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
hf_tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 chat_template=CHAT_TEMPLATE)
hf_tok.save_pretrained(OUT)

# ---------------------------------------------------------------- model
cfg = Qwen2VLConfig(
    text_config=dict(
        vocab_size=bpe.get_vocab_size() + 13,  # a few embedding rows beyond the tokenizer, as in the real model
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, rms_norm_eps=1e-6, max_position_embeddings=2048,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
        bos_token_id=ID["<|endoftext|>"], eos_token_id=ID["<|im_end|>"], pad_token_id=ID["<|endoftext|>"]),
    vision_config=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14,
                       spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
    image_token_id=ID["<|image_pad|>"], video_token_id=ID["<|video_pad|>"],
    vision_start_token_id=ID["<|vision_start|>"], vision_end_token_id=ID["<|vision_end|>"],
    tie_word_embeddings=True)
model = Qwen2VLForConditionalGeneration(cfg).eval()
with torch.no_grad():  # default init (std 0.02) gives flat logits; widen so argmax is well separated
    for _, p in model.named_parameters():
        if p.dim() >= 2:
            p.normal_(0.0, 0.2)
        elif p.dim() == 1:
            p.add_(torch.randn_like(p) * 0.05)
model.generation_config.eos_token_id = [ID["<|im_end|>"], ID["<|endoftext|>"]]
model.generation_config.pad_token_id = ID["<|endoftext|>"]
model.generation_config.do_sample = True
model.generation_config.temperature = 0.7
model.generation_config.top_p = 0.8
model.generation_config.top_k = 20
model.save_pretrained(OUT)

ip = Qwen2VLImageProcessorPil()
ip.save_pretrained(OUT)


# ---------------------------------------------------------------- references
def expand_images(text, grids):
    """Replace each <|image_pad|> by its merged-token count (one placeholder per image)."""
    for n in (grids.prod(-1) // 4).tolist():
        text = text.replace("<|image_pad|>", "<|PAD|>" * n, 1)
    return text.replace("<|PAD|>", "<|image_pad|>")


def reference(images, messages, path, extra=None):
    vis = ip(images=images, return_tensors="pt")
    grids = vis["image_grid_thw"]
    text = hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = hf_tok(expand_images(text, grids), return_tensors="pt")["input_ids"]
    mm = (ids == cfg.image_token_id).int()
    kw = dict(pixel_values=vis["pixel_values"], image_grid_thw=grids, mm_token_type_ids=mm)
    with torch.no_grad():
        logits = model(input_ids=ids, **kw).logits
        pos, deltas = model.model.get_rope_index(ids, mm, grids, None)
        emb = torch.cat(list(model.model.get_image_features(vis["pixel_values"], grids).pooler_output))
        # 8 greedy tokens; EOS ids are disabled so exactly 8 come back, and embedding rows beyond
        # the tokenizer are suppressed (they decode to nothing; the Rust sampler masks them too).
        gen = model.generate(input_ids=ids, **kw, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                             eos_token_id=None, pad_token_id=ID["<|endoftext|>"],
                             suppress_tokens=list(range(len(hf_tok), cfg.text_config.vocab_size)))
    tensors = {"input_ids": ids, "pixel_values": vis["pixel_values"], "image_grid_thw": grids,
               "position_ids": pos, "rope_deltas": deltas, "image_embeds": emb,
               "logits": logits.float(), "greedy_ids": gen}
    tensors.update(extra or {})
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, path))
    print(path, "seq", ids.shape[1], "grids", grids.tolist(), "delta", deltas.tolist(),
          "greedy", gen[0, ids.shape[1]:].tolist(), "|logits|max", float(logits.abs().max()))


ramp = np.arange(64, dtype=np.int64) * 4
img64 = Image.fromarray(np.stack([*np.meshgrid(ramp, ramp[::-1]), np.full((64, 64), 128)], -1).astype(np.uint8))
img64.save(os.path.join(OUT, "image_64.png"))

tools = [{"type": "function", "function": {
    "name": "act", "description": "Take one game action.",
    "parameters": {"type": "object", "properties": {"action": {
        "type": "string", "enum": ["noop", "move_left", "do"], "description": "The action's name."}},
        "required": ["action"]}}}]
tool_messages = [{"role": "system", "content": "You play Crafter."},
                 {"role": "user", "content": "What now? Inventory: wood 2."}]
with open(os.path.join(OUT, "tools_request.json"), "w") as f:
    json.dump({"messages": tool_messages, "tools": tools}, f, indent=1)
tool_text = hf_tok.apply_chat_template(tool_messages, tools=tools, tokenize=False, add_generation_prompt=True)
tool_ids = hf_tok(tool_text, return_tensors="pt")["input_ids"]

reference([img64], [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}],
          "reference.safetensors", {"tools_input_ids": tool_ids})

rng = np.random.default_rng(7)
img_a = Image.fromarray(rng.integers(0, 256, (56, 112, 3), dtype=np.uint8))  # exact size: grid 1x4x8
img_b = Image.fromarray(rng.integers(0, 256, (90, 70, 3), dtype=np.uint8))   # resized to 84x56: grid 1x6x4
img_a.save(os.path.join(OUT, "image_56x112.png"))
img_b.save(os.path.join(OUT, "image_90x70.png"))
reference([img_a, img_b], [
    {"role": "system", "content": "You play Crafter."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this picture? And here:"},
                                 {"type": "image"}]}], "reference2.safetensors")

with open(os.path.join(OUT, "fixture_info.json"), "w") as f:
    json.dump({"made_by": "scripts/make_qwen2vl_fixtures.py", "torch": torch.__version__,
               "transformers": transformers.__version__, "special_token_ids": ID,
               "tokenizer_size": bpe.get_vocab_size()}, f, indent=1)
print("wrote", OUT, "torch", torch.__version__, "transformers", transformers.__version__)
