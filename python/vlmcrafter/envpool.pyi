"""Type stubs of ``vlmcrafter.envpool`` (documentation in ``envpool.py``)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Pair = Union[int, Tuple[int, int], Sequence[int]]
_Textures = Optional[Union[str, "os.PathLike[str]"]]
_TextFormat = Literal["state", "balrog"]
_EnvIds = Union[None, int, Sequence[int], npt.NDArray[np.integer[Any]]]
_Actions = Union[Sequence[int], npt.NDArray[np.integer[Any]]]
_Frames = npt.NDArray[np.uint8]
_Batch = Tuple[_Frames, npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_], Dict[str, Any]]

TASK_IDS: Dict[str, bool]

class EnvPool:
    """``num_envs`` Crafter envs behind EnvPool's ``send``/``recv`` API."""

    task_id: str
    num_envs: int
    batch_size: int
    seeds: List[int]
    config: Dict[str, Any]
    observation_space: Any
    action_space: Any
    single_observation_space: Any
    single_action_space: Any
    all_env_ids: npt.NDArray[np.int32]
    metadata: Dict[str, Any]
    @property
    def is_async(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def in_flight(self) -> List[int]: ...
    def async_reset(self) -> None: ...
    def send(self, action: Union[_Actions, Dict[str, Any]], env_id: _EnvIds = None) -> None: ...
    def recv(self) -> _Batch: ...
    def step(self, action: Union[_Actions, Dict[str, Any]], env_id: _EnvIds = None) -> _Batch: ...
    def reset(
        self, env_id: _EnvIds = None, *, seed: None = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[_Frames, Dict[str, Any]]: ...
    def close(self, **kwargs: Any) -> None: ...
    def __enter__(self) -> "EnvPool": ...
    def __exit__(self, *exc: Any) -> None: ...
    def __len__(self) -> int: ...

def make(
    task_id: str = "Crafter-v1",
    env_type: Literal["gymnasium", "gym"] = "gymnasium",
    num_envs: int = 1,
    batch_size: Optional[int] = None,
    num_threads: Optional[int] = None,
    seed: Union[int, Sequence[int]] = 42,
    max_episode_steps: Optional[int] = None,
    *,
    area: Tuple[int, int] = (64, 64),
    view: _Pair = (9, 9),
    size: _Pair = (64, 64),
    reward: Optional[bool] = None,
    length: Optional[int] = 10000,
    textures: _Textures = None,
    fetch: bool = True,
    obs_text: Optional[_TextFormat] = None,
    semantic: bool = False,
) -> EnvPool: ...
def make_gymnasium(task_id: str = "Crafter-v1", **kwargs: Any) -> EnvPool: ...
def make_gym(task_id: str = "Crafter-v1", **kwargs: Any) -> EnvPool: ...
