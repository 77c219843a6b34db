"""What arrays written bare (`bf16[I_XY, J]`, no op) take of each chip's memory.

An array split over mesh axes keeps one shard on each chip: a dim split over X and Y
has I/(|X|·|Y|) of its rows there. Over the axes that split none of its dims it is
replicated: every chip along them holds the same shard. So, with `chips` the mesh's
chips (1 without a mesh):

* local shape: each dim's size over the chips along the axes that split it;
* bytes per chip: the local shape's elements times the dtype's bytes (int4: 1/2);
* bytes in all: bytes per chip times chips, replicas included (what the slice holds);
* replication: chips over the chips that split it, how many chips hold each element.

Several arrays, on one line or several, sum: "does this fit in HBM" is their bytes per
chip against the chip's capacity. Bare arrays cost no FLOPs and move no bytes.

Examples:
    >>> from symroof.lang.parsing import parse
    >>> (a,) = stored(parse("mesh X, Y=4; bf16[I_XY, J]"))
    >>> a.local_shape, a.bytes_per_chip, a.bytes_total, a.replication
    ((I/(4*X), J), I*J/(2*X), 2*I*J, 1)
    >>> (b,) = stored(parse("mesh X=2, Y=4; int8[B, S_X, D]"))
    >>> b.bytes_per_chip, b.bytes_total, b.replication
    (B*D*S/2, 4*B*D*S, 4)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import sympy

from ..ir import Arrays, Mesh, Program, Tensor


@dataclass(frozen=True)
class Stored:
    """One bare array: as written, its shard on each chip, and what it takes."""

    tensor: Tensor
    local_shape: tuple[sympy.Expr, ...]
    bytes_per_chip: sympy.Expr
    bytes_total: sympy.Expr
    replication: sympy.Expr

    def local_text(self) -> str:
        """Its shard as a tensor: `bf16[I/(4*X), J]`."""
        return f"{self.tensor.dtype}[{', '.join(map(str, self.local_shape))}]"

    def at(self, values: Mapping[sympy.Symbol, sympy.Expr]) -> Stored:
        """The same at the sizes given (symbol -> number)."""
        def sub(e: sympy.Expr) -> sympy.Expr:
            return e.xreplace(values) if values else e
        return replace(self, local_shape=tuple(map(sub, self.local_shape)), bytes_per_chip=sub(self.bytes_per_chip),
                       bytes_total=sub(self.bytes_total), replication=sub(self.replication))


def stored(program: Program) -> tuple[Stored, ...]:
    """The program's bare arrays, in order."""
    return tuple(array(t, program.mesh) for s in program.statements if isinstance(s, Arrays) for t in s.operands)


def array(tensor: Tensor, mesh: Mesh | None) -> Stored:
    """One array on the mesh (on one chip where there is none)."""
    def chips(axes: Iterable[str]) -> sympy.Expr:
        return mesh.over(axes) if mesh is not None else sympy.Integer(1)

    local = tuple(d.symbol / chips(d.axes) for d in tensor.dims)
    per_chip = tensor.dtype.bytes * sympy.Mul(*local)
    everywhere = chips(mesh.names if mesh is not None else ())
    splitting = chips(a for d in tensor.dims for a in d.axes)
    return Stored(tensor, local, per_chip, per_chip * everywhere, everywhere / splitting)
