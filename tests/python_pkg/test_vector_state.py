"""Copies and states of the native vector env (issue 49): `copy.deepcopy`, `pickle` and
`get_state()`/`set_state()` of a stepped `VectorEnv` continue every sub-env's episode exactly, as
crafter 1.8.3's own `copy.deepcopy` does for each of n envs (frames, rewards, done and info for
200 steps after the copy, the copy and the original going on independently, across autoresets
in all three modes); the copy equals an uncopied twin in everything else (the whole infos tree
with text, episode counters, the seeds' generators, `copy=`, `max_episode_steps`); per-sub-env
states; `call("get_state")`/`call("set_state")` as gymnasium's `SyncVectorEnv`; a state of
another configuration and every other bad input refused with the env unchanged."""
import copy
import pickle
import threading
import time

import gymnasium
import numpy as np
import pytest

import vlmcrafter  # noqa: F401  (registers the env id)
from support import SEEDS, assert_same_frame, reference_env
from vlmcrafter import crafter as vc
from vlmcrafter.vector import VectorEnvState

ENV_ID = "vlmcrafter/Crafter-v1"
MODES = ["NEXT_STEP", "SAME_STEP", "DISABLED"]
HOWS = ["deepcopy", "pickle", "set_state"]
N, LENGTH = 2, 100
BEFORE, AFTER = LENGTH, 200  # copied on the step that truncates every surviving episode


def copy_of(envs, how, **kwargs):
    """`envs` copied `how`; set_state goes into a new env of other seeds (the state brings its own)."""
    if how == "deepcopy":
        return copy.deepcopy(envs)
    if how == "pickle":
        return pickle.loads(pickle.dumps(envs))
    if how == "set_state":
        other = vc.VectorEnv(envs.num_envs, seed=SEEDS[2] + 99, **kwargs)
        other.set_state(envs.get_state())
        return other
    raise AssertionError(how)


def crafter_copy(ref):
    """crafter's deepcopy of a reference env, its despawn-order patch made again for the copy."""
    dup = copy.deepcopy(ref)
    del dup._balance_object
    original = dup._balance_object

    def balance(chunk, objs, cls, *args, **kw):
        if len(objs) > 1:  # (one or none is in order already: most calls, each step)
            order = {id(obj): i for i, obj in enumerate(dup._world._objects) if obj is not None}
            objs = sorted(objs, key=lambda obj: order[id(obj)])
        return original(chunk, objs, cls, *args, **kw)

    dup._balance_object = balance
    return dup


class Crafters:
    """n Python crafter 1.8.3 envs stepped as the vector env steps its sub-envs in `mode`."""

    def __init__(self, refs, mode):
        self.refs, self.mode = refs, mode
        self.pending = [False] * len(refs)  # ended on the last step (next step / masked reset)

    def copy(self):
        dup = Crafters([crafter_copy(r) for r in self.refs], self.mode)
        dup.pending = list(self.pending)
        return dup


def same_state_info(ref, infos, i, where):
    """The vector infos' entry `i` against a crafter env's own state (after a reset crafter
    returns no info: its player is read instead)."""
    player = ref._player
    assert infos["discount"][i] == (0.0 if player.health <= 0 else 1.0), where
    assert tuple(infos["player_pos"][i]) == tuple(int(v) for v in player.pos), where
    assert [int(infos["inventory"][k][i]) for k in vc.ITEM_NAMES] == [player.inventory[k] for k in vc.ITEM_NAMES], where
    assert ([int(infos["achievements"][k][i]) for k in vc.ACHIEVEMENT_NAMES]
            == [player.achievements[k] for k in vc.ACHIEVEMENT_NAMES]), where
    assert infos["semantic"][i].tobytes() == ref._sem_view().tobytes(), f"{where}: semantic"


