"""`crafter.Recorder` against crafter 1.8.3's own `crafter.Recorder` on the same seeds and
actions: the same stats.jsonl lines, .npz episodes with the same arrays (keys, dtypes, shapes,
values), and mp4 videos made from the same frames (and, with the same encoder, the same bytes).
Episode files are named with a timestamp: contents and the name's `-ach<n>-len<n>` are compared.
"""
import pathlib
import sys

import numpy as np
import pytest

from support import SEEDS, actions_for, reference_env
from vlmcrafter import crafter as vc
from vlmcrafter import recorder as vrec

try:
    import imageio
    import imageio_ffmpeg  # noqa: F401
    VIDEO = True
except ImportError:
    VIDEO = False


def play(env, actions):
    """Step through `actions`, resetting on done; returns the episodes finished."""
    env.reset()
    finished = 0
    for action in actions:
        _, _, done, _ = env.step(action)
        if done:
            finished += 1
            env.reset()
    return finished


def episode_files(folder, suffix):
    """Episode files in the order they were written, with the name's timestamp cut off."""
    files = sorted(pathlib.Path(folder).glob("*" + suffix), key=lambda f: f.stat().st_mtime_ns)
    return [(f.name.split("-", 1)[1], f) for f in files]


def assert_same_npz(ref_file, our_file):
    with np.load(ref_file) as ref, np.load(our_file) as ours:
        assert list(ours.keys()) == list(ref.keys()), f"{our_file.name}: keys differ"
        for key in ref.keys():
            a, b = ref[key], ours[key]
            assert (b.dtype, b.shape) == (a.dtype, a.shape), (
                f"{our_file.name}[{key}]: {b.dtype}{b.shape}, crafter {a.dtype}{a.shape}")
            assert a.tobytes() == b.tobytes(), f"{our_file.name}[{key}]: values differ"


@pytest.fixture
def fed_frames(monkeypatch):
    """The frame lists each Recorder hands to imageio.mimsave (crafter's and ours call the
    same function), keyed by the folder written into."""
    if not VIDEO:
        pytest.skip("imageio and imageio-ffmpeg are not installed (the video extra)")
    fed = {}
    real = imageio.mimsave

    def spy(filename, frames, *args, **kwargs):
        fed.setdefault(str(pathlib.Path(filename).parent), []).append([f.copy() for f in frames])
        return real(filename, frames, *args, **kwargs)

    monkeypatch.setattr(imageio, "mimsave", spy)
    return fed


@pytest.fixture
def distinct_stamps(monkeypatch):
    """Both recorders name an episode by the second it started in; two episodes of one second
    and one name overwrite each other (crafter's behaviour, kept). Which ones collide depends
    on speed, so each recorder's clock here moves one second per call."""
    import datetime
    import types

    import crafter.recorder

    def clock():
        t = [datetime.datetime(2026, 1, 1)]

        def now():
            t[0] += datetime.timedelta(seconds=1)
            return t[0]
        return types.SimpleNamespace(datetime=types.SimpleNamespace(now=now))

    monkeypatch.setattr(crafter.recorder, "datetime", clock())
    monkeypatch.setattr(vrec, "datetime", clock())


