#!/usr/bin/env python3
"""The vector recorder's cost: `VectorEnv(n)` stepped with random actions, with and without
`VectorRecorder` (stats.jsonl), in ONE run, interleaved in rounds so that load on a shared
machine falls on both alike. Prints env-steps/s of each and the ratio (median over rounds).

    python scripts/bench_recorder.py [--envs 64] [--size 64] [--steps 2000] [--rounds 7]

--steps is vector steps per round and contender. Needs the vlmcrafter package installed (and
crafter's textures, or --textures builtin).
"""
import argparse
import statistics
import tempfile
import time

import numpy as np

from vlmcrafter import crafter
from vlmcrafter.recorder import VectorRecorder


def timed(env, actions):
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    return time.perf_counter() - t0


class _Replay:
    """A stub vector env replaying recorded step results (for the recorder's own cost)."""

    def __init__(self, env, tape):
        self.num_envs, self.metadata, self.i = env.num_envs, env.metadata, 0
        self.achievement_names = env.achievement_names
        self._tape = tape

    def reset(self):
        return None

    def step(self, actions):
        r, te, tr, infos = self._tape[self.i]
        self.i += 1
        return None, r, te, tr, infos

    def close(self):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--textures", default=None)
    args = p.parse_args()
    n = args.envs
    kw = dict(seed=0, size=args.size, threads=args.threads, textures=args.textures)
    plain = crafter.VectorEnv(n, **kw)
    with tempfile.TemporaryDirectory() as folder:
        recorded = VectorRecorder(crafter.VectorEnv(n, **kw), folder)
        plain.reset()
        recorded.reset()
        rng = np.random.default_rng(0)
        timed(plain, rng.integers(0, 17, size=(200, n)))  # warm-up
        timed(recorded, rng.integers(0, 17, size=(200, n)))
        ratios, rates = [], {"plain": [], "recorder": []}
        for r in range(args.rounds):
            actions = rng.integers(0, 17, size=(args.steps, n))
            order = [("plain", plain), ("recorder", recorded)]
            if r % 2:
                order.reverse()
            t = {}
            for name, env in order:
                t[name] = timed(env, actions)
                rates[name].append(args.steps * n / t[name])
            ratios.append(t["recorder"] / t["plain"])
        episodes = recorded.episodes_recorded
        recorded.close()
        tape = [plain.step(a)[1:] for a in rng.integers(0, 17, size=(2000, n))]
        tape = [(r.copy(), te.copy(), tr.copy(), {k: (v.copy() if hasattr(v, "copy") else v) for k, v in i.items()})
                for r, te, tr, i in tape]
        stub = _Replay(plain, tape)
        alone = VectorRecorder(stub, folder)
        alone.reset()
        own = []
        for _ in range(args.rounds):
            stub.i = 0
            t0 = time.perf_counter()
            for _ in range(len(tape)):
                alone.step(None)
            own.append((time.perf_counter() - t0) / len(tape))
        stub.i = 0
        t0 = time.perf_counter()
        for _ in range(len(tape)):
            stub.step(None)
        stub_cost = (time.perf_counter() - t0) / len(tape)
    plain.close()
    print(f"VectorEnv({n}), {args.size} px, {args.rounds} rounds x {args.steps} steps, "
          f"threads={plain.threads if hasattr(plain, 'threads') else '?'}")
    print(f"  no recorder:   {statistics.median(rates['plain']):>12,.0f} env-steps/s (median)")
    print(f"  VectorRecorder:{statistics.median(rates['recorder']):>12,.0f} env-steps/s (median), "
          f"{episodes} episodes written")
    best_plain, best_rec = n / max(rates["plain"]), n / max(rates["recorder"])
    print(f"  best rounds: {best_plain * 1e6:.0f} us vs {best_rec * 1e6:.0f} us per vector step: ratio "
          f"{best_rec / best_plain:.3f} (every round's ratio: {', '.join(f'{x:.2f}' for x in ratios)})")
    rec_us = (min(own) - stub_cost) * 1e6
    print(f"  the recorder's own work: {rec_us:.1f} us per vector step (best of {args.rounds}; stub "
          f"{stub_cost * 1e6:.1f} us subtracted) = {100 * rec_us / (best_plain * 1e6):.1f} % of the env's "
          f"best {best_plain * 1e6:.0f} us per vector step")


if __name__ == "__main__":
    main()
