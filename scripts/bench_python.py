#!/usr/bin/env python3
"""Speed of the Python package beside Python crafter 1.8.3 and the Rust engine, in ONE run.

  .venv-pypkg/bin/python scripts/bench_python.py [--sizes 64 256] [--memory-steps 1000000]
  .venv-pypkg/bin/python scripts/bench_python.py --sizes 64 --make-vec-only --rounds 5 \
      --py-steps 1000 --steps 64000 [--interleave]                          # issue 42 item 6
  OPENBLAS_NUM_THREADS=1 .venv-pypkg/bin/python scripts/bench_python.py --sizes 64 --async-only \
      --vector-n 16 --rounds 5 --steps 32000 [--policy-hidden 32]           # issue 49 item 8b

Every contender plays crafter's default env (area 64x64, view 9x9, length 10 000) from seed 0
with random actions from `numpy.random.RandomState(0).randint(0, 17)`, resetting when an
episode ends (resets included, as `vlm-eval bench env` and crafter_bench.py's end-to-end figure
do). Contenders, per frame size:
  - Python crafter 1.8.3 (stock `crafter.Env`), `--py-steps` steps;
  - our single `vlmcrafter.crafter.Env` through Python, `--steps` steps;
  - `VectorEnv(64)` (threads=None: every core), env-steps/s over `--steps` env-steps, with its
    next_step autoresets;
  - `gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=64)` (the native vector env through
    gymnasium's registry) in `NEXT_STEP` and in `SAME_STEP` autoreset, `--repeats` runs of each
    interleaved (the median is reported: the two modes see the same machine noise); with
    `--make-vec-only --interleave`, also `VectorRecorder` over the NEXT_STEP env (stats.jsonl)
    and the NEXT_STEP env with `copy=True` (the others run `copy=False`, the zero-copy path);
  - the Rust engine alone: `vlm-eval bench env --json` (one thread, no Python);
  - the text observation: `Env.text("state")` / `Env.text("balrog")` after every step, only
    those calls timed.
With `--async-only`, a learner loop instead (issue 49's EnvPool API, `vlmcrafter.envpool`): a
stand-in policy (each frame as float32 times a fixed `(H*W*3, --policy-hidden)` matrix, the argmax
as the action: a cost per env row, in numpy, GIL released) on every batch, with the synchronous
full-batch step (`batch_size = num_envs`) against async `send`/`recv` (`batch_size = num_envs /
2`: the policy of one half runs while the other half steps), `--rounds` rounds of the two back to
back, env-steps/s each and the ratio per round.
With `--sb3` (run it in .venv-ppo, which has stable-baselines3), only the SB3 VecEnvs over
crafter at each `--sb3-n`, in `--rounds` rounds, stepped in interleaved blocks so that all see
the same load (`play_sb3_interleaved`):
`vlmcrafter.sb3.CrafterVecEnv(n)` (the adapter over the native env; also with
`crafter_info=False`), SB3's `DummyVecEnv` and
`SubprocVecEnv` (only up to `--subproc-max` envs) over `gymnasium.make("vlmcrafter/Crafter-v1")`,
and the native env itself through gymnasium (`make_vec(ID, n, SAME_STEP)`, `copy=True` as the
adapter), each from seed 0 with the same random actions, `reset()` and autoresets included.
Then, with `--memory-steps N`, N calls of `VectorEnv(--memory-n).step` with the process's RSS
printed before and after (and at every tenth).

Prints a markdown table (the one in docs/BENCHMARKS.md) and writes --json if given.
"""
import argparse
import itertools
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

import gymnasium
import vlmcrafter
from vlmcrafter import crafter as vc

try:
    import crafter
except ImportError:  # --sb3 runs in .venv-ppo (SB3, torch), which has no Python crafter
    crafter = None

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = (str(pathlib.Path(crafter.__file__).parent / "assets") if crafter is not None
          else os.environ.get("CRAFTER_ASSETS"))


def actions(n, seed=0):
    return [int(a) for a in np.random.RandomState(seed).randint(0, 17, size=n)]


def play(env, steps):
    """Random policy with resets on done; returns (steps/s, resets)."""
    acts = actions(steps)
    t0 = time.perf_counter()
    env.reset()
    resets = 1
    for a in acts:
        if env.step(a)[2]:
            env.reset()
            resets += 1
    return steps / (time.perf_counter() - t0), resets


