"""Elementwise binary ops (`a + b`, `a * b`, `max(a, b)`), broadcasting by dim name, on
the vector unit: one FLOP per result element, as XLA counts add, subtract, multiply,
divide, maximum, minimum, compare, and, or, xor, rem and shifts (shl; shr, logical or
arithmetic); pow and atan2 one
transcendental instead (measured: benchmarks/xla_conventions.md)."""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ..ir import Step
from .base import Counted, Kind, Size, same_dims

# word -> the infix symbol it prints as (None: written as a call, max(a, b))
FUNCTIONS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "max": None, "min": None,
             "maximum": None, "minimum": None, "compare": None, "and": None, "or": None, "xor": None,
             "rem": None, "pow": None, "atan2": None, "shl": None, "shr": None}
TRANSCENDENTAL = ("pow", "atan2")  # XLA counts these a transcendental, and no FLOP
SYMBOLS = {"+": "add", "-": "sub", "−": "sub", "*": "mul", "/": "div", "÷": "div"}


class Elementwise(Kind):
    name = "elementwise"
    words = tuple(FUNCTIONS)
    infix = ("+", "-", "−", "/", "÷")
    arity = (2, 2)
    same_layouts = True

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        same_dims(word, inputs, output)
        return ()

    def count(self, step: Step, size: Size) -> Counted:
        out = size(step.output.labels)
        if step.fn in TRANSCENDENTAL:
            return Counted(sympy.Integer(0), sympy.Integer(0), out)
        return Counted(out, out)

    def describe(self, word: str) -> str:
        return "1 transcendental per result element" if word in TRANSCENDENTAL else "1 FLOP per result element"


KIND = Elementwise()
