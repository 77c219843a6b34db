"""The one sympy symbol for each dim name (and each mesh axis left without a size)."""

from __future__ import annotations

import functools

import sympy


@functools.cache
def dim_symbol(name: str) -> sympy.Symbol:
    """The one sympy symbol for a dim name. Every dim symbol is made here, with the same
    assumptions, so that `subs` and comparisons never miss because two `B`s differ."""
    return sympy.Symbol(name, positive=True, integer=True)
