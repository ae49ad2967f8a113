"""Bad input: each case is a Python exception whose message names the problem; never a crash of
the interpreter (a Rust panic included, provoked on purpose through the test hook)."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from vlmcrafter import crafter as vc


@pytest.fixture
def env():
    e = vc.Env(seed=1)
    e.reset()
    return e


@pytest.mark.parametrize("action", [17, -1, 100, 2 ** 40])
def test_action_out_of_range(env, action):
    with pytest.raises(ValueError, match=r"(?i)action.*0.*16|0.*16.*action"):
        env.step(action)
    env.step(0)  # the env is still usable


@pytest.mark.parametrize("action", [1.5, "noop", None, [1], b"1"])
def test_action_wrong_type(env, action):
    with pytest.raises(TypeError, match=r"(?i)action"):
        env.step(action)
    env.step(0)


@pytest.mark.parametrize("action", [np.int64(3), np.int32(16), np.uint8(0), True])
def test_action_numpy_ints_accepted(env, action):
    env.step(action)


@pytest.mark.parametrize("kwargs, word", [
    (dict(size=(0, 64)), "size"),
    (dict(size=0), "size"),
    (dict(size=(64, 5)), "size"),       # smaller than the view (one pixel per tile)
    (dict(area=(0, 64)), "area"),
    (dict(area=(64, -3)), "area"),
    (dict(view=(0, 9)), "view"),
    (dict(view=(9, 2)), "view"),        # no room left above the inventory rows
    (dict(size=(64, 64, 3)), "size"),
])
def test_bad_geometry(kwargs, word):
    with pytest.raises(ValueError, match=f"(?i){word}"):
        vc.Env(**kwargs)
    with pytest.raises(ValueError, match=f"(?i){word}"):
        vc.VectorEnv(2, **kwargs)


def test_vector_n_zero():
    with pytest.raises(ValueError, match=r"(?i)\bn\b|num|envs"):
        vc.VectorEnv(0)


@pytest.mark.parametrize("n, threads", [(4, 0), (4, 5), (300, 257), (2, -1)])
def test_vector_bad_threads(n, threads):
    with pytest.raises(ValueError, match=r"(?i)threads"):
        vc.VectorEnv(n, threads=threads)


def test_vector_bad_actions():
    venv = vc.VectorEnv(3, seed=0)
    venv.reset()
    with pytest.raises(ValueError, match=r"(?i)3|length|shape"):
        venv.step([1, 2])
    with pytest.raises(ValueError, match=r"(?i)action"):
        venv.step([1, 2, 17])
    with pytest.raises((TypeError, ValueError), match=r"(?i)action|int"):
        venv.step(["a", "b", "c"])
    venv.step(np.array([1, 2, 3], dtype=np.int8))  # still usable, any int dtype


def test_vector_bad_seed_list():
    with pytest.raises(ValueError, match=r"(?i)seed"):
        vc.VectorEnv(3, seed=[1, 2])


def run_python(code, env=None):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


def test_textures_missing_with_fetch_disabled():
    """No $CRAFTER_ASSETS, an empty cache, no Python crafter (hidden from this interpreter and
    no other interpreter to ask), fetch=False: a RuntimeError that says how to get them."""
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "CRAFTER_ASSETS"}
        env.update(VLM_EVAL_CACHE=cache, VLM_EVAL_PYTHON=os.path.join(cache, "no-python"),
                   VLM_EVAL_NO_FETCH="1")
        code = ("import sys\n"
                "sys.modules['crafter'] = None  # as if Python crafter were not installed\n"
                "from vlmcrafter import crafter\n"
                "try:\n"
                "    crafter.Env(fetch=False)\n"
                "except RuntimeError as e:\n"
                "    print('RuntimeError:', e)\n")
        out = run_python(code, env)
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert message.startswith("RuntimeError:"), out.stdout + out.stderr
    assert "textures" in message.lower()
    assert len(message.splitlines()) == 1, message


def test_textures_folder_missing():
    with tempfile.TemporaryDirectory() as d:
        missing = os.path.join(d, "nowhere")
        with pytest.raises(Exception, match="nowhere"):
            vc.Env(textures=missing)
        with pytest.raises(Exception, match="nowhere"):
            vc.VectorEnv(2, textures=missing)


def test_rust_panic_is_an_exception_in_process():
    from vlmcrafter import _native
    with pytest.raises(BaseException) as info:
        _native._panic_for_test()
    assert "panic" in type(info.value).__name__.lower() or "panic" in str(info.value).lower()
    env = vc.Env(seed=0)  # the interpreter and the module live on
    env.reset()
    env.step(1)


def test_rust_panic_does_not_abort_the_interpreter():
    code = ("import vlmcrafter._native as n\n"
            "try:\n"
            "    n._panic_for_test()\n"
            "except BaseException as e:\n"
            "    print('caught', type(e).__name__)\n"
            "print('alive')\n")
    out = run_python(code)
    assert out.returncode == 0, f"rc {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.splitlines()[-1] == "alive", out.stdout
