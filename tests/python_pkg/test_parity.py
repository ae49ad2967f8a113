"""`from vlmcrafter import crafter` against Python crafter 1.8.3: frames byte for byte, rewards,
done and every `info` key with its type, dtype and shape, on the drawn seeds (see support.py).
"""
import numpy as np
import pytest

from support import (SEEDS, actions_for, assert_same_frame, assert_same_info,
                     assert_same_value, reference_env)
from vlmcrafter import crafter as vc


def play(ref, ours, actions, where, render_every=0, render_size=None):
    """Step both envs through `actions`, resetting both on done; compare everything.

    Returns (episodes finished by death, episodes finished by the length limit).
    """
    assert_same_frame(ref.reset(), ours.reset(), f"{where} reset 0")
    deaths = truncations = 0
    resets = 0
    for t, action in enumerate(actions):
        here = f"{where} step {t} action {action}"
        r_obs, r_rew, r_done, r_info = ref.step(action)
        result = ours.step(action)
        assert type(result) is tuple and len(result) == 4, f"{here}: step returned {result!r:.80}"
        o_obs, o_rew, o_done, o_info = result
        assert_same_frame(r_obs, o_obs, here)
        assert_same_value(r_rew, o_rew, f"{here}: reward")
        assert_same_value(r_done, o_done, f"{here}: done")
        assert_same_info(r_info, o_info, here)
        if render_every and t % render_every == 0:
            # At night render() draws noise from the world's RNG: parity must survive it.
            assert_same_frame(ref.render(render_size), ours.render(render_size), f"{here} render")
        if r_done:
            if r_info["discount"] == 0:
                deaths += 1
            else:
                truncations += 1
            resets += 1
            assert_same_frame(ref.reset(), ours.reset(), f"{where} reset {resets}")
    return deaths, truncations


@pytest.mark.parametrize("seed", SEEDS)
def test_dropin_parity_default(seed, assets):
    """crafter's defaults, a random action stream of 600 steps (resets on done). Random play
    dies within about 130-250 steps (40 of 40 seed and action-stream pairs tried), so this
    crosses deaths and the resets after them."""
    ref = reference_env(seed=seed)
    ours = vc.Env(seed=seed, textures=assets)
    deaths, truncations = play(ref, ours, actions_for(seed, 600), f"seed {seed}")
    print(f"seed {seed}: 600 steps identical, {deaths} deaths, {truncations} truncations")
    assert deaths >= 1, "no death in 600 random steps: the test no longer crosses one"


@pytest.mark.parametrize("seed", SEEDS)
def test_dropin_parity_geometry_length_reward(seed, assets):
    """Another geometry, a short length (many episodes: the per-reset seed increment),
    reward=False, and render(size) calls in between (night frames draw from the RNG)."""
    kwargs = dict(area=(48, 40), view=(9, 7), size=(90, 72), reward=False, length=70, seed=seed)
    ref = reference_env(**kwargs)
    ours = vc.Env(**kwargs, textures=assets)
    assert tuple(ours.observation_space.shape) == tuple(ref.observation_space.shape)
    deaths, truncations = play(ref, ours, actions_for(seed + 1, 400), f"seed {seed} {kwargs}",
                               render_every=7, render_size=(96, 96))
    # Each episode lasts at most 70 steps, so 400 steps end at least five of them; how many
    # end by death rather than by length depends on the drawn seed (one gave 1 and 4).
    assert deaths + truncations >= 5, (deaths, truncations)


def test_step_after_done_like_crafter(assets):
    """crafter keeps stepping after done (done stays True past the length); so does ours."""
    ref = reference_env(seed=SEEDS[0], length=15)
    ours = vc.Env(seed=SEEDS[0], length=15, textures=assets)
    assert_same_frame(ref.reset(), ours.reset(), "reset")
    for t, action in enumerate(actions_for(SEEDS[0], 25)):
        r = ref.step(action)
        o = ours.step(action)
        assert_same_frame(r[0], o[0], f"step {t}")
        assert_same_value(r[1], o[1], f"step {t}: reward")
        assert_same_value(r[2], o[2], f"step {t}: done")
        assert_same_info(r[3], o[3], f"step {t}")
    assert r[2] is True


def test_seed_none_draws_like_crafter(assets):
    """seed=None: crafter draws np.random.randint(0, 2**31 - 1); the same global draw gives the
    same world."""
    np.random.seed(SEEDS[0] % 2 ** 32)
    ref = reference_env()
    np.random.seed(SEEDS[0] % 2 ** 32)
    ours = vc.Env(textures=assets)
    assert_same_frame(ref.reset(), ours.reset(), "reset")
    for t, action in enumerate(actions_for(SEEDS[0], 20)):
        assert_same_frame(ref.step(action)[0], ours.step(action)[0], f"step {t}")


def test_spaces_and_names_like_crafter(assets):
    ref = reference_env(seed=1, size=(80, 96))
    ours = vc.Env(seed=1, size=(80, 96), textures=assets)
    assert ours.action_space.n == ref.action_space.n == 17
    assert tuple(ours.observation_space.shape) == tuple(ref.observation_space.shape)
    assert np.dtype(ours.observation_space.dtype) == np.uint8
    assert list(ours.action_names) == list(ref.action_names)
    assert_same_frame(ref.reset(), ours.reset(), "reset 80x96")
    assert_same_frame(ref.render(), ours.render(), "render()")
    assert_same_frame(ref.render((128, 128)), ours.render((128, 128)), "render((128, 128))")
