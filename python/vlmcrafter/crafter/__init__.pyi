"""Type stubs of ``vlmcrafter.crafter`` (documentation in ``crafter.py``)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ..recorder import Recorder as Recorder
from . import constants as constants

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
    def get_state(self) -> "EnvState": ...
    def set_state(self, state: "EnvState") -> None: ...
    def __deepcopy__(self, memo: Dict[int, Any]) -> "Env": ...

class EnvState:
    @property
    def episode(self) -> int: ...
    @property
    def step_count(self) -> int: ...
    def __deepcopy__(self, memo: Dict[int, Any]) -> "EnvState": ...

from ..vector import VectorEnv as VectorEnv
