"""A PyTorch module in: exported with symbolic dims, its ATen graph written as a symroof
program (importer.py; a rule per ATen op, rules.py), checked against FlopCounterMode
(check.py). PyTorch is imported only when a module is imported; these names when first
used (PEP 562)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .importer import Imported, from_torch

_WHERE = {"Imported": "importer", "from_torch": "importer"}
__all__ = ["Imported", "from_torch"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value  # imported once
    return value
