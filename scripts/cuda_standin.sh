#!/usr/bin/env bash
# The CUDA backend without a GPU: a CPU stand-in for the CUDA driver, cuBLAS and our kernels
# (tests/cuda_standin/, test-only, never built into the binary) that cudarc loads instead of
# NVIDIA's libraries, so the backend's Rust code runs unchanged. NVRTC is the real one.
# What this proves and what it does not: docs/ARCHITECTURE.md ("The CUDA stand-in").
#
#   scripts/cuda_standin.sh                build the stand-in, then run through it every CUDA
#                                          test (no test may skip) and `bench parity --device
#                                          cuda` on the tiny fixtures, f32 and bf16 (Qwen2-VL
#                                          against the CPU, Qwen3.5 against transformers)
#   scripts/cuda_standin.sh --build        only build the stand-in (prints its library folder)
#   scripts/cuda_standin.sh --mutants [--quick] [NAME...]
#                                          inject each known bug (all, or those named) into a
#                                          scratch copy and show that the suite fails for it
#                                          (--quick: the kernels.cu ones without a Rust rebuild)
#   scripts/cuda_standin.sh --list-mutants
#
# NVRTC comes from $NVRTC_LIB, else the nvidia-cuda-nvrtc wheel in .venv-crafter (installed
# there if missing). Output: target/cuda-standin/ (logs, the stand-in's libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TERM_COLOR=never
WORK=$ROOT/target/cuda-standin
NVRTC_WHEEL=nvidia-cuda-nvrtc==13.5.37
FIXTURE=crates/local/tests/fixtures/tiny-qwen2vl
FIXTURE35=crates/local/tests/fixtures/tiny-qwen35
# The CUDA tests: the modules named cuda_backend of the local model's test binary (the backend
# against the CPU one) and of vlm-eval's test target $CLI_TEST (error lines through the binary).
CUDA_FILTER=cuda_backend::
CLI_TEST=local_cli

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
elapsed() { # elapsed START_MS -> "12.3 s"
  local ms=$(( $(now_ms) - $1 ))
  printf '%d.%d s' $(( ms / 1000 )) $(( ms % 1000 / 100 ))
}

nvrtc_lib() {
  if [[ -n "${NVRTC_LIB:-}" ]]; then echo "$NVRTC_LIB"; return; fi
  local pat=".venv-crafter/lib/python3*/site-packages/nvidia/cu13/lib/libnvrtc.so.*"
  if ! compgen -G "$pat" >/dev/null; then
    [[ -x .venv-crafter/bin/pip ]] || python3 -m venv .venv-crafter >&2
    .venv-crafter/bin/pip install --quiet --disable-pip-version-check "$NVRTC_WHEEL" >&2 \
      || { echo "pip could not install $NVRTC_WHEEL" >&2; exit 1; }
  fi
  (cd "$(dirname "$(compgen -G "$pat" | head -n 1)")" && pwd)
}

cudarc_dir() {
  cargo metadata --format-version 1 --features cuda 2>/dev/null | python3 -c '
import json, os, sys
m = json.load(sys.stdin)
p = [p for p in m["packages"] if p["name"] == "cudarc"]
if not p: sys.exit("cudarc is not in cargo metadata")
print(os.path.dirname(p[0]["manifest_path"]))'
}

