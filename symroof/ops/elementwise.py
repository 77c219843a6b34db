"""Elementwise binary ops (`a + b`, `a * b`, `max(a, b)`), broadcasting by dim name, on
the vector unit: one FLOP per result element, as XLA counts add, subtract, multiply,
divide, maximum and minimum."""

from __future__ import annotations

from .base import Counted, Kind, Size, same_dims

# word -> the infix symbol it prints as (None: written as a call, max(a, b))
FUNCTIONS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "max": None, "min": None,
             "maximum": None, "minimum": None}
SYMBOLS = {"+": "add", "-": "sub", "−": "sub", "*": "mul", "/": "div", "÷": "div"}


class Elementwise(Kind):
    name = "elementwise"
    words = tuple(FUNCTIONS)
    infix = ("+", "-", "−", "/", "÷")
    arity = (2, 2)
    same_layouts = True

    def summed(self, word, inputs, over, output):
        same_dims(word, inputs, output)
        return ()

    def count(self, step, size: Size) -> Counted:
        out = size(step.output.labels)
        return Counted(out, out)

    def describe(self, word: str) -> str:
        return "1 FLOP per result element"


KIND = Elementwise()
