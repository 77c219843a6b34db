"""Names a package imports when first asked for (PEP 562's module `__getattr__`), so that
`import symroof`, and each command of the command line, loads only what it uses."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any


def names(package: str, where: Mapping[str, str], modules: Collection[str] = ()) -> Callable[[str], Any]:
    """A package's `__getattr__`: each name of `where` from its module (`where[name]`,
    relative to the package), imported when first asked for and kept in the package; a
    name in `modules` is that module itself."""
    def found(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f".{where[name]}", package)
        value = module if name in modules else getattr(module, name)
        setattr(sys.modules[package], name, value)  # imported once
        return value
    return found
