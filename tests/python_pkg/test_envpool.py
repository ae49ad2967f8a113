"""`vlmcrafter.envpool`: EnvPool's asynchronous API (`async_reset`, `send`, `recv`, `step`) with
`batch_size < num_envs`, against the synchronous native vector env as the oracle.

The API and its shapes are EnvPool's documented Python interface
(https://envpool.readthedocs.io/en/latest/content/python_interface.html: "Extended API",
"Data Output Format" with `info["env_id"]`, "Batch Size", "Auto Reset"; and
envpool/python/envpool.py in github.com/sail-sg/envpool: `step` is `send` then `recv`, env ids
are int32, `env_id=None` means every env).

- Each env's trajectory under async send/recv (random completion orders: several worker
  threads, and envs held back for a while before their next action is sent) equals the same
  env stepped alone in `vlmcrafter.crafter.VectorEnv(1)` with its seed and action sequence:
  frames, rewards, flags and infos, across NEXT_STEP autoresets (short episodes).
- `batch_size == num_envs` is the synchronous vector step, row for row.
- Ctrl-C (a real SIGINT to a child process) during `recv` raises KeyboardInterrupt; what was in
  flight is still returned by the next `recv`.
- Bad input raises one clear exception naming the argument and leaves the pool unchanged.
"""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import support
from vlmcrafter import crafter as vc
from vlmcrafter import envpool

LENGTH = 25  # short episodes: every env truncates and autoresets several times


def flat(info, k, prefix=""):
    """Row ``k`` of a vector env's infos as {path: value}, EnvPool's extra keys left out."""
    out = {}
    for key, value in info.items():
        if key in ("env_id", "elapsed_step"):
            continue
        if isinstance(value, dict):
            out.update(flat(value, k, f"{prefix}{key}/"))
        else:
            cell = value[k]
            out[prefix + key] = cell.tolist() if hasattr(cell, "tolist") else cell
    return out


def oracle(seed, actions):
    """Env ``seed`` alone in the synchronous vector env: its reset, then one step per action."""
    env = vc.VectorEnv(1, seed=seed, length=LENGTH)
    obs, info = env.reset()
    out = [(obs[0].tobytes(), 0.0, False, False, flat(info, 0))]
    for a in actions:
        obs, rew, term, trunc, info = env.step([a])
        out.append((obs[0].tobytes(), float(rew[0]), bool(term[0]), bool(trunc[0]), flat(info, 0)))
    env.close()
    return out


def run_async(seed, n, batch, threads, steps, shuffle_seed):
    """Play every env through send/recv until each has at least ``steps + 1`` results, sending
    each turn only a random part of the envs that came back (the rest wait a turn or more)."""
    pool = envpool.make("Crafter-v1", env_type="gymnasium", num_envs=n, batch_size=batch, num_threads=threads,
                        seed=seed, length=LENGTH)
    assert pool.is_async == (batch < n) and len(pool) == n
    assert pool.observation_space.shape == (64, 64, 3) and pool.action_space.n == 17
    rng = np.random.RandomState(shuffle_seed)
    streams = [support.actions_for(seed * 31 + i, 20 * steps) for i in range(n)]
    sent = [0] * n
    got = [[] for _ in range(n)]
    elapsed = [[] for _ in range(n)]
    orders = []
    ready, in_flight = [], n
    pool.async_reset()
    while min(len(g) for g in got) < steps + 1:
        obs, rew, term, trunc, info = pool.recv()
        ids = info["env_id"]
        assert ids.dtype == np.int32 and ids.shape == (batch,) and len(set(ids.tolist())) == batch
        assert obs.dtype == np.uint8 and obs.shape == (batch, 64, 64, 3)
        assert rew.dtype == np.float64 and term.dtype == np.bool_ and trunc.dtype == np.bool_
        assert info["elapsed_step"].dtype == np.int32
        in_flight -= batch
        orders.append(ids.tolist())
        for k, i in enumerate(ids.tolist()):
            # obs[k] itself is kept (no copy): a later recv must not overwrite it.
            got[i].append((obs[k], float(rew[k]), bool(term[k]), bool(trunc[k]), flat(info, k)))
            elapsed[i].append(int(info["elapsed_step"][k]))
            ready.append(i)
        rng.shuffle(ready)
        least = max(0, batch - in_flight)
        take = rng.randint(least, len(ready) + 1)
        if take == 0 and in_flight < batch:
            take = least
        chosen, ready = ready[:take], ready[take:]
        if chosen:
            acts = np.array([streams[i][sent[i]] for i in chosen], dtype=np.int32)
            for i in chosen:
                sent[i] += 1
            pool.send(acts, np.array(chosen, dtype=np.int32))
            in_flight += len(chosen)
        assert sorted(pool.in_flight) == sorted(set(range(n)) - set(ready))
    pool.close()
    return streams, got, elapsed, orders


