#!/usr/bin/env bash
# How long a contributor waits for `cargo build --release` after touching one file (issue 50;
# docs/BENCHMARKS.md "Build and test times"). Builds once to warm up, then touches each file in
# turn and times the rebuild; with --commit also an empty commit (build.rs records the commit)
# on a detached HEAD, which it then leaves where it was.
#
#   scripts/bench_build.sh [--commit] [TREE]      TREE: a checkout (default: this one)
#
# The files: a CLI file (src/cli/score.rs), an engine file (crates/crafter/src/player.rs) and a
# local-model file (crates/local/src/sampling.rs, or src/model/local/sampling.rs in a checkout
# from before the local model was its own crate). Run it on a quiet machine: the figures are wall
# times, and each line prints the load average.
set -euo pipefail
commit=0
if [[ "${1:-}" == --commit ]]; then commit=1; shift; fi
tree=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$tree"
local_file=crates/local/src/sampling.rs
[[ -f "$local_file" ]] || local_file=src/model/local/sampling.rs
for f in src/cli/score.rs crates/crafter/src/player.rs "$local_file"; do
  [[ -f "$f" ]] || { echo "bench_build: $tree has no $f: give a checkout of this project" >&2; exit 2; }
done

timed() { # timed LABEL: one `cargo build --release`, its wall time and the load
  local s e
  s=$(date +%s%N)
  cargo build --release --quiet || { echo "bench_build: the build failed ($1)" >&2; exit 1; }
  e=$(date +%s%N)
  printf '%-52s %7.1f s   load %s\n' "$1" "$(( (e - s) / 1000000 ))e-3" "$(cut -d' ' -f1 /proc/loadavg)"
}

echo "bench_build: $(git rev-parse --short HEAD 2>/dev/null || echo '?') in $tree, $(nproc) CPUs"
timed "warm-up"
timed "nothing changed"
touch src/cli/score.rs && timed "one CLI file (src/cli/score.rs)"
touch crates/crafter/src/player.rs && timed "one engine file (crates/crafter/src/player.rs)"
touch "$local_file" && timed "one local-model file ($local_file)"
touch src/cli/score.rs && timed "one CLI file again"
if [[ $commit == 1 ]]; then
  head=$(git rev-parse HEAD)
  branch=$(git symbolic-ref -q --short HEAD || true)
  git checkout -q --detach
  git -c user.name=bench -c user.email=bench@localhost commit -q --allow-empty -m "bench_build: empty commit"
  timed "an empty commit"
  if [[ -n "$branch" ]]; then git checkout -q "$branch"; else git checkout -q --detach "$head"; fi
fi
