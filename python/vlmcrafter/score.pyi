"""Type stubs of ``vlmcrafter.score`` (documentation in ``score.py``)."""

import os
import pathlib
from typing import Any, Dict, Iterable, List, Tuple, Union

_Path = Union[str, "os.PathLike[str]"]

ACHIEVEMENT_NAMES: Tuple[str, ...]

def stats_files(paths: Union[_Path, Iterable[_Path]]) -> List[pathlib.Path]: ...
def read_stats(path: _Path) -> List[Tuple[int, float, List[int]]]: ...
def compute(paths: Union[_Path, Iterable[_Path]]) -> Dict[str, Any]: ...

class CutLineWarning(UserWarning): ...
