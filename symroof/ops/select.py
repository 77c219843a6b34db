"""Selects and clamps (`select(bool[B, D], x, y) -> z`, `clamp(lo, x, hi) -> y`): one
FLOP per result element, as XLA counts select and clamp, broadcasting by dim name (a
scalar bound is a tensor with no dims)."""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step
from .base import Counted, Kind, Size, same_dims


class Select(Kind):
    name = "select"
    words = ("select", "clamp")
    arity = (3, 3)

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        same_dims(word, inputs, output)
        return ()

    def count(self, step: Step, size: Size) -> Counted:
        out = size(step.output.labels)
        return Counted(out, out)

    def describe(self, word: str) -> str:
        return "1 FLOP per result element"


KIND = Select()
