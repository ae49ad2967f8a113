"""The vector env as gymnasium sees it: `gymnasium.make_vec("vlmcrafter/Crafter-v1")` gives the
native `VectorEnv`, a `gymnasium.vector.VectorEnv`; in each autoreset mode it plays what
gymnasium's own `SyncVectorEnv` over the single env plays (frames, rewards, flags, infos,
`final_obs`/`final_info`), and gymnasium's own vector wrappers run on it with the statistics of
single-env runs on the same seeds.
"""
import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vwrappers

import vlmcrafter  # noqa: F401  (registers the env id)
from support import SEEDS, assert_same_frame, living_seed
from vlmcrafter import crafter as vc
from vlmcrafter import vector as vv

ENV_ID = "vlmcrafter/Crafter-v1"
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
KEYS = ("reward", "discount", "player_pos")


def native(n, mode=AutoresetMode.NEXT_STEP, **kwargs):
    return gymnasium.make_vec(ENV_ID, num_envs=n, autoreset_mode=mode, **kwargs)


def sync(n, mode=AutoresetMode.NEXT_STEP, **kwargs):
    return gymnasium.make_vec(ENV_ID, num_envs=n, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": mode}, **kwargs)


def test_make_vec_is_the_native_gymnasium_vector_env():
    env = native(3)
    assert type(env) is vc.VectorEnv and vc.VectorEnv is vv.VectorEnv
    assert isinstance(env, gymnasium.vector.VectorEnv)
    assert env.num_envs == 3 and env.unwrapped is env
    assert env.spec is not None and env.spec.id == ENV_ID
    assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert env.single_observation_space == gymnasium.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    assert env.single_action_space == gymnasium.spaces.Discrete(17)
    assert env.observation_space == gymnasium.spaces.Box(0, 255, (3, 64, 64, 3), np.uint8)
    assert env.action_space == gymnasium.spaces.MultiDiscrete([17, 17, 17])
    # The same spaces gymnasium's SyncVectorEnv builds from the single env.
    ref = sync(3)
    assert env.observation_space == ref.observation_space
    assert env.action_space == ref.action_space
    obs, infos = env.reset(seed=SEEDS[0])
    assert env.observation_space.contains(obs)
    assert isinstance(env.np_random, np.random.Generator)
    assert env.np_random_seed == SEEDS[0]
    for key in ("reward", "discount", "player_pos", "inventory", "achievements"):
        assert key in infos and infos[f"_{key}"].dtype == np.bool_ and infos[f"_{key}"].all()
    env.close()
    assert env.closed
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("name, want", [
    ("NEXT_STEP", AutoresetMode.NEXT_STEP), ("SAME_STEP", AutoresetMode.SAME_STEP),
    ("DISABLED", AutoresetMode.DISABLED), ("NextStep", AutoresetMode.NEXT_STEP),
    ("same_step", AutoresetMode.SAME_STEP), ("Disabled", AutoresetMode.DISABLED),
    (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP)])
def test_autoreset_mode_by_name(name, want):
    env = native(2, mode=name)
    assert env.metadata["autoreset_mode"] is want and env.autoreset_mode is want


def compare_infos(ours, ref, n, where, mask_key="_discount"):
    """`ours` against SyncVectorEnv's (both dicts of arrays; every field in
    test_vector_parity_tree.py)."""
    mask = ref[mask_key]
    for key in KEYS:
        assert (ours[f"_{key}"] == ref[f"_{key}"]).all(), f"{where}: _{key}"
        assert (ours[key][mask] == ref[key][mask]).all(), f"{where}: {key}"
    for key, names in (("inventory", vc.ITEM_NAMES), ("achievements", vc.ACHIEVEMENT_NAMES)):
        assert (ours[f"_{key}"] == ref[f"_{key}"]).all(), f"{where}: _{key}"
        for name in names:
            assert (ours[key][name][mask] == ref[key][name][mask]).all(), f"{where}: {key}.{name}"


def check_against_sync(mode, n, length, steps, seed):
    """Step the native env and gymnasium's SyncVectorEnv over the single env side by side."""
    ours, ref = native(n, mode, length=length), sync(n, mode, length=length)
    o_obs, o_info = ours.reset(seed=seed)
    r_obs, r_info = ref.reset(seed=seed)
    assert o_obs.tobytes() == r_obs.tobytes()
    compare_infos(o_info, r_info, n, "reset")
    rng = np.random.RandomState(seed % 2 ** 32)
    ends = 0
    for t in range(steps):
        actions = rng.randint(0, 17, size=n)
        o_obs, o_rew, o_term, o_trunc, o_info = ours.step(actions)
        r_obs, r_rew, r_term, r_trunc, r_info = ref.step(actions)
        here = f"{mode.name} step {t}"
        for i in range(n):
            assert_same_frame(r_obs[i], o_obs[i], f"{here} env {i}")
        assert o_rew.dtype == np.float64 and (o_rew == r_rew).all(), f"{here}: {o_rew} vs {r_rew}"
        assert (o_term == r_term).all() and (o_trunc == r_trunc).all(), here
        compare_infos(o_info, r_info, n, here)
        assert ("final_obs" in o_info) == ("final_obs" in r_info), here
        if "final_obs" in r_info:
            assert (o_info["_final_obs"] == r_info["_final_obs"]).all(), here
            assert (o_info["_final_info"] == r_info["_final_info"]).all(), here
            for i in np.flatnonzero(r_info["_final_obs"]):
                assert_same_frame(r_info["final_obs"][i], o_info["final_obs"][i], f"{here} final_obs {i}")
            compare_infos(o_info["final_info"], r_info["final_info"], n, f"{here} final_info")
        done = o_term | o_trunc
        ends += int(done.sum())
        if mode is AutoresetMode.DISABLED and done.any():
            o_obs, o_info = ours.reset(options={"reset_mask": done})
            r_obs, r_info = ref.reset(options={"reset_mask": done.copy()})
            assert o_obs.tobytes() == r_obs.tobytes(), f"{here}: masked reset"
            compare_infos(o_info, r_info, n, f"{here} masked reset")
    ours.close()
    ref.close()
    return ends


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("length", [10000, 45])
def test_each_mode_equals_sync_vector_of_single_envs(mode, length):
    """Deaths (crafter's default length: random play dies within about 130-250 steps) and
    truncations (length 45), in each mode, against gymnasium's own SyncVectorEnv."""
    n, steps = 4, 400
    ends = check_against_sync(mode, n, length, steps, SEEDS[0])
    # Deaths: at least one per env on average; truncations: every env, every 45-46 steps.
    assert ends >= (n if length == 10000 else n * (steps // (length + 1)))


def episodes_of_single(seed, actions_per_env, length):
    """(return, length) of each finished episode of a single env playing `actions`."""
    env = vc.Env(seed=seed, length=length)
    env.reset()
    out, total, steps = [], 0.0, 0
    for a in actions_per_env:
        _, reward, done, _ = env.step(a)
        total += reward
        steps += 1
        if done:
            out.append((total, steps))
            env.reset()
            total, steps = 0.0, 0
    return out


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_record_episode_statistics_equals_single_envs(mode):
    """gymnasium's own vector RecordEpisodeStatistics on the native env: each env's episode
    returns and lengths are those of a single crafter Env on its seed playing the actions it
    applied (next-step autoreset ignores the action of the reset step)."""
    n, length, seed = 3, 60, SEEDS[1]
    env = vwrappers.RecordEpisodeStatistics(native(n, mode, length=length), buffer_length=1000)
    env.reset(seed=seed)
    rng = np.random.RandomState(7)
    applied = [[] for _ in range(n)]
    recorded = [[] for _ in range(n)]
    prev_done = np.zeros(n, dtype=bool)
    for _ in range(400):
        actions = rng.randint(0, 17, size=n)
        for i in range(n):
            if not (mode is AutoresetMode.NEXT_STEP and prev_done[i]):
                applied[i].append(int(actions[i]))
        _, _, term, trunc, infos = env.step(actions)
        done = term | trunc
        if done.any():
            assert (infos["_episode"] == done).all()
            for i in np.flatnonzero(done):
                recorded[i].append((float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])))
        if mode is AutoresetMode.DISABLED and done.any():
            env.reset(options={"reset_mask": done})
        prev_done = done
    total = 0
    for i in range(n):
        want = episodes_of_single(seed + i, applied[i], length)
        assert recorded[i] == want, f"env {i}: {recorded[i]} vs single env {want}"
        total += len(want)
    assert total >= 3 * n
    assert env.episode_count == total
    assert sorted(env.length_queue) == sorted(l for r in recorded for _, l in r)


def test_dict_info_to_list_reads_the_masks():
    """gymnasium's DictInfoToList turns the dict of arrays into per-env dicts through the `_key`
    masks: each env's dict holds its own values (final_info too, same-step)."""
    n = 3
    env = vwrappers.DictInfoToList(native(n, AutoresetMode.SAME_STEP, length=5))
    base = env.unwrapped
    _, infos = env.reset(seed=living_seed(SEEDS[2], [[1] * 5] * n, length=5))  # all truncated at 5
    assert isinstance(infos, list) and len(infos) == n
    assert [infos[1]["inventory"][k] for k in vc.ITEM_NAMES] == [9, 9, 9, 9] + [0] * 12
    for t in range(5):
        _, _, _, trunc, infos = env.step(np.full(n, 1))
    assert trunc.all()
    for i in range(n):
        assert "final_obs" in infos[i] and infos[i]["final_obs"].shape == (64, 64, 3)
        assert list(infos[i]["final_info"]["achievements"]) == list(base.achievement_names)
        assert sum(infos[i]["achievements"].values()) == 0  # the new episode's


def test_transform_and_normalize_observation_wrappers():
    n = 2
    env = native(n, length=50)
    single = gymnasium.spaces.Box(0.0, 1.0, (64, 64, 3), np.float32)
    space = gymnasium.spaces.Box(0.0, 1.0, (n, 64, 64, 3), np.float32)
    wrapped = vwrappers.TransformObservation(env, lambda o: o.astype(np.float32) / 255.0, space,
                                             single)
    obs, _ = wrapped.reset(seed=SEEDS[0])
    assert obs.dtype == np.float32 and np.array_equal(obs, env.obs.astype(np.float32) / 255.0)
    rng = np.random.RandomState(0)
    for _ in range(20):
        obs, *_ = wrapped.step(rng.randint(0, 17, size=n))
        assert np.array_equal(obs, env.obs.astype(np.float32) / 255.0)
    norm = vwrappers.NormalizeObservation(native(n, length=50))
    norm.reset(seed=SEEDS[0])
    frames = [norm.unwrapped.obs.astype(np.float64).copy()]
    for _ in range(30):
        norm.step(rng.randint(0, 17, size=n))
        frames.append(norm.unwrapped.obs.astype(np.float64).copy())
    seen = np.concatenate(frames)
    assert np.allclose(norm.obs_rms.mean, seen.mean(axis=0), atol=1e-3)


def test_make_vec_wrappers_in_sync_mode():
    """`make_vec(..., wrappers=[...])` wraps single envs, which gymnasium allows only with
    vectorization_mode="sync"/"async"; the native env's own entry point refuses it (gymnasium's
    rule), and vector wrappers go around the native env instead."""
    double = lambda e: gymnasium.wrappers.TransformReward(e, lambda r: 2 * r)  # noqa: E731
    env = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", wrappers=[double])
    plain = native(2)
    env.reset(seed=SEEDS[1])
    plain.reset(seed=SEEDS[1])
    rng = np.random.RandomState(3)
    rewards = 0
    for _ in range(150):
        a = rng.randint(0, 17, size=2)
        _, r2, *_ = env.step(a)
        _, r1, *_ = plain.step(a)
        assert (r2 == 2 * r1).all()
        rewards += np.abs(r1).sum()
    assert rewards > 0
    with pytest.raises(gymnasium.error.Error, match="wrappers"):
        gymnasium.make_vec(ENV_ID, num_envs=2, wrappers=[double])
    scaled = vwrappers.TransformReward(native(2), lambda r: 2 * r)
    scaled.reset(seed=SEEDS[1])
    assert scaled.step(np.zeros(2, dtype=np.int64))[1].shape == (2,)


def test_obs_buffer_zero_copy_under_make_vec():
    for mode in MODES:
        env = native(3, mode, length=8, copy=False)
        obs, _ = env.reset(seed=SEEDS[0])
        assert obs is env.unwrapped.obs
        for t in range(30):
            again, _, term, trunc, _ = env.step(np.full(3, t % 17))
            assert again is obs, mode
            if mode is AutoresetMode.DISABLED and (term | trunc).any():
                again, _ = env.reset(options={"reset_mask": term | trunc})
                assert again is obs


def test_seeding_like_sync():
    """reset(seed=int) seeds env i with seed + i; a list seeds each; None goes on with each env's
    sequence; a None in a list keeps that env's sequence."""
    n, s = 3, SEEDS[2]
    env = native(n)
    obs, _ = env.reset(seed=s)
    first = obs.copy()
    for i in range(n):
        assert_same_frame(vc.Env(seed=s + i).reset(), obs[i], f"env {i}")
    obs, _ = env.reset()  # episode 2 of each
    for i in range(n):
        e = vc.Env(seed=s + i)
        e.reset()
        assert_same_frame(e.reset(), obs[i], f"env {i} episode 2")
    obs, _ = env.reset(seed=[s, None, 5])
    assert_same_frame(first[0], obs[0], "reseeded env 0")
    e = vc.Env(seed=s + 1)
    for _ in range(3):
        want = e.reset()
    assert_same_frame(want, obs[1], "env 1 went on to episode 3")
    assert_same_frame(vc.Env(seed=5).reset(), obs[2], "env 2 seed 5")
    assert env.unwrapped.seeds == [s, s + 1, 5]
    assert env.unwrapped.episodes == [1, 3, 1]


def test_call_get_attr_set_attr_render():
    n, s = 2, SEEDS[0]
    env = native(n, render_mode="rgb_array", obs_text="state")
    obs, infos = env.reset(seed=s)
    singles = [gymnasium.make(ENV_ID, obs_text="state") for _ in range(n)]
    for i, single in enumerate(singles):
        _, info = single.reset(seed=s + i)
        assert infos["text"][i] == info["text"]
        assert env.call("text", "state")[i] == info["text"]
        assert env.unwrapped.semantic_map(i).tobytes() == info["semantic"].tobytes()
    frames = env.render()
    assert isinstance(frames, tuple) and len(frames) == n
    assert all(f.tobytes() == obs[i].tobytes() for i, f in enumerate(frames))
    assert env.get_attr("observation_space") == (env.single_observation_space,) * n
    assert env.get_attr("render_mode") == ("rgb_array",) * n
    assert env.unwrapped.episodes == [1, 1]
    env.unwrapped.episodes = [4, 9]
    assert env.unwrapped.episodes == [4, 9]
    env.reset()
    want = vc.Env(seed=s + 1)
    for _ in range(10):  # episode 10: set to 9, then one reset
        frame = want.reset()
    assert_same_frame(frame, env.obs[1], "env 1 after episodes = [4, 9] and a reset")
    env.unwrapped.episodes = 0
    assert env.unwrapped.episodes == [0, 0]
    with pytest.raises(AttributeError, match="nope"):
        env.get_attr("nope")
    with pytest.warns(UserWarning, match="render_mode"):
        assert native(1).render() is None


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_achievements_at_the_episode_end(mode):
    """The counts at the ending step are in the ending step's infos (next-step, disabled) or in
    final_info (same-step): what the vector recorder reads."""
    n, length = 2, 40
    rng = np.random.RandomState(5)
    acts = rng.randint(0, 17, size=(length, n))

    def survives(seed, actions):  # about 1 seed in 150 walks into lava before step 40
        single = vc.Env(seed=seed, length=length)
        single.reset()
        return not any(single.step(int(a))[2] for a in actions[:-1])

    seed = next(s for s in range(SEEDS[1], SEEDS[1] + 50)
                if all(survives(s + i, acts[:, i]) for i in range(n)))
    env = native(n, mode, length=length)
    env.reset(seed=seed)
    for row in acts:
        _, _, term, trunc, infos = env.step(row)
    assert (term | trunc).all()
    ended = infos["final_info"] if mode is AutoresetMode.SAME_STEP else infos
    for i in range(n):
        single = vc.Env(seed=seed + i, length=length)
        single.reset()
        for a in acts[:, i]:
            _, _, done, info = single.step(int(a))
        assert done
        assert ({k: int(v[i]) for k, v in ended["achievements"].items() if k[0] != "_"}
                == info["achievements"])
        assert {k: int(v[i]) for k, v in ended["inventory"].items() if k[0] != "_"} == info["inventory"]


def test_without_gymnasium_still_works():
    """With gymnasium hidden, the same class works on its stand-in base."""
    import subprocess
    import sys
    code = ("import sys\n"
            "sys.modules['gymnasium'] = None\n"
            "import numpy as np\n"
            "from vlmcrafter import crafter\n"
            "env = crafter.VectorEnv(2, seed=1, length=5, autoreset_mode='SAME_STEP')\n"
            "obs, infos = env.reset()\n"
            "for _ in range(5):\n"
            "    obs, r, term, trunc, infos = env.step(np.array([1, 2]))\n"
            "assert trunc.all() and infos['_final_obs'].all(), infos.keys()\n"
            "assert env.metadata['autoreset_mode'] == 'SameStep'\n"
            "assert isinstance(env.np_random, np.random.Generator)\n"
            "print('ok', type(env).__mro__[1].__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "_Base"]
