"""Unary functions (`gelu(x)`, `exp(x)`), on the vector unit.

Each function's count per element follows the HLO that JAX emits for it, as XLA's cost
analysis counts the lowered module (measured: benchmarks/xla_conventions.md): exp, log,
tanh, rsqrt and sqrt are one transcendental each and no FLOP; every add, multiply,
divide, compare or select is one FLOP.
"""

from __future__ import annotations

import sympy

from .base import Counted, Kind, Size, same_dims

# word -> (FLOPs, transcendentals) per element, and how JAX computes it
FUNCTIONS: dict[str, tuple[int, int, str]] = {
    "exp": (0, 1, "exp"),
    "log": (0, 1, "log"),
    "tanh": (0, 1, "tanh"),
    "rsqrt": (0, 1, "rsqrt"),
    "sqrt": (0, 1, "sqrt"),
    "square": (1, 0, "x * x"),
    "relu": (1, 0, "max(x, 0)"),
    "abs": (1, 0, "abs"),
    "neg": (1, 0, "neg"),
    "recip": (1, 0, "1 / x"),
    "sigmoid": (3, 1, "1 / (1 + exp(-x)), as jax.nn.sigmoid lowers"),
    "silu": (4, 1, "x * sigmoid(x)"),
    "gelu": (8, 1, "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), jax.nn.gelu's default"),
    "sign": (1, 0, "sign"),
    "floor": (1, 0, "floor"),
    "ceil": (1, 0, "ceil"),
    "round": (1, 0, "round"),
    "not": (1, 0, "logical or bitwise not"),
    "isfinite": (1, 0, "isfinite"),
    "erf": (0, 1, "erf (one op in the lowered module)"),
    "cbrt": (0, 1, "cbrt"),
    "sin": (0, 1, "sin"),
    "cos": (0, 1, "cos"),
    "tan": (0, 1, "tan"),
    "expm1": (0, 1, "expm1"),
    "log1p": (0, 1, "log1p"),
    "exp2": (1, 1, "exp(x ln 2)"),
    "gelu_erf": (66, 1, "0.5 x (1 + erf(x / sqrt 2)), jax.nn.gelu(approximate=False): JAX expands "
                        "erf into a rational polynomial with one exp"),
}


class Unary(Kind):
    name = "unary"
    words = tuple(FUNCTIONS)
    arity = (1, 1)

    def summed(self, word, inputs, over, output):
        same_dims(word, inputs, output)
        return ()

    def count(self, step, size: Size) -> Counted:
        flops, transcendentals, _ = FUNCTIONS[step.fn]
        out = size(step.output.labels)
        return Counted(flops * out, flops * out, transcendentals * out if transcendentals else sympy.Integer(0))

    def describe(self, word: str) -> str:
        flops, transcendentals, how = FUNCTIONS[word]
        return (f"{flops} FLOP{'s' if flops != 1 else ''} + {transcendentals} "
                f"transcendental{'s' if transcendentals != 1 else ''} per element" +
                (f": {how}" if how != word else ""))


KIND = Unary()
