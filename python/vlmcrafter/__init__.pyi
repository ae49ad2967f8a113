from . import crafter as crafter
from . import vector as vector

__version__: str