def same_info(info, infos, i, where):
    assert infos["reward"][i] == info["reward"], f"{where}: info reward"
    assert infos["discount"][i] == info["discount"], f"{where}: discount"
    assert tuple(infos["player_pos"][i]) == tuple(info["player_pos"]), f"{where}: player_pos"
    assert [int(infos["inventory"][k][i]) for k in vc.ITEM_NAMES] == [info["inventory"][k] for k in vc.ITEM_NAMES], where
    assert ([int(infos["achievements"][k][i]) for k in vc.ACHIEVEMENT_NAMES]
            == [info["achievements"][k] for k in vc.ACHIEVEMENT_NAMES]), where
    assert infos["semantic"][i].tobytes() == info["semantic"].tobytes(), f"{where}: semantic"


def step_both(envs, crafters, actions, where):
    """One vector step against the crafter envs (DISABLED: the envs that ended are reset with a
    mask first, as a training loop does); asserts frames, rewards, flags and infos."""
    if crafters.mode == "DISABLED" and any(crafters.pending):
        mask = np.array(crafters.pending)
        obs, infos = envs.reset(options={"reset_mask": mask})
        for i in np.flatnonzero(mask):
            assert_same_frame(crafters.refs[i].reset(), obs[i], f"{where} masked reset {i}")
            same_state_info(crafters.refs[i], infos, i, f"{where} masked reset {i}")
        crafters.pending = [False] * len(crafters.refs)
    obs, rewards, terminated, truncated, infos = envs.step(actions)
    for i, ref in enumerate(crafters.refs):
        here = f"{where}, env {i}"
        if crafters.pending[i]:  # NEXT_STEP: the step after the end resets, its action ignored
            assert_same_frame(ref.reset(), obs[i], f"{here} (autoreset)")
            assert rewards[i] == 0 and not terminated[i] and not truncated[i], here
            same_state_info(ref, infos, i, here)
            crafters.pending[i] = False
            continue
        frame, reward, done, info = ref.step(int(actions[i]))
        assert rewards[i] == reward, f"{here}: reward {rewards[i]} vs crafter {reward}"
        dead = info["discount"] == 0
        assert (bool(terminated[i]), bool(truncated[i])) == (bool(done) and dead, bool(done) and not dead), here
        if done and crafters.mode == "SAME_STEP":
            assert_same_frame(frame, infos["final_obs"][i], f"{here} final_obs")
            same_info(info, infos["final_info"], i, f"{here} final_info")
            assert_same_frame(ref.reset(), obs[i], f"{here} (same-step reset)")
            same_state_info(ref, infos, i, here)
            continue
        assert_same_frame(frame, obs[i], here)
        same_info(info, infos, i, here)
        crafters.pending[i] = bool(done)


# Python crafter makes a world in about 0.3 s: each mode once, deepcopy and pickle each twice
# (set_state, and every mode with every way, against the uncopied twin below).
@pytest.mark.parametrize("mode,how", [("NEXT_STEP", "deepcopy"), ("NEXT_STEP", "pickle"),
                                      ("SAME_STEP", "deepcopy"), ("DISABLED", "pickle")])
def test_copies_continue_like_crafters_deepcopy(mode, how):
    seed = SEEDS[0]
    kwargs = dict(length=LENGTH, autoreset_mode=mode, semantic=True, obs_text="state", threads=2)
    envs = vc.VectorEnv(N, seed=seed, **kwargs)
    crafters = Crafters([reference_env(seed=seed + i, length=LENGTH) for i in range(N)], mode)
    obs, _ = envs.reset()
    for i, ref in enumerate(crafters.refs):
        assert_same_frame(ref.reset(), obs[i], f"reset {i}")
    rng = np.random.RandomState(seed % 2**32)
    for t in range(BEFORE):
        step_both(envs, crafters, rng.randint(0, 17, size=N), f"step {t}")
    dup, ref_dup = copy_of(envs, how, **kwargs), crafters.copy()
    assert dup.episodes == envs.episodes and dup.finished_episodes() == envs.finished_episodes()
    # The copy plays one action stream, the original another, interleaved: a copy that shared
    # any state with its original would show it.
    other = np.random.RandomState(seed % 2**32 + 1)
    for t in range(AFTER):
        step_both(dup, ref_dup, rng.randint(0, 17, size=N), f"{how} copy, step {t} after the copy")
        step_both(envs, crafters, other.randint(0, 17, size=N), f"original, step {t} after the copy")
    assert min(dup.episodes) >= 3 and min(envs.episodes) >= 3  # autoresets after the copy