@pytest.mark.parametrize("n, batch, threads", [(6, 2, 3), (5, 3, 1), (4, 1, 2)])
def test_each_env_plays_as_alone_in_the_sync_env(n, batch, threads):
    seed = support.SEEDS[0] % 100_000
    steps = 60
    streams, got, elapsed, orders = run_async(seed, n, batch, threads, steps, support.SEEDS[1])
    for i in range(n):
        want = oracle(seed + i, streams[i][:len(got[i]) - 1])
        assert len(want) == len(got[i])
        ends = 0
        for t, (ours, ref) in enumerate(zip(got[i], want)):
            where = f"env {i} (seed {seed + i}), result {t}"
            assert ours[0].tobytes() == ref[0], f"{where}: frames differ"
            assert ours[1:] == ref[1:], f"{where}: {ours[1:]} != {ref[1:]}"
            ends += ours[2] or ours[3]
        assert ends >= 2, f"env {i}: only {ends} episode ends in {len(got[i])} results"
        # EnvPool's elapsed_step: 0 after a reset (the first result, and the step after an end).
        expected = [0]
        for t in range(1, len(got[i])):
            prev = got[i][t - 1]
            expected.append(0 if prev[2] or prev[3] else expected[-1] + 1)
        assert elapsed[i] == expected, f"env {i}: elapsed_step {elapsed[i]} != {expected}"
    print(f"n={n} batch={batch} threads={threads}: {len(orders)} recv batches, "
          f"{sum(o != sorted(o) for o in orders)} not in env id order")


def test_batch_size_num_envs_is_the_sync_step():
    seed = support.SEEDS[2] % 100_000
    n = 4
    pool = envpool.make("vlmcrafter/Crafter-v1", num_envs=n, seed=seed, length=LENGTH, num_threads=2)
    sync = vc.VectorEnv(n, seed=seed, length=LENGTH, threads=2)
    assert not pool.is_async
    obs, info = pool.reset()
    ref_obs, ref_info = sync.reset()
    assert obs.tobytes() == ref_obs.tobytes()
    assert info["env_id"].tolist() == list(range(n))
    assert [flat(info, k) for k in range(n)] == [flat(ref_info, k) for k in range(n)]
    streams = np.array([support.actions_for(seed + i, 80) for i in range(n)]).T
    for t, acts in enumerate(streams):
        ours = pool.step(acts) if t % 2 else pool.step(acts.tolist(), np.arange(n))
        ref = sync.step(acts)
        assert ours[0].tobytes() == ref[0].tobytes(), f"step {t}: frames differ"
        for a, b in zip(ours[1:4], ref[1:4]):
            assert a.dtype == b.dtype and a.tolist() == b.tolist(), f"step {t}"
        assert ours[4]["env_id"].tolist() == list(range(n))
        assert [flat(ours[4], k) for k in range(n)] == [flat(ref[4], k) for k in range(n)], f"step {t}"
    # async_reset + recv with batch_size == num_envs: every env, in env id order.
    pool.async_reset()
    _, _, _, _, info = pool.recv()
    assert info["env_id"].tolist() == list(range(n))
    pool.close()
    sync.close()


