#!/usr/bin/env bash
# vlm-eval through a real LiteLLM proxy (litellm[proxy]==1.106.12, pinned with its dependencies
# in scripts/requirements-litellm.txt) in front of our own upstream (scripts/litellm_upstream.py),
# everything on 127.0.0.1. Checks, on the results files:
#   1. tool protocol and 2. text protocol through the proxy (usage, spend, key never written);
#   3. 429s with LiteLLM's router retries off (`router_settings: num_retries: 0`): our waits
#      follow the upstream's `Retry-After: 1`, which LiteLLM forwards as `llm_provider-retry-after`;
#   4. 429s with router retries on (LiteLLM's default): LiteLLM retries, our figures read 0;
#   5. 8 seeds at concurrency 8;
#   6. a permanently failing upstream: exit 1, retries and spend recorded;
#   7. a wrong key (LiteLLM without a database: 400 "No connected db") and no key: auth hints;
#   8. `--header` does not reach the upstream through LiteLLM; its `extra_headers` does.
# Installs into the ignored venv .venv-litellm (reused when the pinned version is there), stops
# what it started, prints each stage's time. Needs a release build (cargo build --release) or
# VLM_EVAL_BIN=path.
set -euo pipefail
cd "$(dirname "$0")/.."

LITELLM_VERSION=1.106.12
VENV=.venv-litellm
REQUIREMENTS=scripts/requirements-litellm.txt
BIN=${VLM_EVAL_BIN:-target/release/vlm-eval}
PY=python3

T0=$(date +%s)
STAGE_NAME=""
STAGE_START=$T0
stage() {
  local now
  now=$(date +%s)
  [[ -n "$STAGE_NAME" ]] && echo "-- $STAGE_NAME: $((now - STAGE_START)) s"
  STAGE_NAME="$1"
  STAGE_START=$now
  [[ -n "$1" ]] && echo "== litellm: $1"
  return 0
}
fail() {
  echo "interop_litellm: FAILED: $*" >&2
  exit 1
}

[[ -x "$BIN" ]] || fail "$BIN not found: run cargo build --release first (or set VLM_EVAL_BIN)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vlm-eval-litellm.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

stage "install litellm[proxy]==$LITELLM_VERSION into $VENV"
if [[ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))' 2>/dev/null)" != "$LITELLM_VERSION" ]]; then
  rm -rf "$VENV"
  $PY -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS" \
    || fail "pip could not install $REQUIREMENTS"
else
  echo "reusing $VENV (litellm $LITELLM_VERSION)"
fi

