#!/usr/bin/env python3
"""Build the tiny random-weight Qwen3.5 fixture used by crates/local/tests/it/local_qwen35.rs.

Writes into crates/local/tests/fixtures/tiny-qwen35/ (under 2 MB, committed; CI never runs this):
  config.json, model.safetensors, generation_config.json     tiny Qwen3.5 (transformers 5 layout)
  tokenizer.json, tokenizer_config.json, chat_template.jinja  byte-level BPE trained offline here
  preprocessor_config.json                                    Qwen2VLImageProcessorPil, Qwen3.5 values
  image_64.png, image_56x112.png, image_90x70.png             the test images (lossless)
  tools_request.json                                          a text-only request with one tool
  reference.safetensors   one 64x64 image (64x64 -> 16 patches -> 4 image tokens)
  reference2.safetensors  two images (56x112 -> 64x128, 90x70 -> 96x64) with text between them
and crates/local/tests/fixtures/tiny-qwen35-ckpt-bf16/: the same model as a trainer saves it (save_pretrained,
bf16, sharded, with its tokenizer and processor files).
Each reference holds input_ids, pixel_values, image_grid_thw, position_ids, rope_deltas,
image_embeds, logits (prefill, f32, every position), decode_logits (the logits of one decode step
with the cache, fed the first greedy token) and greedy_ids (prompt + 16 greedy tokens, no EOS
stop); reference.safetensors also holds tools_input_ids. templates.json holds chat-template
renderings by jinja2 (transformers' apply_chat_template) for the byte-for-byte template test.

The model: 4 decoder layers (linear, full, linear, full attention), explicit head_dim 32 (not
hidden/heads), partial rotary 0.25 (8 of 32 dims) with interleaved M-RoPE, linear attention with
2 key heads and 4 value heads (Hv > Hk), tied embeddings; a 2-block vision tower with an 8x8
learned position table. preprocessor_config.json keeps Qwen3.5's patch 16 / merge 2 / mean-std
0.5 but a small min_pixels (4096) so the references stay small (the real 65,536 makes a 64 px
frame 256x256; crates/local/tests/it/local_qwen35.rs checks that resize separately).

The chat template is written here in the shape of Qwen3.5's (ChatML, images as
<|vision_start|><|image_pad|><|vision_end|>, XML tool calls, a generation prompt that opens
<think> unless enable_thinking is false); it is not the published file byte for byte. The
published template's Jinja features are covered by crates/local/tests/fixtures/chat-templates/
(scripts/template_cases.py).

How to run (needs torch + transformers 5.23.0; CPU is enough, about 20 s):
  python3 -m venv /work/venv-torch
  /work/venv-torch/bin/pip install torch==2.15.0 transformers==5.23.0 tokenizers safetensors pillow numpy jinja2
  /work/venv-torch/bin/python scripts/make_qwen35_fixtures.py [OUT_DIR]

The image processor is Qwen2VLImageProcessorPil on purpose (transformers maps qwen3_5 to it):
with torchvision installed transformers would otherwise pick the "fast" processor.
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
from transformers import PreTrainedTokenizerFast, Qwen3_5Config, Qwen3_5ForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from template_cases import FIRST, MULTI, TOOLS  # noqa: E402  (the shared conversations)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "crates", "local", "tests", "fixtures", "tiny-qwen35")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(4321)

# ---------------------------------------------------------------- tokenizer
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>"]
# Qwen3.5's pre-tokenizer regex (transformers' tokenization_qwen3_5.py).
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
         r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
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
    "<function=interact_many>\n<parameter=actions>\n[\"do\", \"noop\"]\n</parameter>\n</function>",
    "Inventory: wood 2, sapling 1. Health 9, food 8, drink 7, energy 9.",
    "Let me think about this. I should collect wood first.",
    "Don't click 12 buttons!\n\n  ok",
]
trainer = trainers.BpeTrainer(vocab_size=640, special_tokens=SPECIALS, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
bpe.train_from_iterator(corpus * 40, trainer)
ID = {s: bpe.token_to_id(s) for s in SPECIALS}

# HF renders templates with trim_blocks and lstrip_blocks; newlines that must follow a block tag
# are emitted through {{ "..." }}.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}"
    "{% macro render_content(content) %}"
    "{% if content is string %}{{ content }}"
    "{% else %}{% for c in content %}"
    "{% if c['type'] == 'image' %}{% set image_count.value = image_count.value + 1 %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% endmacro %}"
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ render_content(messages[0]['content']) }}{{ '\\n\\n' }}{% endif %}"
    "{{ '# Tools\\n\\nYou have access to the following functions:\\n\\n<tools>' }}"
    "{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}"
    "{{ '\\n</tools>\\n\\nIf you choose to call a function ONLY reply in the following format with NO suffix:"
    "\\n\\n<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1"
    "\\n</parameter>\\n</function>\\n</tool_call><|im_end|>\\n' }}"
    "{% elif messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system\\n' }}{{ render_content(messages[0]['content']) }}{{ '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% if not loop.first %}"
    "{{ raise_exception('System message must be at the beginning.') }}{% endif %}"
    "{% elif message['role'] == 'user' %}"
    "{{ '<|im_start|>user\\n' }}{{ render_content(message['content']) }}{{ '<|im_end|>\\n' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{% if message.get('reasoning_content') %}"
    "{{ '<think>\\n' }}{{ message['reasoning_content'] }}{{ '\\n</think>\\n\\n' }}{% endif %}"
    "{% if message.get('content') %}{{ render_content(message['content']) }}{% endif %}"
    "{% for tc in message.get('tool_calls', []) %}"
    "{% set f = tc['function'] if tc.get('function') else tc %}"
    "{% if loop.first and message.get('content') %}{{ '\\n\\n' }}{% elif not loop.first %}{{ '\\n' }}{% endif %}"
    "{{ '<tool_call>\\n<function=' }}{{ f['name'] }}{{ '>\\n' }}"
    "{% for k, v in f['arguments'].items() %}"
    "{{ '<parameter=' }}{{ k }}{{ '>\\n' }}"
    "{% if v is string %}{{ v }}{% else %}{{ v | tojson }}{% endif %}"
    "{{ '\\n</parameter>\\n' }}{% endfor %}"
    "{{ '</function>\\n</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' }}{{ render_content(message['content']) }}"
    "{{ '\\n</tool_response><|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}"
    "{% else %}{{ '<think>\\n' }}{% endif %}{% endif %}")
hf_tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 chat_template=CHAT_TEMPLATE)
hf_tok.save_pretrained(OUT)

# ---------------------------------------------------------------- model
cfg = Qwen3_5Config(
    text_config=dict(
        vocab_size=bpe.get_vocab_size() + 13,  # embedding rows beyond the tokenizer, as in the real model
        hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, max_position_embeddings=4096,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=8,
        linear_num_key_heads=2, linear_num_value_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=ID["<|im_end|>"], pad_token_id=ID["<|endoftext|>"]),
    vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                       spatial_merge_size=2, temporal_patch_size=2, in_channels=3, out_hidden_size=64,
                       num_position_embeddings=64),
    image_token_id=ID["<|image_pad|>"], video_token_id=ID["<|video_pad|>"],
    vision_start_token_id=ID["<|vision_start|>"], vision_end_token_id=ID["<|vision_end|>"],
    tie_word_embeddings=True)
model = Qwen3_5ForConditionalGeneration(cfg).eval()
with torch.no_grad():  # default init gives flat logits; widen so argmax is well separated
    for name, p in model.named_parameters():
        if name.endswith("A_log") or name.endswith("dt_bias"):
            p.copy_(torch.randn_like(p) * 0.5)
        elif p.dim() >= 2:
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

ip = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                              image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                              size={"shortest_edge": 4096, "longest_edge": 16777216})
ip.save_pretrained(OUT)
SUPPRESS = list(range(len(hf_tok), cfg.text_config.vocab_size))


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
        out = model(input_ids=ids, **kw, use_cache=True)
        logits = out.logits
        last = logits[0, -1].clone()
        last[SUPPRESS] = float("-inf")
        first = last.argmax().view(1, 1)
        step = model(input_ids=first, past_key_values=out.past_key_values, use_cache=True).logits
        pos, deltas = model.model.get_rope_index(ids, mm, grids, None)
        emb = torch.cat(list(model.model.get_image_features(vis["pixel_values"], grids).pooler_output))
        # 16 greedy tokens; EOS ids are disabled so exactly 16 come back, and embedding rows
        # beyond the tokenizer are suppressed (the Rust sampler masks them too).
        gen = model.generate(input_ids=ids, **kw, max_new_tokens=16, min_new_tokens=16, do_sample=False,
                             eos_token_id=None, pad_token_id=ID["<|endoftext|>"], suppress_tokens=SUPPRESS)
    tensors = {"input_ids": ids, "pixel_values": vis["pixel_values"], "image_grid_thw": grids,
               "position_ids": pos, "rope_deltas": deltas, "image_embeds": emb,
               "logits": logits.float(), "decode_logits": step.float(), "greedy_ids": gen}
    tensors.update(extra or {})
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, path))
    print(path, "seq", ids.shape[1], "grids", grids.tolist(), "delta", deltas.tolist(),
          "greedy", gen[0, ids.shape[1]:].tolist(), "|logits|max", float(logits.abs().max()))


ramp = np.arange(64, dtype=np.int64) * 4
img64 = Image.fromarray(np.stack([*np.meshgrid(ramp, ramp[::-1]), np.full((64, 64), 128)], -1).astype(np.uint8))
img64.save(os.path.join(OUT, "image_64.png"))

# The conversations are shared with scripts/template_cases.py.
tools, tool_messages = TOOLS, FIRST
with open(os.path.join(OUT, "tools_request.json"), "w") as f:
    json.dump({"messages": tool_messages, "tools": tools}, f, indent=1)
tool_text = hf_tok.apply_chat_template(tool_messages, tools=tools, tokenize=False, add_generation_prompt=True)
tool_ids = hf_tok(tool_text, return_tensors="pt")["input_ids"]

reference([img64], [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe the image."}]}],
          "reference.safetensors", {"tools_input_ids": tool_ids})

rng = np.random.default_rng(7)
img_a = Image.fromarray(rng.integers(0, 256, (56, 112, 3), dtype=np.uint8))
img_b = Image.fromarray(rng.integers(0, 256, (90, 70, 3), dtype=np.uint8))
img_a.save(os.path.join(OUT, "image_56x112.png"))
img_b.save(os.path.join(OUT, "image_90x70.png"))
reference([img_a, img_b], [
    {"role": "system", "content": "You play Crafter."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this picture? And here:"},
                                 {"type": "image"}]}], "reference2.safetensors")

# ---------------------------------------------------------------- chat-template renderings
multi_turn = MULTI
cases = {
    "tools_thinking": (tool_messages, tools, None),
    "tools_no_thinking": (tool_messages, tools, False),
    "multi_turn_images_thinking": (multi_turn, None, True),
    "multi_turn_images_no_thinking": (multi_turn, None, False),
    "multi_turn_tools_no_thinking": (multi_turn, tools, False),
}
rendered = []
for name, (msgs, tls, think) in cases.items():
    kw = {} if think is None else {"enable_thinking": think}
    rendered.append({"name": name, "messages": msgs, "tools": tls, "enable_thinking": think,
                     "text": hf_tok.apply_chat_template(msgs, tools=tls, tokenize=False,
                                                        add_generation_prompt=True, **kw)})
with open(os.path.join(OUT, "templates.json"), "w") as f:
    json.dump(rendered, f, indent=1, ensure_ascii=False)

# ---------------------------------------------------------------- a trainer's checkpoint
# What a trainer's save step writes (the RL loop of docs/RL.md): save_pretrained in bf16,
# sharded, with the tokenizer and processor it trained with; nothing added by hand.
CKPT = os.path.join(os.path.dirname(os.path.abspath(OUT)), "tiny-qwen35-ckpt-bf16")
model.to(torch.bfloat16).save_pretrained(CKPT, max_shard_size="256KB")
hf_tok.save_pretrained(CKPT)
ip.save_pretrained(CKPT)
print("wrote", CKPT, sorted(os.listdir(CKPT)))

with open(os.path.join(OUT, "fixture_info.json"), "w") as f:
    json.dump({"made_by": "scripts/make_qwen35_fixtures.py", "torch": torch.__version__,
               "transformers": transformers.__version__, "special_token_ids": ID,
               "tokenizer_size": bpe.get_vocab_size()}, f, indent=1)
print("wrote", OUT, "torch", torch.__version__, "transformers", transformers.__version__)
