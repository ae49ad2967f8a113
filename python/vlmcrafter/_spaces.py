"""Spaces and the env base class, chosen as crafter 1.8.3 chooses them (private)."""

import collections

import numpy as np

# crafter uses gym's spaces and gym.Env when gym is importable, else these namedtuples; we do the
# same, and use gymnasium's spaces when only gymnasium is installed.
try:
    import gym as _spaces_lib

    BaseClass = _spaces_lib.Env
except ImportError:
    BaseClass = object
    try:
        import gymnasium as _spaces_lib
    except ImportError:
        _spaces_lib = None

if _spaces_lib is not None:
    DiscreteSpace = _spaces_lib.spaces.Discrete
    BoxSpace = _spaces_lib.spaces.Box
    DictSpace = _spaces_lib.spaces.Dict

    def multi_discrete(nvec):
        """A MultiDiscrete space (one Discrete per env)."""
        return _spaces_lib.spaces.MultiDiscrete(nvec)

else:
    DiscreteSpace = collections.namedtuple("DiscreteSpace", "n")
    BoxSpace = collections.namedtuple("BoxSpace", "low, high, shape, dtype")
    DictSpace = collections.namedtuple("DictSpace", "spaces")
    MultiDiscreteSpace = collections.namedtuple("MultiDiscreteSpace", "nvec")

    def multi_discrete(nvec):
        """A MultiDiscrete stand-in (namedtuple with ``nvec``)."""
        return MultiDiscreteSpace(np.asarray(nvec, dtype=np.int64))

