"""Threads and lifetime of the native vector env: a second thread's call while one runs is
refused with an error naming the env (never "Already borrowed"), and the running call is not
disturbed; `close()` from any thread closes the env, stopping a running call; every later call
raises "closed"."""
import threading
import time

import numpy as np
import pytest

from support import SEEDS
from vlmcrafter import crafter as vc


def in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, box


def wait_busy(env, thread):
    """Until `thread` is inside a call on env (its guard is taken)."""
    while thread.is_alive() and not env._guard.locked():
        time.sleep(0.001)


def test_a_second_thread_is_refused_with_the_env_named():
    env = vc.VectorEnv(512, seed=SEEDS[0], copy=False)
    env.reset()
    first, box = in_thread(lambda: [env.reset() for _ in range(3)])
    wait_busy(env, first)
    refused = 0
    while first.is_alive():
        try:
            env.step(np.zeros(512, dtype=np.int64))
        except RuntimeError as e:
            assert "VectorEnv (num_envs=512" in str(e) and "busy" in str(e) and "another thread" in str(e)
            assert "Already borrowed" not in str(e)
            refused += 1
        time.sleep(0.01)
    first.join()
    assert "error" not in box, box
    assert refused > 0
    env.step(np.zeros(512, dtype=np.int64))  # free again
    env.close()


def test_close_from_another_thread_stops_a_running_call():
    env = vc.VectorEnv(2048, seed=SEEDS[1], copy=False)
    runner, box = in_thread(lambda: [env.reset() for _ in range(50)])
    wait_busy(env, runner)
    time.sleep(0.2)
    closer, closed = in_thread(env.close)
    closer.join(60)
    runner.join(60)
    assert not closer.is_alive() and not runner.is_alive()
    assert "error" not in closed, closed
    assert isinstance(box.get("error"), RuntimeError) and "closed" in str(box["error"]), box
    assert env.closed
    for call in (env.reset, lambda: env.step(np.zeros(2048, dtype=np.int64)),
                 lambda: env.text(0), lambda: env.get_attr("render_mode"), env.finished_episodes):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    env.close()  # again: nothing


def test_close_from_another_thread_when_idle():
    env = vc.VectorEnv(3, seed=SEEDS[2])
    env.reset()
    t, box = in_thread(env.close)
    t.join()
    assert "error" not in box and env.closed
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros(3, dtype=np.int64))