def test_bad_input_names_the_argument_and_leaves_the_pool_unchanged():
    n = 3
    seed = support.SEEDS[0] % 100_000
    for kwargs, err, words in [
        (dict(num_envs=0), ValueError, "num_envs"),
        (dict(num_envs=2, batch_size=3), ValueError, "batch_size"),
        (dict(num_envs=2, batch_size=0), ValueError, "batch_size"),
        (dict(num_envs=2, batch_size=1.5), TypeError, "batch_size"),
        (dict(num_envs=2, num_threads=3), ValueError, "num_threads"),
        (dict(num_envs=2, seed=[1]), ValueError, "seed"),
        (dict(num_envs=2, env_type="dm"), ValueError, "env_type"),
        (dict(num_envs=2, max_episode_steps=0), ValueError, "max_episode_steps"),
    ]:
        with pytest.raises(err, match=words):
            envpool.make("Crafter-v1", **kwargs)
    with pytest.raises(ValueError, match="task_id"):
        envpool.make("Pong-v5")

    clean = envpool.make(num_envs=n, seed=seed, length=LENGTH)
    pool = envpool.make(num_envs=n, seed=seed, length=LENGTH)
    with pytest.raises(RuntimeError, match="no env has an action in flight"):
        pool.recv()
    with pytest.raises(RuntimeError, match="async_reset"):
        pool.send([0, 0, 0])
    assert pool.in_flight == []
    clean.async_reset()
    pool.async_reset()
    with pytest.raises(RuntimeError, match="async_reset.*in flight"):
        pool.async_reset()
    with pytest.raises(RuntimeError, match="reset.*in flight"):
        pool.reset()
    assert pool.in_flight == [0, 1, 2]
    results = [(clean.recv(), pool.recv())]
    acts = np.array([3, 5, 1])
    for call, err, words in [
        (lambda: pool.send(acts, np.array([0.0, 1.0, 2.0])), TypeError, "env_id"),
        (lambda: pool.send(acts, [0, 1, 3]), ValueError, "env_id 3 is out of range"),
        (lambda: pool.send(acts, [0, -1, 2]), ValueError, "env_id -1 is out of range"),
        (lambda: pool.send(acts, [0, 1, 1]), ValueError, "env_id 1 appears more than once"),
        (lambda: pool.send(acts[:2], [0, 1, 2]), ValueError, "one action per env_id"),
    ]:
        with pytest.raises(err, match=words):
            call()
        assert pool.in_flight == []
    for what, err, words in [(acts.astype(float), TypeError, "action"), (np.array([3, 17, 1]), ValueError, "action 17"),
                             ({"action": acts, "env_id": [0, 1, 2], "x": 1}, ValueError, "dict")]:
        with pytest.raises(err, match=words):
            pool.send(what)
        assert pool.in_flight == []
    with pytest.raises(TypeError, match="env_id"):
        pool.send({"action": acts}, [0, 1, 2])
    with pytest.raises(ValueError, match="seed"):
        pool.reset(seed=1)
    # One env sent: recv would wait for ever with batch_size=3, so it refuses.
    pool.send([acts[0]], [0])
    with pytest.raises(RuntimeError, match="only 1 envs have actions in flight"):
        pool.recv()
    with pytest.raises(ValueError, match="env_id 0 already has an action in flight"):
        pool.send({"action": acts[:1], "env_id": [0]})
    pool.send(acts[1:], np.array([1, 2], dtype=np.uint8))
    clean.send(acts)
    results.append((clean.recv(), pool.recv()))
    for t in range(20):
        a = np.array([support.actions_for(seed + t, 3)]).ravel()
        results.append((clean.step(a), pool.step(a)))
    for t, (ref, ours) in enumerate(results):
        assert ours[0].tobytes() == ref[0].tobytes(), f"result {t}: frames differ"
        assert [x.tolist() for x in ours[1:4]] == [x.tolist() for x in ref[1:4]], f"result {t}"
        assert [flat(ours[4], k) for k in range(n)] == [flat(ref[4], k) for k in range(n)], f"result {t}"
    pool.close()
    pool.close()  # again: nothing
    for call in (pool.recv, pool.async_reset, lambda: pool.send(acts), lambda: pool.in_flight):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    clean.close()


