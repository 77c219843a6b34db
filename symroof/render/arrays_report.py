"""Bare arrays in the text report: each one's shard and bytes, their sums, and whether
they fit in the chip's HBM (stored.py says what each quantity is).

    array           bf16[I_{X,Y}, J]: on each chip bf16[I/(4*X), J], I*J/(2*X) bytes; in all 2*I*J bytes (replication 1)
    bytes per chip  I*J/(2*X) bytes
    bytes in all    2*I*J bytes on 4*X chips, replicas included
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from ..show import capacity, human, pretty

if TYPE_CHECKING:
    from ..analysis import Analysis


def rows(a: Analysis) -> list[tuple[str, str]]:
    """The report's rows for the analysis's bare arrays (none where it has none)."""
    if not a.arrays:
        return []
    out = []
    chips = a.substitute(a.mesh.count) if a.mesh is not None else 1
    for array in a.arrays:
        where = f"on each chip {array.local_text()}, " if a.mesh is not None else ""
        out.append(("array", f"{array.tensor}: {where}{_bytes(array.bytes_per_chip)}"
                             + (f"; in all {_bytes(array.bytes_total)} (replication {pretty(array.replication)})"
                                if a.mesh is not None else "")))
    if len(a.arrays) > 1 or a.mesh is not None:
        out.append(("bytes per chip", _bytes(a.bytes_per_chip) + (" (the arrays summed)" if len(a.arrays) > 1 else "")))
    if a.mesh is not None:
        out.append(("bytes in all", f"{_bytes(a.bytes_total)} on {pretty(chips)} chip{'' if chips == 1 else 's'}, "
                                    "replicas included"))
    fit = _fit(a)
    if fit:
        out.append(("HBM", fit))
    return out


def _bytes(value: sympy.Expr) -> str:
    """`2*I*J bytes`, `4194304 bytes (4.194 MB)`."""
    if value.is_number and value >= 1000:
        return f"{pretty(value)} bytes ({human(value, 'bytes')})"
    return f"{pretty(value)} bytes"


def _fit(a: Analysis) -> str | None:
    """The arrays' bytes per chip against the chip's HBM, where both are numbers."""
    chip = a.chip
    hbm = chip.figure("hbm_capacity_bytes") if chip is not None else None
    if chip is None or hbm is None or not a.bytes_per_chip.is_number:
        return None
    share = float(a.bytes_per_chip / hbm)
    verdict = "fits in" if share <= 1 else "does not fit in"
    shown = f"{share:.1%}" if share >= 0.001 else "under 0.1%"
    return (f"{human(a.bytes_per_chip, 'bytes')} per chip {verdict} {chip.name}'s {capacity(hbm)} "
            f"({shown} of it; what else the chip holds is not counted)")
