"""Copies, casts and transposes (`fp32[B, D] -> bf16[B, D]`, `transpose(x) -> y`): no
arithmetic, only the bytes read and written. XLA counts a convert as one FLOP per
element; symroof counts none (docs/conventions.md)."""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step
from .base import NONE, ZERO, Counted, Kind, Size, same_dims


class Copy(Kind):
    name = "copy"
    unit = NONE
    words = ("copy", "cast", "transpose")
    arity = (1, 1)

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        same_dims(word, inputs, output)
        return ()

    def count(self, step: Step, size: Size) -> Counted:
        return ZERO

    def describe(self, word: str) -> str:
        return "no FLOPs: bytes only"


KIND = Copy()
