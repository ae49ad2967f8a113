from typing import Any, Dict

from . import crafter as crafter
from . import envpool as envpool
from . import vector as vector

__version__: str

GYM_IDS: Dict[str, Dict[str, Any]]