def play_text(env, steps, fmt):
    """Mean time of one `env.text(fmt)` call over the states of a random-policy run, in µs
    (only the text calls are timed)."""
    acts = actions(steps)
    env.reset()
    spent = 0.0
    clock = time.perf_counter
    for a in acts:
        if env.step(a)[2]:
            env.reset()
        t = clock()
        env.text(fmt)
        spent += clock() - t
    return spent / steps * 1e6


def play_vector_env(env, n, env_steps, reset):
    """env-steps/s of a vector env of `n` envs over `env_steps` env-steps (`reset()` and the
    autoresets included), random actions (a fresh array per step, as a policy gives); closes it.
    Returns (rate, episode ends)."""
    calls = max(1, env_steps // n)
    acts = np.random.RandomState(0).randint(0, 17, size=(calls, n))
    t0 = time.perf_counter()
    reset()
    ends = 0
    for row in acts:
        _, _, terminated, truncated, _ = env.step(row)
        ends += int(terminated.sum() + truncated.sum())
    rate = calls * n / (time.perf_counter() - t0)
    env.close()
    return rate, ends


def play_vector(n, size, env_steps):
    venv = vc.VectorEnv(n, seed=0, size=(size, size), textures=ASSETS, copy=False)
    return play_vector_env(venv, n, env_steps, venv.reset)


def play_make_vec(n, size, env_steps, mode, logdir=None):
    """env-steps/s of `gymnasium.make_vec(ID, num_envs=n, autoreset_mode=mode)` from
    `reset(seed=0)` (see `play_vector_env`); with `logdir`, under `VectorRecorder` writing
    stats.jsonl there."""
    env = gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=n, autoreset_mode=mode,
                             size=(size, size), textures=ASSETS, copy=False)
    if logdir is not None:
        from vlmcrafter.recorder import VectorRecorder

        env = VectorRecorder(env, logdir)
    return play_vector_env(env, n, env_steps, lambda: env.reset(seed=0))


def make_vec_modes(n, size, env_steps, repeats):
    """NEXT_STEP and SAME_STEP, `repeats` runs each, interleaved; the medians."""
    rates = {"NEXT_STEP": [], "SAME_STEP": []}
    for _ in range(repeats):
        for mode in rates:
            rate, ends = play_make_vec(n, size, env_steps, mode)
            rates[mode].append(rate)
            print(f"[{size} px] make_vec({n}, {mode}): {rate:,.0f} env-steps/s ({ends} episode ends)",
                  flush=True)
    return {mode: float(np.median(r)) for mode, r in rates.items()}, rates


def make_vec_rounds(n, size, env_steps, py_steps, rounds):
    """Rounds of (Python crafter, make_vec NEXT_STEP, make_vec SAME_STEP, make_vec NEXT_STEP
    under VectorRecorder) back to back, each contender playing alone, the make_vec order
    rotating every round, so that each round's ratios see the same machine load; every round
    repeats the same work (Python crafter from seed 0, make_vec from seed 0, the same actions).
    Returns the per-round figures."""
    out = []
    for k in range(rounds):
        py, _ = play(crafter.Env(seed=0, size=(size, size)), py_steps)
        r = {"python_crafter": py}
        order = ["next_step", "same_step", "recorder"]
        order = order[k % 3:] + order[:k % 3]
        for key in order:
            if key == "recorder":
                with tempfile.TemporaryDirectory() as logdir:
                    r[key], _ = play_make_vec(n, size, env_steps, "NEXT_STEP", logdir)
            else:
                r[key], _ = play_make_vec(n, size, env_steps, key.upper())
        r["load"] = os.getloadavg()[0]
        out.append(r)
        nxt, same = r["next_step"], r["same_step"]
        print(f"[{size} px] round {k + 1}/{rounds}: Python crafter {py:,.1f} steps/s, make_vec({n}) "
              f"NEXT_STEP {nxt:,.0f} ({nxt / py:,.0f}x), SAME_STEP {same:,.0f} ({same / py:,.0f}x), "
              f"SAME/NEXT {same / nxt:.3f}, recorder/no recorder {nxt / r['recorder']:.3f}, "
              f"load {r['load']:.1f}", flush=True)
    return out


