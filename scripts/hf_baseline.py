#!/usr/bin/env python3
"""The transformers side of `vlm-eval bench local`: the same prompt shape on the same weights.

Builds Qwen2-VL-2B-shaped (--family qwen2vl) or Qwen3.5-0.8B-shaped (--family qwen35) weights
with random initialisation (speed does not depend on the values, and nothing is downloaded),
optionally saves them for the Rust bench, then measures on the GPU in bf16, or on the CPU in f32
(--tiny: tiny shapes, for a smoke test):
  - device copy bandwidth (read + write of a 2 GiB buffer), the practical roofline; on the
    CPU the read bandwidth (a sum over 1 GiB), since decode reads weights and writes little;
  - time to first token: one forward over 20 text ids, one frame's image tokens, 30 text ids;
  - decode tokens/s of `generate` (greedy, fixed length) at each batch size, timed from the
    first generated token to the last (per-token stopping-criteria calls), so no prefill time
    is estimated and subtracted.
Prints one JSON object (also written to --json).

With --bf16-weights the random weights are rounded to bfloat16 first (saved as a bf16
checkpoint, as Qwen publishes and trainers save) and, on the CPU, still measured in f32: what
`from_pretrained(..., dtype=torch.float32)` does with a real checkpoint.

Usage: scripts/hf_baseline.py [--family qwen2vl|qwen35] [--tiny] [--save DIR] [--new 128]
                              [--frame 64] [--batch 1,16] [--threads N] [--device cpu|cuda]
                              [--bf16-weights]
"""
import argparse
import json
import math
import statistics
import time

import torch
from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen3_5Config,
                          Qwen3_5ForConditionalGeneration, StoppingCriteriaList)


def config(tiny: bool) -> Qwen2VLConfig:
    if tiny:
        text = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2)
        rope = [2, 3, 3]
        vision = dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2)
        image_id, video_id = 5, 6
    else:
        # Qwen2-VL-2B-Instruct's published shapes.
        text = dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960,
                    num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2)
        rope = [16, 24, 24]
        vision = dict(depth=32, embed_dim=1280, hidden_size=1536, num_heads=16)
        image_id, video_id = 151655, 151656
    text.update(rms_norm_eps=1e-6, max_position_embeddings=32768, bos_token_id=1, eos_token_id=2,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": rope})
    vision.update(mlp_ratio=4, patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
    return Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=image_id,
                         video_token_id=video_id, tie_word_embeddings=True)


def config_qwen35(tiny: bool) -> Qwen3_5Config:
    """Qwen3.5-0.8B's published shapes (hybrid decoder 3 linear : 1 full), or tiny ones."""
    if tiny:
        text = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                    linear_num_value_heads=4)
        rope = [2, 1, 1]
        vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2,
                      out_hidden_size=64, num_position_embeddings=64)
        ids = dict(image_token_id=5, video_token_id=6, vision_start_token_id=7,
                   vision_end_token_id=8)
    else:
        text = dict(vocab_size=248320, hidden_size=1024, intermediate_size=3584,
                    num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2,
                    head_dim=256, linear_key_head_dim=128, linear_value_head_dim=128,
                    linear_num_key_heads=16, linear_num_value_heads=16)
        rope = [11, 11, 10]
        vision = dict(depth=12, hidden_size=768, intermediate_size=3072, num_heads=12,
                      out_hidden_size=1024, num_position_embeddings=2304)
        ids = dict(image_token_id=248056, video_token_id=248057, vision_start_token_id=248053,
                   vision_end_token_id=248054)
    n = text["num_hidden_layers"]
    text.update(rms_norm_eps=1e-6, max_position_embeddings=32768, linear_conv_kernel_dim=4,
                layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                             for i in range(n)],
                rope_parameters={"rope_type": "default", "rope_theta": 1e7,
                                 "partial_rotary_factor": 0.25, "mrope_section": rope,
                                 "mrope_interleaved": True},
                tie_word_embeddings=True, bos_token_id=None, eos_token_id=2, pad_token_id=0)
    vision.update(patch_size=16, spatial_merge_size=2, temporal_patch_size=2, in_channels=3)
    return Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)