# build_standin KERNELS_CU OUT_DIR: libcuda.so.1 (driver + host-compiled kernels) and
# libcublas.so.13, with the names cudarc's loader tries first linked to them.
build_standin() {
  local kernels=$1 out=$2 src=$ROOT/tests/cuda_standin
  local cudarc
  command -v g++ >/dev/null || { echo "g++ not found (apt-get install g++)" >&2; exit 1; }
  cudarc=$(cudarc_dir)
  mkdir -p "$out/obj" "$out/lib"
  grep -o 'extern "C" __global__ void [A-Za-z_0-9]*' "$kernels" \
    | awk '{print "STANDIN_KERNEL(" $5 ")"}' >"$out/obj/kernel_list.inc"
  [[ -s "$out/obj/kernel_list.inc" ]] || { echo "no kernels found in $kernels" >&2; exit 1; }
  python3 "$src/gen_stubs.py" "$cudarc" driver "$out/obj/stubs_driver.cpp" >/dev/null
  python3 "$src/gen_stubs.py" "$cudarc" cublas "$out/obj/stubs_cublas.cpp" >/dev/null
  local cxx=(g++ -std=c++17 -O2 -g -fPIC -fvisibility=hidden -fno-strict-aliasing -pthread
             -Wall -Wextra -Werror -I "$src" -I "$out/obj")
  # Kernels as NVRTC compiles them by default (--fmad=true contracts a*b+c into FMAs), with
  # indices into fixed-size arrays (__shared__ ones included) checked: a trap is an error.
  # Warnings in kernels.cu are g++'s opinion of CUDA code, not errors (`#pragma unroll` is
  # NVRTC's: g++ ignores it).
  local kflags=(-ffp-contract=fast -fsanitize=bounds -fsanitize-undefined-trap-on-error -Wno-error
                -Wno-unknown-pragmas "-DSTANDIN_KERNELS_CU=\"$kernels\"")
  grep -qw fma /proc/cpuinfo 2>/dev/null && kflags+=(-mfma)
  local pids=()
  "${cxx[@]}" -c "$src/exec.cpp" -o "$out/obj/exec.o" & pids+=($!)
  "${cxx[@]}" -c "$src/driver.cpp" -o "$out/obj/driver.o" & pids+=($!)
  "${cxx[@]}" -c "$src/log.cpp" -o "$out/obj/log.o" & pids+=($!)
  "${cxx[@]}" -c "$src/cublas.cpp" -o "$out/obj/cublas.o" & pids+=($!)
  "${cxx[@]}" "${kflags[@]}" -c "$src/kernels.cpp" -o "$out/obj/kernels.o" & pids+=($!)
  "${cxx[@]}" -Wno-unused-function -c "$out/obj/stubs_driver.cpp" -o "$out/obj/stubs_driver.o" & pids+=($!)
  "${cxx[@]}" -Wno-unused-function -c "$out/obj/stubs_cublas.cpp" -o "$out/obj/stubs_cublas.o" & pids+=($!)
  local p
  for p in "${pids[@]}"; do wait "$p"; done
  "${cxx[@]}" -shared -Wl,-soname,libcuda.so.1 -Wl,--no-undefined -o "$out/lib/libcuda.so.1" \
    "$out/obj/exec.o" "$out/obj/driver.o" "$out/obj/log.o" "$out/obj/kernels.o" \
    "$out/obj/stubs_driver.o"
  "${cxx[@]}" -shared -Wl,-soname,libcublas.so.13 -Wl,--no-undefined \
    -o "$out/lib/libcublas.so.13" "$out/obj/cublas.o" "$out/obj/log.o" "$out/obj/stubs_cublas.o" \
    -L"$out/lib" -l:libcuda.so.1 -Wl,-rpath,'$ORIGIN'
  ln -sf libcuda.so.1 "$out/lib/libcuda.so"
  ln -sf libcublas.so.13 "$out/lib/libcublas.so"
}

# build_suite TREE LOG: build the CUDA test targets and the binary of TREE (cargo's output to
# LOG); sets SUITE_TEST_BIN (crates/local's tests), SUITE_CLI_BIN (vlm-eval's $CLI_TEST) and
# SUITE_VLM_BIN.
build_suite() {
  local tree=$1 log=$2 json t
  t=$(now_ms)
  # One target per command: `-p vlm-eval -p vlm-eval-local --test it` would also build the
  # harness's own `it` (no CUDA code) with the feature.
  json=$(cd "$tree" \
    && cargo test --release --features cuda -p vlm-eval-local --test it --no-run \
      --message-format=json 2>>"$log" \
    && cargo test --release --features cuda -p vlm-eval --test "$CLI_TEST" --no-run \
      --message-format=json 2>>"$log") \
    || { echo "build failed (log: $log)" >&2; return 5; }
  artifact() { # artifact PACKAGE TARGET KIND: the executable cargo built for it
    python3 -c '
import json, sys
pkg, name, kind = sys.argv[1:]
for line in sys.stdin:
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["package_id"].split("#")[-1].split("@")[0] == pkg
            and m["target"]["name"] == name and kind in m["target"]["kind"]):
        print(m["executable"])' "$1" "$2" "$3" <<<"$json"
  }
  SUITE_TEST_BIN=$(artifact vlm-eval-local it test)
  SUITE_CLI_BIN=$(artifact vlm-eval "$CLI_TEST" test)
  SUITE_VLM_BIN=$(artifact vlm-eval vlm-eval bin)
  [[ -x "$SUITE_TEST_BIN" && -x "$SUITE_CLI_BIN" && -x "$SUITE_VLM_BIN" ]] \
    || { echo "cargo built no CUDA test binaries or vlm-eval binary" >&2; return 5; }
  echo "   build: $(elapsed "$t")" >>"$log.times"
}

