#!/usr/bin/env bash
# The env server through HTTP beside Python crafter in-process, back to back in one run:
# env steps/s at N concurrent sessions and reset latency (docs/RL.md, docs/BENCHMARKS.md).
#   scripts/bench_serve.sh [SESSIONS] [REQUESTS_PER_SESSION]
# Python: $PYTHON, else .venv-crafter (made with crafter==1.8.3 when missing: scripts/crafter_venv.sh).
# Binary: $VLM_EVAL, else target/release/vlm-eval (cargo build --release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=$("$root/scripts/crafter_venv.sh")
VLM_EVAL=${VLM_EVAL:-$root/target/release/vlm-eval}
[ -x "$VLM_EVAL" ] || { echo "bench: $VLM_EVAL not found: cargo build --release, or set VLM_EVAL" >&2; exit 2; }
sessions=${1:-64}
requests=${2:-200}
assets=$("$PYTHON" -c 'import crafter, os; print(os.path.join(os.path.dirname(crafter.__file__), "assets"))')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Python crafter 1.8.3 in-process: reset() latency and random-policy steps with the 64x64
# observation (crafter always renders it), resets excluded from the step rate.
"$PYTHON" - "$out/py.json" <<'PY'
import json, statistics, sys, time
import numpy as np
import crafter
resets, steps = 6, 3000
times = []
for i in range(resets):
    env = crafter.Env(seed=i)
    t = time.perf_counter(); env.reset(); times.append(time.perf_counter() - t)
rng = np.random.RandomState(0)
env = crafter.Env(seed=100); env.reset()
busy = 0.0
for _ in range(steps):
    a = int(rng.randint(0, 17))
    t = time.perf_counter(); _, _, done, _ = env.step(a); busy += time.perf_counter() - t
    if done:
        env.reset()
json.dump({"reset_ms_median": statistics.median(times) * 1e3,
           "steps_per_sec": steps / busy}, open(sys.argv[1], "w"))
PY
cat "$out/py.json"; echo
"$VLM_EVAL" bench serve --assets "$assets" --sessions "$sessions" --requests "$requests" --json | tee "$out/rs.json"
python3 - "$out" "$sessions" <<'PY'
import json, sys
d, n = sys.argv[1], sys.argv[2]
py, rs = json.load(open(f"{d}/py.json")), json.load(open(f"{d}/rs.json"))
rows = [
    (f"env steps/s, {n} sessions over HTTP, 1 action per request", py["steps_per_sec"], rs["steps_per_sec_actions"], False),
    (f"env steps/s, {n} sessions over HTTP, model text with 4 actions", py["steps_per_sec"], rs["steps_per_sec_text"], False),
    ("reset latency, ms (server: POST /v1/sessions incl. HTTP and first PNG)", py["reset_ms_median"], rs["reset_ms_median"], True),
]
print()
print("| measurement | Python crafter 1.8.3 in-process | vlm-eval serve-env | ratio |")
print("|---|---|---|---|")
for name, p, r, lower in rows:
    ratio = p / r if lower else r / p
    print(f"| {name} | {p:,.1f} | {r:,.1f} | {ratio:,.1f}x |")
PY
