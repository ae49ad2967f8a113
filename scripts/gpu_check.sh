#!/usr/bin/env bash
# Every GPU check and benchmark of the local VLM (issue 6) in one run, for a machine with an
# NVIDIA GPU, PyTorch and transformers but no Rust toolchain.
#
#   scripts/gpu_check.sh --prepare   # here: build the cuda binaries into .gpu/ (git-ignored)
#   scripts/gpu_check.sh             # there: run everything, results under $OUT (or gpu-results/)
#   GPU_CHECK_TINY=1 scripts/gpu_check.sh   # dry run of the script with tiny shapes
#
# Steps (each under its own time limit; a failing step does not stop the others):
#   1. GPU, driver and the CUDA libraries found (pip wheels are put on LD_LIBRARY_PATH);
#   2. the CUDA backend's tests against the CPU backend (ops, tiny fixture), failing on skip;
#   3. `bench parity` on the tiny fixture and a 4-episode run on the GPU;
#   4. scripts/hf_baseline.py: random Qwen2-VL-2B weights saved, transformers' TTFT and decode;
#   5. `bench local` on the same weights (bf16; f32 batch 1), then `bench parity` at real
#      shapes: f32 max |Δ| and bf16 top-1 agreement against the CPU f32 reference, and top-1
#      agreement and greedy tokens against transformers' own logits (--reference);
#   6. Qwen3.5: `bench parity` on the tiny Qwen3.5 fixture against transformers' reference, then
#      scripts/hf_baseline.py --family qwen35 (random 0.8B-shaped weights saved) and `bench
#      local` on the same weights, batch 1 and 8 (targets on an H200: batch-1 decode ≥ 1,400
#      tok/s, TTFT ≤ 10 ms; the CUDA tests of step 2 cover the Qwen3.5 ops and fixture too);
#   7. summary.json with the Rust/transformers ratios.
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == --prepare ]]; then
  set -e
  cargo build --release --features cuda
  # crates/local's test binary; step 2 runs its cuda_backend module.
  test_bin=$(cargo test --release --features cuda -p vlm-eval-local --test it --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "it":
        print(m["executable"])')
  mkdir -p .gpu
  cp target/release/vlm-eval .gpu/vlm-eval
  cp "$test_bin" .gpu/cuda_backend
  strip .gpu/vlm-eval .gpu/cuda_backend 2>/dev/null || true
  ls -la .gpu
  exit 0
fi

OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
BIN=$PWD/.gpu/vlm-eval
TESTS=$PWD/.gpu/cuda_backend
CKPT=${CKPT:-/tmp/q2vl2b}
W35=${W35:-/tmp/q35-08b}
# GPU_CHECK_TINY=1: tiny random shapes instead of Qwen2-VL-2B (a dry run of this script).
TINY=()
[[ "${GPU_CHECK_TINY:-}" == 1 ]] && TINY=(--tiny)
SUMMARY=$OUT/steps.txt
: >"$SUMMARY"

step() { # step NAME SECONDS CMD...: run with a time limit, log to $OUT/NAME.log
  local name=$1 limit=$2 start rc
  shift 2
  echo "== $name"
  start=$(date +%s%N)
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  printf '%-14s rc=%-3s %6d ms\n' "$name" "$rc" $(( ($(date +%s%N) - start) / 1000000 )) | tee -a "$SUMMARY"
  tail -n 25 "$OUT/$name.log"
}

[[ -x "$BIN" && -x "$TESTS" ]] || { echo "no .gpu/ binaries: run scripts/gpu_check.sh --prepare first" >&2; exit 2; }

echo "== machine"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv; } \
  | tee "$OUT/gpu.txt"
