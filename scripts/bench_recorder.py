#!/usr/bin/env python3
"""The vector recorder's cost: `VectorEnv(n)` stepped with random actions, with and without
`VectorRecorder` (stats.jsonl), in ONE run, interleaved in rounds so that load on a shared
machine falls on both alike. Both envs have the same seeds and get the same actions, so they do
the same engine work. Prints env-steps/s of each and the ratios (best rounds, and the median of
the rounds' ratios), then the cost of the recorder's own bookkeeping (the path it takes for a
vector env other than vlmcrafter's) on a replay stub.

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
    kw = dict(seed=0, size=args.size, threads=args.threads, textures=args.textures, copy=False)
    plain = crafter.VectorEnv(n, **kw)
    with tempfile.TemporaryDirectory() as folder:
        recorded = VectorRecorder(crafter.VectorEnv(n, **kw), folder)
        plain.reset()
        recorded.reset()
        rng = np.random.default_rng(0)
        # Both envs get the same seeds and the SAME actions from the start, so they pass through
        # the same states and do the same engine work (resets included, which are a large and
        # uneven share of a round): the only difference between them is the recorder.
        warm = rng.integers(0, 17, size=(200, n))
        timed(plain, warm)
        timed(recorded, warm)
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
        # In place: the recorder's own time per step in the real loop (its wall time minus the
        # wrapped env's step, timed inside it), caches and worker threads as they really are.
        inner, inner_step, spent = recorded.env, recorded.env.step, [0.0]

        def timed_inner(a):
            t0 = time.perf_counter()
            out = inner_step(a)
            spent[0] += time.perf_counter() - t0
            return out

        inner.step = timed_inner
        in_place = []
        for _ in range(args.rounds):
            actions = rng.integers(0, 17, size=(args.steps, n))
            spent[0] = 0.0
            total = timed(recorded, actions)
            in_place.append((total - spent[0]) / args.steps)
        del inner.step
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
          f"{best_rec / best_plain:.3f}; median of the rounds' ratios {statistics.median(ratios):.3f} "
          f"(every round's: {', '.join(f'{x:.2f}' for x in ratios)})")
    print(f"  the recorder's own time in the loop (its step's wall time minus the env's step inside "
          f"it): median {statistics.median(in_place) * 1e6:.1f} us per vector step over {args.rounds} "
          f"rounds ({', '.join(f'{x * 1e6:.1f}' for x in in_place)}) = "
          f"{100 * statistics.median(in_place) / best_plain:.2f} % of the env's best vector step")
    rec_us = (min(own) - stub_cost) * 1e6
    print(f"  the recorder counting episodes itself (its path for any other gymnasium vector env; "
          f"on a replay stub): {rec_us:.1f} us per vector step (best of {args.rounds}; stub "
          f"{stub_cost * 1e6:.1f} us subtracted) = {100 * rec_us / (best_plain * 1e6):.1f} % of the env's "
          f"best {best_plain * 1e6:.0f} us per vector step")


if __name__ == "__main__":
    main()
