#!/usr/bin/env bash
# CI's smoke run of the PPO example (examples/ppo_crafter.py): a few thousand steps on the
# installed wheel, then checks that it wrote crafter's stats.jsonl (one line per finished
# episode, crafter's keys) and a Crafter score in summary.json.
#
#   scripts/ppo_smoke.sh [WHEEL]
#
# WHEEL defaults to the one scripts/python_pkg_check.sh built (target/pypkg-wheels/; CI runs
# that stage first). The pinned venv .venv-ppo (examples/requirements-ppo.txt: torch, gymnasium,
# numpy) is made once and reused while the pins are unchanged (their sha256 is stamped in
# .venv-ppo/pins.sha256); PyPI's torch for Linux brings the CUDA wheels, so the first make
# downloads about 3 GB. Each part's time is printed. STEPS (default 4096) sets the run's length.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=$root/.venv-ppo
pins=$root/examples/requirements-ppo.txt
steps=${STEPS:-4096}

t_all=$(date +%s)
WHO=ppo_smoke
# shellcheck source=scripts/pinned_venv.sh
source "$root/scripts/pinned_venv.sh"

wheel=${1:-$(compgen -G "$root/target/pypkg-wheels/vlmcrafter-*.whl" | head -n 1 || true)}
if [[ -z "$wheel" || ! -f "$wheel" ]]; then
  echo "ppo_smoke: no vlmcrafter wheel${1:+ at $1}: build one with scripts/python_pkg_check.sh (it leaves it in target/pypkg-wheels/) or pass its path" >&2
  exit 1
fi

part "venv .venv-ppo (pinned: examples/requirements-ppo.txt)"
pinned_venv "$venv" "$pins"

part "install $(basename "$wheel")"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"

part "examples/ppo_crafter.py, $steps steps"
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
# 4 envs x 128 steps per update; episodes truncated at 200 steps so that some surely end; one
# torch thread (with two, a busy machine made the updates several times slower).
"$venv/bin/python" examples/ppo_crafter.py --total-timesteps "$steps" --num-envs 4 --num-steps 128 \
  --episode-length 200 --seed 1 --threads 1 --logdir "$logdir"

part "check stats.jsonl and the score"
"$venv/bin/python" - "$logdir" <<'PY'
import json, math, os, sys

from vlmcrafter import crafter

logdir = sys.argv[1]
lines = [json.loads(l) for l in open(os.path.join(logdir, "stats.jsonl"))]
assert lines, "stats.jsonl has no episode"
keys = ["length", "reward"] + [f"achievement_{n}" for n in crafter.ACHIEVEMENT_NAMES]
for line in lines:
    assert list(line) == keys, f"a stats.jsonl line has keys {list(line)}, crafter's are {keys}"
    assert 1 <= line["length"] <= 200, line
summary = json.load(open(os.path.join(logdir, "summary.json")))
score = summary["crafter"]
assert score["episodes"] == len(lines), (score["episodes"], len(lines))
assert math.isfinite(score["score"]) and 0 <= score["score"] <= 100, score
assert summary["env_steps"] > 0 and summary["env_s"] > 0 and summary["learner_s"] > 0, summary
print(f"ppo_smoke: {len(lines)} episodes in stats.jsonl, score {score['score']:.2f} %, "
      f"{summary['env_steps']} steps in {summary['wall_s']:.1f} s "
      f"(env {summary['env_s']:.1f} s, learner {summary['learner_s']:.1f} s)")
PY
part ""
echo "-- ppo_smoke: total $(( $(date +%s) - t_all )) s"
