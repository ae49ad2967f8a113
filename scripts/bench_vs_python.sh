#!/usr/bin/env bash
# Run Python crafter's benchmark (../shared/research/crafter_bench.py) and `vlm-eval bench env`
# back to back on this machine and print the ratios that docs/BENCHMARKS.md records.
#   PYTHON=.venv-crafter/bin/python scripts/bench_vs_python.sh [REPEATS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$root/.venv-crafter/bin/python}
VLM_EVAL=${VLM_EVAL:-$root/target/release/vlm-eval}
bench_py=${CRAFTER_BENCH:-$root/../shared/research/crafter_bench.py}
repeats=${1:-3}
[ -f "$bench_py" ] || { echo "bench: $bench_py not found (set CRAFTER_BENCH)" >&2; exit 2; }
assets=$("$PYTHON" -c 'import crafter, os; print(os.path.join(os.path.dirname(crafter.__file__), "assets"))')
out=$(mktemp -d)
"$PYTHON" "$bench_py" --repeats "$repeats" --steps 2000 --resets 6 | tee "$out/py.txt"
"$VLM_EVAL" bench env --assets "$assets" --steps 300000 --json | tee "$out/rs.json"
"$VLM_EVAL" bench env --assets "$assets" --steps 3000000 --no-render --json | tee "$out/rs_nr.json"
python3 - "$out" <<'PY'
import json, re, sys
d = sys.argv[1]
py = open(f'{d}/py.txt').read()
def med(label):
    m = re.search(re.escape(label) + r'.*?median=\s*([0-9.]+)', py)
    return float(m.group(1)) if m else float('nan')
rs, nr = json.load(open(f'{d}/rs.json')), json.load(open(f'{d}/rs_nr.json'))
rows = [
    ('random policy, resets included, 64x64 render (steps/s)', med('f_end_to_end_random_sps'), rs['steps_per_sec']),
    ('step with 64x64 render, resets excluded (steps/s)', med('a_step_render_sps'), rs['step_only_per_sec']),
    ('reset (ms)', med('b_reset_ms'), rs['reset_ms']),
    ('step without render (steps/s)', med('c_step_norender_sps'), nr['step_only_per_sec']),
]
print()
print('| measurement | Python crafter 1.8.3 | vlm-eval | ratio |')
print('|---|---|---|---|')
for name, p, r in rows:
    ratio = p / r if 'ms' in name else r / p
    print(f'| {name} | {p:,.1f} | {r:,.1f} | {ratio:,.0f}x |')
PY
rm -rf "$out"
