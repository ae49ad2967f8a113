#!/usr/bin/env python3
"""Reference traces from Python crafter 1.8.3, in the JSONL format of `vlm-eval env trace`.

  python scripts/crafter_reference_trace.py --seed 7 --steps 1000 --action-seed 0 --size 64

Records: one `reset` record at the start and after every `done`, one `step` record per
env.step(). Actions are `numpy.random.RandomState(action_seed).randint(0, 17)`, one per step.

Stock crafter despawns `creatures[randint(0, n)]` from a list built by iterating a Python set,
whose order depends on memory addresses, so stock crafter is not reproducible even against
itself. Like vlm-eval, this tracer uses the canonical order: creatures sorted by object id
(creation order). `--immortal` refills health to 9 before each step (both sides implement it)
so that one episode can run to the length limit; `--actions do,noop,...` cycles fixed actions.
"""
import argparse
import hashlib
import json
import sys

import numpy as np

import crafter


def digest(data):
    return hashlib.sha256(data).hexdigest()


def rng_digest(rng):
    _, key, pos, _, _ = rng.get_state()
    return digest(np.asarray(key, dtype='<u4').tobytes() + np.int32(pos).astype('<i4').tobytes())


def use_creation_order(env):
    original = env._balance_object

    def balance(chunk, objs, cls, *args, **kwargs):
        order = {id(obj): i for i, obj in enumerate(env._world._objects) if obj is not None}
        return original(chunk, sorted(objs, key=lambda obj: order[id(obj)]), cls, *args, **kwargs)

    env._balance_object = balance


def class_name(obj):
    return type(obj).__name__.lower()


def player_state(env):
    player = env._player
    return {
        'pos': [int(v) for v in player.pos],
        'facing': [int(v) for v in player.facing],
        'sleeping': bool(player.sleeping),
        'inventory': {name: int(n) for name, n in player.inventory.items()},
        'hunger': float(player._hunger),
        'thirst': float(player._thirst),
        'fatigue': float(player._fatigue),
        'recover': float(player._recover),
    }


def on_reset(env, obs):
    world = env._world
    world_seed = hash((env._seed, env._episode)) % (2 ** 31 - 1)
    objects = [{'kind': class_name(o), 'pos': [int(v) for v in o.pos], 'health': int(o.health)}
               for o in world._objects if o is not None]
    counts = {}
    for obj in objects:
        counts[obj['kind']] = counts.get(obj['kind'], 0) + 1
    return {
        'type': 'reset',
        'episode': env._episode,
        'env_seed': env._seed,
        'world_seed': world_seed,
        'simplex_seed': int(np.random.RandomState(world_seed).randint(0, 2 ** 31 - 1)),
        'daylight': float(world.daylight),
        'mat_map_sha256': digest(world._mat_map.tobytes()),
        'mat_counts': {name: int((world._mat_map == i).sum())
                       for name, i in world._mat_ids.items() if name is not None},
        'object_counts': counts,
        'objects': objects,
        'player': player_state(env),
        'frame_sha256': digest(obs.tobytes()),
        'frame_shape': list(obs.shape),
        'rng_sha256': rng_digest(world.random),
    }


def on_step(env, action, obs, reward, done, info):
    live = env._world.objects
    return {
        'type': 'step',
        'episode': env._episode,
        't': env._step,
        'action': action,
        'action_name': crafter.constants.actions[action],
        'reward': float(reward),
        'done': bool(done),
        'discount': float(info['discount']),
        'daylight': float(env._world.daylight),
        'player': player_state(env),
        'achievements': {k: int(v) for k, v in info['achievements'].items() if v > 0},
        'unlocked': sorted(env._unlocked),
        'n_objects': len(live),
        'object_counts': {kind: sum(1 for o in live if class_name(o) == kind)
                          for kind in ('cow', 'zombie', 'skeleton', 'arrow', 'plant')},
        'semantic_sha256': digest(info['semantic'].tobytes()),
        'frame_sha256': digest(obs.tobytes()),
        'rng_sha256': rng_digest(env._world.random),
    }


def pair(values):
    return values if len(values) == 2 else [values[0], values[0]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--action-seed', type=int, default=0)
    parser.add_argument('--size', type=int, nargs='+', default=[64])
    parser.add_argument('--area', type=int, nargs=2, default=[64, 64])
    parser.add_argument('--view', type=int, nargs=2, default=[9, 9])
    parser.add_argument('--length', type=int, default=10000)
    parser.add_argument('--immortal', action='store_true')
    parser.add_argument('--actions', default=None,
                        help='comma-separated action ids or names, cycled, instead of random ones')
    parser.add_argument('--out', default='-')
    args = parser.parse_args()

    env = crafter.Env(area=tuple(args.area), view=tuple(args.view), size=tuple(pair(args.size)),
                      length=args.length, seed=args.seed)
    use_creation_order(env)
    actions = np.random.RandomState(args.action_seed)
    out = sys.stdout if args.out == '-' else open(args.out, 'w')

    def write(record):
        out.write(json.dumps(record, separators=(',', ':')) + '\n')

    names = crafter.constants.actions
    cycle = None
    if args.actions:
        cycle = [int(a) if a.strip().isdigit() else names.index(a.strip())
                 for a in args.actions.split(',')]
    write(on_reset(env, env.reset()))
    for t in range(args.steps):
        if cycle:
            action = cycle[t % len(cycle)]
        else:
            action = int(actions.randint(0, len(names)))
        if args.immortal and env._player.health < 9:
            env._player.health = 9
        obs, reward, done, info = env.step(action)
        write(on_step(env, action, obs, reward, done, info))
        if done:
            write(on_reset(env, env.reset()))
    out.flush()


if __name__ == '__main__':
    main()
