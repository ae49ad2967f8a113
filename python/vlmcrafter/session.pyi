"""Type stubs of ``vlmcrafter.session`` (see the module's docstring)."""

from typing import Any, Dict, Optional, Sequence, Union

INVALID_NOTE: str

class SessionOver(RuntimeError): ...

class Session:
    options: Dict[str, Any]
    id: str
    def __init__(
        self,
        seed: int,
        *,
        image_size: int = 64,
        obs_format: str = "state",
        length: int = 10000,
        protocol: str = "tool",
        max_actions: int = 8,
        parser: str = "lenient",
        textures: Optional[str] = None,
        fetch: bool = True,
    ) -> None: ...
    @property
    def seed(self) -> int: ...
    @property
    def world_seed(self) -> int: ...
    @property
    def done(self) -> bool: ...
    def reset(self, frames: str = "last") -> Dict[str, Any]: ...
    def step(
        self,
        text: Optional[str] = None,
        *,
        actions: Optional[Sequence[Union[str, int]]] = None,
        frames: str = "last",
    ) -> Dict[str, Any]: ...
    def close(self) -> Dict[str, Any]: ...
