"""Type stubs of ``vlmcrafter.gym`` (documentation in ``gym.py``)."""

import os
from typing import Any, Dict, Literal, Optional, Tuple, Union

import gymnasium
import numpy as np
import numpy.typing as npt

class CrafterEnv(gymnasium.Env[npt.NDArray[np.uint8], int]):
    obs_text: Optional[Literal["state", "balrog"]]
    render_mode: Optional[str]
    def __init__(
        self,
        area: Tuple[int, int] = (64, 64),
        view: Union[int, Tuple[int, int]] = (9, 9),
        size: Union[int, Tuple[int, int]] = (64, 64),
        reward: bool = True,
        length: Optional[int] = 10000,
        obs_text: Optional[Literal["state", "balrog"]] = None,
        render_mode: Optional[Literal["rgb_array"]] = None,
        *,
        textures: Optional[Union[str, "os.PathLike[str]"]] = None,
        fetch: bool = True,
    ) -> None: ...
    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[npt.NDArray[np.uint8], Dict[str, Any]]: ...
    def step(self, action: int) -> Tuple[npt.NDArray[np.uint8], float, bool, bool, Dict[str, Any]]: ...
    def render(self) -> Optional[npt.NDArray[np.uint8]]: ...
    def text(self, fmt: Literal["state", "balrog"] = "state") -> str: ...
    def close(self) -> None: ...
    def get_state(self) -> "CrafterState": ...
    def set_state(self, state: "CrafterState") -> None: ...

class CrafterState:
    env: Any
    frame: Optional[npt.NDArray[np.uint8]]
    seeded: bool
    np_random: np.random.Generator
    def __init__(
        self, env: Any, frame: Optional[npt.NDArray[np.uint8]], seeded: bool, np_random: np.random.Generator
    ) -> None: ...

