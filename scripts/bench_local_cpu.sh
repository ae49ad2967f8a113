#!/usr/bin/env bash
# The CPU side-by-side of issue 20: random Qwen3.5-0.8B-shaped weights (scripts/hf_baseline.py,
# transformers 5.23.0 + torch, f32), then on the same saved weights, in one run:
# transformers' TTFT and decode (batch 1 and 8), `vlm-eval bench local` f32, and bf16. Then the
# same weights rounded to bf16 and saved as a bf16 checkpoint (as Qwen publishes and trainers
# save), run in f32 by both: transformers upcasts them, vlm-eval holds them as bf16 (same bits).
# Prints the ratio tables; JSON results under OUT (default target/bench-local-cpu).
#
#   scripts/bench_local_cpu.sh [--family qwen35|qwen2vl] [--new 16] [--repeats 3]
#
# Needs a release binary (cargo build --release) and a Python with torch and transformers
# ($PYTHON, default .venv-torch/bin/python). The weights (3.4 GB for Qwen3.5-0.8B, and 1.7 GB
# in bf16) are written once to $WEIGHTS (default target/bench-local-cpu/weights-FAMILY) and
# $WEIGHTS-bf16, and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
FAMILY=qwen35 NEW=16 REPEATS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --family) FAMILY=$2; shift 2 ;;
    --new) NEW=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    *) echo "unknown flag $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
PYTHON=${PYTHON:-.venv-torch/bin/python}
BIN=${BIN:-target/release/vlm-eval}
OUT=${OUT:-target/bench-local-cpu}
WEIGHTS=${WEIGHTS:-$OUT/weights-$FAMILY}
[[ -x $BIN ]] || { echo "$BIN not found: run cargo build --release first" >&2; exit 2; }
"$PYTHON" -c 'import torch, transformers' 2>/dev/null \
  || { echo "$PYTHON lacks torch/transformers: set PYTHON to a venv that has them" >&2; exit 2; }
mkdir -p "$OUT"
save=()
[[ -f $WEIGHTS/model.safetensors ]] || save=(--save "$WEIGHTS")
echo "== $(date -u +%H:%M:%S) transformers ($FAMILY, f32, cpu)"
"$PYTHON" scripts/hf_baseline.py --family "$FAMILY" --device cpu --new "$NEW" --batch 1,8 \
  --repeats "$REPEATS" "${save[@]}" --json "$OUT/hf.json" 2>&1 | grep -v 'falling back' | tail -n 1
# The read bandwidth transformers' script measured: the roofline of batch-1 decode.
PEAK=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["read_gb_per_s"])' "$OUT/hf.json")
for dt in f32 bf16; do
  echo "== $(date -u +%H:%M:%S) vlm-eval bench local --dtype $dt"
  "$BIN" bench local --model-dir "$WEIGHTS" --dtype "$dt" --new "$NEW" --batch 1,8 \
    --repeats "$REPEATS" --peak-gbs "$PEAK" --json "$OUT/local_$dt.json" | tail -n 5
done
save=()
[[ -f $WEIGHTS-bf16/model.safetensors || -f $WEIGHTS-bf16/model.safetensors.index.json ]] \
  || save=(--save "$WEIGHTS-bf16")
echo "== $(date -u +%H:%M:%S) transformers ($FAMILY, bf16 checkpoint, f32)"
"$PYTHON" scripts/hf_baseline.py --family "$FAMILY" --device cpu --new "$NEW" --batch 1,8 \
  --repeats "$REPEATS" --bf16-weights "${save[@]}" --json "$OUT/hf_bf16ckpt.json" 2>&1 \
  | grep -v 'falling back' | tail -n 1
echo "== $(date -u +%H:%M:%S) vlm-eval bench local --dtype f32 (bf16 checkpoint)"
"$BIN" bench local --model-dir "$WEIGHTS-bf16" --dtype f32 --new "$NEW" --batch 1,8 \
  --repeats "$REPEATS" --peak-gbs "$PEAK" --json "$OUT/local_f32_bf16ckpt.json" | tail -n 5
echo "== $(date -u +%H:%M:%S) done"
"$PYTHON" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
peak = json.load(open(f"{out}/hf.json"))["read_gb_per_s"]
# transformers holds every weight in f32 (it upcasts a bf16 checkpoint): the bytes per decoded
# token of vlm-eval's f32 run on f32 weights.
f32_bytes = json.load(open(f"{out}/local_f32.json"))["weight_bytes_per_token"]


def hf(name):
    r = json.load(open(f"{out}/{name}.json"))
    return (r["ttft_ms"]["median"], {d["batch"]: d["tokens_per_s_total"] for d in r["decode"]},
            f32_bytes)


def ours(name):
    r = json.load(open(f"{out}/{name}.json"))
    return (r["ttft"]["median_ms"], {d["batch"]: d["tokens_per_s_total"] for d in r["decode"]},
            r["weight_bytes_per_token"])


def table(title, rows):
    (_, (t0, d0, _)) = rows[0]
    print(f"{title:32} {'TTFT ms':>8} {'b1 tok/s':>9} {'b1 GB/s':>8} {'b8 tok/s':>9} "
          f"| speed vs transformers")
    for name, (ttft, dec, b) in rows:
        gbs = dec[1] * b / 1e9
        print(f"{name:32} {ttft:8.0f} {dec[1]:9.2f} {gbs:8.1f} {dec[8]:9.2f} "
              f"| TTFT {t0 / ttft:.2f}x  b1 {dec[1] / d0[1]:.2f}x  b8 {dec[8] / d0[8]:.2f}x")


print(f"read bandwidth (transformers' script, 2 threads): {peak} GB/s; batch-1 decode reads every "
      f"decoder weight once per token")
table("f32 weights", [("transformers f32", hf("hf")), ("vlm-eval f32", ours("local_f32")),
                      ("vlm-eval bf16 (rounded weights)", ours("local_bf16"))])
table("bf16 checkpoint, f32 compute", [("transformers f32", hf("hf_bf16ckpt")),
                                       ("vlm-eval f32 (held as bf16)",
                                        ours("local_f32_bf16ckpt"))])
PY
