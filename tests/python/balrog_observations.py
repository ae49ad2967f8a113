"""BALROG's own observation texts for many (seed, actions) jobs in one process.

    python balrog_observations.py SHARED_BALROG_DIR < jobs.jsonl > observations.jsonl

Each input line is {"seed": S, "actions": [crafter ids]}; each output line is
{"seed": S, "obs": [{"step", "long_term_context", "short_term_context", "image_sha256"}, ...]}
(the sha256 of the image's RGB bytes, height x width x 3): the observation
after BALROG's reset (which plays one Noop), then one per action until the episode ends.
It runs BALROG's Crafter language wrapper (frames at BALROG's 256 px: the wrapper renders twice
per step and at night each render draws from the game's RNG, so the size shapes the game) through SHARED_BALROG_DIR/balrog_reference.py (its
wrapper loader and creation-order balancing) on Python crafter 1.8.3, as that script's main()
does for one seed; only the loop over jobs is ours. Needs a Python with crafter==1.8.3.
"""
import hashlib
import json
import sys

import numpy as np


def main():
    shared = sys.argv[1]
    sys.path.insert(0, shared)
    import balrog_reference as ref
    import crafter

    mod = ref.load_wrapper()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        env = crafter.Env(area=(64, 64), view=(9, 9), size=(256, 256), reward=True, seed=job["seed"])
        ref.creation_order_balancing(env)
        wrapper = mod.CrafterLanguageWrapper(env, "default", max_episode_steps=10000)
        out = []

        def emit(obs):
            t = obs["text"]
            image = np.asarray(obs["image"], dtype=np.uint8)
            out.append({"step": int(env._step), "long_term_context": t["long_term_context"],
                        "short_term_context": t["short_term_context"],
                        "image_sha256": hashlib.sha256(image.tobytes()).hexdigest()})

        emit(wrapper.reset())
        for a in job["actions"]:
            obs, _, done, _ = wrapper.step(mod.ACTIONS[a])
            emit(obs)
            if done:
                break
        print(json.dumps({"seed": job["seed"], "obs": out}), flush=True)


if __name__ == "__main__":
    main()
