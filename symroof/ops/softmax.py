"""Softmax over named dims (`softmax_T x -> y`), on the vector unit, as jax.nn.softmax
computes it: the row max, x - max, exp, the row sum, and a divide.

Per row of n elements (E elements in all, R rows): 2(n - 1) FLOPs for the two
reductions, 2 per element for the subtract and the divide, one exp per element: exact
4E - 2R FLOPs, leading 4E, and E transcendentals. Split over a mesh axis along the dim
it normalises over, each row's max and sum are combined across the axis: 2 fp32 values
per row, all-reduced.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step
from .base import Counted, Kind, ShapeError, Size, over_dims, shown


class Softmax(Kind):
    name = "softmax"
    words = ("softmax", "logsoftmax")
    arity = (1, 1)
    takes_dims = True

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        over_dims(word, inputs[0], over)
        if list(output) != list(inputs[0]):
            raise ShapeError(f"{word} keeps its input's dims: the result is [{shown(inputs[0])}]")
        return tuple(over)

    def count(self, step: Step, size: Size) -> Counted:
        elements = size(step.output.labels)
        rows = elements / size(step.summed)
        # logsoftmax: x - max - log(sum exp): a subtract where softmax divides, and one log per row
        logs = rows if step.fn == "logsoftmax" else 0
        return Counted(4 * elements, 4 * elements - 2 * rows, elements + logs)

    def stats(self, word: str | None) -> int:
        return 2

    def describe(self, word: str) -> str:
        extra = " + 1 log per row" if word == "logsoftmax" else ""
        return f"4 FLOPs per element (exact: 2 fewer per row) + 1 exp per element{extra}"


KIND = Softmax()
