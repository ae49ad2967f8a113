#!/usr/bin/env bash
# A real single-node Slurm (Debian's slurmctld, slurmd, slurm-client, munge) runs deploy/slurm/
# as shipped: a mock run of 16 seeds x 5 steps in 4 shards, submitted with submit.sh (texture
# warm-up, array, merge). Checks that
#   1. the merged summary.json equals an unsharded run's (timing fields aside) and every frame
#      is byte-identical;
#   2. when one shard fails, the merge job is cancelled (not left pending), `vlm-eval merge
#      --check` names the failed shard and the array subset to resubmit, and `merge` refuses the
#      incomplete set naming the missing seed;
#   3. resubmitting only that shard (submit.sh --array 2) resumes it (its finished episodes are
#      kept byte for byte) and the merge completes, again equal to the unsharded run.
# The failure is injected without touching deploy/: VLM_EVAL (the binary the job files run)
# points at a wrapper that, for array task 2 only, plays the shard and then takes back its
# last episode's episode.json and exits 1, as a task killed during its last episode leaves it.
#
# Daemons run from a throwaway config in a temp folder (SLURM_CONF; proctrack/linuxproc,
# task/none, no cgroups, no accounting) on free loopback ports; their PIDs are kept and exactly
# those are stopped on exit. Needs root (slurmd), as CI has. Uses target/release/vlm-eval
# (built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$(date +%s)
say() { echo "slurm_check [$(($(date +%s) - START)) s]: $*"; }
fail() { echo "slurm_check: FAIL: $*" >&2; exit 1; }

