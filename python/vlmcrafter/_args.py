"""The constructor arguments that ``crafter.Env`` and ``VectorEnv`` share, checked and converted
as crafter 1.8.3 reads them: ``area``/``view``/``size`` pairs, ``length``, seeds (drawn and
hashed as crafter does) and where crafter's textures are (private).

Both envs take these arguments with one meaning; keeping the rules here lets ``vector.py`` use
them without importing the drop-in module (which re-exports ``VectorEnv``).
"""

import math
import numbers
import os

import numpy as np

def _is_int(value):
    """An integer as gymnasium and numpy take one: Python or numpy ints, never a bool."""
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


_HINT = []


def _crafter_assets_hint():
    """The assets folder of a ``crafter`` package this interpreter can import, found without
    importing it (None when there is none)."""
    if not _HINT:
        folder = None
        try:
            import importlib.util

            spec = importlib.util.find_spec("crafter")
            for loc in (spec.submodule_search_locations or []) if spec else []:
                if os.path.isdir(os.path.join(loc, "assets")):
                    folder = os.path.join(loc, "assets")
                    break
        except (ImportError, ValueError):
            folder = None
        _HINT.append(folder)
    return _HINT[0]


def _pair(name, value, scalar_ok):
    """``value`` as a pair of ints; an int gives ``(value, value)`` where crafter allows it."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a pair of ints (width, height), not {type(value).__name__}")
    if scalar_ok and not hasattr(value, "__len__"):
        value = (value, value)
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{name} must be a pair of ints (width, height), not {type(value).__name__}") from None
    if len(items) != 2:
        raise ValueError(f"{name} must have 2 values (width, height), got {len(items)}")
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
            raise TypeError(f"{name} must hold ints, got {type(v).__name__} in {value!r}")
        out.append(int(v))
    if out[0] <= 0 or out[1] <= 0:
        raise ValueError(f"{name}={tuple(out)}: both sides must be positive")
    return tuple(out)


def _length(length):
    """crafter's ``length`` rule as the engine's: falsy means unlimited (None); any other value
    ends the episode once the step count reaches it (so a negative one ends it at step 1)."""
    if not length:
        return None
    if not isinstance(length, (numbers.Real, np.number)) or isinstance(length, complex):
        raise TypeError(f"length must be an int or None, not {type(length).__name__}")
    steps = math.ceil(length)
    if steps <= 0:
        return 1
    return None if steps >= 2**32 else steps


def _draw_seed():
    # Exactly crafter's draw, from numpy's global RNG (np.random.seed makes it reproducible).
    return np.random.randint(0, 2**31 - 1)


def _engine_seed(seed):
    # crafter's world seed is hash((seed, episode)) % (2**31 - 1); a tuple hashes its items'
    # hashes, so hash(seed) stands in for any hashable seed (ints of any size, numpy ints...).
    try:
        return hash(seed)
    except TypeError:
        raise TypeError(f"seed must be an int (or None), not {type(seed).__name__}") from None


def _textures_arg(textures):
    if textures is None:
        return None
    return os.fspath(textures)