# run_suite TREE LIB_DIR LOG: the CUDA test target and bench parity (binaries from build_suite)
# through the stand-in in LIB_DIR. Prints cargo's result lines; non-zero on any failure, any
# skipped test, or if the stand-in was not what got loaded.
run_suite() {
  local tree=$1 lib=$2 log=$3 nvrtc mark rc=0
  nvrtc=$(nvrtc_lib)
  mark=$(dirname "$log")/standin-loaded.txt
  rm -f "$mark"
  (
    cd "$tree"
    export LD_LIBRARY_PATH="$lib:$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export VLM_EVAL_REQUIRE_CUDA=1 VLM_EVAL_REQUIRE_NVRTC=1 CUDA_STANDIN_MARK="$mark"
    t=$(now_ms)
    timeout "${STANDIN_TEST_TIMEOUT:-600}" "$SUITE_TEST_BIN" "$CUDA_FILTER" --nocapture >>"$log" 2>&1 \
      || exit 1
    timeout "${STANDIN_TEST_TIMEOUT:-600}" "$SUITE_CLI_BIN" "$CUDA_FILTER" --nocapture >>"$log" 2>&1 \
      || exit 1
    echo "   cuda tests: $(elapsed "$t")" >>"$log.times"
    t=$(now_ms)
    # bf16 rounding alone flips about 3 % of the tiny random model's near-tie top-1s (the 0.99
    # gate is for real shapes; crates/local/tests/it/cuda_backend.rs holds bf16 to an emulation of
    # its rounding).
    timeout 300 "$SUITE_VLM_BIN" bench parity --model-dir "$FIXTURE" --device cuda --dtype both \
      --min-top1 0.95 >>"$log" 2>&1 || exit 2
    # Qwen3.5 against transformers' own logits (the fixture's reference file).
    timeout 300 "$SUITE_VLM_BIN" bench parity --model-dir "$FIXTURE35" --device cuda --dtype both \
      --reference "$FIXTURE35/reference.safetensors" --min-top1 0.95 >>"$log" 2>&1 || exit 2
    echo "   bench parity: $(elapsed "$t")" >>"$log.times"
  ) || rc=$?
  grep -E '^test result:|^test .* FAILED$|^(PASS|FAIL):|^ +(f32|bf16) ' "$log" || true
  if [[ $rc == 2 ]]; then echo "bench parity --device cuda failed" >&2; fi
  if grep -E '^skipped' "$log" >&2; then echo "a CUDA test skipped" >&2; rc=3; fi
  if [[ ! -s "$mark" ]]; then
    echo "the stand-in's cuInit never ran: another libcuda was loaded?" >&2
    rc=4
  fi
  return "$rc"
}

