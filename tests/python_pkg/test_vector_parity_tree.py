"""The native vector env against gymnasium's own `SyncVectorEnv` over vlmcrafter's gymnasium
env, field for field: ONE walk over the whole `infos` tree (every key, mask, dtype, shape,
nesting and value, `final_obs` and `final_info` included) in all three autoreset modes, with and
without `obs_text`; the same after gymnasium's vector wrappers (`RecordEpisodeStatistics`,
`DictInfoToList`); `get_attr`/`call` answer the names the sync env's sub-envs answer.

`semantic` is the one field the native env leaves out unless asked (`semantic=True`): with it
the trees are identical, without it they differ by exactly `semantic`/`_semantic`.
"""
import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vwrappers

import vlmcrafter  # noqa: F401  (registers the env id)
from vlmcrafter.gym import CrafterState
from vlmcrafter.vector import VectorEnvState
from support import SEEDS

ENV_ID = "vlmcrafter/Crafter-v1"
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def native(n, mode, **kwargs):
    return gymnasium.make_vec(ENV_ID, num_envs=n, autoreset_mode=mode, **kwargs)


def sync(n, mode, **kwargs):
    return gymnasium.make_vec(ENV_ID, num_envs=n, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": mode}, **kwargs)


def walk(ours, ref, where, skip_values=(), drop=()):
    """Assert `ours` is `ref` in shape and value, recursively: dict keys (as sets; `drop` names
    keys `ref` may have and `ours` must not), list lengths, ndarray dtype, shape and bytes
    (object arrays item by item), scalars' types and values. `skip_values` names the paths
    whose values may differ (wall-clock times), dtype and shape still checked."""
    if isinstance(ref, dict):
        assert isinstance(ours, dict), f"{where}: {type(ours).__name__}, sync dict"
        want = set(ref) - set(drop)
        assert set(ours) == want, (
            f"{where}: keys only native {sorted(set(ours) - want)}, only sync {sorted(want - set(ours))}")
        for key in want:
            walk(ours[key], ref[key], f"{where}.{key}", skip_values, drop)
    elif isinstance(ref, (list, tuple)):
        assert type(ours) is type(ref) and len(ours) == len(ref), f"{where}: {type(ours).__name__} of {len(ours)}"
        for i, (o, r) in enumerate(zip(ours, ref)):
            walk(o, r, f"{where}[{i}]", skip_values, drop)
    elif isinstance(ref, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{where}: {type(ours).__name__}, sync ndarray"
        assert (ours.dtype, ours.shape) == (ref.dtype, ref.shape), (
            f"{where}: native {ours.dtype}{ours.shape}, sync {ref.dtype}{ref.shape}")
        if where.split(".")[-1] in skip_values:
            return
        if ref.dtype == object:
            for i, (o, r) in enumerate(zip(ours.ravel(), ref.ravel())):
                walk(o, r, f"{where}[{i}]", skip_values, drop)
        else:
            assert ours.tobytes() == ref.tobytes(), f"{where}: values differ: {ours!r} vs {ref!r}"
    else:
        assert type(ours) is type(ref), f"{where}: {type(ours).__name__}, sync {type(ref).__name__}"
        if where.split(".")[-1] not in skip_values:
            assert ours == ref, f"{where}: {ours!r} vs {ref!r}"


def play_side_by_side(ours, ref, n, mode, steps, seed, check):
    """Reset both with `seed`, step both with the same random actions (masked resets in
    DISABLED); `check(ours_out, ref_out, where)` compares each call's result. Returns the
    number of episode ends."""
    check(ours.reset(seed=seed), ref.reset(seed=seed), "reset")
    rng = np.random.RandomState(seed % 2 ** 32)
    ends = 0
    for t in range(steps):
        actions = rng.randint(0, 17, size=n)
        o, r = ours.step(actions), ref.step(actions.copy())
        check(o, r, f"step {t}")
        done = r[2] | r[3]
        ends += int(done.sum())
        if mode is AutoresetMode.DISABLED and done.any():
            check(ours.reset(options={"reset_mask": done.copy()}),
                  ref.reset(options={"reset_mask": done.copy()}), f"step {t} masked reset")
    return ends


@pytest.mark.parametrize("obs_text", [None, "state"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_infos_tree_equals_sync_vector_env(mode, obs_text):
    """Every field of every call's result, in each mode, with deaths (crafter's default length:
    random play dies within about 130-250 steps) and truncations (length 40) in the same run."""
    n, steps = 4, 260
    text = {} if obs_text is None else {"obs_text": obs_text}
    for semantic in (True, False):
        for length in (10000, 40):
            ours = native(n, mode, length=length, semantic=semantic, **text)
            ref = sync(n, mode, length=length, **text)
            drop = () if semantic else ("semantic", "_semantic")

            def check(o, r, where):
                assert len(o) == len(r), where
                for i, (a, b) in enumerate(zip(o, r)):
                    walk(a, b, f"{mode.name} length={length} semantic={semantic} {where} [{i}]", drop=drop)

            ends = play_side_by_side(ours, ref, n, mode, steps, SEEDS[0] + length, check)
            if length == 40:  # truncations at 40 steps: final_* and masked resets were walked
                assert ends >= n * (steps // 41)
            ours.close()
            ref.close()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_same_tree_after_gymnasium_vector_wrappers(mode):
    """RecordEpisodeStatistics (its `episode` entries: `t` is wall time, compared by dtype and
    shape) and DictInfoToList (a list of per-env dicts, built through the masks)."""
    n, steps = 3, 120

    def wrap(env):
        return vwrappers.DictInfoToList(vwrappers.RecordEpisodeStatistics(env))

    ours = wrap(native(n, mode, length=30, obs_text="balrog", semantic=True))
    ref = wrap(sync(n, mode, length=30, obs_text="balrog"))

    def check(o, r, where):
        for i, (a, b) in enumerate(zip(o, r)):
            walk(a, b, f"{mode.name} {where} [{i}]", skip_values=("t",))

    assert play_side_by_side(ours, ref, n, mode, steps, SEEDS[1], check) >= n
    # The statistics the wrapper kept agree too.
    assert list(ours.env.return_queue) == list(ref.env.return_queue)
    assert list(ours.env.length_queue) == list(ref.env.length_queue)


def test_get_attr_and_call_answer_the_sync_names():
    """Every public attribute or method the sync env's sub-envs answer (its wrapper plumbing
    aside), the native env answers with the same values; the vector env's own reset, step and
    close are refused with a pointer to them; get_state/set_state answer per sub-env, as the
    sync env's sub-envs do; names sync refuses are refused."""
    n, s = 2, SEEDS[2]
    ours = native(n, AutoresetMode.NEXT_STEP, render_mode="rgb_array", obs_text="state")
    ref = sync(n, AutoresetMode.NEXT_STEP, render_mode="rgb_array", obs_text="state")
    ours.reset(seed=s)
    ref.reset(seed=s)
    # gymnasium's wrapper plumbing, and the bookkeeping of its env checker (PassiveEnvChecker)
    plumbing = {"env", "class_name", "wrapper_spec", "get_wrapper_attr", "has_wrapper_attr",
                "set_wrapper_attr", "checked_data_reuse", "checked_render", "checked_reset",
                "checked_step", "close_called"}
    own = {"reset", "step", "close"}
    states = {"get_state", "set_state"}

    def layers(env):  # call/get_attr answer through every wrapper (get_wrapper_attr): TimeLimit
        while True:   # (the ids' max_episode_steps), OrderEnforcing (has_reset), the checker
            yield env
            if not isinstance(env, gymnasium.Wrapper):
                return
            env = env.env

    names = {name for env in ref.envs for layer in layers(env) for name in dir(layer) if not name.startswith("_")}
    assert states <= names
    answered = sorted(names - plumbing - own - states)
    assert {"observation_space", "action_space", "render_mode", "obs_text", "metadata", "spec",
            "np_random", "np_random_seed", "text", "render", "unwrapped", "has_reset"} <= set(answered)
    for name in answered:
        want = ref.get_attr(name)
        got = ours.get_attr(name)
        assert len(got) == n, name
        if name == "unwrapped":
            assert all(u is ours for u in got)
        elif name == "spec":
            assert all(g.id == w.id for g, w in zip(got, want))
        elif name == "np_random":
            assert [g.bit_generator.state for g in got] == [w.bit_generator.state for w in want]
        else:
            walk(got, want, f"get_attr({name!r})")
    walk(ours.call("text", "balrog"), ref.call("text", "balrog"), "call('text', 'balrog')")
    for name in own:
        with pytest.raises(AttributeError, match=f"envs.{name}"):
            ours.call(name)
    # the states: a tuple of one state per sub-env from both (each env its own kind: the sync
    # env's CrafterState, the native env's VectorEnvState of one sub-env); call("set_state",
    # state) sets one on every sub-env in both (test_vector_state.py plays them on alike)
    assert all(isinstance(state, CrafterState) for state in ref.call("get_state"))
    for got in (ours.call("get_state"), ours.get_attr("get_state")):
        assert type(got) is tuple and len(got) == n
        assert all(isinstance(s, VectorEnvState) and s.index == i for i, s in enumerate(got))
    assert ours.call("set_state", got[1]) == ref.call("set_state", ref.call("get_state")[1]) == (None,) * n
    for env in (ours, ref):
        with pytest.raises(TypeError):  # set_state without its state
            env.get_attr("set_state")
    for name in ("episode", "seed", "semantic", "area", "nope"):
        with pytest.raises(AttributeError):
            ref.get_attr(name)
        with pytest.raises(AttributeError, match=repr(name)):
            ours.get_attr(name)
    ours.close()
    ref.close()
