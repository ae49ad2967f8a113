"""pytest set-up of the SB3 adapter's checks (scripts/sb3_check.sh): they run against the
INSTALLED wheel in .venv-ppo (stable-baselines3 and torch pinned in examples/requirements-ppo.txt).

Run them as scripts/sb3_check.sh does: from outside the checkout, with
`--import-mode=importlib`. Textures: crafter's own through $CRAFTER_ASSETS when it is set (CI
sets it), else the project's built-in sprites; nothing is fetched.
"""
import os
import pathlib
import sys
import tempfile

import pytest

import vlmcrafter

_PKG = pathlib.Path(vlmcrafter.__file__).resolve()
_PREFIX = pathlib.Path(sys.prefix).resolve()
if _PREFIX not in _PKG.parents:
    raise pytest.UsageError(
        f"vlmcrafter was imported from {_PKG}, not from this venv ({_PREFIX}): install the wheel "
        "and run pytest from outside the checkout with --import-mode=importlib")

os.environ["VLM_EVAL_NO_FETCH"] = "1"
os.environ["VLM_EVAL_CACHE"] = tempfile.mkdtemp(prefix="vlm-eval-sb3-cache-")
TEXTURES = os.environ.get("CRAFTER_ASSETS") or "builtin"


def pytest_report_header(config):
    import stable_baselines3

    return [f"vlmcrafter {vlmcrafter.__version__} from {_PKG.parent}, stable-baselines3 "
            f"{stable_baselines3.__version__}, textures {TEXTURES}"]


@pytest.fixture(scope="session")
def textures():
    return TEXTURES
