"""Copies of a stepped single env continue the same episode exactly, as crafter 1.8.3's own
`copy.deepcopy` does: `deepcopy`, `pickle` and `get_state()`/`set_state()` of the drop-in
`crafter.Env`, checked against crafter's deepcopy on the 200 steps after the copy (frames,
rewards, done and info); the gymnasium `CrafterEnv` (through `gymnasium.make`'s wrappers) against
its original; a state of another configuration is refused."""
import copy
import pickle

import gymnasium
import pytest

import vlmcrafter  # noqa: F401  (registers the ids)
from support import SEEDS, actions_for, assert_same_frame, assert_same_info, reference_env
from vlmcrafter import crafter as vc

BEFORE, AFTER = 190, 200  # the copy is taken at night (daylight ~0.1), where render draws RNG


def patched_copy(ref):
    """crafter's deepcopy of the reference env, with the reference's despawn-order patch (a
    closure over the original env) made again for the copy."""
    dup = copy.deepcopy(ref)
    del dup._balance_object
    original = dup._balance_object

    def balance(chunk, objs, cls, *args, **kw):
        order = {id(obj): i for i, obj in enumerate(dup._world._objects) if obj is not None}
        return original(chunk, sorted(objs, key=lambda obj: order[id(obj)]), cls, *args, **kw)

    dup._balance_object = balance
    return dup


def ours_copy(env, how):
    if how == "deepcopy":
        return copy.deepcopy(env)
    if how == "pickle":
        return pickle.loads(pickle.dumps(env))
    if how == "set_state":
        other = vc.Env(seed=SEEDS[2] + 1)  # another seed: the state brings its own
        other.set_state(env.get_state())
        return other
    if how == "pickled state":
        other = vc.Env(seed=1)
        other.set_state(pickle.loads(pickle.dumps(env.get_state())))
        return other
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "set_state", "pickled state"])
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_copy_continues_like_crafters_deepcopy(seed, how):
    actions = actions_for(seed + 7, BEFORE + AFTER)
    ref, ours = reference_env(seed=seed), vc.Env(seed=seed)
    ref.reset(), ours.reset()
    for t, a in enumerate(actions[:BEFORE]):
        ref.step(a), ours.step(a)
        if t % 37 == 0:  # renders are part of the state (at night they draw the game RNG)
            assert_same_frame(ref.render(), ours.render(), f"render at {t}")
    assert_same_frame(ref.render((80, 72)), ours.render((80, 72)), "render(80, 72)")
    ref_copy, copied = patched_copy(ref), ours_copy(ours, how)
    # The originals go another way; a copy that shared their state would show it.
    for a in actions[:50]:
        ours.step((a + 3) % 17)
    for t, a in enumerate(actions[BEFORE:]):
        want, got = ref_copy.step(a), copied.step(a)
        where = f"{how}, step {t} after the copy"
        assert_same_frame(want[0], got[0], where)
        assert got[1] == want[1] and type(got[1]) is type(want[1]), f"{where}: reward {got[1]} vs {want[1]}"
        assert bool(got[2]) == bool(want[2]), f"{where}: done"
        assert_same_info(want[3], got[3], where)
        if want[2]:
            assert_same_frame(ref_copy.reset(), copied.reset(), f"{where}: reset")


def test_copy_between_episodes_and_before_reset():
    env = vc.Env(seed=SEEDS[0], length=20)
    fresh = copy.deepcopy(env)  # never reset: copies the seed and the episode count
    assert fresh.reset().tobytes() == vc.Env(seed=SEEDS[0], length=20).reset().tobytes()
    env.reset()
    for a in actions_for(SEEDS[0], 20):
        env.step(a)
    for dup in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert dup.episode == env.episode == 1
        assert dup.reset().tobytes() == copy.deepcopy(env).reset().tobytes()
        assert dup.episode == 2


def test_state_is_reusable_and_unchanged():
    """A planner branches from one state many times."""
    env = vc.Env(seed=SEEDS[1])
    env.reset()
    for a in actions_for(SEEDS[1], 30):
        env.step(a)
    state = env.get_state()
    assert (state.episode, state.step_count) == (1, 30)
    branches = []
    for _ in range(3):
        env.set_state(state)
        branches.append([env.step(a)[0].tobytes() for a in (5, 5, 1, 3)])
    assert branches[0] == branches[1] == branches[2]
    assert (state.episode, state.step_count) == (1, 30)


@pytest.mark.parametrize("kwargs,named", [
    (dict(size=(80, 80)), "size"),
    (dict(view=(7, 7)), "view"),
    (dict(area=(48, 48)), "area"),
    (dict(length=50), "length"),
    (dict(reward=False), "reward"),
])
def test_state_of_another_configuration_is_refused(kwargs, named):
    source = vc.Env(seed=3)
    source.reset()
    target = vc.Env(seed=4, **kwargs)
    first = target.reset()
    with pytest.raises(ValueError, match=rf"set_state: the state is of another configuration: {named}="):
        target.set_state(source.get_state())
    # Unchanged: it goes on with its own episode.
    again = vc.Env(seed=4, **kwargs)
    assert again.reset().tobytes() == first.tobytes()
    assert target.step(0)[0].tobytes() == again.step(0)[0].tobytes()
    with pytest.raises(TypeError, match="EnvState"):
        target.set_state({"not": "a state"})


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "set_state"])
def test_gymnasium_env_copies_continue(how):
    env = gymnasium.make("vlmcrafter/Crafter-v1", obs_text="state")
    env.reset(seed=SEEDS[0])
    actions = actions_for(SEEDS[0] + 1, 300)
    for a in actions[:100]:
        env.step(a)
    if how == "deepcopy":
        dup = copy.deepcopy(env)
    elif how == "pickle":
        dup = pickle.loads(pickle.dumps(env))
    else:
        dup = gymnasium.make("vlmcrafter/Crafter-v1", obs_text="state")
        dup.reset(seed=SEEDS[1])  # gymnasium's wrappers want a reset before a step
        dup.unwrapped.set_state(env.unwrapped.get_state())
    for t, a in enumerate(actions[100:]):
        want, got = env.step(a), dup.step(a)
        assert_same_frame(want[0], got[0], f"{how} step {t}")
        assert got[1:4] == want[1:4], f"{how} step {t}"
        assert_same_info(want[4], got[4], f"{how} step {t}")
        if want[2] or want[3]:
            want_obs, got_obs = env.reset()[0], dup.reset()[0]  # unseeded: np_random came along
            assert_same_frame(want_obs, got_obs, f"{how} reset")
