"""What a fused block keeps on chip, against the chip's on-chip memory.

A fused block's intermediates never touch HBM, so its HBM bytes leave them out. That
holds only while a kernel can keep them on chip: an intermediate larger than the chip's
on-chip memory (VMEM on a TPU core, L2 on a GPU) must be tiled by the kernel, as flash
attention tiles the S x T scores. symroof says where that is so; it does not model the
tiling.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..hardware.chips import Chip
from ..show import capacity as bytes_text

# Which on-chip store bounds a kernel's working set, in order of preference.
_STORES = (("onchip.vmem_capacity_bytes", "VMEM"), ("onchip.l2_capacity_bytes", "L2"))


@dataclass(frozen=True)
class OnChip:
    """One intermediate a fused block keeps on chip.

    Attributes:
        tensor: the step that writes it, as spec text.
        bytes: its size per chip, at the analysis's sizes.
        capacity: the chip's on-chip memory it must fit in, or None where unknown.
        store: that memory's name ("VMEM", "L2").
    """

    tensor: str
    bytes: sympy.Expr
    capacity: sympy.Rational | None
    store: str | None

    @property
    def fits(self) -> bool | None:
        """True or False where the size and the capacity are numbers; None otherwise."""
        if self.capacity is None or not self.bytes.is_number:
            return None
        return bool(self.bytes <= self.capacity)

    def __str__(self) -> str:
        size = bytes_text(self.bytes) if self.bytes.is_number else f"{self.bytes} bytes"
        if self.capacity is None:
            return f"{self.tensor}: {size}, kept on chip (the chip lists no on-chip memory to check it against)"
        verdict = {True: "fits", False: "does NOT fit: a kernel must tile it (the HBM bytes assume it does)",
                   None: f"fits while {self.bytes} <= {self.capacity}"}[self.fits]
        return f"{self.tensor}: {size}, kept on chip; {self.store} holds {bytes_text(self.capacity)}: {verdict}"


def capacity(chip: Chip | None) -> tuple[sympy.Rational | None, str | None]:
    """The on-chip memory a kernel's intermediates must fit in, and its name."""
    if chip is None:
        return None, None
    for path, name in _STORES:
        figure = chip.figure(path)
        if figure is not None:
            return figure, name
    return None, None
