"""Cumulative ops along one named dim (`cumsum_T x -> y`: y[t] combines x[0..t]), on the
vector unit; the result has the input's dims.

Counted as a sequential scan: each row of n elements takes n - 1 combines (exact), n
(leading, one per element, as a reduction's). A combine is one FLOP for cumsum, cumprod,
cummax and cummin; for cumlogsumexp it is one logaddexp as JAX writes it (max, subtract,
abs, negate, exp, log1p, add, and a NaN guard of compare, add and select): 8 FLOPs and 2
transcendentals, counted per element as the FLOPs' leading count is. Bytes: the input
read once and the result written once. A reverse scan (`reverse=True`) counts the same.

XLA's lowered module counts more (benchmarks/xla_conventions.md): JAX lowers each of
these to a reduce_window over the whole prefix, T - 1 combines for every output element.

The scanned dim cannot be split across chips: each element depends on every one before
it, so a chip's part needs the totals of the chips before it, a prefix across the mesh
that symroof does not cost. Split, it is an error that names the AllGather that fixes
it; a result written split there is computed whole on each chip and sliced (free).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ..ir import Step, label_text, subscripted
from .base import Counted, Kind, ShapeError, Size, function_of, over_dims, shown

# word -> (FLOPs, transcendentals) per combine, as JAX writes the combine
FUNCTIONS: dict[str, tuple[int, int]] = {
    "cumsum": (1, 0),
    "cumprod": (1, 0),
    "cummax": (1, 0),
    "cummin": (1, 0),
    "cumlogsumexp": (8, 2),
}


class Cumulative(Kind):
    name = "cumulative"
    words = tuple(FUNCTIONS)
    arity = (1, 1)
    takes_dims = True
    over_word = "scans"
    scans = True

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        over_dims(word, inputs[0], over)
        if len(over) != 1:
            raise ShapeError(f"{word} scans one dim: write {subscripted(word, (label_text(over[0]),), short=True)}, "
                             f"not {subscripted(word, [label_text(l) for l in over])}")
        if list(output) != list(inputs[0]):
            raise ShapeError(f"{word} keeps its input's dims: the result is [{shown(inputs[0])}]")
        return tuple(over)

    def count(self, step: Step, size: Size) -> Counted:
        flops, transcendentals = FUNCTIONS[function_of(step)]
        elements = size(step.output.labels)
        rows = elements / size(step.summed)
        return Counted(flops * elements, flops * (elements - rows),
                       transcendentals * elements if transcendentals else sympy.Integer(0))

    def describe(self, word: str) -> str:
        flops, transcendentals = FUNCTIONS[word]
        if not transcendentals:
            return "1 FLOP per element (exact: n - 1 per row of n): a sequential scan"
        return (f"{flops} FLOPs + {transcendentals} transcendentals per element (exact FLOPs: {flops}(n - 1) "
                "per row of n): one logaddexp per element, as JAX writes it")


KIND = Cumulative()
