"""sonotile's version (a leaf module: any layer may import it)."""

__version__ = "0.1.0"