def rust_engine(size, steps):
    binary = os.environ.get("VLM_EVAL", str(ROOT / "target" / "release" / "vlm-eval"))
    out = subprocess.run([binary, "bench", "env", "--steps", str(steps), "--size", str(size),
                          "--assets", ASSETS, "--json"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory_check(n, calls, size):
    venv = vc.VectorEnv(n, seed=0, size=(size, size), textures=ASSETS)
    rng = np.random.RandomState(0)
    block = rng.randint(0, 17, size=(1000, n))
    venv.reset()
    for row in block:  # warm-up: buffers, thread pool, allocator pools
        venv.step(row)
    before = rss_mib()
    print(f"memory: VectorEnv({n}) at {size} px, {calls:,} step() calls "
          f"({calls * n:,} env-steps); RSS after 1,000 warm-up calls {before:.1f} MiB", flush=True)
    samples = []
    t0 = time.perf_counter()
    done = 0
    while done < calls:
        k = min(len(block), calls - done)
        for row in block[:k]:
            venv.step(row)
        done += k
        if done % max(1, calls // 10) < k:
            samples.append((done, rss_mib()))
            print(f"  {done:>10,} calls  RSS {samples[-1][1]:.1f} MiB  "
                  f"({done * n / (time.perf_counter() - t0):,.0f} env-steps/s)", flush=True)
    after = rss_mib()
    venv.close()
    return {"n": n, "calls": calls, "env_steps": calls * n, "size": size,
            "rss_before_mib": before, "rss_after_mib": after, "samples": samples,
            "seconds": time.perf_counter() - t0}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    p.add_argument("--py-steps", type=int, default=3000, help="Python crafter's steps per size")
    p.add_argument("--steps", type=int, default=200_000,
                   help="our steps per contender at 64 px (scaled by (64/size)^2 at other sizes)")
    p.add_argument("--text-steps", type=int, default=20_000, help="text() calls per size")
    p.add_argument("--vector-n", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3, help="runs of each make_vec autoreset mode")
    p.add_argument("--make-vec-only", action="store_true",
                   help="only Python crafter and make_vec in both autoreset modes (item 6), in "
                        "--rounds rounds of the three back to back")
    p.add_argument("--rounds", type=int, default=5, help="rounds of --make-vec-only")
    p.add_argument("--interleave", action="store_true",
                   help="--make-vec-only: one call of each contender per loop iteration, each "
                        "timed alone (--py-steps calls each per round)")
    p.add_argument("--memory-steps", type=int, default=0, help="VectorEnv.step calls (0: skip)")
    p.add_argument("--memory-n", type=int, default=64)
    p.add_argument("--memory-only", action="store_true", help="run only the memory check")
    p.add_argument("--text-only", action="store_true", help="run only the text observation's cost")
    p.add_argument("--async-only", action="store_true",
                   help="only the learner loop: sync full-batch step vs async send/recv (issue 49)")
    p.add_argument("--policy-hidden", type=int, default=32,
                   help="--async-only: the stand-in policy's matrix width (0: no policy)")
    p.add_argument("--sb3", action="store_true",
                   help="only the SB3 VecEnvs (the adapter, DummyVecEnv, SubprocVecEnv, the native env)")
    p.add_argument("--sb3-n", type=int, nargs="+", default=[8, 64], help="--sb3: numbers of envs")
    p.add_argument("--sb3-steps", type=int, default=40_000,
                   help="--sb3: env-steps per contender and round")
    p.add_argument("--subproc-max", type=int, default=8,
                   help="--sb3: SubprocVecEnv only up to this many envs (one process each)")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args()

    print(f"vlmcrafter {vlmcrafter.__version__}, crafter {'absent' if crafter is None else getattr(crafter, '__version__', '1.8.3')}, "
          f"numpy {np.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    results = {"sizes": {}, "load_start": os.getloadavg()[0]}
    if args.sb3:
        return sb3_only(args, results)
    if args.async_only:
        return async_only(args, results)
    if crafter is None:
        print("bench_python: Python crafter 1.8.3 is not installed (run it in .venv-pypkg); only "
              "--sb3 and --async-only run without it", file=sys.stderr)
        return 2
    if args.memory_only:
        m = memory_check(args.memory_n, args.memory_steps, args.sizes[0])
        print(f"memory: RSS {m['rss_before_mib']:.1f} MiB -> {m['rss_after_mib']:.1f} MiB over "
              f"{m['calls']:,} VectorEnv({m['n']}).step calls ({m['env_steps']:,} env-steps, "
              f"{m['seconds']:.0f} s)")
        return 0
    if args.make_vec_only:
        return make_vec_only(args, results)
    for size in args.sizes:
        r = {}
        scale = min(1.0, (64 / size) ** 2)
        steps, text_steps = int(args.steps * scale), args.text_steps  # text: size-independent
        if args.text_only:
            for fmt in ("state", "balrog"):
                us = play_text(vc.Env(seed=0, size=(size, size), textures=ASSETS), text_steps, fmt)
                print(f"[{size} px] text({fmt!r}): {us:.2f} us/call ({text_steps} calls)")
            continue
        py_rate, py_resets = play(crafter.Env(seed=0, size=(size, size)), args.py_steps)
        r["python_crafter"] = py_rate
        print(f"[{size} px] Python crafter: {py_rate:,.1f} steps/s ({py_resets} episodes)",
              flush=True)
        medians, runs = make_vec_modes(args.vector_n, size, steps, args.repeats)
        r["make_vec_next_step"], r["make_vec_same_step"] = medians["NEXT_STEP"], medians["SAME_STEP"]
        r["make_vec_runs"] = runs
        single, resets = play(vc.Env(seed=0, size=(size, size), textures=ASSETS), steps)
        r["single"] = single
        print(f"[{size} px] vlmcrafter Env: {single:,.0f} steps/s ({resets} episodes)", flush=True)
        vec, ends = play_vector(args.vector_n, size, steps)
        r["vector"] = vec
        print(f"[{size} px] VectorEnv({args.vector_n}): {vec:,.0f} env-steps/s ({ends} episode "
              "ends)", flush=True)
        rust = rust_engine(size, steps)
        r["rust_engine"] = rust["steps_per_sec"]
        print(f"[{size} px] Rust engine (bench env): {rust['steps_per_sec']:,.0f} steps/s",
              flush=True)
        for fmt in ("state", "balrog"):
            r[f"text_{fmt}_us"] = play_text(vc.Env(seed=0, size=(size, size), textures=ASSETS),
                                            text_steps, fmt)
            print(f"[{size} px] text({fmt!r}): +{r[f'text_{fmt}_us']:.2f} us/step", flush=True)
        results["sizes"][size] = r
    results["load_end"] = os.getloadavg()[0]
    if args.text_only:
        return 0

    if args.memory_steps:
        results["memory"] = memory_check(args.memory_n, args.memory_steps, args.sizes[0])

    print()
    print(f"| measurement | " + " | ".join(f"{s} px" for s in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))

    def row(name, fn):
        print(f"| {name} | " + " | ".join(fn(results["sizes"][s]) for s in args.sizes) + " |")

    row("Python crafter 1.8.3 (steps/s)", lambda r: f"{r['python_crafter']:,.1f}")
    row("vlmcrafter `Env` through Python (steps/s)", lambda r: f"{r['single']:,.0f}")
    row("ratio to Python crafter (target ≥ 100×)", lambda r: f"**{r['single'] / r['python_crafter']:,.0f}×**")
    row(f"`VectorEnv({args.vector_n})` (env-steps/s)", lambda r: f"{r['vector']:,.0f}")
    row("ratio to Python crafter (target ≥ 250×)", lambda r: f"**{r['vector'] / r['python_crafter']:,.0f}×**")
    make_vec_rows(args, row)
    row("Rust engine, `bench env`, one thread (steps/s)", lambda r: f"{r['rust_engine']:,.0f}")
    row("Rust engine / VectorEnv (target ≤ 1.3)", lambda r: f"**{r['rust_engine'] / r['vector']:.2f}**")
    row("`Env` through Python / Rust engine", lambda r: f"{r['single'] / r['rust_engine']:.2f}")
    row("`text(\"state\")` per step (µs)", lambda r: f"{r['text_state_us']:.1f}")
    row("`text(\"balrog\")` per step (µs)", lambda r: f"{r['text_balrog_us']:.1f}")
    print(f"\nload average: {results['load_start']:.1f} at the start, {results['load_end']:.1f} "
          "at the end")
    if "memory" in results:
        m = results["memory"]
        print(f"memory: RSS {m['rss_before_mib']:.1f} MiB -> {m['rss_after_mib']:.1f} MiB over "
              f"{m['calls']:,} VectorEnv({m['n']}).step calls ({m['env_steps']:,} env-steps, "
              f"{m['seconds']:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def make_vec_rows(args, row):
    n = args.vector_n
    row(f"`make_vec(ID, num_envs={n})`, NEXT_STEP (env-steps/s, median of {args.repeats})",
        lambda r: f"{r['make_vec_next_step']:,.0f}")
    row("ratio to Python crafter (target ≥ 600×)",
        lambda r: f"**{r['make_vec_next_step'] / r['python_crafter']:,.0f}×**")
    row(f"`make_vec(ID, num_envs={n})`, SAME_STEP (env-steps/s, median of {args.repeats})",
        lambda r: f"{r['make_vec_same_step']:,.0f}")
    row("ratio to Python crafter", lambda r: f"**{r['make_vec_same_step'] / r['python_crafter']:,.0f}×**")
    row("SAME_STEP / NEXT_STEP (target ≥ 0.90)",
        lambda r: f"**{r['make_vec_same_step'] / r['make_vec_next_step']:.3f}**")


def make_vec_interleaved(n, size, calls, logdir, block=25):
    """Python crafter and make_vec in NEXT_STEP, in SAME_STEP, and in NEXT_STEP under
    `VectorRecorder` (stats.jsonl into `logdir`), interleaved finely so that all four see the
    same machine load (a noisy machine's load swings over seconds): a block of `block` Python
    crafter steps, then a block of `block` calls of each make_vec env, the env that goes first
    rotating every block. Each env steps its block back to back, as a training loop steps its
    one vector env (interleaving single calls instead makes each env's call start while the
    previous env's worker threads still spin, a contention no real loop has), and each block's
    first call pays the same wake-up of its worker threads. The three make_vec envs have the
    same seeds and actions, so the recorded one does exactly the plain NEXT_STEP one's engine
    work. Each call is timed alone. Returns the four rates."""
    from vlmcrafter.recorder import VectorRecorder

    py = crafter.Env(seed=0, size=(size, size))

    def make(mode, copy=False):
        return gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=n, autoreset_mode=mode,
                                  size=(size, size), textures=ASSETS, copy=copy)

    envs = [(mode, make(mode)) for mode in ("NEXT_STEP", "SAME_STEP")]
    envs.append(("RECORDER", VectorRecorder(make("NEXT_STEP"), logdir)))
    envs.append(("COPY", make("NEXT_STEP", copy=True)))
    acts = np.random.RandomState(0).randint(0, 17, size=(calls, n))
    spent = {"python_crafter": 0.0, "NEXT_STEP": 0.0, "SAME_STEP": 0.0, "RECORDER": 0.0, "COPY": 0.0}
    clock = time.perf_counter
    t = clock()
    py.reset()
    spent["python_crafter"] += clock() - t
    for mode, env in envs:
        t = clock()
        env.reset(seed=0)
        spent[mode] += clock() - t
    for start in range(0, calls, block):
        rows = acts[start:start + block]
        for row in rows:
            t = clock()
            if py.step(int(row[0]))[2]:
                py.reset()
            spent["python_crafter"] += clock() - t
        first = (start // block) % len(envs)
        for mode, env in envs[first:] + envs[:first]:
            for row in rows:
                t = clock()
                env.step(row)
                spent[mode] += clock() - t
    recorded = envs[2][1].episodes_recorded
    for _, env in envs:
        env.close()
    return {"python_crafter": calls / spent["python_crafter"],
            "next_step": calls * n / spent["NEXT_STEP"],
            "same_step": calls * n / spent["SAME_STEP"],
            "recorder": calls * n / spent["RECORDER"], "episodes_recorded": recorded,
            "copy": calls * n / spent["COPY"],
            "load": os.getloadavg()[0]}


def make_vec_only(args, results):
    """Item 6's figures: per-round ratios, and their medians."""
    for size in args.sizes:
        scale = min(1.0, (64 / size) ** 2)
        if args.interleave:
            rounds = []
            for k in range(args.rounds):
                with tempfile.TemporaryDirectory() as logdir:
                    r = make_vec_interleaved(args.vector_n, size, args.py_steps, logdir)
                rounds.append(r)
                print(f"[{size} px] interleaved round {k + 1}/{args.rounds} ({args.py_steps} calls "
                      f"each): Python crafter {r['python_crafter']:,.1f} steps/s, NEXT_STEP "
                      f"{r['next_step']:,.0f} ({r['next_step'] / r['python_crafter']:,.0f}x), "
                      f"SAME_STEP {r['same_step']:,.0f}, SAME/NEXT "
                      f"{r['same_step'] / r['next_step']:.3f}, recorder/no recorder "
                      f"{r['next_step'] / r['recorder']:.3f} ({r['episodes_recorded']} episodes "
                      f"written), load {r['load']:.1f}", flush=True)
        else:
            rounds = make_vec_rounds(args.vector_n, size, int(args.steps * scale), args.py_steps,
                                     args.rounds)
        results["sizes"][size] = {"rounds": rounds}
    results["load_end"] = os.getloadavg()[0]
    n = args.vector_n
    print()
    print(f"| {args.rounds} rounds, medians | " + " | ".join(f"{s} px" for s in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))

    def row(name, fn):
        cells = []
        for s in args.sizes:
            cells.append(fn(results["sizes"][s]["rounds"]))
        print(f"| {name} | " + " | ".join(cells) + " |")

    def med(rounds, f):
        return float(np.median([f(r) for r in rounds]))

    row("Python crafter 1.8.3 (steps/s)", lambda rs: f"{med(rs, lambda r: r['python_crafter']):,.1f}")
    row(f"`make_vec(ID, num_envs={n})`, NEXT_STEP (env-steps/s)",
        lambda rs: f"{med(rs, lambda r: r['next_step']):,.0f}")
    row(f"`make_vec(ID, num_envs={n})`, SAME_STEP (env-steps/s)",
        lambda rs: f"{med(rs, lambda r: r['same_step']):,.0f}")
    row("NEXT_STEP / Python crafter, per round (target ≥ 600×)",
        lambda rs: "**" + f"{med(rs, lambda r: r['next_step'] / r['python_crafter']):,.0f}×** ("
        + ", ".join(f"{r['next_step'] / r['python_crafter']:,.0f}" for r in rs) + ")")
    row("SAME_STEP / Python crafter, per round",
        lambda rs: "**" + f"{med(rs, lambda r: r['same_step'] / r['python_crafter']):,.0f}×** ("
        + ", ".join(f"{r['same_step'] / r['python_crafter']:,.0f}" for r in rs) + ")")
    row("SAME_STEP / NEXT_STEP, per round (target ≥ 0.90)",
        lambda rs: "**" + f"{med(rs, lambda r: r['same_step'] / r['next_step']):.3f}** ("
        + ", ".join(f"{r['same_step'] / r['next_step']:.2f}" for r in rs) + ")")
    if "copy" in results["sizes"][args.sizes[0]]["rounds"][0]:
        row(f"`make_vec(ID, num_envs={n}, copy=True)`, NEXT_STEP (env-steps/s)",
            lambda rs: f"{med(rs, lambda r: r['copy']):,.0f}")
        row("copy=True / Python crafter, per round",
            lambda rs: "**" + f"{med(rs, lambda r: r['copy'] / r['python_crafter']):,.0f}×** ("
            + ", ".join(f"{r['copy'] / r['python_crafter']:,.0f}" for r in rs) + ")")
    row(f"`VectorRecorder(make_vec(ID, num_envs={n}))`, NEXT_STEP (env-steps/s)",
        lambda rs: f"{med(rs, lambda r: r['recorder']):,.0f}")
    row("time with the recorder / without, per round (target ≤ 1.05)",
        lambda rs: "**" + f"{med(rs, lambda r: r['next_step'] / r['recorder']):.3f}** ("
        + ", ".join(f"{r['next_step'] / r['recorder']:.2f}" for r in rs) + ")")
    print(f"\nload average: {results['load_start']:.1f} at the start, {results['load_end']:.1f} "
          "at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def learner_loop(n, batch, size, env_steps, weights):
    """env-steps/s of an EnvPool loop over `envpool.make(num_envs=n, batch_size=batch)`: every
    batch's frames go through the stand-in policy (`weights`; None: random actions), whose
    actions are sent back for the batch's env ids. `batch == n` is the synchronous step."""
    from vlmcrafter import envpool

    pool = envpool.make("Crafter-v1", num_envs=n, batch_size=batch, seed=0, size=(size, size),
                        textures=ASSETS)
    rng = np.random.RandomState(0)

    def policy(obs):
        if weights is None:
            return rng.randint(0, 17, size=len(obs))
        return np.argmax(obs.reshape(len(obs), -1).astype(np.float32) @ weights, axis=1) % 17

    calls = max(1, env_steps // batch)
    t0 = time.perf_counter()
    if batch == n:
        obs, _ = pool.reset()
        for _ in range(calls):
            obs = pool.step(policy(obs))[0]
    else:
        pool.async_reset()
        for _ in range(calls):
            obs, _, _, _, info = pool.recv()
            pool.send(policy(obs), info["env_id"])
    rate = calls * batch / (time.perf_counter() - t0)
    pool.close()
    return rate


def async_only(args, results):
    """Issue 49 item 8b: the learner loop, sync full batch vs async half batches, per round."""
    n, size = args.vector_n, args.sizes[0]
    weights = None
    if args.policy_hidden:
        weights = np.random.RandomState(1).standard_normal((size * size * 3, args.policy_hidden))
        weights = weights.astype(np.float32) / 1000
        frames = np.zeros((n, size, size, 3), dtype=np.uint8)
        t = time.perf_counter()
        for _ in range(20):
            np.argmax(frames.reshape(n, -1).astype(np.float32) @ weights, axis=1)
        print(f"stand-in policy: {(time.perf_counter() - t) / 20 / n * 1e6:.1f} us per env row "
              f"(({size}*{size}*3) x {args.policy_hidden} float32)", flush=True)
    rounds = []
    for k in range(args.rounds):
        r = {"sync": learner_loop(n, n, size, args.steps, weights),
             "async": learner_loop(n, n // 2, size, args.steps, weights), "load": os.getloadavg()[0]}
        rounds.append(r)
        print(f"[{size} px] round {k + 1}/{args.rounds}: sync step({n}) {r['sync']:,.0f} env-steps/s, "
              f"async send/recv (batch {n // 2} of {n}) {r['async']:,.0f}, async/sync "
              f"{r['async'] / r['sync']:.3f}, load {r['load']:.1f}", flush=True)
    results["async"] = rounds
    med = lambda f: float(np.median([f(r) for r in rounds]))  # noqa: E731
    print(f"\n| learner loop, {n} envs, {size} px, policy width {args.policy_hidden}, "
          f"{args.rounds} rounds | median | per round |")
    print("|---|---|---|")
    print(f"| sync `step` of all {n} (env-steps/s) | {med(lambda r: r['sync']):,.0f} | "
          + ", ".join(f"{r['sync']:,.0f}" for r in rounds) + " |")
    print(f"| async `recv`/`send`, batch_size {n // 2} (env-steps/s) | {med(lambda r: r['async']):,.0f} | "
          + ", ".join(f"{r['async']:,.0f}" for r in rounds) + " |")
    print(f"| async / sync | **{med(lambda r: r['async'] / r['sync']):.3f}** | "
          + ", ".join(f"{r['async'] / r['sync']:.2f}" for r in rounds) + " |")
    print(f"\nload average: {results['load_start']:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def play_sb3_interleaved(makers, n, env_steps, block=25):
    """env-steps/s of each contender (`makers`: name -> a function making the env) over
    `env_steps` env-steps from seed 0, interleaved: a block of `block` calls of each env in
    turn, the env that goes first rotating every block, so that all see the same machine load
    (this 2-core machine's load swings over seconds). Every env gets the same random actions;
    each `reset()` and `step()` call is timed alone (autoresets included). SB3 VecEnvs are
    seeded with `seed(0)`, the native gymnasium env with `reset(seed=0)`. Returns {name: rate}."""
    calls = max(1, env_steps // n)
    acts = np.random.RandomState(0).randint(0, 17, size=(calls, n))
    envs = [(name, make()) for name, make in makers.items()]
    spent = dict.fromkeys(makers, 0.0)
    clock = time.perf_counter
    for name, env in envs:
        t = clock()
        if name == "native_same_step":
            env.reset(seed=0)
        else:
            env.seed(0)
            env.reset()
        spent[name] += clock() - t
    for start in range(0, calls, block):
        rows = acts[start:start + block]
        first = (start // block) % len(envs)
        for name, env in envs[first:] + envs[:first]:
            for row in rows:
                t = clock()
                env.step(row)
                spent[name] += clock() - t
    for _, env in envs:
        env.close()
    return {name: calls * n / spent[name] for name in makers}


def sb3_contenders(n, subproc_max):
    """The SB3 contenders at `n` envs: name -> a function that makes the env (not timed)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
    from vlmcrafter.sb3 import CrafterVecEnv

    def single():
        import vlmcrafter  # noqa: F401  (registers the id in SubprocVecEnv's workers too)

        return gymnasium.make("vlmcrafter/Crafter-v1", textures=ASSETS)

    out = {
        "adapter": lambda: CrafterVecEnv(n, textures=ASSETS),
        "adapter_lean": lambda: CrafterVecEnv(n, textures=ASSETS, crafter_info=False),
        "native_same_step": lambda: gymnasium.make_vec(
            "vlmcrafter/Crafter-v1", num_envs=n, autoreset_mode="SAME_STEP", textures=ASSETS),
        "dummy": lambda: DummyVecEnv([single] * n),
    }
    if n <= subproc_max:
        out["subproc"] = lambda: SubprocVecEnv([single] * n)
    return out


def sb3_only(args, results):
    """Issue 49's SB3 figures: per round and n, each contender's env-steps/s; the medians."""
    import stable_baselines3

    print(f"stable-baselines3 {stable_baselines3.__version__}, gymnasium {gymnasium.__version__}",
          flush=True)
    rounds = []
    for k in range(args.rounds):
        r = {}
        for n in args.sb3_n:
            makers = sb3_contenders(n, args.subproc_max)
            for name, rate in play_sb3_interleaved(makers, n, args.sb3_steps).items():
                r[f"{name}_{n}"] = rate
            print(f"round {k + 1}/{args.rounds}, {n} envs: " + ", ".join(
                f"{name} {r[f'{name}_{n}']:,.0f}" for name in makers) + " env-steps/s "
                f"(adapter/DummyVecEnv {r[f'adapter_{n}'] / r[f'dummy_{n}']:.2f}, "
                f"adapter/native {r[f'adapter_{n}'] / r[f'native_same_step_{n}']:.2f}), "
                f"load {os.getloadavg()[0]:.1f}", flush=True)
        rounds.append(r)
    results["sb3_rounds"] = rounds
    results["load_end"] = os.getloadavg()[0]
    names = {"adapter": "`vlmcrafter.sb3.CrafterVecEnv(n)`",
             "adapter_lean": "`CrafterVecEnv(n, crafter_info=False)` (SB3's info keys only)",
             "dummy": "SB3 `DummyVecEnv` of `gymnasium.make(ID)`",
             "subproc": "SB3 `SubprocVecEnv` of `gymnasium.make(ID)`",
             "native_same_step": "native `make_vec(ID, n, SAME_STEP)` (gymnasium API, for reference)"}
    print()
    print(f"| env-steps/s, median of {args.rounds} rounds | "
          + " | ".join(f"{n} envs" for n in args.sb3_n) + " |")
    print("|---|" + "---|" * len(args.sb3_n))
    for name, label in names.items():
        cells = []
        for n in args.sb3_n:
            vals = [r[f"{name}_{n}"] for r in rounds if f"{name}_{n}" in r]
            cells.append(f"{float(np.median(vals)):,.0f}" if vals else "not run")
        print(f"| {label} | " + " | ".join(cells) + " |")
    for mine, other in itertools.product(("adapter", "adapter_lean"), ("dummy", "subproc")):
        cells = []
        for n in args.sb3_n:
            ratios = [r[f"{mine}_{n}"] / r[f"{other}_{n}"] for r in rounds if f"{other}_{n}" in r]
            cells.append(f"**{float(np.median(ratios)):.1f}×** (" + ", ".join(f"{x:.1f}" for x in ratios)
                         + ")" if ratios else "not run")
        print(f"| {'adapter' if mine == 'adapter' else 'crafter_info=False'} / "
              f"{names[other].split(' of ')[0].replace('SB3 ', '')}, per round | " + " | ".join(cells) + " |")
    print(f"\nload average: {results['load_start']:.1f} at the start, {results['load_end']:.1f} "
          "at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
