"""`__version__`, the typing files, `repr`, `close()` and pickling."""
import importlib.metadata
import pathlib
import pickle

import numpy as np
import pytest

import vlmcrafter
from support import SEEDS, assert_same_frame
from vlmcrafter import crafter as vc


def test_version_is_the_distribution_version():
    assert isinstance(vlmcrafter.__version__, str) and vlmcrafter.__version__
    assert vlmcrafter.__version__ == importlib.metadata.version("vlmcrafter")


def test_typing_files_installed():
    pkg = pathlib.Path(vlmcrafter.__file__).parent
    assert (pkg / "py.typed").is_file()
    stubs = {p.name for p in pkg.glob("*.pyi")}
    assert "_native.pyi" in stubs, sorted(stubs)


def test_repr():
    env = vc.Env(seed=5, size=(80, 80))
    assert "Env" in repr(env) and "5" in repr(env)
    venv = vc.VectorEnv(2, seed=5)
    assert "VectorEnv" in repr(venv) and "2" in repr(venv)


def test_close_is_idempotent():
    env = vc.Env(seed=1)
    env.reset()
    env.close()
    env.close()
    venv = vc.VectorEnv(2, seed=1)
    venv.reset()
    venv.close()
    venv.close()


def test_docstrings():
    for obj in (vc.Env, vc.Env.step, vc.Env.reset, vc.VectorEnv, vc.VectorEnv.step):
        assert obj.__doc__ and obj.__doc__.strip(), obj


@pytest.mark.parametrize("make", [
    lambda: vc.Env(seed=SEEDS[0], length=50, size=(72, 72)),
    lambda: vc.VectorEnv(2, seed=SEEDS[0], length=50),
])
def test_pickle_round_trip_or_clear_refusal(make):
    """Either a clear TypeError, or the copy is an env with the same settings and seed that
    plays the same game as a fresh one (Ray and multiprocessing pickle envs)."""
    env = make()
    env.reset()
    try:
        data = pickle.dumps(env)
    except TypeError as err:
        assert "pickl" in str(err).lower(), str(err)
        return
    copy = pickle.loads(data)
    assert type(copy) is type(env)
    fresh = make()

    def frames(reset):  # Env.reset gives the frame, VectorEnv.reset (obs, infos)
        return reset[0] if isinstance(reset, tuple) else reset

    first = frames(fresh.reset())
    got = frames(copy.reset())
    if got.tobytes() != first.tobytes():
        # Restored with its episode counter: the copy's next reset is the original's next one.
        want = frames(env.reset())
        assert_same_frame(np.asarray(want), np.asarray(got), "unpickled env's reset")
