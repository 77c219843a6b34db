"""Gather, as an embedding lookup: `gather bf16[V, D], int32[B, T] -> bf16[B, T, D]`
takes one row of the table (its first dim indexed) for each index. No FLOPs; the bytes
read are the rows gathered and the indices, not the whole table. With the table's first
dim split over a mesh axis, each chip looks up the rows it holds and the partial results
are summed across the axis (an AllReduce), as a vocab-sharded embedding is."""

from __future__ import annotations

import sympy

from .base import NONE, ZERO, Counted, Kind, ShapeError, Size, shown, term_bytes


class Gather(Kind):
    name = "gather"
    unit = NONE
    over_word = "indexes"
    words = ("gather", "take", "embed")
    arity = (2, 2)

    def summed(self, word, inputs, over, output):
        table, indices = inputs
        if not table:
            raise ShapeError(f"{word} takes rows of a table: the table needs at least one dim", 0)
        want = [*indices, *table[1:]]
        if list(output) != want:
            raise ShapeError(f"{word} of table [{shown(table)}] at indices [{shown(indices)}] gives "
                             f"[{shown(want)}]: the indices' dims, then the table's row")
        if table[0] in indices:
            raise ShapeError(f"the indices cannot have the table's first dim {shown(table[:1])}", 1)
        return (table[0],)

    def count(self, step, size: Size) -> Counted:
        return ZERO

    def read(self, step, size: Size, kept: frozenset[int] = frozenset()) -> sympy.Expr:
        table, indices = step.inputs
        rows = table.dtype.bytes * size(step.output.labels) if 0 not in kept else 0
        return rows + (term_bytes(indices, size) if 1 not in kept else 0)

    def describe(self, word: str) -> str:
        return "no FLOPs; reads the rows it takes (not the whole table) and the indices"


KIND = Gather()