# --- mutants ----------------------------------------------------------------------------------
# NAME|FILE|FROM|TO: one bug each, applied to a scratch copy (FROM must occur exactly once).
MUTANTS=(
  "rms-rsqrt|crates/local/src/backend/cuda/kernels.cu|float r = rsqrtf(block_sum(s, red) / (float)dim + eps);|float r = sqrtf(block_sum(s, red) / (float)dim + eps);"
  "attn-tile-off-by-one|crates/local/src/backend/cuda/kernels.cu|for (int jj = 0; jj < cnt; ++jj) {|for (int jj = 0; jj <= cnt; ++jj) {"
  "attn-causal-off-by-one|crates/local/src/backend/cuda/kernels.cu|int visible = causal ? (n_kv - n_q + i + 1) : n_kv;|int visible = causal ? (n_kv - n_q + i) : n_kv;"
  "attn-shared-too-small|crates/local/src/backend/cuda/kernels.cu|__shared__ float ps[ATT_T];|__shared__ float ps[ATT_T / 2];"
  "no-barrier-block-sum|crates/local/src/backend/cuda/kernels.cu|    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = lane < warps ? red[lane] : 0.f;|    if (lane == 0) red[warp] = v;
    float r = lane < warps ? red[lane] : 0.f;"
  "bf16-truncate|crates/local/src/backend/cuda/kernels.cu|    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);|    return (bf16_t)(u >> 16);"
  "gemv-lane-stride|crates/local/src/backend/cuda/kernels.cu|for (int c = lane; c < k / 8; c += 32) {|for (int c = lane; c < k / 8; c += 31) {"
  "delta-rule-no-decay|crates/local/src/backend/cuda/kernels.cu|                s[ii] *= decay;|                (void)decay;"
  "delta-rule-kv-head|crates/local/src/backend/cuda/kernels.cu|    int kh = h / (hv / hk);|    int kh = h % hk;"
  "conv-state-kept|crates/local/src/backend/cuda/kernels.cu|        if (j < past) state[(size_t)j * ch + c] = win[j];|        // the state is not saved"
  "sgemm-transpose|crates/local/src/backend/cuda/matmul.rs|                    transa: cublasOperation_t::CUBLAS_OP_T,|                    transa: cublasOperation_t::CUBLAS_OP_N,"
  "gemmex-ldc|crates/local/src/backend/cuda/matmul.rs|                        cudaDataType_t::CUDA_R_32F,
                        m_,|                        cudaDataType_t::CUDA_R_32F,
                        n_,"
  "attn-shared-mem-at-launch|crates/local/src/backend/cuda/mod.rs|            block_dim: (ATT_T, 1, 1),
            shared_mem_bytes: 0,|            block_dim: (ATT_T, 1, 1),
            shared_mem_bytes: (s.hd * n_kv * 4) as u32,"
  "per-row-block-too-small|crates/local/src/backend/cuda/mod.rs|fn per_row(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),|fn per_row(rows: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows as u32, 1, 1),
        block_dim: (BLOCK - 16, 1, 1),"
)

mutant_field() { # mutant_field INDEX FIELD(1-4)
  local - IFS='|'
  set -f  # split on '|' only: no globbing of the code's '*'
  # shellcheck disable=SC2206
  local parts=(${MUTANTS[$1]})
  printf '%s' "${parts[$(( $2 - 1 ))]}"
}

# Copy of this tree (tracked and untracked, not ignored files) with mutant INDEX applied.
make_scratch() {
  local i=$1 scratch=$2 file
  file=$(mutant_field "$i" 2)
  rm -rf "$scratch"
  mkdir -p "$scratch"
  git ls-files -z --cached --others --exclude-standard \
    | (while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done) \
    | tar --null -T - -cf - | tar -xf - -C "$scratch"
  MUT_FROM=$(mutant_field "$i" 3) MUT_TO=$(mutant_field "$i" 4) python3 - "$scratch/$file" <<'EOF2'
import os, sys
p = sys.argv[1]
s = open(p, encoding="utf-8").read()
a, b = os.environ["MUT_FROM"], os.environ["MUT_TO"]
if s.count(a) != 1:
    sys.exit(f"mutant does not apply: {a!r} occurs {s.count(a)} times in {p}")
open(p, "w", encoding="utf-8").write(s.replace(a, b))
EOF2
  diff -u "$file" "$scratch/$file" | sed -n '3,$p' | grep -E '^[-+]' | sed 's/^/   /' || true
}