def smart_resize(side: int, factor: int, min_pixels: int, max_pixels: int) -> int:
    """The Qwen2-VL processor's resize of a square side (rounded to `factor`, pixel bounds)."""
    s = max(factor, round(side / factor) * factor)
    if s * s > max_pixels:
        s = max(factor, math.floor(side / math.sqrt(side * side / max_pixels) / factor) * factor)
    elif s * s < min_pixels:
        s = math.ceil(side * math.sqrt(min_pixels / (side * side)) / factor) * factor
    return s


def write_reference(a, model, cfg, ids, pixels, grid, dev) -> None:
    """input_ids, pixel_values, image_grid_thw, logits [1, S, V] and greedy_ids [1, S + 8]."""
    from safetensors.torch import save_file

    special = {cfg.image_token_id, cfg.video_token_id,
               getattr(cfg, "vision_start_token_id", -1), getattr(cfg, "vision_end_token_id", -1)}
    g = torch.Generator().manual_seed(1)
    teacher = [t if t not in special else 3
               for t in torch.randint(3, cfg.text_config.vocab_size, (a.positions,), generator=g).tolist()]
    input_ids = torch.tensor([ids + teacher], device=dev)
    kw = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), pixel_values=pixels,
              image_grid_thw=grid, mm_token_type_ids=(input_ids == cfg.image_token_id).int())
    with torch.no_grad():
        logits = model(**kw).logits.float()
        greedy = model.generate(**kw, do_sample=False, min_new_tokens=8, max_new_tokens=8,
                                pad_token_id=0)
    save_file({"input_ids": input_ids.cpu().long(), "pixel_values": pixels.float().cpu(),
               "image_grid_thw": grid.cpu().long(), "logits": logits.cpu().contiguous(),
               "greedy_ids": greedy.cpu().long()}, a.reference)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=["qwen2vl", "qwen35"], default="qwen2vl",
                    help="Qwen2-VL-2B or Qwen3.5-0.8B shapes")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (smoke test on CPU)")
    ap.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available")
    ap.add_argument("--threads", type=int, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--save", help="save the random weights here (for vlm-eval bench local)")
    ap.add_argument("--bf16-weights", action="store_true",
                    help="round the weights to bf16 (saved as bf16); compute in the usual dtype")
    ap.add_argument("--new", type=int, default=128, help="decoded tokens per sequence")
    ap.add_argument("--frame", type=int, default=64, help="frame side in pixels")
    ap.add_argument("--batch", default="1,16", help="decode batch sizes")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument("--reference", help="write transformers' logits and 8 greedy tokens for the "
                    "prompt plus --positions teacher-forced ids here (for vlm-eval bench parity)")
    ap.add_argument("--positions", type=int, default=128)
    a = ap.parse_args()

    dev = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if dev == "cuda" and not a.tiny else torch.float32
    if a.threads:
        torch.set_num_threads(a.threads)
    qwen35 = a.family == "qwen35"
    cfg = config_qwen35(a.tiny) if qwen35 else config(a.tiny)
    cls = Qwen3_5ForConditionalGeneration if qwen35 else Qwen2VLForConditionalGeneration
    torch.manual_seed(0)
    t = time.time()
    with torch.device(dev):
        model = cls(cfg).eval()
    init_s = round(time.time() - t, 2)
    t = time.time()
    model = model.to(torch.bfloat16 if a.bf16_weights else dtype)
    if a.save:
        model.save_pretrained(a.save)
    save_s = round(time.time() - t, 2)
    model = model.to(dtype)
    out = {"family": a.family, "threads": torch.get_num_threads(),
           "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
           "dtype": str(dtype).removeprefix("torch."),
           "weights": "bf16" if a.bf16_weights else str(dtype).removeprefix("torch."),
           "params": sum(p.numel() for p in model.parameters()),
           "init_s": init_s,
           "torch": torch.__version__}
    if a.save:
        out["save_s"] = save_s

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if dev == "cuda":
        x = torch.empty(2 << 30, dtype=torch.uint8, device=dev)
        y = torch.empty_like(x)
        for _ in range(3):
            y.copy_(x)
        sync()
        t = time.time()
        for _ in range(20):
            y.copy_(x)
        sync()
        out["copy_gb_per_s"] = round(20 * 2 * x.numel() / (time.time() - t) / 1e9, 1)
        del x, y
    else:
        # Decode on the CPU reads weights and writes almost nothing: the roofline is the read
        # bandwidth of all threads (a sum over 1 GiB, best of 7).
        x = torch.ones(1 << 28)
        x.sum()
        best = math.inf
        for _ in range(7):
            t = time.time()
            x.sum()
            best = min(best, time.time() - t)
        out["read_gb_per_s"] = round(4 * x.numel() / best / 1e9, 1)
        del x

    # The processor's resize of a square frame: Qwen2-VL patch 14 (factor 28, min 56²
    # pixels), Qwen3.5 patch 16 (factor 32, min 65,536 pixels: a 64 px frame becomes 256 px).
    patch = cfg.vision_config.patch_size
    side = smart_resize(a.frame, 2 * patch, 65_536 if qwen35 else 56 * 56,
                        16_777_216 if qwen35 else 28 * 28 * 1280)
    grid = torch.tensor([[1, side // patch, side // patch]], device=dev)
    patches = int(grid.prod())
    pixels = torch.randn(patches, 3 * 2 * patch * patch, device=dev, dtype=dtype)
    n_img = patches // 4
    ids = [1] * 20 + [cfg.image_token_id] * n_img + [2] * 30
    out.update(frame_px=side, image_tokens=n_img, prompt_tokens=len(ids))

    def inputs(b: int) -> dict:
        input_ids = torch.tensor([ids] * b, device=dev)
        return dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                    pixel_values=pixels.repeat(b, 1),
                    image_grid_thw=grid.repeat(b, 1),
                    mm_token_type_ids=(input_ids == cfg.image_token_id).int())

    if a.reference:
        write_reference(a, model, cfg, ids, pixels, grid, dev)

    with torch.no_grad():
        one = inputs(1)
        for _ in range(2):
            model(**one)
        times = []
        for _ in range(a.repeats):
            sync()
            t = time.time()
            model(**one)
            sync()
            times.append((time.time() - t) * 1e3)
        out["ttft_ms"] = {"median": round(statistics.median(times), 3), "min": round(min(times), 3)}
        out["decode"] = []
        for b in [int(s) for s in a.batch.split(",")]:
            kw = inputs(b)
            gen = dict(do_sample=False, min_new_tokens=a.new, max_new_tokens=a.new, pad_token_id=0)
            model.generate(**kw, **dict(gen, min_new_tokens=4, max_new_tokens=4))
            # generate asks its stopping criteria after every token: the first call comes after
            # the prefill and first token, each later one after one decode step, so the time
            # between the first and last call is the decode alone (no prefill subtracted).
            stamps = []

            def stamp(input_ids, scores, **_):
                sync()
                stamps.append(time.time())
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

            res = model.generate(**kw, **gen, stopping_criteria=StoppingCriteriaList([stamp]))
            steps = len(stamps) - 1  # decode steps after the first token
            assert steps == res.shape[1] - len(ids) - 1, (steps, res.shape)
            per_seq = steps / max(stamps[-1] - stamps[0], 1e-9)
            out["decode"].append({"batch": b, "steps": steps,
                                  "tokens_per_s_per_seq": round(per_seq, 1),
                                  "tokens_per_s_total": round(per_seq * b, 1)})
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
