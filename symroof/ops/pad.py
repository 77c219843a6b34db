"""Pad: `pad fp32[B, T] -> fp32[B, T2]` with `let T2 = T + 3` (`jnp.pad`, `lax.pad`, low,
high and interior padding alike; negative padding crops). Dims are matched by name, as
everywhere (the result's in any order): a dim of the operand the result keeps is not
padded, and each one it lacks is padded into one of the result's own (its size says how
much padding; a literal size may differ from the operand's: `pad fp32[B, 5] -> fp32[B, 8]`;
a size-1 axis padded is written as `1`).

No FLOPs; the operand read once and the whole result written once (the fill value's
writes included), as XLA's lowered `pad` counts it (and the fill scalar, s bytes, which
symroof leaves out). On a mesh, an operand split along a padded dim is gathered first:
the shards alone cannot be padded (GSPMD instead pads them in place, exchanging halos).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Step
from .base import NONE, ZERO, Counted, Kind, ShapeError, Size, shown


class Pad(Kind):
    name = "pad"
    unit = NONE
    words = ("pad",)
    arity = (1, 1)
    makes_dims = True  # the padded dims

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        (x,) = inputs
        padded = [a for a in x if a not in output]
        new = [b for b in output if b not in x]
        if len(padded) != len(new):
            raise ShapeError(f"{word} replaces each dim it pads with one of its own (T with T2, let T2 = T + 3): "
                             f"[{shown(x)}] -> [{shown(output)}] replaces {len(padded)} ({shown(padded) or 'none'}) "
                             f"with {len(new)} ({shown(new) or 'none'})")
        return ()

    def count(self, step: Step, size: Size) -> Counted:
        return ZERO

    def whole(self, step: Step) -> tuple[str, ...]:
        return tuple(a for a in step.inputs[0].labels if a not in step.output.labels)

    def describe(self, word: str) -> str:
        return "no FLOPs; reads the operand once and writes the whole (padded) result once"


KIND = Pad()
