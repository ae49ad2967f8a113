#!/usr/bin/env bash
# Prints the path of a Python with crafter==1.8.3, the reference the benchmark and parity
# scripts measure against: $PYTHON when set, else .venv-crafter/bin/python, which it makes
# (python3 -m venv, pip install crafter==1.8.3) when it is missing, as .ci/run does.
#   PYTHON=$(scripts/crafter_venv.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ -n "${PYTHON:-}" ]]; then
  "$PYTHON" -c 'import crafter' 2>/dev/null || {
    echo "PYTHON=$PYTHON cannot import crafter: pip install crafter==1.8.3 there, or unset PYTHON to use .venv-crafter" >&2
    exit 2
  }
  echo "$PYTHON"
  exit 0
fi
venv=$root/.venv-crafter
if ! "$venv/bin/python" -c 'import crafter' 2>/dev/null; then
  echo "making $venv with crafter==1.8.3 (python3 -m venv; pip install)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check crafter==1.8.3 >&2 || {
    echo "pip could not install crafter==1.8.3 into $venv (it needs PyPI)" >&2
    exit 2
  }
fi
echo "$venv/bin/python"