def test_close_while_the_workers_step_in_the_background():
    pool = envpool.make(num_envs=32, batch_size=16, num_threads=1, size=256, seed=1)
    pool.async_reset()
    ids = pool.recv()[4]["env_id"]
    pool.send(np.zeros(16, dtype=np.int32), ids)
    assert len(pool.in_flight) == 32
    pool.close()  # resets and steps still queued: the worker stops after its current one
    assert pool.closed
    with pytest.raises(RuntimeError, match="closed"):
        pool.recv()


def test_close_from_another_thread_stops_a_waiting_recv():
    pool = envpool.make(num_envs=64, num_threads=1, size=384, seed=2)
    pool.reset()
    closer = threading.Timer(0.3, pool.close)
    closer.start()
    with pytest.raises(RuntimeError, match="closed"):
        for _ in range(10_000):  # each step takes a while: close lands in a recv (or a send)
            pool.step(np.zeros(64, dtype=np.int64))
    closer.join()
    assert pool.closed


CHILD = textwrap.dedent(r"""
    import signal, sys, time
    import numpy as np
    from vlmcrafter import envpool

    # A suite run in the background starts children with SIGINT ignored: install Python's handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    n, size = int(sys.argv[1]), int(sys.argv[2])
    pool = envpool.make("Crafter-v1", num_envs=n, batch_size=n // 2, num_threads=1, size=size, seed=0)
    pool.async_reset()
    t = time.perf_counter()
    obs, rew, term, trunc, info = pool.recv()
    call_s = time.perf_counter() - t
    print(f"READY {call_s:.3f}", flush=True)
    ids = info["env_id"]
    calls = 0
    try:
        while True:
            pool.send(np.zeros(len(ids), dtype=np.int32), ids)
            ids = pool.recv()[4]["env_id"]
            calls += 1
    except KeyboardInterrupt:
        caught = time.time()
        print(f"INTERRUPTED {caught:.6f} after {calls} calls", flush=True)
    # Nothing is lost: what was in flight comes back.
    flying = pool.in_flight
    print(f"IN-FLIGHT {len(flying)}", flush=True)
    got = pool.recv()[4]["env_id"].tolist()
    assert set(got) <= set(flying), (got, flying)
    print("RECV-AFTER-INTERRUPT-WORKED", flush=True)
    pool.close()
    print("DONE", flush=True)
""")


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="needs POSIX signals")
def test_sigint_during_recv_raises_keyboard_interrupt():
    n, size = 128, 384
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(n), str(size)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = child.stdout.readline()
        assert ready.startswith("READY"), (ready, child.stderr.read())
        call_s = float(ready.split()[1])
        time.sleep(min(0.5, call_s / 2) + 0.2)
        sent = time.time()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, f"exit {child.returncode}\n{out}\n{err}"
    lines = out.splitlines()
    stopped = [line for line in lines if line.startswith("INTERRUPTED")]
    assert stopped, out
    latency = float(stopped[0].split()[1]) - sent
    print(f"recv of {n // 2} of {n} envs at {size} px: one recv {call_s:.3f} s, KeyboardInterrupt "
          f"{latency * 1000:.0f} ms after SIGINT")
    assert latency < 30, f"KeyboardInterrupt came {latency:.1f} s after SIGINT"  # liveness only
    assert "RECV-AFTER-INTERRUPT-WORKED" in lines and lines[-1] == "DONE", out
    assert "Exception ignored" not in err, err
