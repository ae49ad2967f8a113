#!/usr/bin/env bash
# The OpenRLHF example agent under the real OpenRLHF 0.11.2, both ways: creates (or reuses) the
# pinned venv .venv-openrlhf, starts the release binary on a free loopback port, runs
# tests/python/test_crafter_agent.py with CRAFTER_ENV=http (the agent talks to the server),
# installs the vlm-eval wheel into the venv (--no-deps) and runs it again with
# CRAFTER_ENV=inprocess (the agent plays in-process; the server stays the oracle), runs
# tests/python/test_session_parity.py (vlmcrafter.session against the server, document for
# document), and stops the server. Each part's time is printed.
#
#   scripts/openrlhf_check.sh          # needs target/release/vlm-eval (cargo build --release)
#
# The wheel: $VLM_EVAL_WHEEL, else the one scripts/python_pkg_check.sh built just before in CI
# (target/pypkg-wheels), else built here with maturin (.venv-pypkg's, or on PATH) into
# target/openrlhf-wheels, reusing the CLI binary.
#
# Environment: VLM_EVAL_BIN (default target/release/vlm-eval), OPENRLHF_VENV (default
# .venv-openrlhf), PYTHON (the interpreter that makes the venv; default python3, 3.11: the
# openrlhf 0.11.2 wheel is built for CPython 3.11), VLM_EVAL_WHEEL.
set -euo pipefail
cd "$(dirname "$0")/.."

OPENRLHF=openrlhf==0.11.2
REQS=tests/python/requirements-openrlhf.txt
VENV=${OPENRLHF_VENV:-.venv-openrlhf}
BIN=${VLM_EVAL_BIN:-target/release/vlm-eval}
PY=${PYTHON:-python3}

[[ -x "$BIN" ]] || { echo "$BIN not found: run cargo build --release first" >&2; exit 1; }

t0=$(date +%s)
# The venv is reused while its stamp matches the pins; otherwise it is made anew.
want="$OPENRLHF $(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.pins" 2>/dev/null)" != "$want" ]]; then
  echo "making $VENV ($OPENRLHF --no-deps, $REQS)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQS" \
    || { echo "pip could not install $REQS" >&2; exit 1; }
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "$OPENRLHF" \
    || { echo "pip could not install $OPENRLHF" >&2; exit 1; }
  echo "$want" >"$VENV/.pins"
fi
t1=$(date +%s)
versions=$("$VENV/bin/python" -c 'import importlib.metadata as m
print(", ".join(p + " " + m.version(p) for p in ("openrlhf", "transformers", "tokenizers", "ray")))')
echo "venv ready in $((t1 - t0)) s: $versions"

# A small --max-sessions: the test fills the server to check that reset waits out a 503.
LOG=$(mktemp -t serve-env.XXXXXX.log)
"$BIN" serve-env --host 127.0.0.1 --port 0 --max-sessions 8 --idle-timeout 600 >"$LOG" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
URL=""
for _ in $(seq 1 300); do
  URL=$(sed -n 's/^listening on \(http:\/\/[^ ]*\)$/\1/p' "$LOG" | head -n 1)
  [[ -n "$URL" ]] && break
  kill -0 "$SERVER" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$URL" ]]; then
  echo "serve-env did not start; its output:" >&2
  cat "$LOG" >&2
  exit 1
fi
echo "serve-env at $URL (log: $LOG)"

run_test() {  # run_test BACKEND FILE
  if ! CRAFTER_ENV="$1" CRAFTER_ENV_URL="$URL" timeout 600 "$VENV/bin/python" "$2"; then
    echo "$2 failed (CRAFTER_ENV=$1); the server's last lines:" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
}

run_test http tests/python/test_crafter_agent.py
t2=$(date +%s)
echo "agent test (CRAFTER_ENV=http) ran in $((t2 - t1)) s"

# The in-process backend: the vlm-eval wheel in the same venv.
WHEEL=${VLM_EVAL_WHEEL:-$(compgen -G "target/pypkg-wheels/vlmcrafter-*.whl" | head -n 1 || true)}
if [[ -z "$WHEEL" ]]; then
  MATURIN=$(command -v .venv-pypkg/bin/maturin maturin | head -n 1 || true)
  [[ -n "$MATURIN" ]] || { echo "no vlm-eval wheel and no maturin: run scripts/python_pkg_check.sh first, or set VLM_EVAL_WHEEL" >&2; exit 1; }
  rm -rf target/openrlhf-wheels
  VLM_EVAL_CLI_BIN=$(realpath "$BIN") "$MATURIN" build --release --quiet \
    --interpreter "$VENV/bin/python" --out target/openrlhf-wheels
  WHEEL=$(compgen -G "target/openrlhf-wheels/vlmcrafter-*.whl" | head -n 1 || true)
  [[ -n "$WHEEL" ]] || { echo "maturin made no wheel" >&2; exit 1; }
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$WHEEL" \
  || { echo "pip could not install $WHEEL" >&2; exit 1; }
t3=$(date +%s)
echo "wheel $(basename "$WHEEL") installed in $((t3 - t2)) s"

run_test inprocess tests/python/test_crafter_agent.py
t4=$(date +%s)
echo "agent test (CRAFTER_ENV=inprocess) ran in $((t4 - t3)) s"
run_test inprocess tests/python/test_session_parity.py
t5=$(date +%s)
echo "session parity ran in $((t5 - t4)) s; in-process part in all $((t5 - t2)) s"
rm -f "$LOG"
