"""Contraction: two operands, summing the dims they share (a matmul, a dot product, an
einsum), on the matrix unit.

FLOPs follow the loop nest: one multiply per point of the index space and, per output
element, one add fewer than the terms it sums (the exact count); the leading count is
the book's two FLOPs per point (2*B*D*F for a matmul, against the exact B*F*(2*D - 1)).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step
from .base import MATRIX, Counted, Kind, Size


class Contraction(Kind):
    name = "contract"
    unit = MATRIX
    over_word = "sums"
    arity = (2, 2)

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        return tuple(over)

    def count(self, step: Step, size: Size) -> Counted:
        out, summed = size(step.output.labels), size(step.summed)
        return Counted(2 * out * summed, out * (2 * summed - 1))

    def describe(self, word: str) -> str:
        return "2 FLOPs per point of the index space (exact: one add fewer per output element)"


KIND = Contraction()
