"""Type stubs of ``vlmcrafter.crafter.constants`` (documentation in ``constants.py``)."""

import pathlib
from typing import Any, Dict, List

root: pathlib.Path
actions: List[str]
materials: List[str]
walkable: List[str]
items: Dict[str, Dict[str, int]]
collect: Dict[str, Dict[str, Any]]
place: Dict[str, Dict[str, Any]]
make: Dict[str, Dict[str, Any]]
achievements: List[str]
