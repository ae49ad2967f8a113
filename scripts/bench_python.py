#!/usr/bin/env python3
"""Speed of the Python package beside Python crafter 1.8.3 and the Rust engine, in ONE run.

  .venv-pypkg/bin/python scripts/bench_python.py [--sizes 64 256] [--memory-steps 1000000]
  .venv-pypkg/bin/python scripts/bench_python.py --sizes 64 --make-vec-only   # item 6's figures

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
    interleaved (the median is reported: the two modes see the same machine noise);
  - the Rust engine alone: `vlm-eval bench env --json` (one thread, no Python);
  - the text observation: `Env.text("state")` / `Env.text("balrog")` after every step, only
    those calls timed.
Then, with `--memory-steps N`, N calls of `VectorEnv(--memory-n).step` with the process's RSS
printed before and after (and at every tenth).

Prints a markdown table (the one in docs/BENCHMARKS.md) and writes --json if given.
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

import crafter
import gymnasium
import vlmcrafter
from vlmcrafter import crafter as vc

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = str(pathlib.Path(crafter.__file__).parent / "assets")


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


def play_vector(n, size, env_steps):
    venv = vc.VectorEnv(n, seed=0, size=(size, size), textures=ASSETS)
    calls = max(1, env_steps // n)
    acts = np.random.RandomState(0).randint(0, 17, size=(calls, n))
    t0 = time.perf_counter()
    venv.reset()
    ends = 0
    for row in acts:
        _, _, terminated, truncated, _ = venv.step(row)
        ends += int(terminated.sum() + truncated.sum())
    rate = calls * n / (time.perf_counter() - t0)
    venv.close()
    return rate, ends


def play_make_vec(n, size, env_steps, mode):
    """env-steps/s of `gymnasium.make_vec(ID, num_envs=n, autoreset_mode=mode)`, random actions
    (a fresh array per step, as a policy gives), autoresets included; returns (rate, ends)."""
    env = gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=n, autoreset_mode=mode,
                             size=(size, size), textures=ASSETS)
    calls = max(1, env_steps // n)
    acts = np.random.RandomState(0).randint(0, 17, size=(calls, n))
    t0 = time.perf_counter()
    env.reset(seed=0)
    ends = 0
    for row in acts:
        _, _, terminated, truncated, _ = env.step(row)
        ends += int(terminated.sum() + truncated.sum())
    rate = calls * n / (time.perf_counter() - t0)
    env.close()
    return rate, ends


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
                   help="only Python crafter and make_vec in both autoreset modes (item 6)")
    p.add_argument("--memory-steps", type=int, default=0, help="VectorEnv.step calls (0: skip)")
    p.add_argument("--memory-n", type=int, default=64)
    p.add_argument("--memory-only", action="store_true", help="run only the memory check")
    p.add_argument("--text-only", action="store_true", help="run only the text observation's cost")
    p.add_argument("--json", help="write the figures here too")
    args = p.parse_args()

    print(f"vlmcrafter {vlmcrafter.__version__}, crafter {crafter.__version__ if hasattr(crafter, '__version__') else '1.8.3'}, "
          f"numpy {np.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    results = {"sizes": {}, "load_start": os.getloadavg()[0]}
    if args.memory_only:
        m = memory_check(args.memory_n, args.memory_steps, args.sizes[0])
        print(f"memory: RSS {m['rss_before_mib']:.1f} MiB -> {m['rss_after_mib']:.1f} MiB over "
              f"{m['calls']:,} VectorEnv({m['n']}).step calls ({m['env_steps']:,} env-steps, "
              f"{m['seconds']:.0f} s)")
        return 0
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
        if args.make_vec_only:
            results["sizes"][size] = r
            continue
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
    if args.make_vec_only:
        print_make_vec(args, results)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
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


def print_make_vec(args, results):
    print()
    print(f"| measurement | " + " | ".join(f"{s} px" for s in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes))

    def row(name, fn):
        print(f"| {name} | " + " | ".join(fn(results["sizes"][s]) for s in args.sizes) + " |")

    row("Python crafter 1.8.3 (steps/s)", lambda r: f"{r['python_crafter']:,.1f}")
    make_vec_rows(args, row)
    print(f"\nload average: {results['load_start']:.1f} at the start, {results['load_end']:.1f} "
          "at the end")


if __name__ == "__main__":
    sys.exit(main())
