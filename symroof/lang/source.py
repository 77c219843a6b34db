"""A program with structure as objects, as it is written: what `symroof model --print`
prints, built without text.

The model templates build these (models/templates.py) and the strategies, the backward
pass and the pipeline stages transform them; `str()` prints the spec text a person reads
and may edit, and `structure.read_source` resolves the objects directly, with no parse.
Names stay as written (`B_{ZM}` is the dim B over the axes written `ZM`), so that printing
and reading back gives the same program: `read_structured(str(p))` costs what
`read_source(p)` does.

Examples:
    >>> x = Tensor("bf16", (Dim("B", "X"), Dim("D")))
    >>> w = Tensor("bf16", (Dim("D"), Dim("F", "YZ")))
    >>> print(Contraction((x, w), (Op("*", ("D",)),), Tensor("bf16", (Dim("B", "X"), Dim("F", "YZ"))), "up"))
    bf16[B_X, D] *_D bf16[D, F_{YZ}] -> bf16[B_X, F_{YZ}]   # up
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ..ir import subscripted

INDENT = "  "


def _commented(line: str, comment: str | None) -> str:
    return line if comment is None else f"{line}   # {comment}"


@dataclass(frozen=True, slots=True)
class Dim:
    """A dim by name, and the mesh axes it is split over as written (`ZM` for `D_{ZM}`)."""

    name: str
    axes: str = ""

    def __str__(self) -> str:
        return subscripted(self.name, (self.axes,) if self.axes else ())

    @property
    def bare(self) -> Dim:
        return Dim(self.name)


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor as written: its dtype and dims, its name where the program names it (a
    remat policy's `x:`, a declaration's `Wq:`), and the axes its partial sums are left
    unreduced over (`{U_X}`)."""

    dtype: str
    dims: tuple[Dim, ...]
    name: str | None = None
    unreduced: str = ""

    def __str__(self) -> str:
        named = f"{self.name}: " if self.name else ""
        kept = f" {{{Dim('U', self.unreduced)}}}" if self.unreduced else ""
        return f"{named}{self.dtype}[{', '.join(str(d) for d in self.dims)}]{kept}"

    @property
    def bare(self) -> Tensor:
        """Unnamed, with every dim whole."""
        return Tensor(self.dtype, tuple(d.bare for d in self.dims))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def unnamed(self) -> Tensor:
        return replace(self, name=None) if self.name else self

    def with_dims(self, dims: tuple[Dim, ...] | list[Dim]) -> Tensor:
        return replace(self, dims=tuple(dims))


@dataclass(frozen=True, slots=True)
class Op:
    """An operator between operands: `*`, `+`, `*_D`, `*_{K,G,H}`."""

    symbol: str
    summed: tuple[str, ...] = ()

    def __str__(self) -> str:
        # an op's one dim unbraced (`*_J1`), as the templates write it
        return subscripted(self.symbol, self.summed, short=True)


@dataclass(frozen=True, slots=True)
class Contraction:
    """Operands joined by operators, and the result: `a *_D w -> y`."""

    operands: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    output: Tensor
    comment: str | None = None

    def __str__(self) -> str:
        parts = [str(self.operands[0])]
        for op, operand in zip(self.ops, self.operands[1:]):
            parts += [str(op), str(operand)]
        return _commented(f"{' '.join(parts)} -> {self.output}", self.comment)

    def tensors(self) -> tuple[Tensor, ...]:
        return (*self.operands, self.output)

    def mapped(self, f: Callable[[Tensor], Tensor]) -> Contraction:
        return replace(self, operands=tuple(f(t) for t in self.operands), output=f(self.output))


@dataclass(frozen=True, slots=True)
class Apply:
    """A statement that names its op: `softmax_S x -> y` (form "prefix"), `silu(x) -> y`
    ("call"), `gather table, indices -> y`."""

    word: str
    subscript: tuple[str, ...]  # the dims it names (`softmax_S`: ("S",)), () for none
    form: str
    operands: tuple[Tensor, ...]
    output: Tensor
    comment: str | None = None

    def __str__(self) -> str:
        word = subscripted(self.word, self.subscript, short=True)
        operands = ", ".join(str(t) for t in self.operands)
        head = f"{word}({operands})" if self.form == "call" else f"{word} {operands}"
        return _commented(f"{head} -> {self.output}", self.comment)

    def tensors(self) -> tuple[Tensor, ...]:
        return (*self.operands, self.output)

    def mapped(self, f: Callable[[Tensor], Tensor]) -> Apply:
        return replace(self, operands=tuple(f(t) for t in self.operands), output=f(self.output))


@dataclass(frozen=True, slots=True)
class Collective:
    """A collective written out: `AllGather_Z x -> y`, `ReduceScatter_{Z,D} x {U_Z} -> y`;
    `subscript` its items as written (the axes run together, then the dim where it names one)."""

    kind: str
    subscript: tuple[str, ...]
    input: Tensor
    output: Tensor
    comment: str | None = None

    def __str__(self) -> str:
        return _commented(f"{subscripted(self.kind, self.subscript)} {self.input} -> {self.output}", self.comment)

    def tensors(self) -> tuple[Tensor, ...]:
        return (self.input, self.output)

    def mapped(self, f: Callable[[Tensor], Tensor]) -> Collective:
        return replace(self, input=f(self.input), output=f(self.output))


Statement = Contraction | Apply | Collective


@dataclass(frozen=True, slots=True)
class Fused:
    """`fused { ... }`: statements that run as one kernel."""

    statements: tuple[Contraction | Apply, ...]
    comment: str | None = None

    def lines(self, depth: int) -> Iterator[str]:
        lead = INDENT * depth
        yield lead + _commented("fused {", self.comment)
        for s in self.statements:
            yield lead + INDENT + str(s)
        yield lead + "}"

    def mapped(self, f: Callable[[Tensor], Tensor]) -> Fused:
        return replace(self, statements=tuple(s.mapped(f) for s in self.statements))


