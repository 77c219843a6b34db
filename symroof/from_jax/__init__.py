"""A JAX function in: traced with symbolic shapes, each jaxpr equation converted into IR
statements, and cross-checked against XLA's cost analysis."""

from .importer import Imported, from_jax

__all__ = ["Imported", "from_jax"]