# run_mutants QUICK NAME...: each mutant in a scratch copy; the suite must fail for every one.
# Full (QUICK=0): the scratch copy is built on its own (target/cuda-standin/mutants/target,
# release without LTO and incremental, so only the first build compiles the dependencies).
# Quick (QUICK=1, kernels.cu mutants only): the stand-in is rebuilt from the mutated kernels.cu
# and the suite runs with this tree's test binaries, whose NVRTC PTX still comes from the
# unmutated kernels.cu. The stand-in takes only entry names, parameter types and shared-memory
# sizes from the PTX, which these mutants do not change (module load checks the first two).
run_mutants() {
  local quick=$1 names=() want=() i j name file scratch log t rc killed=0 survived=0 skipped=0
  local broken=0
  shift
  want=("$@")
  for i in "${!MUTANTS[@]}"; do names+=("$(mutant_field "$i" 1)"); done
  [[ ${#want[@]} -gt 0 ]] || want=("${names[@]}")
  scratch=$WORK/mutants/src
  mkdir -p "$WORK/mutants"
  local summary=()
  for name in "${want[@]}"; do
    i=-1
    for j in "${!names[@]}"; do [[ ${names[$j]} == "$name" ]] && i=$j; done
    [[ $i -ge 0 ]] || { echo "unknown mutant $name (--list-mutants)" >&2; exit 2; }
    file=$(mutant_field "$i" 2)
    if [[ $quick == 1 && $file != */kernels.cu ]]; then
      skipped=$((skipped + 1))
      continue
    fi
    echo "== mutant $name ($file)"
    t=$(now_ms)
    make_scratch "$i" "$scratch"
    build_standin "$scratch/crates/local/src/backend/cuda/kernels.cu" "$WORK/mutants/standin"
    log=$WORK/mutants/$name.log
    rm -f "$log" "$log.times"
    rc=0
    if [[ $quick == 1 ]]; then
      # This tree's binaries, built once.
      [[ -n "${SUITE_TEST_BIN:-}" ]] || build_suite "$ROOT" "$WORK/mutants/build.log"
    else
      CARGO_TARGET_DIR=$WORK/mutants/target CARGO_PROFILE_RELEASE_LTO=false \
        CARGO_PROFILE_RELEASE_INCREMENTAL=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        build_suite "$scratch" "$log" || rc=$?
    fi
    if [[ $rc != 0 ]]; then
      # A mutant that does not compile proves nothing about the tests.
      broken=$((broken + 1))
      summary+=("$(printf '%-26s DID NOT BUILD (fix the mutant): see %s' "$name" "$log")")
      echo "   ${summary[-1]}"
      continue
    fi
    run_suite "$scratch" "$WORK/mutants/standin/lib" "$log" >/dev/null 2>&1 || rc=$?
    grep -E '^test result:' "$log" | sed 's/^/   /' || true
    if [[ $rc == 0 ]]; then
      survived=$((survived + 1))
      summary+=("$(printf '%-26s SURVIVED: the suite passed (%s)' "$name" "$(elapsed "$t")")")
    else
      killed=$((killed + 1))
      local why
      why=$(grep -m1 -A1 -E "^cuda-standin: .*-> [0-9]+|panicked at|^FAIL:" "$log" \
        | grep -v "panicked at" | head -n 1 | cut -c1-200 || true)
      [[ -n "$why" ]] || why=$(grep -m1 -E 'FAILED|error' "$log" | cut -c1-160 || true)
      local failed
      failed=$(grep -E '^test .* FAILED$' "$log" | awk '{print $2}' | paste -sd, - || true)
      summary+=("$(printf '%-26s killed (%s), failing: %s; first sign: %s' "$name" "$(elapsed "$t")" \
        "${failed:-bench parity}" "$why")")
    fi
    echo "   ${summary[-1]}"
  done
  local note=""
  [[ $skipped == 0 ]] || note=", $skipped outside kernels.cu left to the full mode"
  echo "== mutants: $killed killed, $survived survived, $broken did not build$note"
  printf '%s\n' "${summary[@]}"
  [[ $survived == 0 && $broken == 0 ]]
}

mode=${1:-}
case "$mode" in
  --list-mutants)
    for i in "${!MUTANTS[@]}"; do printf '%-28s %s\n' "$(mutant_field "$i" 1)" "$(mutant_field "$i" 2)"; done
    ;;
  --build)
    build_standin "$ROOT/crates/local/src/backend/cuda/kernels.cu" "$WORK/standin"
    echo "$WORK/standin/lib"
    ;;
  --mutants)
    shift
    quick=0
    if [[ "${1:-}" == --quick ]]; then quick=1; shift; fi
    start=$(now_ms)
    run_mutants "$quick" "$@"
    echo "mutants: $(elapsed "$start")"
    ;;
  "")
    start=$(now_ms)
    build_standin "$ROOT/crates/local/src/backend/cuda/kernels.cu" "$WORK/standin"
    echo "stand-in built in $(elapsed "$start"): $WORK/standin/lib"
    rm -f "$WORK/suite.log" "$WORK/suite.log.times"
    rc=0
    build_suite "$ROOT" "$WORK/suite.log" || rc=$?
    [[ $rc != 0 ]] || run_suite "$ROOT" "$WORK/standin/lib" "$WORK/suite.log" || rc=$?
    cat "$WORK/suite.log.times" 2>/dev/null || true
    if [[ $rc != 0 ]]; then
      echo "FAILED (log: $WORK/suite.log)" >&2
      exit 1
    fi
    echo "CUDA backend through the stand-in: all passed in $(elapsed "$start") (log: $WORK/suite.log)"
    ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
