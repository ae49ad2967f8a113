#!/usr/bin/env bash
# The CPU side-by-side of issue 20: random Qwen3.5-0.8B-shaped weights (scripts/hf_baseline.py,
# transformers 5.23.0 + torch, f32), then on the same saved weights, in one run:
# transformers' TTFT and decode (batch 1 and 8), `vlm-eval bench local` f32, and bf16.
# Prints the ratio table; JSON results under OUT (default target/bench-local-cpu).
#
#   scripts/bench_local_cpu.sh [--family qwen35|qwen2vl] [--new 16] [--repeats 3]
#
# Needs a release binary (cargo build --release) and a Python with torch and transformers
# ($PYTHON, default .venv-torch/bin/python). The weights (3.4 GB for Qwen3.5-0.8B) are written
# once to $WEIGHTS (default target/bench-local-cpu/weights-FAMILY) and reused.
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
for dt in f32 bf16; do
  echo "== $(date -u +%H:%M:%S) vlm-eval bench local --dtype $dt"
  "$BIN" bench local --model-dir "$WEIGHTS" --dtype "$dt" --new "$NEW" --batch 1,8 \
    --repeats "$REPEATS" --json "$OUT/local_$dt.json" | tail -n 5
done
echo "== $(date -u +%H:%M:%S) done"
"$PYTHON" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
hf = json.load(open(f"{out}/hf.json"))
rows = [("transformers f32", hf["ttft_ms"]["median"],
         {d["batch"]: d["tokens_per_s_total"] for d in hf["decode"]})]
for dt in ("f32", "bf16"):
    r = json.load(open(f"{out}/local_{dt}.json"))
    rows.append((f"vlm-eval {dt}", r["ttft"]["median_ms"],
                 {d["batch"]: d["tokens_per_s_total"] for d in r["decode"]}))
base = rows[0]
print(f"{'':18} {'TTFT ms':>10} {'b1 tok/s':>9} {'b8 tok/s':>9} | speed vs transformers")
for name, ttft, dec in rows:
    print(f"{name:18} {ttft:10.0f} {dec[1]:9.2f} {dec[8]:9.2f} | TTFT {base[1] / ttft:.2f}x  "
          f"b1 {dec[1] / base[2][1]:.2f}x  b8 {dec[8] / base[2][8]:.2f}x")
PY
