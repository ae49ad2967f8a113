"""Type stubs of ``vlmcrafter._native``, the compiled module (private: use ``vlmcrafter.crafter``)."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

__version__: str
ACTION_NAMES: list[str]
ITEM_NAMES: list[str]
ACHIEVEMENT_NAMES: list[str]
CRAFTER_VERSION: str

def _panic_for_test(in_thread: bool = False) -> None:
    """Panic in Rust on purpose (a test hook): raises ``pyo3_runtime.PanicException`` (a
    ``BaseException``), never aborts the interpreter. ``in_thread=True`` panics in a native
    worker thread with the GIL released, as ``VectorEnv.step`` runs."""

def texture_source(textures: Optional[str] = None, hint: Optional[str] = None, fetch: bool = True) -> str:
    """``"builtin"`` or the folder of crafter's textures that these arguments resolve to."""

INVALID_NOTE: str

def judge_reply(
    text: str, *, protocol: str = "tool", max_actions: int = 8, mode: str = "lenient"
) -> Tuple[list[int], str, str]:
    """Judge a model's raw text as ``vlm-eval serve-env`` does: ``(action ids, outcome, parsed
    JSON)``; no ids when nothing is usable (serve-env then plays one ``noop``)."""

class Env:
    def __init__(
        self,
        area: Tuple[int, int],
        view: Tuple[int, int],
        size: Tuple[int, int],
        reward: bool,
        length: Optional[int],
        seed: int,
        textures: Optional[str] = None,
        hint: Optional[str] = None,
        fetch: bool = True,
    ) -> None: ...
    def reset(self) -> npt.NDArray[np.uint8]: ...
    def step(self, action: int) -> Tuple[npt.NDArray[np.uint8], float, bool, dict]: ...
    def render(self, size: Optional[Tuple[int, int]] = None) -> npt.NDArray[np.uint8]: ...
    def text(self, fmt: str = "state") -> str: ...
    def semantic(self) -> npt.NDArray[np.uint8]: ...
    episode: int
    @property
    def step_count(self) -> int: ...
    @property
    def world_seed(self) -> int: ...
    @property
    def texture_source(self) -> str: ...
    def clone_env(self) -> "Env": ...
    def history(self) -> Optional[bytes]: ...
    def replay(self, episode: int, history: bytes) -> None: ...

class VectorEnv:
    def __init__(
        self,
        seeds: Sequence[int],
        area: Tuple[int, int],
        view: Tuple[int, int],
        size: Tuple[int, int],
        reward: bool,
        length: Optional[int],
        threads: Optional[int],
        textures: Optional[str] = None,
        hint: Optional[str] = None,
        fetch: bool = True,
        autoreset: str = "NextStep",
        obs_text: Optional[str] = None,
        semantic: bool = False,
    ) -> None: ...
    @property
    def obs(self) -> npt.NDArray[np.uint8]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def threads(self) -> int: ...
    @property
    def num_envs(self) -> int: ...
    def reseed(self, index: int, seed: int) -> None: ...
    def reset(self, mask: Optional[Sequence[bool]] = None) -> Dict[str, Any]: ...
    def step(
        self, actions: npt.NDArray[np.int64]
    ) -> Tuple[
        npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        Dict[str, Any],
        Optional[Tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8], Dict[str, Any]]],
    ]: ...
    episodes: list[int]
    def finished(self) -> Optional[List[Tuple[int, int, float, List[int]]]]: ...
    def stats_lines(self) -> Optional[Tuple[Optional[bytes], int]]: ...
    @property
    def pending_reset(self) -> list[bool]: ...
    def text(self, index: int, fmt: str = "state") -> str: ...
    def semantic(self, index: int) -> npt.NDArray[np.uint8]: ...
    def close(self) -> None: ...
    def clone_env(self) -> "VectorEnv": ...
    @property
    def texture_source(self) -> str: ...
    def snapshot(self, index: Optional[int] = None) -> "VectorSnapshot": ...
    def restore(self, snapshot: "VectorSnapshot", index: Optional[int] = None) -> None: ...
    def decode(self, whole: Optional[Tuple[bool, bool]], envs: Sequence[_EncodedEnv]) -> "VectorSnapshot": ...

# One sub-env of a snapshot's pickled form: engine seed, episode count, (episode at its reset,
# action ids since) or None, pending reset, (length, reward, achievements) of the episode it
# ended on the last step or None.
_EncodedEnv = Tuple[int, int, Optional[Tuple[int, bytes]], bool, Optional[Tuple[int, float, List[int]]]]

class VectorSnapshot:
    @property
    def num_envs(self) -> int: ...
    @property
    def whole(self) -> bool: ...
    @property
    def progress(self) -> List[Tuple[int, int]]: ...
    def encode(self) -> Tuple[Optional[Tuple[bool, bool]], List[_EncodedEnv]]: ...

class AsyncVectorEnv:
    def __init__(
        self,
        seeds: Sequence[int],
        area: Tuple[int, int],
        view: Tuple[int, int],
        size: Tuple[int, int],
        reward: bool,
        length: Optional[int],
        batch_size: int,
        threads: Optional[int],
        textures: Optional[str] = None,
        hint: Optional[str] = None,
        fetch: bool = True,
        obs_text: Optional[str] = None,
        semantic: bool = False,
    ) -> None: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def in_flight(self) -> List[int]: ...
    def reset_send(self, env_ids: Optional[Sequence[int]] = None) -> None: ...
    def send(self, actions: npt.NDArray[np.int64], env_ids: npt.NDArray[np.int64]) -> None: ...
    def recv(
        self, count: Optional[int] = None, sort: bool = False
    ) -> Tuple[
        npt.NDArray[np.uint8],
        npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        Dict[str, Any],
    ]: ...
    def close(self) -> None: ...

def stats_line(length: int, reward: float, achievements: Sequence[int]) -> Optional[str]: ...
def score_compute(paths: Sequence[str]) -> Tuple[str, Optional[str]]: ...
def score_files(paths: Sequence[str]) -> List[str]: ...
def score_read(path: str) -> Tuple[List[Tuple[int, float, List[int]]], Optional[int]]: ...