def same_tree(ours, want, where):
    """The same value: dict keys, ndarray dtype/shape/bytes (object arrays item by item), scalars."""
    if isinstance(want, dict):
        assert isinstance(ours, dict) and set(ours) == set(want), f"{where}: keys {sorted(ours)} vs {sorted(want)}"
        for key in want:
            same_tree(ours[key], want[key], f"{where}.{key}")
    elif isinstance(want, (list, tuple)):
        assert type(ours) is type(want) and len(ours) == len(want), where
        for i, (o, w) in enumerate(zip(ours, want)):
            same_tree(o, w, f"{where}[{i}]")
    elif isinstance(want, np.ndarray):
        assert isinstance(ours, np.ndarray) and (ours.dtype, ours.shape) == (want.dtype, want.shape), where
        if want.dtype == object:
            for i, (o, w) in enumerate(zip(ours.ravel(), want.ravel())):
                same_tree(o, w, f"{where}[{i}]")
        else:
            assert ours.tobytes() == want.tobytes(), f"{where}: {ours!r} vs {want!r}"
    else:
        assert type(ours) is type(want) and ours == want, f"{where}: {ours!r} vs {want!r}"


def play(env, actions, where, twin=None):
    """Step `env` (and `twin` alike, compared result for result), resetting ended envs with a
    mask under DISABLED."""
    for t, a in enumerate(actions):
        if env.unwrapped.autoreset_mode.value == "Disabled" and any(env.unwrapped._core.pending_reset):
            mask = np.array(env.unwrapped._core.pending_reset)
            got = env.reset(options={"reset_mask": mask})
            if twin is not None:
                same_tree(got, twin.reset(options={"reset_mask": mask}), f"{where} masked reset at {t}")
        got = env.step(a)
        if twin is not None:
            same_tree(tuple(x.copy() if isinstance(x, np.ndarray) else x for x in got), twin.step(a), f"{where} step {t}")


def rng_states(env):
    return [g.bit_generator.state for g in env.get_attr("np_random")] + [env.unwrapped.np_random.bit_generator.state]


@pytest.mark.parametrize("how", HOWS + ["set_state per env"])
@pytest.mark.parametrize("mode", MODES)
def test_copy_equals_an_uncopied_twin(mode, how):
    """Everything a copy carries, against a twin that never was copied and got the same calls:
    the infos tree (text, final_obs/final_info), episode counters, finished episodes, the
    seeds' generators (`np_random`, each sub-env's), `copy=False` with its own buffer, and
    make_vec's `max_episode_steps` cap."""
    kwargs = dict(num_envs=N, autoreset_mode=mode, obs_text="state", copy=False, max_episode_steps=25, threads=2)
    env, twin = gymnasium.make_vec(ENV_ID, **kwargs), gymnasium.make_vec(ENV_ID, **kwargs)
    for e in (env, twin):
        e.reset(seed=SEEDS[1])
        e.get_attr("np_random")  # drawn from their seeds, as the sync env's sub-envs'
    actions = np.random.RandomState(SEEDS[1] % 2**32).randint(0, 17, size=(200, N))
    play(env, actions[:37], "before", twin)
    if how == "set_state per env":
        dup = gymnasium.make_vec(ENV_ID, **kwargs)
        dup.reset(seed=SEEDS[2])
        for i in range(N):
            dup.unwrapped.set_state(env.unwrapped.get_state(i), i)
    else:
        dup = copy_of(env.unwrapped, how, **{k: v for k, v in kwargs.items() if k not in ("num_envs", "max_episode_steps")},
                      **({"length": 25} if how == "set_state" else {}))
    assert dup.copy is False and dup.obs is not env.unwrapped.obs
    assert dup.obs.tobytes() == env.unwrapped.obs.tobytes()
    assert dup.episodes == env.unwrapped.episodes
    assert dup.seeds == env.unwrapped.seeds
    if how != "set_state per env":
        assert dup.finished_episodes() == env.unwrapped.finished_episodes()
        assert rng_states(dup) == rng_states(env)
    if how in ("deepcopy", "pickle"):  # the spaces are the env's, not part of a state
        assert dup.action_space.sample().tolist() == env.unwrapped.action_space.sample().tolist()
    before = dup.obs.copy()
    play(env, (actions[37:60] + 5) % 17, "the original going on")  # must not touch the copy
    assert dup.obs.tobytes() == before.tobytes()
    play(dup, actions[37:], f"{how} copy", twin)
    assert max(dup.episodes) >= 5  # episodes capped at 25 steps: autoresets after the copy
    # Unseeded resets continue each sub-env's own seed; seeded ones reseed all.
    same_tree(dup.reset(), twin.reset(), "reset()")
    same_tree(dup.reset(seed=7), twin.reset(seed=7), "reset(seed=7)")
    play(dup, actions[:30], "after reset(seed=7)", twin)


