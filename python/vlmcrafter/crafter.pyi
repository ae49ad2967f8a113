"""Type stubs of ``vlmcrafter.crafter`` (documentation in ``crafter.py``)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from .recorder import Recorder as Recorder

_Pair = Union[int, Tuple[int, int], Sequence[int]]
_Seed = Optional[int]
_Textures = Optional[Union[str, "os.PathLike[str]"]]
_TextFormat = Literal["state", "balrog"]

ACTION_NAMES: Tuple[str, ...]
ITEM_NAMES: Tuple[str, ...]
ACHIEVEMENT_NAMES: Tuple[str, ...]

class Env:
    reward_range: None
    metadata: None
    def __init__(
        self,
        area: Tuple[int, int] = (64, 64),
        view: _Pair = (9, 9),
        size: _Pair = (64, 64),
        reward: bool = True,
        length: Optional[int] = 10000,
        seed: _Seed = None,
        *,
        textures: _Textures = None,
        fetch: bool = True,
    ) -> None: ...
    @property
    def observation_space(self) -> Any: ...
    @property
    def action_space(self) -> Any: ...
    @property
    def action_names(self) -> List[str]: ...
    def reset(self) -> npt.NDArray[np.uint8]: ...
    def step(self, action: int) -> Tuple[npt.NDArray[np.uint8], float, bool, Dict[str, Any]]: ...
    def render(self, size: Optional[_Pair] = None) -> npt.NDArray[np.uint8]: ...
    def text(self, fmt: _TextFormat = "state") -> str: ...
    def close(self) -> None: ...
    @property
    def episode(self) -> int: ...
    @property
    def texture_source(self) -> str: ...

class VectorEnv:
    autoreset_mode: Any
    metadata: Dict[str, Any]
    inventory_names: Tuple[str, ...]
    achievement_names: Tuple[str, ...]
    action_names: Tuple[str, ...]
    num_envs: int
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
        seed: Union[None, int, Sequence[Optional[int]]] = None,
        *,
        threads: Optional[int] = None,
        textures: _Textures = None,
        fetch: bool = True,
    ) -> None: ...
    @property
    def threads(self) -> int: ...
    @property
    def seeds(self) -> List[Any]: ...
    @property
    def obs(self) -> npt.NDArray[np.uint8]: ...
    @property
    def episodes(self) -> List[int]: ...
    def reset(self) -> npt.NDArray[np.uint8]: ...
    def step(
        self, actions: npt.ArrayLike
    ) -> Tuple[
        npt.NDArray[np.uint8],
        npt.NDArray[np.float32],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        Dict[str, npt.NDArray[Any]],
    ]: ...
    def text(self, index: int, fmt: _TextFormat = "state") -> str: ...
    def close(self) -> None: ...
    def __len__(self) -> int: ...
