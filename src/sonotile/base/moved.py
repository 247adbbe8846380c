"""Module paths that moved, kept importable: ``import old.path`` (and ``from old.path import
name``) gives the module now at the new path, the same module object, so every public name
stays where users import it from."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import finder for moved modules (``{old path: new path}``)."""

    def __init__(self, moved: Mapping[str, str]) -> None:
        self.moved = dict(moved)
        self.specs: dict[str, ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.moved[spec.name])
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module keeps its own spec (the import machinery set the old path's)."""
        module.__spec__ = self.specs.get(module.__name__, module.__spec__)


def keep_importable(moved: Mapping[str, str]) -> None:
    """Make each old module path of ``moved`` import the module at its new path."""
    if not any(isinstance(f, Moved) and f.moved == dict(moved) for f in sys.meta_path):
        sys.meta_path.append(Moved(moved))


__all__ = ["Moved", "keep_importable"]
