"""Gather: `gather bf16[V, D], int32[B, T] -> bf16[B, T, D]` takes, for each index, the
table's slice along the one dim the result lacks (V: an embedding lookup's rows). The
result has the indices' dims and the table's others, in any order (labels are names, so
`gather fp32[B, V, D], int32[K] -> fp32[B, K, D]` is `jnp.take(x, ids, axis=1)`). A table
dim the indices have too is a batch dim: `gather fp32[B, V], int32[B] -> fp32[B]` picks one
element of each row, as `jnp.take_along_axis(logits, labels[:, None], axis=-1)` does.

No FLOPs; the bytes read are the elements gathered (the result's size, in the table's
dtype) and the indices, not the whole table, as XLA's lowered `gather` counts them. With
the indexed dim split over a mesh axis, each chip looks up the rows it holds and the
partial results are summed across the axis (an AllReduce), as a vocab-sharded embedding
is."""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ..ir import Step
from .base import NONE, ZERO, Counted, Kind, ShapeError, Size, shown, term_bytes


class Gather(Kind):
    name = "gather"
    unit = NONE
    over_word = "indexes"
    words = ("gather", "take", "embed")
    arity = (2, 2)

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        table, indices = inputs
        if not table:
            raise ShapeError(f"{word} takes elements of a table: the table needs at least one dim", 0)
        picked = [t for t in table if t not in output]
        if len(picked) != 1:
            which = (f"the result lacks {shown(picked)}" if picked
                     else "the result has every one of its dims")
            raise ShapeError(f"{word} picks along one dim of the table [{shown(table)}], the one its result "
                             f"lacks; {which}")
        want = [*indices, *(t for t in table if t not in indices and t not in picked)]
        if sorted(output) != sorted(want):
            raise ShapeError(f"{word} of table [{shown(table)}] at indices [{shown(indices)}] along "
                             f"{shown(picked)} gives [{shown(want)}]: the indices' dims, then the table's "
                             "others (in any order)")
        return tuple(picked)

    def count(self, step: Step, size: Size) -> Counted:
        return ZERO

    def read(self, step: Step, size: Size, kept: frozenset[int] = frozenset()) -> sympy.Expr:
        table, indices = step.inputs
        rows = table.dtype.bytes * size(step.output.labels) if 0 not in kept else 0
        return rows + (term_bytes(indices, size) if 1 not in kept else 0)

    def describe(self, word: str) -> str:
        return "no FLOPs; reads the elements it takes (not the whole table) and the indices"


KIND = Gather()
