"""Normalisations over named dims, on the vector unit: `rmsnorm_D x -> y` and
`layernorm_D x -> y`, with an optional scale (`rmsnorm_D x, w -> y`) and, for layernorm,
a bias (`layernorm_D x, w, b -> y`), each broadcast by dim name.

Counted as they are written in JAX (E elements, R rows of n):

* rmsnorm: x*x (E), the row sum (E - R), / n and + eps (2R), rsqrt (R transcendentals),
  the multiply (E): exact 3E + R FLOPs, leading 3E + 2R.
* layernorm: the row mean (E - R adds, R divides), x - mean (E), its square (E), the row
  mean of that (E - R, R), + eps (R), rsqrt (R transcendentals), the multiply (E): exact
  5E + R, leading 5E + 3R.
* a scale or a bias: E more each.

Split over a mesh axis along the normalised dim, the row statistics are combined across
the axis: one fp32 value per row for rmsnorm, two (sum and sum of squares) for layernorm.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step, label_text
from .base import Counted, Kind, ShapeError, Size, function_of, over_dims, shown

# word -> (exact FLOPs per element, exact FLOPs per row, how many reductions, stats per row)
FUNCTIONS = {"rmsnorm": (3, 1, 1, 1), "layernorm": (5, 1, 2, 2)}


class Norm(Kind):
    name = "norm"
    words = tuple(FUNCTIONS)
    arity = (1, 3)
    takes_dims = True

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        x, *params = inputs
        over_dims(word, x, over)
        if len(params) > (2 if word == "layernorm" else 1):
            raise ShapeError(f"{word} takes the input and a scale" +
                             (" and a bias" if word == "layernorm" else ""), len(inputs) - 1)
        for i, p in enumerate(params, 1):
            stray = [l for l in p if l not in x]
            if stray:
                raise ShapeError(f"a {word} {'scale' if i == 1 else 'bias'} broadcasts over the input: "
                                 f"{label_text(stray[0])} is not a dim of the input", i)
        if list(output) != list(x):
            raise ShapeError(f"{word} keeps its input's dims: the result is [{shown(x)}]")
        return tuple(over)

    def count(self, step: Step, size: Size) -> Counted:
        per_element, per_row, reductions, _ = FUNCTIONS[function_of(step)]
        elements = size(step.output.labels)
        rows = elements / size(step.summed)
        params = (len(step.inputs) - 1) * elements
        exact = per_element * elements + per_row * rows + params
        return Counted(exact + reductions * rows, exact, rows)

    def stats(self, word: str | None) -> int:
        return FUNCTIONS[word or 'rmsnorm'][3]

    def describe(self, word: str) -> str:
        per_element, per_row, reductions, _ = FUNCTIONS[word]
        return (f"{per_element} FLOPs per element + {per_row + reductions} per row (exact: {per_row}) "
                "+ 1 rsqrt per row; + 1 per element for each scale or bias")


KIND = Norm()
