"""What jax_convert.py builds: views of arrays, written statements, the program."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import sympy


@dataclass(frozen=True)
class View:
    """How a jaxpr value reads an array in memory: the array's dtype and dims (its
    materialized shape), and for each of the value's axes the array's axis it is (None:
    broadcast). A layout op makes a new view of the same array; a statement a new array."""

    dtype: str
    dims: tuple  # the array's dims (jaxpr dims: int or symbolic)
    axes: tuple[int | None, ...]
    # a constant known when the sizes are (a literal, a dim's value, arithmetic on them):
    # folded at concrete sizes, so no statement computes it
    const: bool = False
    # inside shard_map, the mesh axes (symroof's letters) it holds partial sums over: a
    # contraction over a sharded dim leaves them, a psum (AllReduce) sums them
    unreduced: str = ""

    @staticmethod
    def whole(dtype: str, shape: tuple, const: bool = False, unreduced: str = "") -> View:
        return View(dtype, tuple(shape), tuple(range(len(shape))), const, unreduced)


def split_label(label: str) -> tuple[str, str]:
    """A label as its dim's name and the mesh axes it is split over: 'B_X' -> ('B', 'X'),
    'B_{XY}' -> ('B', 'XY'), 'B' -> ('B', '')."""
    name, _, axes = label.partition("_")
    return name, axes.strip("{}")


def join_label(name: str, axes: str) -> str:
    """'B', 'XY' -> 'B_{XY}': a dim split over mesh axes, as symroof writes it."""
    return name if not axes else f"{name}_{axes}" if len(axes) == 1 else f"{name}_{{{axes}}}"


def union(*axes: str) -> str:
    """Mesh axes (strings of symroof's letters) together, each once, in order."""
    return "".join(dict.fromkeys("".join(axes)))


@dataclass
class Statement:
    """One written statement, the primitive it came from, and how XLA's lowered count of
    it differs from symroof's (FLOPs: XLA minus symroof), with the reason."""

    text: str
    primitive: str
    depth: int
    xla_flops: sympy.Expr = sympy.Integer(0)
    why: str = ""
    in_shard_map: bool = False  # written inside a shard_map's body: per chip, with its splits


@dataclass
class Converted:
    lets: dict[str, str] = field(default_factory=dict)  # name -> expression text
    mesh: dict[str, int] = field(default_factory=dict)  # shard_map's mesh: symroof's axis letter -> size
    axis_names: dict[str, str] = field(default_factory=dict)  # JAX's mesh axis name -> symroof's letter
    lines: list[tuple[int, str]] = field(default_factory=list)  # (depth, text): statements and repeat lines
    statements: list[Statement] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # primitive -> count: not costed
    shard_maps: int = 0  # inside this many shard_maps now (while converting)
    layout: Counter = field(default_factory=Counter)  # primitive -> count: taken as free
    notes: list[str] = field(default_factory=list)
    # what XLA counts that no statement stands for: (FLOPs, why), once each
    xla_extra: list[tuple[int, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        out = []
        if self.mesh:
            names = {letter: name for name, letter in self.axis_names.items()}
            out.append("mesh " + ", ".join(f"{k}={v}" for k, v in self.mesh.items())
                       + "   # shard_map's mesh: " + ", ".join(f"{k} is {names[k]!r}" for k in self.mesh))
        if self.lets:
            out.append("let " + ", ".join(f"{k} = {v}" for k, v in self.lets.items()))
        out += ["  " * depth + line for depth, line in self.lines]
        return "\n".join(out) + "\n"


class Parts:
    """What each part of the converter (jax_loops, jax_shard, jax_data) uses of the rest:
    jax_convert.Converter provides each."""

    out: Converted
    names: dict[str, str]  # a dim's text -> its name
    used: set[str]  # every dim name given out

    def walk(self, jaxpr, env: dict, depth: int = 0) -> None:
        raise NotImplementedError

    def view(self, var, env) -> View:
        raise NotImplementedError

    def dtype(self, aval_dtype) -> str:
        raise NotImplementedError

    def dim_name(self, dim) -> str:
        raise NotImplementedError

    def dim_text(self, dim) -> str:
        raise NotImplementedError

    def labels(self, dims: list, named: frozenset[int] = frozenset()) -> list[str]:
        raise NotImplementedError

    def axis_labels(self, shape: tuple, named: frozenset[int] = frozenset()) -> tuple[list[str], list[str | None]]:
        raise NotImplementedError

    def tensor(self, view: View, axis_labels: list[str | None], summed: list[str] | None = None) -> str:
        raise NotImplementedError

    def size(self, labels: list[str]) -> sympy.Expr:
        raise NotImplementedError

    def emit(self, text: str, primitive: str, depth: int, xla_flops: sympy.Expr | None = None, why: str = "") -> None:
        raise NotImplementedError

    def result(self, eqn, env, k: int = 0, unreduced: str | None = None) -> View:
        raise NotImplementedError

    def _skip(self, eqn, env) -> None:
        raise NotImplementedError