def stepped(n=3, **kwargs):
    env = vc.VectorEnv(n, seed=SEEDS[0], **kwargs)
    env.reset()
    play(env, np.random.RandomState(SEEDS[0] % 2**32).randint(0, 17, size=(10, n)), "setup")
    return env


def fingerprint(env):
    """What a refused call must leave unchanged: frames, counters, and the next step's results."""
    twin = copy.deepcopy(env)
    obs, rewards, *_ = twin.step(np.arange(env.num_envs) % 17)
    return env.obs.tobytes(), env.episodes, env.seeds, obs.tobytes(), rewards.tobytes()


def test_per_env_states_branch_and_move_between_envs():
    """A planner's use: one sub-env's state set into another sub-env (or another env with other
    n) continues as that sub-env did; branching from one state repeats exactly."""
    env = stepped(3)
    state = env.get_state(1)
    assert isinstance(state, VectorEnvState) and not state.whole and state.index == 1 and state.num_envs == 1
    assert state.episodes == [env.episodes[1]]
    taken = (state.episodes, state.step_counts)
    frame1 = env.obs[1].copy()
    other = vc.VectorEnv(5, seed=SEEDS[1])
    other.reset()
    other.set_state(state, 4)
    assert other.obs[4].tobytes() == frame1.tobytes() and other.seeds[4] == env.seeds[1]
    branches = []
    for _ in range(3):
        env.set_state(state, 0)
        got = [env.step(np.array([a, 0, 0]))[0][0].tobytes() for a in (5, 5, 1, 3, 2)]
        branches.append(got)
    assert branches[0] == branches[1] == branches[2]
    theirs = [other.step(np.array([0, 0, 0, 0, a]))[0][4].tobytes() for a in (5, 5, 1, 3, 2)]
    assert theirs == branches[0]
    assert (state.episodes, state.step_counts) == taken  # the state is not changed by its uses


