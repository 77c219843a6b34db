"""A JAX function in: traced with symbolic shapes, each jaxpr equation converted into IR
statements, and cross-checked against XLA's cost analysis. Its names are imported when
first used (PEP 562): the command line loads the importer only to import."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .importer import Imported, from_jax

_WHERE = {"Imported": "importer", "from_jax": "importer"}
__all__ = ["Imported", "from_jax"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value  # imported once
    return value
