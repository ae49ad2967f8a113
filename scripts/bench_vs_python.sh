#!/usr/bin/env bash
# Python crafter 1.8.3's speed (scripts/bench_crafter_py.py) and `vlm-eval bench env`, back to
# back on this machine, and the ratios that docs/BENCHMARKS.md records.
#   scripts/bench_vs_python.sh [REPEATS]
# Python: $PYTHON, else .venv-crafter (made with crafter==1.8.3 when missing: scripts/crafter_venv.sh).
# Binary: $VLM_EVAL, else target/release/vlm-eval (cargo build --release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=$("$root/scripts/crafter_venv.sh")
VLM_EVAL=${VLM_EVAL:-$root/target/release/vlm-eval}
[ -x "$VLM_EVAL" ] || { echo "bench: $VLM_EVAL not found: cargo build --release, or set VLM_EVAL" >&2; exit 2; }
repeats=${1:-3}
assets=$("$PYTHON" -c 'import crafter, os; print(os.path.join(os.path.dirname(crafter.__file__), "assets"))')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$PYTHON" "$root/scripts/bench_crafter_py.py" --repeats "$repeats" --steps 2000 --resets 6 | tee "$out/py.json"
"$VLM_EVAL" bench env --assets "$assets" --steps 300000 --json | tee "$out/rs.json"
"$VLM_EVAL" bench env --assets "$assets" --steps 3000000 --no-render --json | tee "$out/rs_nr.json"
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
py = json.load(open(f'{d}/py.json'))
rs, nr = json.load(open(f'{d}/rs.json')), json.load(open(f'{d}/rs_nr.json'))
rows = [
    ('random policy, resets included, 64x64 render (steps/s)', py['end_to_end_sps'], rs['steps_per_sec']),
    ('step with 64x64 render, resets excluded (steps/s)', py['step_render_sps'], rs['step_only_per_sec']),
    ('reset (ms)', py['reset_ms'], rs['reset_ms']),
    ('step without render (steps/s)', py['step_norender_sps'], nr['step_only_per_sec']),
]
print()
print('| measurement | Python crafter 1.8.3 | vlm-eval | ratio |')
print('|---|---|---|---|')
for name, p, r in rows:
    ratio = p / r if 'ms' in name else r / p
    print(f'| {name} | {p:,.1f} | {r:,.1f} | {ratio:,.0f}x |')
PY