def test_call_get_state_and_set_state_as_sync_vector_env():
    """gymnasium's SyncVectorEnv.call runs `name(*args)` on each sub-env: `call("get_state")` is
    a tuple of each sub-env's state, `call("set_state", state)` sets that state on every
    sub-env. The native env and the sync env, both set to their env 0's state, then play alike."""
    ours = gymnasium.make_vec(ENV_ID, num_envs=3)
    ref = gymnasium.make_vec(ENV_ID, num_envs=3, vectorization_mode="sync")
    ours.reset(seed=SEEDS[2])
    ref.reset(seed=SEEDS[2])
    actions = np.random.RandomState(3).randint(0, 17, size=(40, 3))
    for a in actions[:20]:
        ours.step(a), ref.step(a)
    # SyncVectorEnv keeps its next-step autoreset flags itself (a sub-env's set_state does not
    # carry them): set the states where no episode just ended.
    for _ in range(50):
        *_, term, trunc, _ = ours.step(np.zeros(3, dtype=np.int64))
        ref.step(np.zeros(3, dtype=np.int64))
        if not (term | trunc).any():
            break
    got, want = ours.call("get_state"), ref.call("get_state")
    assert type(got) is tuple and len(got) == len(want) == 3
    assert [s.index for s in got] == [0, 1, 2]
    assert [len(g) for g in (ours.get_attr("get_state"), ref.get_attr("get_state"))] == [3, 3]
    assert ours.call("set_state", got[0]) == ref.call("set_state", want[0]) == (None, None, None)
    for t, a in enumerate(actions[20:]):
        o, w = ours.step(a), ref.step(a)
        assert o[0].tobytes() == w[0].tobytes(), f"step {t}"
        assert o[1].tolist() == w[1].tolist() and o[2].tolist() == w[2].tolist(), f"step {t}"
    with pytest.raises(TypeError, match="takes no arguments"):
        ours.call("get_state", 1)
    with pytest.raises(TypeError, match="one sub-env's state"):
        ours.call("set_state")
    with pytest.raises(TypeError, match="one sub-env's state"):
        ours.get_attr("set_state")
    with pytest.raises(AttributeError, match="read-only"):
        ours.set_attr("get_state", [1, 2, 3])


@pytest.mark.parametrize("kwargs,named", [
    (dict(size=(80, 80)), "size"),
    (dict(view=(7, 7)), "view"),
    (dict(area=(48, 48)), "area"),
    (dict(length=50), "length"),
    (dict(reward=False), "reward"),
    (dict(textures="builtin"), "textures"),
    (dict(autoreset_mode="SAME_STEP"), "autoreset_mode"),
    (dict(n=4), "num_envs"),
])
def test_state_of_another_configuration_is_refused(kwargs, named):
    source = stepped(3)
    kwargs = dict(kwargs)
    n = kwargs.pop("n", 3)
    target = stepped(n, **kwargs)
    before = fingerprint(target)
    with pytest.raises(ValueError, match=rf"set_state: the state is of another configuration: {named}=.*\(this env: "):
        target.set_state(source.get_state())
    assert fingerprint(target) == before
    if named != "num_envs":  # one sub-env's state may go into an env of another n, not of another setting
        with pytest.raises(ValueError, match=rf"another configuration: {named}="):
            target.set_state(source.get_state(0), 1)
        assert fingerprint(target) == before
    else:
        target.set_state(source.get_state(0), 1)
        assert target.obs[1].tobytes() == source.obs[0].tobytes()


def test_what_may_differ_between_state_and_env():
    """copy, threads, obs_text and semantic are not part of the state."""
    source = stepped(3, copy=True, threads=1)
    target = vc.VectorEnv(3, seed=1, copy=False, threads=3, obs_text="balrog", semantic=True)
    target.set_state(source.get_state())
    assert target.obs.tobytes() == source.obs.tobytes()
    a = np.array([1, 2, 3])
    want, got = source.step(a), target.step(a)
    assert want[0].tobytes() == got[0].tobytes() and want[1].tolist() == got[1].tolist()
    assert "text" in got[4] and "semantic" in got[4] and "text" not in want[4]


@pytest.mark.parametrize("call,error,match", [
    (lambda env, s, one: env.set_state({"not": "a state"}), TypeError, r"set_state takes a VectorEnvState .* not dict"),
    (lambda env, s, one: env.set_state(None), TypeError, r"VectorEnvState .*not NoneType"),
    (lambda env, s, one: env.set_state(vc.Env().get_state()), TypeError, r"not EnvState"),
    (lambda env, s, one: env.set_state(one), ValueError, r"state of one sub-env \(get_state\(2\)\): give the index"),
    (lambda env, s, one: env.set_state(s, 0), ValueError, r"state of a whole vector env .* without an index"),
    (lambda env, s, one: env.set_state(one, 3), IndexError, r"index 3 is out of range for 3 envs"),
    (lambda env, s, one: env.set_state(one, -1), IndexError, r"index -1 is out of range"),
    (lambda env, s, one: env.set_state(one, "0"), TypeError, r"index must be None .* not str"),
    (lambda env, s, one: env.set_state(one, True), TypeError, r"index must be None .* not bool"),
    (lambda env, s, one: env.get_state(7), IndexError, r"get_state: env index 7 is out of range"),
    (lambda env, s, one: env.get_state(1.0), TypeError, r"index must be None .* not float"),
])
def test_bad_state_input_is_one_clear_error_and_changes_nothing(call, error, match):
    env = stepped(3)
    state, one = env.get_state(), env.get_state(2)
    before = fingerprint(env)
    with pytest.raises(error, match=match):
        call(env, state, one)
    assert fingerprint(env) == before


