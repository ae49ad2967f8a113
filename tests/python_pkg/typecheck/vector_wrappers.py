"""A user's script, type-checked by mypy (scripts/python_pkg_check.sh runs
`mypy --strict` over this file against the installed wheel's stubs): vlmcrafter's native vector
env passed to gymnasium's vector wrappers and used as a gymnasium VectorEnv. Never run by
pytest (its name does not start with test_)."""

import copy
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium.vector import VectorEnv
from gymnasium.wrappers.vector import DictInfoToList, RecordEpisodeStatistics

import vlmcrafter
from vlmcrafter.crafter import VectorEnv as CrafterVectorEnv
from vlmcrafter.recorder import VectorRecorder
from vlmcrafter.vector import VectorEnvState


def rollout(envs: VectorEnv[Any, Any, Any], steps: int) -> float:
    """Any gymnasium vector env."""
    obs, infos = envs.reset(seed=0)
    total = 0.0
    for _ in range(steps):
        obs, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
        total += float(np.sum(rewards))
    return total


def main() -> None:
    native: CrafterVectorEnv = CrafterVectorEnv(4, seed=0)
    frames: npt.NDArray[np.uint8] = native.reset(seed=0)[0]
    assert frames.shape == (4, 64, 64, 3)
    stats = RecordEpisodeStatistics(native, buffer_length=100)
    listed = DictInfoToList(native)
    print(rollout(native, 10), rollout(stats, 10), rollout(listed, 10))
    print(rollout(VectorRecorder(native, "/tmp/vlmcrafter-typing"), 10))
    made = gymnasium.make_vec("vlmcrafter/Crafter-v1", num_envs=2)
    print(rollout(RecordEpisodeStatistics(made), 10), vlmcrafter.__version__)
    # A planner's branching: the whole env's state and one sub-env's.
    whole: VectorEnvState = native.get_state()
    one: VectorEnvState = native.get_state(0)
    native.set_state(whole)
    native.set_state(one, 3)
    twin: CrafterVectorEnv = copy.deepcopy(native)
    print(whole.episodes, one.step_counts, one.index, twin.num_envs)
    native.close()


if __name__ == "__main__":
    main()