free_port() {
  $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_http() { # URL PID WHAT LOG
  for _ in $(seq 1 1200); do
    curl -s -o /dev/null -m 1 "$1" && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$3 did not come up at $1; last lines of $4:" >&2
  tail -n 40 "$4" >&2 || true
  exit 1
}

stage "upstream"
UP_PORT=$(free_port)
$PY scripts/litellm_upstream.py "$UP_PORT" >"$WORK/upstream.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$UP_PORT/stats" "${PIDS[-1]}" "the upstream" "$WORK/upstream.log"
UP="http://127.0.0.1:$UP_PORT"

MASTER_KEY="sk-litellm-master-$RANDOM$RANDOM"
write_config() { # FILE R429_PATH ROUTER_RETRIES(off|on)
  {
    echo "model_list:"
    for pair in tool-model:tool text-model:text "r429-model:$2" down-model:down; do
      echo "  - model_name: ${pair%%:*}"
      echo "    litellm_params:"
      echo "      model: openai/upstream"
      echo "      api_base: $UP/${pair##*:}/v1"
      echo "      api_key: upstream-key"
      if [[ "${pair%%:*}" == text-model ]]; then
        echo "      extra_headers: {\"X-Vlm-Eval-Probe\": \"from-litellm\"}"
      fi
    done
    echo "router_settings:"
    [[ "$3" == off ]] && echo "  num_retries: 0"
    echo "  disable_cooldowns: true"
    echo "general_settings:"
    echo "  master_key: $MASTER_KEY"
  } >"$1"
}

PROXY_PID=""
start_proxy() { # CONFIG
  PROXY_PORT=$(free_port)
  LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_TELEMETRY=False \
    "$VENV/bin/litellm" --config "$1" --host 127.0.0.1 --port "$PROXY_PORT" \
    >"$WORK/proxy-$PROXY_PORT.log" 2>&1 &
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  wait_http "http://127.0.0.1:$PROXY_PORT/health/liveliness" "$PROXY_PID" "the LiteLLM proxy" \
    "$WORK/proxy-$PROXY_PORT.log"
  BASE="http://127.0.0.1:$PROXY_PORT/v1"
}
stop_proxy() {
  kill "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
}

OUT="$WORK/results"
# vlm-eval through the proxy: RUN_NAME EXPECTED_EXIT ARGS...; output in $WORK/RUN_NAME.log
vlm() {
  local name=$1 want=$2
  shift 2
  local code=0
  LITELLM_MASTER_KEY=${KEY-$MASTER_KEY} "$BIN" --base-url "$BASE" --api-key-env LITELLM_MASTER_KEY \
    --out "$OUT" --run-name "$name" --quiet --price-in 1 --price-out 2 "$@" \
    >"$WORK/$name.log" 2>&1 || code=$?
  if [[ "$code" != "$want" ]]; then
    cat "$WORK/$name.log" >&2
    fail "$name: exit $code, expected $want"
  fi
}
# Python assertions on a run folder: CHECK_NAME RUN_NAME PYTHON (sees run, eps, rows, summary, up)
check() {
  local what=$1 name=$2 code=$3
  RUN="$OUT/$name" UP="$UP" $PY - "$code" <<'PYEOF' || fail "$what"
import json, os, sys, urllib.request
run = os.environ["RUN"]
summary = json.load(open(os.path.join(run, "summary.json")))
eps, rows = {}, {}
for d in sorted(os.listdir(os.path.join(run, "episodes"))):
    seed = int(d.split("_")[1])
    eps[seed] = json.load(open(os.path.join(run, "episodes", d, "episode.json")))
    rows[seed] = [json.loads(l) for l in open(os.path.join(run, "episodes", d, "trajectory.jsonl"))]
up = json.load(urllib.request.urlopen(os.environ["UP"] + "/stats"))
exec(sys.argv[1])
PYEOF
  echo "ok: $what"
}

stage "LiteLLM proxy, router retries off (num_retries: 0)"
write_config "$WORK/off.yaml" r429off off
start_proxy "$WORK/off.yaml"

stage "tool protocol"
vlm tool 0 --model tool-model --seeds 2 --steps 3
check "tool protocol: tool calls parsed, usage and spend through the proxy" tool '
assert len(eps) == 2 and all(e["termination"] == "turn_budget" and e["turns"] == 3 for e in eps.values()), eps
assert all(r["parsed"]["source"] == "tool_call" and r["parsed"]["actions"] for rs in rows.values() for r in rs)
s = summary["spent"]
assert s["requests"] == 6 and s["retries"] == 0 and s["input_tokens"] > 0 and s["output_tokens"] == 42, s
assert abs(s["cost_usd"] - (s["input_tokens"] + 2 * s["output_tokens"]) / 1e6) < 1e-12, s
'

stage "text protocol"
vlm text 0 --model text-model --protocol text --seeds 1 --steps 3
check "text protocol: ACTION lines parsed" text '
assert all(r["parsed"]["source"] == "text" and len(r["parsed"]["actions"]) == 1 for r in rows[0]), rows
'

stage "--header through LiteLLM"
vlm header 0 --model tool-model --seeds 1 --steps 1 --header "X-Vlm-Eval-Probe: from-vlm-eval"
check "--header does not reach the upstream; LiteLLM extra_headers does" header '
assert up["tool"]["probe"] == 0, up["tool"]
assert up["text"]["probe"] == up["text"]["hits"] > 0, up["text"]
'

stage "429 every 3rd upstream call, router retries off: our waits follow the hint"
vlm r429off 0 --model r429-model --seeds 1 --steps 6 --max-retries 3
check "429s retried by us after the forwarded hint (llm_provider-retry-after: 1)" r429off '
waits = [a["wait"] for rs in rows.values() for r in rs for a in r.get("attempts") or [] if "wait" in a]
assert summary["retries"] >= 2 and len(waits) == summary["retries"], (summary["retries"], waits)
assert all(w["after"] == "llm_provider-retry-after" and w["hint_ms"] == 1000 for w in waits), waits
assert all(990 <= w["ms"] <= 1500 for w in waits), waits
st = up["r429off"]
gaps = [st["times"][i + 1] - st["times"][i] for i, c in enumerate(st["codes"][:-1]) if c == 429]
assert st["codes"].count(429) == summary["retries"] and all(g >= 0.99 for g in gaps), st
print("   our waits after a 429 (ms):", [round(w["ms"]) for w in waits])
'
stage "8 seeds at concurrency 8"
vlm conc 0 --model tool-model --seeds 8 --concurrency 8 --steps 3
check "8 episodes complete at concurrency 8" conc '
assert len(eps) == 8 and all(e["turns"] == 3 and e["termination"] == "turn_budget" for e in eps.values()), eps
assert summary["spent"]["requests"] == 24 and summary["errors"] == 0, summary
'

stage "permanently failing upstream (503)"
vlm down 1 --model down-model --seeds 1 --steps 2 --max-retries 2 --max-retry-wait 0.2
check "failed turn keeps its attempts; retries and spend recorded" down '
e = eps[0]
assert e["termination"] == "error" and e["retries"] == 2 and e["turns"] == 0, e
row = rows[0][-1]
assert row["retries"] == 2 and len(row["attempts"]) == 3, row
assert all(a.get("status", 0) >= 500 for a in row["attempts"]), row["attempts"]
assert summary["spent"]["requests"] == 3 and summary["spent"]["retries"] == 2, summary["spent"]
assert up["down"]["hits"] == 3, up["down"]
'

stage "auth: a wrong key, and no key"
KEY=sk-not-the-master-key vlm wrongkey 1 --model tool-model --seeds 1 --steps 1 --max-retries 0
check "a wrong key: LiteLLM without a db answers 400 No connected db; the hint says a key was sent" wrongkey '
err = eps[0]["error"]
assert "No connected db" in err and "an API key was sent (from $LITELLM_MASTER_KEY)" in err, err
'
KEY="" vlm nokey 1 --model tool-model --seeds 1 --steps 1 --max-retries 0
check "no key: the error says none was sent" nokey '
err = eps[0]["error"]
assert "no API key was sent ($LITELLM_MASTER_KEY is not set)" in err, err
'

stop_proxy

stage "LiteLLM proxy, router retries on (its default)"
write_config "$WORK/on.yaml" r429on on
start_proxy "$WORK/on.yaml"

stage "429 every 3rd upstream call, router retries on: LiteLLM retries, we see none"
vlm r429on 0 --model r429-model --seeds 1 --steps 6 --max-retries 3
check "LiteLLM retried the 429s itself (our retries read 0)" r429on '
st = up["r429on"]
assert st["codes"].count(429) >= 2, st
assert summary["retries"] == 0 and all(e["turns"] == 6 for e in eps.values()), summary
print("   upstream 429s:", st["codes"].count(429), " our retries:", summary["retries"],
      " our p95 latency (ms):", round(summary["latency_p95_ms"]))
'
stop_proxy

stage "the master key is in no results file and no output"
if grep -rqF "$MASTER_KEY" "$OUT" "$WORK"/*.log; then
  fail "the master key was written to $(grep -rlF "$MASTER_KEY" "$OUT" "$WORK"/*.log | head -n 1)"
fi
echo "ok: the key is in no results file and no output"

stage ""
echo "== interop_litellm passed in $(( $(date +%s) - T0 )) s"