def test_per_env_state_before_reset_and_whole_state_before_reset():
    fresh = vc.VectorEnv(2, seed=SEEDS[1])
    with pytest.raises(RuntimeError, match=r"get_state\(index\) before reset\(\)"):
        fresh.get_state(0)
    with pytest.raises(RuntimeError, match=r"set_state\(index\) before reset\(\)"):
        fresh.set_state(stepped(2).get_state(0), 0)
    # The whole env's state of a never-reset env: its copies start the same first episodes.
    blank = fresh.get_state()
    assert blank.episodes == [0, 0]
    target = stepped(2)
    target.set_state(blank)
    with pytest.raises(RuntimeError, match="before reset"):
        target.step(np.zeros(2, dtype=np.int64))
    assert target.reset()[0].tobytes() == fresh.reset()[0].tobytes()
    for dup in (copy.deepcopy(vc.VectorEnv(2, seed=5)), pickle.loads(pickle.dumps(vc.VectorEnv(2, seed=5)))):
        assert dup.reset()[0].tobytes() == vc.VectorEnv(2, seed=5).reset()[0].tobytes()


def test_states_deepcopy_and_pickle():
    env = stepped(3)
    for state in (env.get_state(), env.get_state(1)):
        for dup in (copy.deepcopy(state), pickle.loads(pickle.dumps(state))):
            assert (dup.whole, dup.index, dup.episodes, dup.step_counts) == (
                state.whole, state.index, state.episodes, state.step_counts)
            a, b = copy.deepcopy(env), copy.deepcopy(env)
            a.set_state(state, state.index)
            b.set_state(dup, dup.index)
            acts = np.array([4, 5, 6])
            assert a.step(acts)[0].tobytes() == b.step(acts)[0].tobytes()
    assert "VectorEnvState(env 1" in repr(env.get_state(1))


def test_closed_env_refuses_state_and_copies():
    env = stepped(2)
    state, one = env.get_state(), env.get_state(0)
    env.close()
    for call in (env.get_state, lambda: env.get_state(0), lambda: env.set_state(state),
                 lambda: env.set_state(one, 0), lambda: copy.deepcopy(env), lambda: pickle.dumps(env),
                 lambda: env.call("get_state")):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    target = stepped(2)
    target.set_state(state)  # the state outlives its env
    assert target.episodes == state.episodes


def test_state_calls_from_a_second_thread_are_refused():
    env = vc.VectorEnv(512, seed=SEEDS[0], copy=False)
    env.reset()
    state = env.get_state(0)
    box = {}

    def run():
        try:
            for _ in range(3):
                env.reset()
        except Exception as e:  # noqa: BLE001  (reported through box)
            box["error"] = e

    first = threading.Thread(target=run)
    first.start()
    while first.is_alive() and not env._guard.locked():
        time.sleep(0.001)
    refused = 0
    while first.is_alive():
        for call in (env.get_state, lambda: env.set_state(state, 0), lambda: copy.deepcopy(env)):
            try:
                call()
            except RuntimeError as e:
                assert "busy" in str(e) and "another thread" in str(e), e
                refused += 1
        time.sleep(0.01)
    first.join()
    assert "error" not in box and refused > 0
    env.set_state(state, 1)  # free again
    env.close()
