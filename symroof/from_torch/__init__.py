"""A PyTorch module in: exported with symbolic dims, its ATen graph written as a symroof
program (importer.py; a rule per ATen op, rules.py), checked against FlopCounterMode
(check.py). PyTorch is imported only when a module is imported; these names when first
used (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import lazy

if TYPE_CHECKING:
    from .importer import Imported, from_torch

_WHERE = {"Imported": "importer", "from_torch": "importer"}
__all__ = ["Imported", "from_torch"]

__getattr__ = lazy.names(__name__, _WHERE)
