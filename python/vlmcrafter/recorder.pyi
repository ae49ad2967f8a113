"""Type stubs of ``vlmcrafter.recorder`` (documentation in ``recorder.py``)."""

import os
import pathlib
from typing import Any, Dict, Optional, Tuple, Union

import gymnasium
import numpy as np
import numpy.typing as npt

_Dir = Union[str, "os.PathLike[str]"]

class Recorder:
    def __init__(
        self,
        env: Any,
        directory: Optional[_Dir],
        save_stats: bool = True,
        save_video: bool = True,
        save_episode: bool = True,
        video_size: Tuple[int, int] = (512, 512),
    ) -> None: ...
    @property
    def directory(self) -> Optional[pathlib.Path]: ...
    @property
    def episode_name(self) -> Optional[str]: ...
    def reset(self) -> npt.NDArray[np.uint8]: ...
    def step(self, action: int) -> Tuple[npt.NDArray[np.uint8], float, bool, Dict[str, Any]]: ...
    def close(self) -> None: ...
    def __getattr__(self, name: str) -> Any: ...

# A gymnasium VectorWrapper with gymnasium installed (a plain wrapper without it); type checkers
# see the gymnasium base, so it passes where a gymnasium VectorEnv is expected.
class VectorRecorder(gymnasium.vector.VectorWrapper):
    episodes_recorded: int
    def __init__(self, env: gymnasium.vector.VectorEnv[Any, Any, Any], directory: _Dir) -> None: ...
    @property
    def directory(self) -> pathlib.Path: ...
    def reset(
        self, *, seed: Any = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[Any, Dict[str, Any]]: ...
    def step(
        self, actions: Any
    ) -> Tuple[Any, npt.NDArray[Any], npt.NDArray[np.bool_], npt.NDArray[np.bool_], Dict[str, Any]]: ...
    def close(self, **kwargs: Any) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
