"""Unary functions (`gelu(x)`, `exp(x)`), on the vector unit.

Each function's count per element follows the HLO that JAX emits for it, as XLA's cost
analysis counts the lowered module (measured: benchmarks/xla_conventions.md): exp, log,
tanh, rsqrt and sqrt are one transcendental each and no FLOP; every add, multiply,
divide, compare or select is one FLOP.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ..ir import Step
from .base import Counted, Kind, Size, function_of, same_dims

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
    "popcount": (1, 0, "popcount"),  # the bits set
    "clz": (1, 0, "clz"),  # leading zeros
    # functions XLA expands into polynomials, selects and a few transcendentals before it
    # counts (fp32; a 16-bit float's are computed in fp32, between two converts)
    "erfc": (62, 1, "1 - erf(x), as XLA expands it: two rational polynomials and one exp"),
    "erfinv": (37, 2, "the inverse of erf, as XLA expands it: a polynomial in sqrt(-log(1 - x^2))"),
    "lgamma": (53, 4, "log of Gamma(x)'s magnitude, as XLA expands it: Lanczos' series, a reflection for x < 1/2"),
    "digamma": (73, 3, "d/dx log Gamma(x), as XLA expands it: Lanczos' series, a reflection for x < 1/2"),
    "asin": (5, 2, "2 atan2(x, 1 + sqrt(1 - x^2)), as XLA expands it"),
    "acos": (3, 2, "2 atan2(sqrt(1 - x^2), 1 + x), as XLA expands it"),
    "atan": (0, 1, "atan2(x, 1)"),
    "sinh": (10, 3, "(exp(x) - exp(-x)) / 2, as XLA expands it, with expm1 near 0"),
    "cosh": (3, 2, "(exp(x) + exp(-x)) / 2, as XLA expands it"),
    "asinh": (11, 3, "sign(x) log(abs(x) + sqrt(x^2 + 1)), as XLA expands it"),
    "acosh": (7, 4, "log(x + sqrt(x^2 - 1)), as XLA expands it"),
    "atanh": (6, 2, "(log1p(x) - log1p(-x)) / 2, as XLA expands it"),
}


class Unary(Kind):
    name = "unary"
    words = tuple(FUNCTIONS)
    arity = (1, 1)

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        same_dims(word, inputs, output)
        return ()

    def count(self, step: Step, size: Size) -> Counted:
        flops, transcendentals, _ = FUNCTIONS[function_of(step)]
        out = size(step.output.labels)
        return Counted(flops * out, flops * out, transcendentals * out if transcendentals else sympy.Integer(0))

    def describe(self, word: str) -> str:
        flops, transcendentals, how = FUNCTIONS[word]
        return (f"{flops} FLOP{'s' if flops != 1 else ''} + {transcendentals} "
                f"transcendental{'s' if transcendentals != 1 else ''} per element" +
                (f": {how}" if how != word else ""))


KIND = Unary()
