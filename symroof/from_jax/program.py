"""What the rules build: views of arrays, written statements (the spec's own objects,
lang/source.py: printed only at the edge), the program."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import sympy

from ..ir import subscripted
from ..lang import source

_ARRAYS = itertools.count()  # each array in memory a number of its own (View.array)

# a jaxpr equation, and the view of each jaxpr variable in scope (JAX's own types: this
# package never imports JAX, importer.py traces)
Eqn = Any
Env = dict[Any, "View"]


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
    # the array it reads: every view of one array has its number (a layout op keeps it, a
    # statement makes a new array), so what is known of the array (the labels it was
    # written with, its splits over a mesh) is known wherever it is read
    array: int = field(default_factory=lambda: next(_ARRAYS))
    # a constant known to be all zeros (a literal 0, broadcast or moved by layout ops): what
    # a gradient scatters into
    zero: bool = False

    @staticmethod
    def whole(dtype: str, shape: tuple, const: bool = False, unreduced: str = "") -> View:
        return View(dtype, tuple(shape), tuple(range(len(shape))), const, unreduced)

    def moved(self) -> View:
        """The same view of a new array: the array after a collective moved it."""
        return replace(self, array=next(_ARRAYS))


def split_label(label: str) -> tuple[str, str]:
    """A label as its dim's name and the mesh axes it is split over: 'B_X' -> ('B', 'X'),
    'B_{XY}' -> ('B', 'XY'), 'B' -> ('B', '')."""
    name, _, axes = label.partition("_")
    return name, axes.strip("{}")


def join_label(name: str, axes: str) -> str:
    """'B', 'XY' -> 'B_{XY}': a dim split over mesh axes, as symroof writes it."""
    return subscripted(name, (axes,) if axes else ())


def same(a: Any, b: Any) -> bool:
    """Two jaxpr dims equal (symbolic ones that JAX cannot compare: not known equal)."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (JAX's inconclusive comparison of symbolic dims)
        return False


def union(*axes: str) -> str:
    """Mesh axes (strings of symroof's letters) together, each once, in order."""
    return "".join(dict.fromkeys("".join(axes)))


def dim(label: str) -> source.Dim:
    """A label as a dim written in a statement: 'B_{XY}' -> B over X and Y."""
    return source.Dim(*split_label(label))


def tensor(dtype: str, labels: list[str | None] | list[str], unreduced: str = "") -> source.Tensor:
    """A tensor with these labels (None: a size-1 axis, left out), partial sums over `unreduced`."""
    return source.Tensor(dtype, tuple(dim(label) for label in labels if label is not None), unreduced=unreduced)


@dataclass(frozen=True)
class Opened:
    """A loop's `repeat COUNT {` line."""

    count: str
    comment: str

    def __str__(self) -> str:
        return f"repeat {self.count} {{   # {self.comment}"


@dataclass(frozen=True)
class Closed:
    def __str__(self) -> str:
        return "}"


# one line of the program as written: a statement (with its primitive as its comment), a
# comment, or a loop's opening or closing line
Line = source.Contraction | source.Apply | source.Collective | source.Comment | Opened | Closed


@dataclass
class Statement:
    """One written statement, the primitive it came from, and how XLA's lowered count of
    it differs from symroof's (FLOPs and transcendentals: XLA minus symroof), with the reason."""

    item: source.Contraction | source.Apply | source.Collective  # without its comment
    primitive: str
    depth: int
    xla_flops: sympy.Expr = sympy.Integer(0)
    why: str = ""
    in_shard_map: bool = False  # written inside a shard_map's body: per chip, with its splits
    derived: bool = False  # outside shard_map, with the splits derived from jit's shardings (gspmd.py)
    xla_transcendentals: sympy.Expr = sympy.Integer(0)
    line: int = -1  # its index in Converted.lines (the repeat blocks it lies in)

    @property
    def text(self) -> str:
        return str(self.item)


@dataclass
class Converted:
    lets: dict[str, str] = field(default_factory=dict)  # name -> expression text
    mesh: dict[str, int] = field(default_factory=dict)  # JAX's mesh: symroof's axis letter -> size
    axis_names: dict[str, str] = field(default_factory=dict)  # JAX's mesh axis name -> symroof's letter
    lines: list[tuple[int, Line]] = field(default_factory=list)  # (depth, line): statements, comments, loops
    statements: list[Statement] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # primitive -> count: not costed
    shard_maps: int = 0  # inside this many shard_maps now (while converting)
    shardings_read: bool = False  # a jit's shardings or a sharding constraint read (gspmd.py)
    layout: Counter = field(default_factory=Counter)  # primitive -> count: taken as free
    notes: list[str] = field(default_factory=list)
    dead: int = 0  # jaxpr equations dropped: nothing uses their results (jit drops them too)
    # what XLA counts that no statement stands for: (FLOPs, why, where: the index in `lines`
    # it was said at, so the repeat blocks it lies in), once each
    xla_extra: list[tuple[int | sympy.Expr, str, int]] = field(default_factory=list)
    # the arrays the function closes over (a jaxpr's consts: weights), by the constant's
    # id: its dtype, shape, and the arrays (View.array) it is read as
    closed: dict[int, tuple[str, tuple, list[int]]] = field(default_factory=dict)
    params: list[source.Declare] = field(default_factory=list)  # `param` declarations, written after the lets
    # each scan's repeat line (its index in `lines`) -> (its unroll, its length: a number or a dim's name)
    scans: dict[int, tuple[int, int | str]] = field(default_factory=dict)
    # each loop's repeat line and its closing line (indices in `lines`), in the order they open
    loops: list[tuple[int, int]] = field(default_factory=list)

    def extra(self, flops: int | sympy.Expr, why: str) -> None:
        """What XLA counts here that no statement stands for (once per pass through here)."""
        self.xla_extra.append((flops, why, len(self.lines)))

    def mesh_line(self) -> source.MeshLine | None:
        return source.MeshLine(tuple((k, v, "ici") for k, v in self.mesh.items())) if self.mesh else None

    def let_line(self) -> source.Let | None:
        return source.Let(tuple(self.lets.items())) if self.lets else None

    @property
    def text(self) -> str:
        out = []
        if self.mesh:
            names = {letter: name for name, letter in self.axis_names.items()}
            out.append(f"{self.mesh_line()}   # JAX's mesh: " + ", ".join(f"{k} is {names[k]!r}" for k in self.mesh))
        if self.lets:
            out.append(str(self.let_line()))
        out += map(str, self.params)
        out += ["  " * depth + str(line) for depth, line in self.lines]
        return "\n".join(out) + "\n"

    def program(self, lines: list[tuple[int, Line]] | None = None) -> source.Program:
        """The program as objects (its statements in their repeat blocks; comments, which
        cost nothing, left out), with `lines` in place of its own where given."""
        stack: list[list[source.Item]] = [[]]
        opened: list[Opened] = []
        for _, line in self.lines if lines is None else lines:
            if isinstance(line, Opened):
                stack.append([])
                opened.append(line)
            elif isinstance(line, Closed):
                body, top = stack.pop(), opened.pop()
                stack[-1].append(source.Repeat(top.count, tuple(body), top.comment))
            elif not isinstance(line, source.Comment):
                stack[-1].append(line)
        head = [line for line in (self.mesh_line(), self.let_line()) if line is not None]
        return source.Program((*head, *self.params, *stack[0]))
