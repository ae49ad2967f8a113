#!/usr/bin/env bash
# Parity check: vlm-eval's Crafter against Python crafter 1.8.3 (canonical creature order).
#
#   scripts/parity.sh [--seed S] [--steps N] [--action-seed A] [--size W] [--length L] [--immortal]
#                     [--actions a,b,...]
#       one comparison; prints OK or the first differing record and field
#   scripts/parity.sh --suite
#       the acceptance suite: seeds 0-19 x 1000 steps at 64x64, seeds 0-2 x 500 steps at
#       224x224, one full 10 000-step episode (health refilled, a fixed action cycle, ending at the
#       length limit) and a 10 000-step random-action trace (many episodes)
#
# Environment: PYTHON (an interpreter with crafter==1.8.3; default .venv-crafter/bin/python),
# VLM_EVAL (the binary; default target/release/vlm-eval), JOBS (parallel runs; default nproc),
# PARITY_DIR (where traces are kept; default a temporary folder, kept only on failure).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$root/.venv-crafter/bin/python}
VLM_EVAL=${VLM_EVAL:-$root/target/release/vlm-eval}
JOBS=${JOBS:-$(nproc)}

[ -x "$VLM_EVAL" ] || { echo "parity: $VLM_EVAL not found; run cargo build --release" >&2; exit 2; }
"$PYTHON" -c 'import crafter' 2>/dev/null || {
  echo "parity: $PYTHON cannot import crafter; create it with: python3 -m venv .venv-crafter && .venv-crafter/bin/pip install crafter==1.8.3" >&2
  exit 2
}
# Frames are compared byte for byte, so both sides must use crafter's own textures.
assets=$("$PYTHON" -c 'import crafter, os; print(os.path.join(os.path.dirname(crafter.__file__), "assets"))')

one() {  # one comparison; args: name then tracer flags
  local name=$1; shift
  local py_args=() rs_args=()
  while [ $# -gt 0 ]; do
    case $1 in
      --immortal) py_args+=(--immortal); rs_args+=(--immortal); shift ;;
      --seed|--steps|--action-seed|--size|--length|--actions) py_args+=("$1" "$2"); rs_args+=("$1" "$2"); shift 2 ;;
      *) echo "parity: unknown flag $1" >&2; return 2 ;;
    esac
  done
  "$PYTHON" "$root/scripts/crafter_reference_trace.py" "${py_args[@]}" --out "$dir/$name.ref.jsonl"
  "$VLM_EVAL" env trace --assets "$assets" "${rs_args[@]}" > "$dir/$name.ours.jsonl"
  python3 "$root/scripts/trace_diff.py" "$dir/$name.ref.jsonl" "$dir/$name.ours.jsonl" > "$dir/$name.result" || true
  echo "$name: $(cat "$dir/$name.result")"
  grep -q '^OK' "$dir/$name.result"
}
export -f one
export PYTHON VLM_EVAL root assets

dir=${PARITY_DIR:-$(mktemp -d)}
mkdir -p "$dir"
export dir
if [ "${1:-}" = "--suite" ]; then
  {
    for s in $(seq 0 19); do echo "s${s}_64 --seed $s --steps 1000 --size 64"; done
    for s in 0 1 2; do echo "s${s}_224 --seed $s --steps 500 --size 224"; done
    echo "episode_10000 --seed 20 --steps 10000 --size 64 --immortal --actions do,noop,place_stone,do,noop,noop"
    echo "random_10000 --seed 21 --steps 10000 --size 64 --action-seed 3"
  } > "$dir/jobs"
  status=0
  xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ < "$dir/jobs" || status=1
  records=$(cat "$dir"/*.ref.jsonl | wc -l)
  if [ $status -eq 0 ]; then
    echo "parity suite: all $(wc -l < "$dir/jobs") comparisons identical ($records records)"
    [ -n "${PARITY_DIR:-}" ] || rm -rf "$dir"
  else
    echo "parity suite: MISMATCH (traces kept in $dir)"
  fi
  exit $status
fi
one single "$@" && { [ -n "${PARITY_DIR:-}" ] || rm -rf "$dir"; }
