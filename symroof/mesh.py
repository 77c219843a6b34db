"""Device meshes: their axes, each axis's chips (a number, or a symbol where the spec
leaves it without one: `mesh X, Y=4`) and the link that joins them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import sympy

from .errors import SpecError
from .symbols import dim_symbol


@dataclass(frozen=True, slots=True)
class MeshAxis:
    """One axis of a device mesh: its name, its chips (`size`; None for an axis written
    without one, `mesh X`, whose `count` is then the symbol X), and the link that joins
    them ("ici", "dcn" or "pcie"). For an ICI axis without a size, `ring` is the case its
    formulas take: with wraparound (`X@ring`), without (`X@line`), or None: a ring where
    the chip's axes can wrap, said wherever its link is described. A `deferred` axis is
    one of a strategy family's (models/families.py): its size (where None) and where it
    lies are given later, member by member, so its collectives' seconds per byte and
    latency are symbols (collectives.rate_symbols), worked out for each member's mesh."""

    name: str
    size: int | None
    link: str = "ici"
    ring: bool | None = None
    deferred: bool = False

    @property
    def count(self) -> sympy.Expr:
        return sympy.Integer(self.size) if self.size is not None else dim_symbol(self.name)

    @property
    def symbolic(self) -> bool:
        return self.size is None

    @property
    def alone(self) -> sympy.Expr:
        """1 where the axis has one chip, else 0; for a strategy family's axis without a size
        a symbol (`alone[X]`), 1 or 0 member by member."""
        return sympy.Symbol(f"alone[{self.name}]", nonnegative=True) if self.size is None \
            else sympy.Integer(self.size == 1)

    @property
    def number(self) -> int:
        """Its size, where only a number will do (a model, a pod's layout: refused before)."""
        if self.size is None:
            raise SpecError(f"mesh axis {self.name} needs a size here")
        return self.size

    def __str__(self) -> str:
        size = "" if self.size is None else f"={self.size}"
        ring = "" if self.ring is None else "@ring" if self.ring else "@line"
        link = ring if self.link == "ici" else f"@{self.link}"
        return f"{self.name}{size}{link}"


@dataclass(frozen=True, slots=True)
class Mesh:
    """The device mesh a sharded spec runs on."""

    axes: tuple[MeshAxis, ...]
    # what `axis` and `over` found, kept: the costing of a sharded program asks them of
    # every dim of every statement (not part of what the mesh is)
    _named: dict[str, MeshAxis] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)
    _over: dict[Any, sympy.Expr] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)
    # its axes' names, read of every subscript as a sharded program is resolved
    names: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(a.name for a in self.axes))

    def axis(self, name: str) -> MeshAxis:
        if not self._named:
            self._named.update((a.name, a) for a in reversed(self.axes))  # the first of a name, as a search finds
        return self._named[name]

    @property
    def symbolic(self) -> tuple[str, ...]:
        """The axes without a size, whose chip counts are symbols."""
        return tuple(a.name for a in self.axes if a.size is None)

    @property
    def deferred(self) -> bool:
        """Whether its axes are a strategy family's, laid out member by member (MeshAxis)."""
        return any(a.deferred for a in self.axes)

    def written(self) -> Mesh:
        """The mesh as a `mesh` line writes it: a family's axes as any other's."""
        return Mesh(tuple(replace(a, deferred=False) for a in self.axes)) if self.deferred else self

    @property
    def chips(self) -> int | sympy.Expr:
        """How many chips: an int, or a product of symbols where some axis has no size."""
        return int(self.count) if self.count.is_Integer else self.count

    @property
    def count(self) -> sympy.Expr:
        """How many chips, always as an expression (a number, or a product of symbols)."""
        return self.over(self.names)

    def over(self, axes: Iterable[str]) -> sympy.Expr:
        """The chips these axes span together (1 for none), as an expression."""
        key = axes if isinstance(axes, (str, tuple)) else tuple(axes)
        found = self._over.get(key)
        if found is None:
            found = self._over[key] = sympy.Mul(*(self.axis(a).count for a in key))
        return found

    def number(self, what: str) -> int:
        """Its chips, where only a number will do (`what`: a model, a strategy)."""
        if self.symbolic:
            raise SpecError(f"{what} needs a size for every mesh axis; {', '.join(self.symbolic)} has none")
        return self.chips

    def axes_text(self) -> str:
        """The axes as a spec writes them after `mesh`.

        Examples:
            >>> Mesh((MeshAxis("X", 2), MeshAxis("Y", None, "dcn"))).axes_text()
            'X=2, Y@dcn'
        """
        return ", ".join(map(str, self.axes))

    def __str__(self) -> str:
        return "mesh " + self.axes_text()