@pytest.mark.parametrize("seed", SEEDS)
def test_recorder_equals_crafter(seed, assets, tmp_path, fed_frames, distinct_stamps):
    """Stats, episodes and videos; length 80 and 260 steps: several episodes, truncations and
    (random play dies within about 130-250 steps) usually a death; a 96x80 video whose
    render() calls draw from the world RNG at night, as crafter's do."""
    kwargs = dict(seed=seed, length=80, size=(72, 64))
    rec_args = dict(save_stats=True, save_video=True, save_episode=True, video_size=(96, 80))
    import crafter

    ref = crafter.Recorder(reference_env(**kwargs), tmp_path / "ref", **rec_args)
    ours = vc.Recorder(vc.Env(textures=assets, **kwargs), tmp_path / "ours", **rec_args)
    actions = actions_for(seed, 260)
    finished = play(ref, actions)
    assert play(ours, actions) == finished >= 3

    ref_stats = (tmp_path / "ref" / "stats.jsonl").read_text()
    our_stats = (tmp_path / "ours" / "stats.jsonl").read_text()
    assert our_stats.splitlines() == ref_stats.splitlines()
    assert len(our_stats.splitlines()) == finished

    ref_eps, our_eps = episode_files(tmp_path / "ref", ".npz"), episode_files(tmp_path / "ours", ".npz")
    assert [n for n, _ in our_eps] == [n for n, _ in ref_eps]
    for (_, a), (_, b) in zip(ref_eps, our_eps):
        assert_same_npz(a, b)

    ref_fed, our_fed = fed_frames[str(tmp_path / "ref")], fed_frames[str(tmp_path / "ours")]
    assert len(our_fed) == len(ref_fed) == finished
    for e, (a, b) in enumerate(zip(ref_fed, our_fed)):
        assert len(a) == len(b), f"episode {e}: {len(b)} video frames, crafter {len(a)}"
        for t, (fa, fb) in enumerate(zip(a, b)):
            assert fa.shape == fb.shape and fa.tobytes() == fb.tobytes(), (
                f"episode {e} video frame {t} differs")
    ref_vid, our_vid = episode_files(tmp_path / "ref", ".mp4"), episode_files(tmp_path / "ours", ".mp4")
    assert [n for n, _ in our_vid] == [n for n, _ in ref_vid]
    for (_, a), (_, b) in zip(ref_vid, our_vid):
        # The same frames through the same imageio/ffmpeg call: the same file.
        assert a.read_bytes() == b.read_bytes(), f"{b.name}: mp4 bytes differ from crafter's"
    assert not list((tmp_path / "ours").glob(".*partial*")), "a partial file was left behind"


@pytest.mark.parametrize("seed", SEEDS[:1])
def test_recorder_defaults_stats_only(seed, assets, tmp_path):
    """crafter's defaults (length 10000, 64x64) with stats only, 500 steps crossing deaths;
    and reward=False: the stats' reward is still the real one (info["reward"])."""
    import crafter

    for kwargs in (dict(seed=seed), dict(seed=seed, reward=False)):
        tag = "r" if kwargs.get("reward", True) else "n"
        ref = crafter.Recorder(reference_env(**kwargs), tmp_path / f"ref{tag}", save_video=False, save_episode=False)
        ours = vc.Recorder(vc.Env(textures=assets, **kwargs), tmp_path / f"ours{tag}", save_video=False, save_episode=False)
        actions = actions_for(seed + 1, 500)
        finished = play(ref, actions)
        assert play(ours, actions) == finished >= 1
        assert ((tmp_path / f"ours{tag}" / "stats.jsonl").read_text().splitlines()
                == (tmp_path / f"ref{tag}" / "stats.jsonl").read_text().splitlines())
        assert sorted(p.name for p in (tmp_path / f"ours{tag}").iterdir()) == ["stats.jsonl"]


def test_recorder_passes_attributes_and_no_directory(assets, tmp_path):
    env = vc.Env(seed=3, textures=assets)
    rec = vc.Recorder(env, tmp_path / "a" / "b", save_video=False)
    assert rec.action_space.n == 17 and rec.action_names == env.action_names
    assert (tmp_path / "a" / "b" / "stats.jsonl").exists()
    # A falsy directory records nothing (as crafter's).
    off = vc.Recorder(vc.Env(seed=3, textures=assets), None)
    off.reset()
    off.step(0)
    assert off.directory is None


@pytest.mark.parametrize("how", ["file", "readonly"])
def test_recorder_unwritable_directory(assets, tmp_path, how):
    """An unwritable directory: one OSError at construction naming the folder; nothing written."""
    if how == "file":
        blocker = tmp_path / "taken"
        blocker.write_text("x")
        target = blocker / "logs"
    else:
        import os
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        target = ro / "logs"
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for cls, args in ((vc.Recorder, (vc.Env(seed=1, textures=assets), target)),
                      (vrec.VectorRecorder, (vc.VectorEnv(2, seed=1, textures=assets), target))):
        kwargs = {"save_video": False} if cls is vc.Recorder else {}
        with pytest.raises(OSError) as err:
            cls(*args, **kwargs)
        message = str(err.value)
        assert str(target) in message and "cannot write" in message and "\n" not in message
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_recorder_video_without_imageio_is_one_clear_error(assets, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import now raises ImportError
    with pytest.raises(ImportError, match=r"vlmcrafter\[video\].*save_video=False"):
        vc.Recorder(vc.Env(seed=1, textures=assets), tmp_path / "v")
    assert not (tmp_path / "v").exists(), "the folder was made before the error"
    vc.Recorder(vc.Env(seed=1, textures=assets), tmp_path / "v", save_video=False)
