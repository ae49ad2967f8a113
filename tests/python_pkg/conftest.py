"""pytest set-up of the Python package's suite: it runs against the INSTALLED wheel.

Run it as scripts/python_pkg_check.sh does: from outside the checkout, with
`--import-mode=importlib`. The helpers live in support.py (seeds, reference env, comparisons).
"""
import os
import pathlib
import sys
import tempfile

import pytest

import vlmcrafter

# The suite tests the wheel installed into this interpreter's environment, never the source tree.
_PKG = pathlib.Path(vlmcrafter.__file__).resolve()
_PREFIX = pathlib.Path(sys.prefix).resolve()
if _PREFIX not in _PKG.parents:
    raise pytest.UsageError(
        f"vlmcrafter was imported from {_PKG}, not from this venv ({_PREFIX}): install the wheel "
        "and run pytest from outside the checkout with --import-mode=importlib")

# support.py sits beside this file; the source package (python/vlmcrafter) is not on this path.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import support  # noqa: E402

# Every env finds crafter's own textures through $CRAFTER_ASSETS (as the CLI does), nothing is
# fetched and nothing is written to the user's cache; tests of discovery set their own.
os.environ["CRAFTER_ASSETS"] = support.crafter_assets()
os.environ["VLM_EVAL_NO_FETCH"] = "1"
os.environ["VLM_EVAL_CACHE"] = tempfile.mkdtemp(prefix="vlm-eval-pytest-cache-")


def pytest_report_header(config):
    seeds = ",".join(map(str, support.SEEDS))
    return [f"vlmcrafter {vlmcrafter.__version__} from {_PKG.parent}",
            f"seeds: {seeds} (replay with VLM_EVAL_TEST_SEEDS={seeds})"]


@pytest.fixture(scope="session")
def assets():
    return support.crafter_assets()
