"""A JAX function in: traced with symbolic shapes, each jaxpr equation converted into IR
statements, and cross-checked against XLA's cost analysis. Its names are imported when
first used (PEP 562): the command line loads the importer only to import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import lazy

if TYPE_CHECKING:
    from .importer import Imported, from_jax

_WHERE = {"Imported": "importer", "from_jax": "importer"}
__all__ = ["Imported", "from_jax"]

__getattr__ = lazy.names(__name__, _WHERE)
