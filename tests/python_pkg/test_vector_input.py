"""Actions and seeds as gymnasium's `SyncVectorEnv` takes them: any integer array of the right
length (strided, reversed, sliced, any integer dtype, a list) steps as the same int64 actions;
seeds are ints >= 0 or None, and anything else raises the error `SyncVectorEnv` raises
(gymnasium's `error.Error`), leaving the env as it was; an unseeded env never touches numpy's
global RNG."""
import gymnasium
import numpy as np
import pytest

import vlmcrafter  # noqa: F401  (registers the env id)
from support import SEEDS
from vlmcrafter import crafter as vc

ENV_ID = "vlmcrafter/Crafter-v1"
N = 4


def native(**kwargs):
    return gymnasium.make_vec(ENV_ID, num_envs=N, **kwargs)


def sync():
    return gymnasium.make_vec(ENV_ID, num_envs=N, vectorization_mode="sync")


def action_forms(base):
    """`base` (int64 (N,)) in every form a user may pass."""
    batch = np.stack([base, base[::-1]], axis=1)  # (N, 2): column 0 is base, strided
    wide = np.empty(2 * N, dtype=np.int64)
    wide[::2] = base
    yield "column of a batch", batch[:, 0]
    yield "every other", wide[::2]
    yield "reversed", base[::-1].copy()[::-1]
    yield "slice", np.concatenate([base, base])[N:]
    yield "list", [int(a) for a in base]
    yield "tuple", tuple(int(a) for a in base)
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64, np.intp):
        yield np.dtype(dtype).name, base.astype(dtype)
    yield "Fortran column", np.asfortranarray(batch)[:, 0]


def test_every_integer_action_form_steps_like_int64():
    reference = native(copy=False)
    reference.reset(seed=SEEDS[0])
    rng = np.random.RandomState(SEEDS[0] % 2 ** 32)
    steps = [rng.randint(0, 17, size=N).astype(np.int64) for _ in range(12)]
    want = []
    for a in steps:
        o, r, *_ = reference.step(a)
        want.append((o.tobytes(), r.tobytes()))
    for name, _ in action_forms(steps[0]):
        env = native()
        env.reset(seed=SEEDS[0])
        for t, a in enumerate(steps):
            form = dict(action_forms(a))[name]
            o, r, *_ = env.step(form)
            assert (o.tobytes(), r.tobytes()) == want[t], f"{name} step {t}"


@pytest.mark.parametrize("actions, error, words", [
    (np.zeros(N, dtype=np.float64), TypeError, "integers"),
    (np.zeros(N, dtype=bool), TypeError, "integers"),
    (["a"] * N, TypeError, "integers"),
    (np.zeros(N + 1, dtype=np.int64), ValueError, rf"shape \({N},\)"),
    (np.zeros((N, 1), dtype=np.int64), ValueError, rf"shape \({N},\)"),
    (np.full(N, 17, dtype=np.int32), ValueError, "17 is out of range"),
    (np.full(N, -1, dtype=np.int64), ValueError, "out of range"),
    (np.full(N, 300, dtype=np.uint16), ValueError, "300 is out of range"),
])
def test_bad_actions_leave_the_env_unchanged(actions, error, words):
    env = native(copy=False)
    env.reset(seed=SEEDS[1])
    before = env.unwrapped.obs.tobytes(), env.unwrapped.episodes
    with pytest.raises(error, match=words):
        env.step(actions)
    assert (env.unwrapped.obs.tobytes(), env.unwrapped.episodes) == before
    env.step(np.zeros(N, dtype=np.int64))  # still usable


@pytest.mark.parametrize("seed", [
    [1.5, 2.5, 3.5, 4.5], ["a", "b", "c", "d"], [-1, -2, -3, -4], -5, [0, 1, None, 1.0]])
def test_bad_seeds_raise_what_sync_raises(seed):
    ref = sync()
    with pytest.raises(Exception) as want:
        ref.reset(seed=seed)
    env = native(copy=False)
    env.reset(seed=SEEDS[2])
    before = env.unwrapped.obs.tobytes(), env.unwrapped.episodes, env.unwrapped.seeds
    with pytest.raises(type(want.value), match="seed") as got:
        env.reset(seed=seed)
    assert isinstance(got.value, gymnasium.error.Error)
    assert isinstance(got.value, (TypeError, ValueError))  # also the usual Python errors
    assert (env.unwrapped.obs.tobytes(), env.unwrapped.episodes, env.unwrapped.seeds) == before
    with pytest.raises(gymnasium.error.Error, match="seed"):
        vc.VectorEnv(N, seed=seed)


def test_big_seeds_in_numpy_range_are_accepted():
    env = native()
    for seed in (0, 2 ** 31, 2 ** 64 + 3, np.int64(5), np.uint64(2 ** 63)):
        env.reset(seed=seed)
        env.reset(seed=[seed, None, 1, 2])


def test_unseeded_envs_leave_numpy_global_rng_alone():
    np.random.seed(0)
    want = np.random.rand()
    np.random.seed(0)
    env = native()
    env.reset()
    env.reset(seed=[None] * N)
    env.step(np.zeros(N, dtype=np.int64))
    vc.VectorEnv(2).reset()
    assert np.random.rand() == want
    # Unseeded envs draw different seeds (fresh entropy, not a fixed default).
    assert native().unwrapped.seeds != native().unwrapped.seeds


@pytest.mark.parametrize("seed", [2.0, "7", b"7", object()])
def test_a_seed_that_is_neither_int_nor_list(seed):
    """SyncVectorEnv fails there on `len(seed)` (a bare AssertionError or TypeError); the native
    env raises the same gymnasium Error as for a bad seed in a list, naming the argument."""
    env = native()
    env.reset(seed=SEEDS[2])
    before = env.unwrapped.episodes, env.unwrapped.seeds
    with pytest.raises(gymnasium.error.Error, match="seed must be an int >= 0, a list of 4 seeds, or None"):
        env.reset(seed=seed)
    assert (env.unwrapped.episodes, env.unwrapped.seeds) == before
