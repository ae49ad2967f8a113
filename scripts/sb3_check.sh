#!/usr/bin/env bash
# CI's check of the Stable-Baselines3 adapter (vlmcrafter.sb3, issue 49): on the installed wheel
# in the pinned venv .venv-ppo (examples/requirements-ppo.txt: torch, gymnasium,
# stable-baselines3, pytest), run
#   1. pytest tests/python_sb3/ (the adapter beside SB3's DummyVecEnv over the single env, step
#      for step, with SB3's wrappers on top; its API; PPO's CnnPolicy taking it);
#   2. a short SB3 PPO run (CnnPolicy, $STEPS steps, one torch thread) on the adapter;
#   3. the SB3 example of docs/PYTHON.md (the block marked "run by scripts/sb3_check.sh").
#
#   scripts/sb3_check.sh [WHEEL]
#
# WHEEL defaults to the one scripts/python_pkg_check.sh built (target/pypkg-wheels/); the venv is
# made once and reused while the pins are unchanged (scripts/pinned_venv.sh; scripts/ppo_smoke.sh
# makes the same venv). Textures: $CRAFTER_ASSETS when set (CI sets it), else built-in sprites.
# Each part's time is printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=$root/.venv-ppo
pins=$root/examples/requirements-ppo.txt
steps=${STEPS:-4096}

t_all=$(date +%s)
WHO=sb3_check
# shellcheck source=scripts/pinned_venv.sh
source "$root/scripts/pinned_venv.sh"

wheel=${1:-$(compgen -G "$root/target/pypkg-wheels/vlmcrafter-*.whl" | head -n 1 || true)}
if [[ -z "$wheel" || ! -f "$wheel" ]]; then
  echo "sb3_check: no vlmcrafter wheel${1:+ at $1}: build one with scripts/python_pkg_check.sh (it leaves it in target/pypkg-wheels/) or pass its path" >&2
  exit 1
fi

part "venv .venv-ppo (pinned: examples/requirements-ppo.txt)"
pinned_venv "$venv" "$pins"

part "install $(basename "$wheel")"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export VLM_EVAL_NO_FETCH=1

part "pytest tests/python_sb3 (against the installed wheel)"
status=0
(cd "$scratch" && "$venv/bin/python" -m pytest --import-mode=importlib -p no:cacheprovider \
  -ra "$root/tests/python_sb3") || status=$?
case $status in
  0) ;;
  5) echo "sb3_check: pytest collected no tests (exit 5): that is a failure" >&2; exit 1 ;;
  *) echo "sb3_check: pytest failed (exit $status)" >&2; exit 1 ;;
esac

part "SB3 PPO (CnnPolicy) on CrafterVecEnv(4), $steps steps, one torch thread"
# Episodes truncated at 100 steps so that some surely end (VecMonitor logs them).
(cd "$scratch" && "$venv/bin/python" - "$steps" <<'PY'
import math, os, sys, time

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor

from vlmcrafter.sb3 import CrafterVecEnv

torch.set_num_threads(1)
steps = int(sys.argv[1])
env = VecMonitor(CrafterVecEnv(4, seed=1, length=100, textures=os.environ.get("CRAFTER_ASSETS") or "builtin"))
model = PPO("CnnPolicy", env, n_steps=128, batch_size=128, n_epochs=2, seed=1, device="cpu")
t = time.perf_counter()
model.learn(steps)
wall = time.perf_counter() - t
episodes = list(model.ep_info_buffer)
assert model.num_timesteps >= steps, model.num_timesteps
assert episodes, "no episode ended (VecMonitor logged none)"
assert all(1 <= e["l"] <= 100 and math.isfinite(e["r"]) for e in episodes), episodes
print(f"sb3_check: PPO CnnPolicy, {model.num_timesteps} steps in {wall:.1f} s, {len(episodes)} episodes, "
      f"mean return {np.mean([e['r'] for e in episodes]):.2f}, mean length {np.mean([e['l'] for e in episodes]):.1f}")
env.close()
PY
)

part "docs/PYTHON.md's SB3 example (the block marked for scripts/sb3_check.sh)"
block=$scratch/docs_sb3.py
awk '/docs-test: skip \(.*scripts\/sb3_check.sh runs it/ {mark=1; next}
     mark && /^```python/ {inblock=1; next}
     inblock && /^```/ {exit}
     inblock {print}' docs/PYTHON.md > "$block"
[[ -s "$block" ]] || { echo "sb3_check: no SB3 block marked for scripts/sb3_check.sh in docs/PYTHON.md" >&2; exit 1; }
(cd "$scratch" && OMP_NUM_THREADS=1 "$venv/bin/python" "$block")

part ""
echo "-- sb3_check: total $(( $(date +%s) - t_all )) s"