NV=$(python3 - <<'EOF'
import glob, os, site
dirs = set()
for s in site.getsitepackages():
    for p in glob.glob(os.path.join(s, "nvidia", "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(p))
print(":".join(sorted(dirs)))
EOF
)
export LD_LIBRARY_PATH="$NV${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in ${NV//:/ }; do ls "$d"; done | grep -E 'libcublas|libnvrtc|libcudart' | sort -u | tee "$OUT/libs.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' \
  | tee -a "$OUT/gpu.txt"

FIXTURES=crates/local/tests/fixtures
export VLM_EVAL_REQUIRE_CUDA=1 VLM_EVAL_FIXTURE=$PWD/$FIXTURES/tiny-qwen2vl
export VLM_EVAL_FIXTURE35=$PWD/$FIXTURES/tiny-qwen35
step cuda_tests 120 "$TESTS" cuda_backend:: --test-threads=1 --nocapture
# bf16 flips ~3 % of the tiny random model's near-tie top-1s by itself: 0.99 is for real shapes.
step parity_tiny 60 "$BIN" bench parity --model-dir $FIXTURES/tiny-qwen2vl --device cuda \
  --min-top1 0.95 --json "$OUT/parity_tiny.json"
step run_tiny 90 "$BIN" --model local:$FIXTURES/tiny-qwen2vl --device cuda --seeds 4 --steps 3 \
  --out "$OUT/runs" --run-name tiny-cuda --quiet
step hf_baseline 240 python3 scripts/hf_baseline.py "${TINY[@]}" --save "$CKPT" --new 128 --batch 1,16 \
  --reference "$CKPT/reference.safetensors" --json "$OUT/hf_baseline.json"
step bench_bf16 150 "$BIN" bench local --model-dir "$CKPT" --device cuda --dtype bf16 --new 128 \
  --batch 1,16 --json "$OUT/bench_bf16.json"
step bench_f32 120 "$BIN" bench local --model-dir "$CKPT" --device cuda --dtype f32 --new 64 \
  --batch 1 --repeats 3 --json "$OUT/bench_f32.json"
step parity_2b 240 "$BIN" bench parity --model-dir "$CKPT" --device cuda --dtype both --positions 128 \
  --json "$OUT/parity_2b.json"
# transformers ran in bf16 on the GPU, so its logits are no f32 oracle: gate on top-1 only.
step parity_hf 120 "$BIN" bench parity --model-dir "$CKPT" --device cuda --dtype both \
  --reference "$CKPT/reference.safetensors" --max-abs inf --json "$OUT/parity_hf.json"

# Qwen3.5 (issue 20): the tiny fixture against transformers' own logits (f32 and bf16), then
# 0.8B shapes side by side with transformers.
Q35=$FIXTURES/tiny-qwen35
step parity_q35 90 "$BIN" bench parity --model-dir "$Q35" --device cuda --dtype both \
  --reference "$Q35/reference.safetensors" --min-top1 0.9 --json "$OUT/parity_q35.json"
step hf_qwen35 300 python3 scripts/hf_baseline.py "${TINY[@]}" --family qwen35 --save "$W35" \
  --batch 1,8 --json "$OUT/hf_qwen35.json"
step local_qwen35 180 "$BIN" bench local --model-dir "$W35" --device cuda --batch 1,8 \
  --json "$OUT/local_qwen35.json"

python3 - "$OUT" <<'EOF' | tee "$OUT/summary.json"
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
hf, rs = load("hf_baseline.json"), load("bench_bf16.json")
s = {"hf": hf, "rust_bf16": rs, "rust_f32": load("bench_f32.json"),
     "parity_tiny": load("parity_tiny.json"), "parity_2b": load("parity_2b.json"),
     "parity_hf": load("parity_hf.json")}
if hf and rs:
    s["ratio_ttft_hf_over_rust"] = hf["ttft_ms"]["median"] / rs["ttft"]["median_ms"]
    by_b = {d["batch"]: d for d in hf["decode"]}
    s["ratio_decode_rust_over_hf"] = {
        d["batch"]: d["tokens_per_s_total"] / by_b[d["batch"]]["tokens_per_s_total"]
        for d in rs["decode"] if d["batch"] in by_b}
hq, rq = load("hf_qwen35.json"), load("local_qwen35.json")
s["qwen35"] = {"hf": hq, "rust": rq, "parity_tiny": load("parity_q35.json")}
if rq:
    b1 = [d for d in rq.get("decode", []) if d.get("batch") == 1]
    s["qwen35"]["targets"] = {
        "decode_b1_tok_s": b1[0]["tokens_per_s_total"] if b1 else None, "decode_b1_min": 1400,
        "ttft_ms": rq["ttft"]["median_ms"], "ttft_max_ms": 10}
try:  # hf_baseline.py --family qwen35 writes the same fields as for Qwen2-VL
    s["qwen35"]["ratio_ttft_hf_over_rust"] = hq["ttft_ms"]["median"] / rq["ttft"]["median_ms"]
    by_b = {d["batch"]: d for d in hq["decode"]}
    s["qwen35"]["ratio_decode_rust_over_hf"] = {
        d["batch"]: d["tokens_per_s_total"] / by_b[d["batch"]]["tokens_per_s_total"]
        for d in rq["decode"] if d["batch"] in by_b}
except (KeyError, TypeError, ZeroDivisionError) as e:
    s["qwen35"]["ratio_error"] = repr(e)
print(json.dumps(s, indent=1))
EOF
cat "$SUMMARY"
