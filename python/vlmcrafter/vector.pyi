"""Type stubs of ``vlmcrafter.vector`` (documentation in ``vector.py``)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import gymnasium
import numpy as np
import numpy.typing as npt

_Pair = Union[int, Tuple[int, int], Sequence[int]]
_Textures = Optional[Union[str, "os.PathLike[str]"]]
_TextFormat = Literal["state", "balrog"]
_Seed = Union[None, int, Sequence[Any]]

AUTORESET_MODES: Tuple[str, ...]

# gymnasium is optional at run time (without it VectorEnv has a stand-in base), but type checkers
# see the gymnasium base: passing the env to gymnasium's vector wrappers type-checks.
class VectorEnv(gymnasium.vector.VectorEnv[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[Any]]):
    """n Crafter envs stepped natively; a ``gymnasium.vector.VectorEnv`` (with gymnasium
    installed; a stand-in base without it)."""

    inventory_names: Tuple[str, ...]
    achievement_names: Tuple[str, ...]
    action_names: Tuple[str, ...]
    autoreset_mode: Any
    metadata: Dict[str, Any]
    render_mode: Optional[str]
    obs_text: Optional[_TextFormat]
    num_envs: int
    closed: bool
    copy: bool
    semantic: bool
    spec: Any
    single_observation_space: Any
    single_action_space: Any
    observation_space: Any
    action_space: Any
    def __init__(
        self,
        n: int,
        area: Tuple[int, int] = (64, 64),
        view: _Pair = (9, 9),
        size: _Pair = (64, 64),
        reward: bool = True,
        length: Optional[int] = 10000,
        seed: _Seed = None,
        *,
        threads: Optional[int] = None,
        textures: _Textures = None,
        fetch: bool = True,
        autoreset_mode: Any = "NEXT_STEP",
        render_mode: Optional[Literal["rgb_array"]] = None,
        obs_text: Optional[_TextFormat] = None,
        copy: bool = True,
        semantic: bool = False,
    ) -> None: ...
    @property
    def threads(self) -> int: ...
    @property
    def seeds(self) -> List[Any]: ...
    @property
    def obs(self) -> npt.NDArray[np.uint8]: ...
    @property
    def episodes(self) -> List[int]: ...
    @episodes.setter
    def episodes(self, values: Union[int, Sequence[int]]) -> None: ...
    def finished_episodes(self) -> Optional[List[Tuple[int, int, float, List[int]]]]: ...
    def reset(
        self, *, seed: _Seed = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[npt.NDArray[np.uint8], Dict[str, Any]]: ...
    def step(
        self, actions: npt.ArrayLike
    ) -> Tuple[
        npt.NDArray[np.uint8],
        npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        Dict[str, Any],
    ]: ...
    def render(self) -> Optional[Tuple[npt.NDArray[np.uint8], ...]]: ...
    def text(self, index: int, fmt: _TextFormat = "state") -> str: ...
    def semantic_map(self, index: int) -> npt.NDArray[np.uint8]: ...
    def call(self, name: str, *args: Any, **kwargs: Any) -> Tuple[Any, ...]: ...
    def get_attr(self, name: str) -> Tuple[Any, ...]: ...
    def set_attr(self, name: str, values: Any) -> None: ...
    def close(self, **kwargs: Any) -> None: ...
    def get_state(self, index: Optional[int] = None) -> "VectorEnvState": ...
    def set_state(self, state: "VectorEnvState", index: Optional[int] = None) -> None: ...
    def __deepcopy__(self, memo: Dict[int, Any]) -> "VectorEnv": ...
    def __len__(self) -> int: ...

class VectorEnvState:
    """A snapshot of a ``VectorEnv`` (``get_state()``) or of one sub-env (``get_state(i)``)."""

    @property
    def whole(self) -> bool: ...
    @property
    def index(self) -> Optional[int]: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def episodes(self) -> List[int]: ...
    @property
    def step_counts(self) -> List[int]: ...
    def __deepcopy__(self, memo: Dict[int, Any]) -> "VectorEnvState": ...

def make_vec_env(num_envs: int = 1, max_episode_steps: Optional[int] = None, **kwargs: Any) -> VectorEnv: ...
