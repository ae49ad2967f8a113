#!/usr/bin/env bash
# Submit a sharded vlm-eval run to Slurm as three chained jobs: the texture warm-up
# (warmup.sbatch), the shards (array.sbatch, one array task per shard) and the merge
# (merge.sbatch). Each waits on the one before with --dependency=afterok:<id> and
# --kill-on-invalid-dep=yes, so a failed step cancels what follows instead of leaving it
# pending forever (DependencyNeverSatisfied).
#
#   deploy/slurm/submit.sh --shards N --results DIR [options] -- RUN FLAGS…
#
#   --shards N      the shard count n (shards 0..n-1 split the seed list)
#   --results DIR   this run's results folder, on a filesystem every node mounts: shard i writes
#                   DIR/<run>_shard<i>of<n>, the merge writes DIR/<merged>, logs go to DIR/logs
#   --array LIST    which shards to submit, in sbatch's --array syntax (default 0-<n-1>). After a
#                   failure, `vlm-eval merge --check DIR/*_shard*of<n>` prints the list to
#                   resubmit; resubmitted shards resume their folders.
#   --throttle K    at most K shards at once (--array=…%K): with an API model, shards × the run's
#                   --concurrency is the load on the endpoint (docs/SCALING.md)
#   --merged NAME   the merged run's folder name (default: merged)
#   RUN FLAGS       `vlm-eval run` flags, the same for every shard (not --out, --shard,
#                   --run-name: this script sets the first two, and shards need their own names)
#
# Environment knobs (all optional):
#   VLM_EVAL               the vlm-eval binary the jobs run (default: vlm-eval on PATH)
#   VLM_EVAL_SBATCH_ARGS   extra sbatch flags for the shard tasks: partition, account, resources,
#                          e.g. "--partition=gpu --gres=gpu:1 --cpus-per-task=8 --mem=32G --time=12:00:00"
#                          (none by default, so nothing is asked that a small node lacks)
#   VLM_EVAL_SBATCH_SMALL  extra sbatch flags for the warm-up and merge jobs (partition, account)
# sbatch passes the submitting environment on (OPENAI_API_KEY, CRAFTER_ASSETS, …).
#
# Prints: warmup=<id> array=<id> merge=<id>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "submit.sh: $*" >&2; exit 2; }

shards="" results="" array="" throttle="" merged="merged"
while (($#)); do
  case "$1" in
    --shards) shards=${2:-}; shift 2 || die "--shards needs a number" ;;
    --results) results=${2:-}; shift 2 || die "--results needs a folder" ;;
    --array) array=${2:-}; shift 2 || die "--array needs a list, e.g. 2,5" ;;
    --throttle) throttle=${2:-}; shift 2 || die "--throttle needs a number" ;;
    --merged) merged=${2:-}; shift 2 || die "--merged needs a name" ;;
    --) shift; break ;;
    *) die "unknown option $1 (run flags go after --)" ;;
  esac
done
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "--shards N is required (a whole number >= 1)"
[[ -n "$results" ]] || die "--results DIR is required (a folder every node mounts)"
[[ -z "$throttle" || "$throttle" =~ ^[1-9][0-9]*$ ]] || die "--throttle must be a whole number >= 1"
[[ "$merged" =~ ^[A-Za-z0-9._-]+$ ]] || die "--merged must be a plain folder name"
(($#)) || die "give the run flags after --, e.g. -- --model gpt-4o-mini --seeds 200 --steps 100"
for flag in "$@"; do
  case "$flag" in
    --out|--out=*|--shard|--shard=*|--run-name|--run-name=*)
      die "do not pass ${flag%%=*} in the run flags: --results sets the folder, the array the shard" ;;
  esac
done
array=${array:-0-$((shards - 1))}
mkdir -p "$results/logs"
results=$(cd "$results" && pwd)
logs="$results/logs"

# Word-split on purpose: these hold several sbatch flags.
# shellcheck disable=SC2206
task_args=(${VLM_EVAL_SBATCH_ARGS:-})
# shellcheck disable=SC2206
small_args=(${VLM_EVAL_SBATCH_SMALL:-})

jobid() { local out; out=$("$@") || exit 1; echo "${out%%;*}"; }

warmup=$(jobid sbatch --parsable "${small_args[@]}" --output="$logs/warmup_%j.out" \
  "$here/warmup.sbatch")
tasks=$(jobid sbatch --parsable "${task_args[@]}" \
  --array="$array${throttle:+%$throttle}" \
  --dependency=afterok:"$warmup" --kill-on-invalid-dep=yes \
  --export=ALL,VLM_EVAL_SHARD_COUNT="$shards" \
  --output="$logs/shard_%A_%a.out" \
  "$here/array.sbatch" --out "$results" "$@")
merge=$(jobid sbatch --parsable "${small_args[@]}" \
  --dependency=afterok:"$tasks" --kill-on-invalid-dep=yes \
  --output="$logs/merge_%j.out" \
  "$here/merge.sbatch" "$results" "$shards" "$merged")
echo "warmup=$warmup array=$tasks merge=$merge"
