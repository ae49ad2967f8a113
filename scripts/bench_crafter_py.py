#!/usr/bin/env python3
"""Python crafter's own speed, measured as `vlm-eval bench env` measures the Rust engine.

  .venv-crafter/bin/python scripts/bench_crafter_py.py [--repeats 3] [--steps 2000] [--resets 6]

Every figure is taken `--repeats` times and the median printed, as one JSON object:
  - end_to_end_sps: random actions (numpy RandomState(0).randint(0, 17)) from seed 0 with
    resets whenever an episode ends, reset time included, 64x64 render on every step (crafter
    always renders its observation);
  - step_render_sps: the same steps with the reset time left out;
  - reset_ms: one `reset()` (world generation and the first frame), mean over `--resets` seeds;
  - step_norender_sps: the same random steps with `render` replaced by a stub, so only the
    game logic is timed (the stub makes no noise draws at night, so the game differs from
    the rendered one after the first night: fine for a rate, not for a trace).
scripts/bench_vs_python.sh prints them beside `vlm-eval bench env`.
"""
import argparse
import json
import statistics
import time

import numpy as np

import crafter


def random_steps(steps, render=True):
    """Play `steps` random actions from seed 0; return (seconds with resets, seconds of resets)."""
    env = crafter.Env(seed=0)
    if not render:
        blank = np.zeros((64, 64, 3), np.uint8)
        env.render = lambda size=None: blank
    rng = np.random.RandomState(0)
    start = time.perf_counter()
    env.reset()
    in_resets = time.perf_counter() - start
    for _ in range(steps):
        _, _, done, _ = env.step(int(rng.randint(0, 17)))
        if done:
            t = time.perf_counter()
            env.reset()
            in_resets += time.perf_counter() - t
    return time.perf_counter() - start, in_resets


def reset_ms(resets):
    """Mean milliseconds of `reset()` over seeds 0..resets-1."""
    total = 0.0
    for seed in range(resets):
        env = crafter.Env(seed=seed)
        t = time.perf_counter()
        env.reset()
        total += time.perf_counter() - t
    return 1e3 * total / resets


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--resets", type=int, default=6)
    a = ap.parse_args()
    runs = {"end_to_end_sps": [], "step_render_sps": [], "reset_ms": [], "step_norender_sps": []}
    for _ in range(a.repeats):
        total, in_resets = random_steps(a.steps)
        runs["end_to_end_sps"].append(a.steps / total)
        runs["step_render_sps"].append(a.steps / max(total - in_resets, 1e-9))
        runs["reset_ms"].append(reset_ms(a.resets))
        total, in_resets = random_steps(a.steps, render=False)
        runs["step_norender_sps"].append(a.steps / max(total - in_resets, 1e-9))
    out = {k: statistics.median(v) for k, v in runs.items()}
    out.update(repeats=a.repeats, steps=a.steps, resets=a.resets)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
