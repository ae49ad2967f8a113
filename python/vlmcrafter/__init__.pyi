from . import crafter as crafter

__version__: str
