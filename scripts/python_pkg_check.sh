#!/usr/bin/env bash
# The Python package's check (CI's "Python package" stage): build the wheel with maturin, install
# it into the pinned venv .venv-pypkg, type-check tests/python_pkg/typecheck/ with mypy against
# its stubs, and run the pytest suite tests/python_pkg/ against the INSTALLED package (pytest
# runs from a scratch folder with --import-mode=importlib, and the suite refuses a vlmcrafter
# imported from anywhere but the venv).
#
#   scripts/python_pkg_check.sh [PYTEST ARGS...]      e.g. -k vector, or -x
#
# The venv is made once and reused while tests/python_pkg/requirements.txt (the pins) is
# unchanged: its sha256 is stamped in .venv-pypkg/pins.sha256. The wheel reuses the CLI binary
# already built by cargo (VLM_EVAL_CLI_BIN=target/release/vlm-eval; built here if missing).
# Each part's time is printed. Environment: PYTHON (the interpreter that makes the venv;
# default python3), VLM_EVAL_TEST_SEEDS (fixes the suite's drawn seeds).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=$root/.venv-pypkg
pins=$root/tests/python_pkg/requirements.txt
wheels=$root/target/pypkg-wheels

t_all=$(date +%s)
WHO=python_pkg_check
# shellcheck source=scripts/pinned_venv.sh
source "$root/scripts/pinned_venv.sh"

part "venv .venv-pypkg (pinned: tests/python_pkg/requirements.txt)"
pinned_venv "$venv" "$pins"

part "the CLI binary (cargo build --release --bin vlm-eval)"
cargo build --release --quiet --bin vlm-eval
cli_bin=$root/target/release/vlm-eval

part "wheel (maturin build --release)"
rm -rf "$wheels"
VLM_EVAL_CLI_BIN=$cli_bin "$venv/bin/maturin" build --release --quiet \
  --interpreter "$venv/bin/python" --out "$wheels"
wheel=$(compgen -G "$wheels/vlmcrafter-*.whl" | head -n 1 || true)
[[ -n "$wheel" ]] || { echo "python_pkg_check: maturin made no wheel in $wheels" >&2; exit 1; }
echo "wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

part "install the wheel into the venv"
# The distribution is `vlmcrafter` (`vlm-eval` was its earlier name): without the uninstall, pip
# keeps an installed wheel of the same version and the suite tests stale code.
"$venv/bin/pip" uninstall --quiet --disable-pip-version-check -y vlmcrafter vlm-eval >/dev/null 2>&1 || true
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "$wheel"
"$venv/bin/pip" check --disable-pip-version-check  # the wheel's own dependencies are met
[[ -x "$venv/bin/vlm-eval" ]] || { echo "python_pkg_check: the wheel installed no $venv/bin/vlm-eval" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

part "mypy --strict tests/python_pkg/typecheck (the installed wheel's stubs, as a user's script sees them)"
# A user's script that passes the native vector env to gymnasium's vector wrappers type-checks.
(cd "$scratch" && "$venv/bin/mypy" --strict --no-incremental "$root"/tests/python_pkg/typecheck/*.py)

part "pytest tests/python_pkg (against the installed wheel)"
status=0
(cd "$scratch" && "$venv/bin/python" -m pytest --import-mode=importlib -p no:cacheprovider \
  -ra "$root/tests/python_pkg" "$@") || status=$?
part ""
echo "-- python_pkg_check: total $(( $(date +%s) - t_all )) s"
case $status in
  0) ;;
  5) echo "python_pkg_check: pytest collected no tests (exit 5): that is a failure" >&2; exit 1 ;;
  *) echo "python_pkg_check: pytest failed (exit $status)" >&2; exit 1 ;;
esac
