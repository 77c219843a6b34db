"""Reductions over named dims (`sum_D x`, `max_D x`, `min_D`, `prod_D`, `all_D` and
`any_D` (a logical and, or), `mean_D x`, and the one-operand einsum
`bf16[B, D] -> fp32[B]`), on the vector unit.

Reducing n terms is n - 1 FLOPs per result element (exact) and n (leading); `mean` adds
one divide per result element.

`argmax_D x -> int32[B]` (and `argmin`) is the index of the max: one compare per term, as
max's (the selects that carry the index along are not counted, as max's are not); its
result has the index's dtype. With D split over a mesh axis each chip finds its own max
and index, and the rows' pairs are combined across the axis (an AllReduce of two fp32
values per row: the max, and its index), where a sum's partial results are AllReduced.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step, label_text, subscripted
from .base import Counted, Kind, ShapeError, Size, over_dims, shown

FUNCTIONS = ("sum", "max", "min", "prod", "all", "any", "mean", "argmax", "argmin")


class Reduce(Kind):
    name = "reduce"
    words = FUNCTIONS
    arity = (1, 1)
    takes_dims = True
    over_word = "sums"

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        over_dims(word, inputs[0], over)
        kept = [l for l in inputs[0] if l not in over]
        if list(output) != kept and sorted(output) != sorted(kept):
            raise ShapeError(f"{subscripted(word, [label_text(l) for l in over], short=True)} leaves [{shown(kept)}]: "
                             "the result has those dims")
        return tuple(over)

    def count(self, step: Step, size: Size) -> Counted:
        out, n = size(step.output.labels), size(step.summed)
        extra = out if step.fn == "mean" else 0
        return Counted(out * n + extra, out * (n - 1) + extra)

    def stats(self, word: str | None) -> int:
        return 2 if word in ("argmax", "argmin") else 0

    def describe(self, word: str) -> str:
        if word in ("argmax", "argmin"):
            return ("n FLOPs per result element over n terms (exact: n - 1): one compare each; "
                    "split, the max and its index combined across chips")
        return "n FLOPs per result element over n terms (exact: n - 1)" + (", + 1 divide" if word == "mean" else "")


KIND = Reduce()