# --- packages -------------------------------------------------------------------------------
missing=()
for tool in slurmctld slurmd sbatch munged; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  say "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
  SUDO=""
  [[ "$(id -u)" != 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    slurmctld slurmd slurm-client munge >/dev/null
fi
[[ "$(id -u)" == 0 ]] || fail "slurmd must run as root here (CI runs as root)"

BIN="$ROOT/target/release/vlm-eval"
[[ -x "$BIN" ]] || cargo build --release
PY=python3

# --- throwaway cluster ----------------------------------------------------------------------
T=$(mktemp -d /tmp/vlm-eval-slurm.XXXXXX)
PIDS=()
cleanup() {
  local rc=$?
  if [[ -n "${SLURM_CONF:-}" ]] && ((${#PIDS[@]})); then
    # Our private controller: every job it knows is ours.
    squeue -h -o %A 2>/dev/null | xargs -r scancel 2>/dev/null || true
  fi
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    local alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  if ((rc != 0)); then
    for f in "$T"/slurmctld.log "$T"/slurmd.log "$T"/results*/logs/*.out; do
      [[ -f "$f" ]] && { echo "--- $f (last lines)" >&2; tail -n 15 "$f" >&2; }
    done
  fi
  rm -rf "$T"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
HOST=$(hostname -s)
NCPU=$(nproc)
mkdir -p "$T/munge" "$T/state" "$T/spool"
chmod 700 "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
SOCKET="$T/munge/munge.socket"
munged -F -f --key-file="$T/munge/munge.key" --socket="$SOCKET" \
  --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
  --seed-file="$T/munge/munged.seed" >"$T/munge/munged.out" 2>&1 &
PIDS+=($!)

export SLURM_CONF="$T/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=vlmevalci
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$NCPU State=UNKNOWN
PartitionName=ci Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF

for _ in $(seq 1 50); do [[ -S "$SOCKET" ]] && break; sleep 0.1; done
[[ -S "$SOCKET" ]] || fail "munged did not start (see $T/munge/munged.log)"
slurmctld -D -c >"$T/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -N "$HOST" >"$T/slurmd.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 150); do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
  [[ "$state" == idle ]] && break
  sleep 0.2
done
[[ "$state" == idle ]] || fail "the node did not come up idle (state: '${state:-none}')"
say "Slurm $(sinfo -V | awk '{print $2}') up: node $HOST, $NCPU CPU(s), no --mem, no cgroups"

# --- helpers --------------------------------------------------------------------------------
# job_states ID: the state of each task of a job (one per line).
job_states() { scontrol show job -o "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
# wait_done ID: until no task of the job is pending or running (at most 120 s).
wait_done() {
  local s
  for _ in $(seq 1 600); do
    s=$(job_states "$1" | grep -cE '^(PENDING|RUNNING|CONFIGURING|COMPLETING)$' || true)
    ((s == 0)) && return 0
    sleep 0.2
  done
  fail "job $1 still not finished after 120 s: $(job_states "$1" | sort | uniq -c | tr '\n' ' ')"
}
expect_state() { # ID STATE
  local got
  got=$(job_states "$1" | sort -u | tr '\n' ' ')
  [[ "$got" == "$2 " ]] || fail "job $1 is ${got:-gone}, expected $2 ($(scontrol show job -o "$1" | grep -o 'Reason=[^ ]*' | sort -u | tr '\n' ' '))"
}
# submit RESULTS [submit.sh options]: sets WARMUP, ARRAY, MERGE.
submit() {
  local results=$1 line
  shift
  line=$(deploy/slurm/submit.sh --shards 4 --results "$results" "$@" -- "${RUN_FLAGS[@]}")
  eval "$(echo "$line" | sed -E 's/warmup=/WARMUP=/; s/array=/ARRAY=/; s/merge=/MERGE=/')"
  [[ -n "${WARMUP:-}" && -n "${ARRAY:-}" && -n "${MERGE:-}" ]] || fail "submit.sh printed '$line'"
}
# same_as_unsharded MERGED: summary (timing aside) and every frame equal the unsharded run's.
same_as_unsharded() {
  $PY - "$T/full/full" "$1" <<'PYEOF'
import json, os, sys
full, merged = sys.argv[1], sys.argv[2]
timing = {"episode_wall_s", "latency_p50_ms", "latency_p95_ms"}
def summary(run):
    with open(os.path.join(run, "summary.json")) as f:
        return {k: v for k, v in json.load(f).items() if k not in timing}
a, b = summary(full), summary(merged)
if a != b:
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    sys.exit(f"summary.json differs from the unsharded run's in {diff}")
frames = 0
for seed in sorted(os.listdir(os.path.join(full, "episodes"))):
    fa = os.path.join(full, "episodes", seed, "frames")
    fb = os.path.join(merged, "episodes", seed, "frames")
    names = sorted(os.listdir(fa))
    if names != sorted(os.listdir(fb)):
        sys.exit(f"{seed}: frame files differ")
    for n in names:
        with open(os.path.join(fa, n), "rb") as x, open(os.path.join(fb, n), "rb") as y:
            if x.read() != y.read():
                sys.exit(f"{seed}/frames/{n} differs")
        frames += 1
if a.get("episodes") != 16 and len(os.listdir(os.path.join(merged, "episodes"))) != 16:
    sys.exit("the merged run does not hold 16 episodes")
print(f"equal: summary.json (timing fields aside) and {frames} frames byte for byte")
PYEOF
}

RUN_FLAGS=(--model mock --seeds 16 --steps 5 --concurrency 2)
"$BIN" run "${RUN_FLAGS[@]}" --out "$T/full" --run-name full --quiet >/dev/null
say "unsharded reference run done"

# --- 1. the whole array as shipped ----------------------------------------------------------
export VLM_EVAL="$BIN"
submit "$T/results-a"
say "submitted: warm-up $WARMUP, array $ARRAY (4 tasks), merge $MERGE"
wait_done "$MERGE"
expect_state "$WARMUP" COMPLETED
expect_state "$ARRAY" COMPLETED
expect_state "$MERGE" COMPLETED
say "array and merge completed; $(same_as_unsharded "$T/results-a/merged")"
from=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["shard_from"])' \
  "$(echo "$T"/results-a/*_shard1of4)/run.json")
[[ "$from" == "{'index': 'SLURM_ARRAY_TASK_ID', 'count': 'VLM_EVAL_SHARD_COUNT'}" ]] \
  || fail "run.json shard_from is $from"

# --- 2. one shard fails ---------------------------------------------------------------------
RB="$T/results-b"
cat >"$T/flaky-vlm-eval" <<WRAP
#!/usr/bin/env bash
# Task 2 plays its shard, then loses its last episode (seed 11) and fails.
"$BIN" "\$@" || exit \$?
if [[ "\${1:-}" == run && "\${SLURM_ARRAY_TASK_ID:-}" == 2 ]]; then
  rm "$RB"/*_shard2of4/episodes/seed_11/episode.json
  echo "injected failure: shard 2 stopped during seed 11" >&2
  exit 1
fi
WRAP
chmod +x "$T/flaky-vlm-eval"
VLM_EVAL="$T/flaky-vlm-eval" submit "$RB"
wait_done "$ARRAY"
wait_done "$MERGE"
got=$(scontrol show job -o "$ARRAY" | grep -oE 'ArrayTaskId=[0-9]+ .*JobState=[A-Z]+' \
  | sed -E 's/ArrayTaskId=([0-9]+) .*JobState=([A-Z]+)/\1:\2/' | sort | tr '\n' ' ')
[[ "$got" == "0:COMPLETED 1:COMPLETED 2:FAILED 3:COMPLETED " ]] || fail "array tasks: $got"
expect_state "$MERGE" CANCELLED
say "task 2 failed, tasks 0,1,3 completed, merge $MERGE cancelled (not pending)"

set +e
check=$("$BIN" merge --check "$RB"/*_shard*of4)
rc=$?
set -e
echo "$check" | sed 's/^/  | /'
((rc == 1)) || fail "merge --check exited $rc, expected 1"
grep -q '^shard 2/4: 3/4 episode(s) done, unfinished seeds \[11\]' <<<"$check" \
  || fail "merge --check does not name shard 2 and seed 11"
grep -q 'sbatch --array=2 ' <<<"$check" || fail "merge --check does not print --array=2"
set +e
refused=$("$BIN" merge "$RB"/*_shard*of4 --out "$T/premature" 2>&1)
rc=$?
set -e
((rc == 2)) && grep -q '\[11\]' <<<"$refused" && [[ ! -e "$T/premature" ]] \
  || fail "merge of the incomplete set: exit $rc, '$refused'"

# --- 3. resubmit only the failed shard ------------------------------------------------------
kept() { for s in 8 9 10; do sha256sum "$RB"/*_shard2of4/episodes/seed_$s/episode.json; stat -c %Y "$RB"/*_shard2of4/episodes/seed_$s/episode.json; done; }
before=$(kept)
submit "$RB" --array 2
say "resubmitted shard 2: array $ARRAY, merge $MERGE"
wait_done "$MERGE"
expect_state "$ARRAY" COMPLETED
expect_state "$MERGE" COMPLETED
[[ "$(kept)" == "$before" ]] || fail "resubmitted shard 2 replayed finished episodes"
grep -q 'resuming: 3 finished episode(s) kept' "$RB"/logs/shard_"$ARRAY"_2.out \
  || fail "shard 2's log does not say it resumed"
"$BIN" merge --check "$RB"/*_shard*of4 >/dev/null || fail "merge --check still finds gaps"
say "shard 2 resumed (seeds 8-10 kept) and the merge completed; $(same_as_unsharded "$RB/merged")"
say "passed"
