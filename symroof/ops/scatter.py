"""Scatter: rows of updates written into an array at indices, the inverse of a gather.

    scatter_add bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V, D]   # x.at[ids].add(u)
    scatter_add int32[B, T], bf16[B, T, D] -> bf16[V, D]             # into a new array of zeros

The array's dim the updates lack (V) is the one the indices pick; the updates have the
indices' dims and the array's others (in any order), and an array dim the indices have
too is a batch dim (`scatter_add int32[B], fp32[B] -> fp32[B, V]`: one element of each
row, the gradient of `take_along_axis`). `scatter` sets the rows (`x.at[ids].set(u)`);
`scatter_add`, `scatter_mul`, `scatter_min`, `scatter_max` combine each update with the
element it lands on.

What it counts:

* FLOPs: one per update element for add, mul, min and max (the combine; duplicate indices
  combine too), none for `scatter`, as XLA's cost analysis counts them.
* Bytes, with an array operand (three operands): in place, as XLA runs it: the indices and
  the updates read, and the rows they touch read and written (the updates' size in the
  array's dtype), not the whole array. XLA's lowered `scatter` counts exactly this: the
  indices and three times the updates.
* With two operands (no array: the result is a new array of one value, zeros for an
  embedding's gradient), the whole result is written once besides: a fresh array must be
  filled before the rows land in it (XLA's lowered module writes the broadcast zeros too).
  So a gradient of a [V, D] table from B·T lookups costs V·D written even where B·T is
  small: the dense gradient JAX makes.

On a mesh, an index dim split over an axis (the updates of a data-parallel batch) leaves
each chip part of the rows: the partial results are summed across the axis (an
AllReduce), for `scatter` too (each chip's rows, the others' untouched, combined as one
array). The array split along its indexed dim (a vocab-sharded table) keeps that split:
each chip writes the rows it holds, and counts every update as touching it (an upper
bound).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ..ir import Step
from .base import VECTOR, ZERO, Counted, Kind, ShapeError, Size, shown, term_bytes

COMBINES = ("scatter_add", "scatter_mul", "scatter_min", "scatter_max")


class Scatter(Kind):
    name = "scatter"
    unit = VECTOR
    over_word = "scatters over"
    words = ("scatter", *COMBINES)
    arity = (2, 3)
    makes_dims = True  # a new array's rows are in no operand

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        array = inputs[0] if len(inputs) == 3 else output
        indices, updates = inputs[-2:]
        if len(inputs) == 3 and sorted(output) != sorted(array):
            raise ShapeError(f"{word} into [{shown(array)}] gives an array of its dims, not [{shown(output)}]")
        picked = [a for a in array if a not in updates]
        if len(picked) != 1:
            which = f"they lack {shown(picked)}" if picked else "they have every one of its dims"
            raise ShapeError(f"{word} writes along one dim of the array [{shown(array)}], the one its updates "
                             f"lack; {which}", len(inputs) - 1)
        if picked[0] in indices:
            raise ShapeError(f"{word}'s indices [{shown(indices)}] cannot have the dim they pick along "
                             f"({shown(picked)}); with two operands it takes the indices and the updates (into a "
                             "new array), with three the array first", len(inputs) - 2)
        want = [*indices, *(a for a in array if a not in indices and a not in picked)]
        if sorted(updates) != sorted(want):
            raise ShapeError(f"{word} into [{shown(array)}] at indices [{shown(indices)}] along {shown(picked)} "
                             f"takes updates [{shown(want)}]: the indices' dims, then the array's others "
                             "(in any order)", len(inputs) - 1)
        return tuple(i for i in indices if i not in array)

    def count(self, step: Step, size: Size) -> Counted:
        if step.fn == "scatter":
            return ZERO
        n = size(step.inputs[-1].labels)
        return Counted(n, n)

    def read(self, step: Step, size: Size, kept: frozenset[int] = frozenset()) -> sympy.Expr:
        first = len(step.inputs) - 2  # the indices' position: 1 with an array operand, else 0
        rows = step.output.dtype.bytes * size(step.inputs[-1].labels) if first == 0 or 0 not in kept else 0
        return rows + sum((term_bytes(t, size) for i, t in enumerate(step.inputs[first:], first) if i not in kept),
                          sympy.Integer(0))

    def written(self, step: Step, size: Size) -> sympy.Expr:
        rows = step.output.dtype.bytes * size(step.inputs[-1].labels)
        return rows + (term_bytes(step.output, size) if len(step.inputs) == 2 else 0)

    def describe(self, word: str) -> str:
        does = "1 FLOP per update element (the combine)" if word in COMBINES else "no FLOPs (it sets the rows)"
        return (f"{does}; reads the indices, the updates and the rows they touch, writes those rows (in "
                "place); into a new array (two operands), the whole result written once besides")


KIND = Scatter()