@dataclass(frozen=True, slots=True)
class Let:
    """`let D = 8192, N = K*G`: each name with its expression as written (relations.py reads it)."""

    entries: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        return "let " + ", ".join(f"{name} = {expr}" for name, expr in self.entries)


@dataclass(frozen=True, slots=True)
class MeshLine:
    """`mesh X=2, Y=4@dcn`: each axis's name, size (None: `X`, without one) and link (ici is
    not written)."""

    axes: tuple[tuple[str, int | None, str], ...]

    def __str__(self) -> str:
        return "mesh " + ", ".join(a + ("" if size is None else f"={size}") + ("" if link == "ici" else f"@{link}")
                                   for a, size, link in self.axes)


@dataclass(frozen=True, slots=True)
class Declare:
    """`param Wq: bf16[D, K, G, H], Wk: ...`: `word` is param, embedding or cache, each
    tensor named."""

    word: str
    tensors: tuple[Tensor, ...]
    comment: str | None = None

    def __str__(self) -> str:
        return _commented(f"{self.word} " + ", ".join(str(t) for t in self.tensors), self.comment)

    def mapped(self, f: Callable[[Tensor], Tensor]) -> Declare:
        return replace(self, tensors=tuple(f(t) for t in self.tensors))


@dataclass(frozen=True, slots=True)
class Comment:
    text: str

    def __str__(self) -> str:
        return f"# {self.text}"


@dataclass(frozen=True, slots=True)
class Blank:
    def __str__(self) -> str:
        return ""


@dataclass(frozen=True, slots=True)
class Repeat:
    """`repeat COUNT { ... }` (COUNT an expression as written: `L`, `L/4`)."""

    count: str
    body: tuple[Item, ...]
    comment: str | None = None

    def lines(self, depth: int) -> Iterator[str]:
        yield INDENT * depth + _commented(f"repeat {self.count} {{", self.comment)
        yield from _lines(self.body, depth + 1)
        yield INDENT * depth + "}"


@dataclass(frozen=True, slots=True)
class Part:
    """`part NAME { ... }`: a named part, for the split of a step's time."""

    name: str
    body: tuple[Item, ...]

    def lines(self, depth: int) -> Iterator[str]:
        yield INDENT * depth + f"part {self.name} {{"
        yield from _lines(self.body, depth + 1)
        yield INDENT * depth + "}"


@dataclass(frozen=True, slots=True)
class Backward:
    """`backward { ... }`: the backward pass, at the program's end; it shares the
    forward's `let` and `mesh` lines."""

    body: tuple[Item, ...]
    comment: str | None = None

    def lines(self, depth: int) -> Iterator[str]:
        yield INDENT * depth + _commented("backward {", self.comment)
        yield from _lines(self.body, depth + 1)
        yield INDENT * depth + "}"


Item = Contraction | Apply | Collective | Fused | Let | MeshLine | Declare | Comment | Blank | Repeat | Part | Backward
Block = Repeat | Part | Backward


def _lines(items: tuple[Item, ...], depth: int) -> Iterator[str]:
    for item in items:
        if isinstance(item, (Fused, Repeat, Part, Backward)):
            yield from item.lines(depth)
        else:
            line = str(item)
            yield INDENT * depth + line if line else ""


@dataclass(frozen=True, slots=True)
class Program:
    """A program with structure: its items in order, each printed on its own line(s)."""

    items: tuple[Item, ...]

    def __str__(self) -> str:
        return "".join(line + "\n" for line in _lines(self.items, 0))

    @property
    def mesh(self) -> MeshLine | None:
        return next((i for i in self.items if isinstance(i, MeshLine)), None)

    def mapped(self, f: Callable[[Tensor], Tensor]) -> Program:
        """Every tensor of every statement and declaration through `f`."""
        return Program(map_tensors(self.items, f))


def map_tensors(items: tuple[Item, ...], f: Callable[[Tensor], Tensor]) -> tuple[Item, ...]:
    """The items with every tensor of their statements and declarations through `f`."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, (Contraction, Apply, Collective, Fused, Declare)):
            out.append(item.mapped(f))
        elif isinstance(item, (Repeat, Part, Backward)):
            out.append(replace(item, body=map_tensors(item.body, f)))
        else:
            out.append(item)
    return tuple(out)


def map_items(items: tuple[Item, ...], f: Callable[[Item], tuple[Item, ...]]) -> tuple[Item, ...]:
    """The items with each one that is not a block replaced by what `f` makes of it (none,
    itself, or several), inside blocks too."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, (Repeat, Part, Backward)):
            out.append(replace(item, body=map_items(item.body, f)))
        else:
            out += f(item)
    return tuple(out)


def declared_name(parts: list[str], taken: set[str]) -> str:
    """A name for a declaration, from the path an importer found it at (a pytree's keys, a
    module's state_dict name), that symroof reads (no `_`, which subscripts), once each.

    Examples:
        >>> taken = set()
        >>> declared_name(["w_up"], taken), declared_name(["dense", "kernel"], taken), declared_name(["w_up"], taken)
        ('wUp', 'denseKernel', 'wUp2')
    """
    words = [w for p in parts for w in re.split(r"[_\W]+", p) if w]
    name = "".join(w if i == 0 else w[:1].upper() + w[1:] for i, w in enumerate(words)) or "p"
    if not re.match(r"[^\W\d_]", name):
        name = "p" + name
    base, n = name, 2
    while name in taken:
        name, n = f"{base}{n}", n + 1
    taken.add(name)
    return name
