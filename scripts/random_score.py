#!/usr/bin/env python3
"""The Crafter paper's Random row, reproduced: a uniform random policy for 1M env steps per run
on vlmcrafter's native vector env, logged by the vector recorder to crafter's stats.jsonl, and
scored as the paper scores it (success rates, score, reward, length).

    python scripts/random_score.py                       # 1 run of 1M steps, 16 envs
    python scripts/random_score.py --runs 10 --out logs/random    # 10 seeds, score ± std
    vlm-eval score logs/random                            # the same numbers from the CLI

Needs the vlmcrafter package installed (pip install . from a checkout) and crafter's textures
(found as the CLI finds them; --textures builtin uses vlm-eval's own sprites: the play is the
same, only the pixels differ). Run r uses env seeds seed*1000 + 100*r + i and its own action
stream. Env steps are counted as the paper counts them, per env and per episode step: the
NEXT_STEP reset steps (which ignore their action) are not counted.

The paper (Hafner 2021) reports the Random agent's score as 1.6 ± 0.0 % (1M steps per seed).
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np

from vlmcrafter import crafter, score
from vlmcrafter.recorder import VectorRecorder

PAPER_RANDOM_SCORE = "1.6 ± 0.0 %"


def run_once(out, run, args):
    n = args.envs
    seeds = [args.seed * 1000 + 100 * run + i for i in range(n)]
    textures = None if args.textures is None else args.textures
    env = VectorRecorder(crafter.VectorEnv(n, seed=seeds, size=args.size, threads=args.threads,
                                           textures=textures), out)
    rng = np.random.default_rng(args.seed * 1000 + run)
    env.reset()
    pending = np.zeros(n, bool)
    steps = 0
    chunk = 4096
    while steps < args.steps:
        block = rng.integers(0, 17, size=(chunk, n))
        for actions in block:
            _, _, term, trunc, _ = env.step(actions)
            steps += n - int(pending.sum())
            pending = term | trunc
            if steps >= args.steps:
                break
    env.close()
    return steps, env.episodes_recorded


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1_000_000, help="env steps per run (default 1M)")
    p.add_argument("--runs", type=int, default=1, help="runs (seeds), each --steps long (default 1)")
    p.add_argument("--envs", type=int, default=16, help="envs in the vector env (default 16)")
    p.add_argument("--threads", type=int, default=None, help="worker threads (default: the cores)")
    p.add_argument("--size", type=int, default=64, help="frame size in pixels (default 64)")
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--textures", default=None, help="crafter's assets folder, or 'builtin'")
    p.add_argument("--out", default="logs/random", help="log folder; run r writes OUT/run<r>/stats.jsonl")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    args = p.parse_args()
    root = pathlib.Path(args.out)
    existing = sorted(root.rglob("stats.jsonl")) if root.exists() else []
    if existing:
        sys.exit(f"random_score: {existing[0]} exists: stats are appended, so give a fresh --out")
    t0 = time.perf_counter()
    total = 0
    for run in range(args.runs):
        t = time.perf_counter()
        steps, episodes = run_once(root / f"run{run}", run, args)
        total += steps
        print(f"run {run}: {steps} env steps, {episodes} episodes, {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
    wall = time.perf_counter() - t0
    m = score.compute(root)
    if args.json:
        print(json.dumps(dict(m, wall_s=wall, env_steps=total)))
        return
    print(f"{args.runs} run(s), {total} env steps, {m['episodes']} episodes, {wall:.1f} s "
          f"({total / wall:,.0f} env steps/s)")
    spread = f" ± {m['score_std']:.2f}" if m["score_std"] is not None else ""
    print(f"score  {m['score']:.2f}{spread} %   (paper's Random: {PAPER_RANDOM_SCORE})")
    print(f"reward {m['reward_mean']:.2f} ± {m['reward_std']:.2f}   length {m['length_mean']:.1f} ± {m['length_std']:.1f}")
    for name, rate in m["success_rates"].items():
        print(f"  {name:<22} {rate:6.2f} %")


if __name__ == "__main__":
    main()
