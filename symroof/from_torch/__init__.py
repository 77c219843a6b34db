"""A PyTorch module in: exported with symbolic dims, its ATen graph written as a symroof
program (importer.py; a rule per ATen op, rules.py), checked against FlopCounterMode
(check.py). PyTorch is imported only when a module is imported."""

from .importer import Imported, from_torch

__all__ = ["Imported", "from_torch"]
