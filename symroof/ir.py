"""The IR: a program of contractions over typed tensors, and the binary steps each is costed as.

Every node is frozen, and `str()` prints it back in the spec language, so that
`parse(str(program)) == program`.

Examples:
    >>> from symroof.dtypes import DTYPES
    >>> x = Tensor(DTYPES["bf16"], (Dim("B"), Dim("D")))
    >>> str(x), x.dims[0].symbol.is_positive
    ('bf16[B, D]', True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sympy

from .dtypes import DType
from .mesh import Mesh as Mesh  # re-exported: the IR's users take the mesh from here
from .mesh import MeshAxis as MeshAxis
from .symbols import dim_symbol as dim_symbol


def label_text(label: str) -> str:
    """How a step label prints: a literal's label `4096#2` prints as its size, `4096`."""
    return label.split("#", 1)[0]


def is_literal_label(label: str) -> bool:
    return label[:1].isdigit()


def step_sizes(steps: Iterable[Step]) -> tuple[tuple[str, sympy.Expr], ...]:
    """Each label of the steps with its size: a literal's (`4096#2` is 4096) or the dim's
    symbol, in order of first appearance."""
    sizes: dict[str, sympy.Expr] = {}
    for step in steps:
        for term in (*step.inputs, step.output):
            for label in term.labels:
                if label not in sizes:
                    sizes[label] = (sympy.Integer(int(label_text(label))) if is_literal_label(label)
                                    else dim_symbol(label))
    return tuple(sizes.items())


@dataclass(frozen=True, slots=True)
class Dim:
    """A dim as the spec writes it: a name (`B`) or a literal size (`4096`).

    Attributes:
        name: the dim's name; None for a literal size.
        size: the literal size; None for a named dim (a named dim's value, from `D=4096`
            or `--set`, lives with the program, not here).
        axes: mesh axes the dim is sharded over (`D_X`), outermost first.
    """

    name: str | None = None
    size: int | None = None
    axes: tuple[str, ...] = ()

    @property
    def symbol(self) -> sympy.Expr:
        return dim_symbol(self.name) if self.name is not None else sympy.Integer(self.size)

    def __str__(self) -> str:
        text = self.name if self.name is not None else str(self.size)
        return subscripted(text, self.axes)


def subscript(items: Sequence[str], short: bool = False) -> str:
    """The one printer of the subscript notation: `_X` for one single-letter item, `_{X,Y}`
    (`_{XY}`) otherwise, nothing for none. `short` leaves one item of several letters
    unbraced too (`cumsum_seq`, `AllGather_XY`), as some messages and the templates write
    an op's dims; both read back the same.

    Examples:
        >>> subscript(("X",)), subscript(("X", "K")), subscript(("XY",)), subscript(("XY",), short=True)
        ('_X', '_{X,K}', '_{XY}', '_XY')
    """
    if not items:
        return ""
    if len(items) == 1 and (short or len(items[0]) == 1):
        return f"_{items[0]}"
    return "_{" + ",".join(items) + "}"


def subscripted(name: str, items: Sequence[str], short: bool = False) -> str:
    """A name with its subscript (see `subscript`): a dim with the axes it is split over
    (`D_X`), a collective with its axes (`AllGather_{X,Y}`), an op with its dims (`softmax_T`).

    Examples:
        >>> subscripted("D", ("X", "Y")), subscripted("ReduceScatter", ("X", "K")), subscripted("B", ())
        ('D_{X,Y}', 'ReduceScatter_{X,K}', 'B')
    """
    return name + subscript(items, short)


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor as written: dtype, dims, an optional name (`x: bf16[N]`), and the mesh
    axes over which it holds unreduced partial sums (`{U_X}`)."""

    dtype: DType
    dims: tuple[Dim, ...]
    name: str | None = None
    unreduced: tuple[str, ...] = ()

    def text(self, values: dict[str, int] | None = None, shown: set[str] | None = None,
             notes: tuple[str, ...] = ()) -> str:
        """Spec text; a named dim with a value prints as `D=4096` the first time; `notes`
        join `U_X` in the `{...}` after it."""
        parts = []
        for dim in self.dims:
            part = str(dim)
            if values and dim.name in values and shown is not None and dim.name not in shown:
                shown.add(dim.name)
                part = f"{part}={values[dim.name]}"
            parts.append(part)
        prefix = f"{self.name}: " if self.name else ""
        notes = ((subscripted("U", self.unreduced),) if self.unreduced else ()) + tuple(notes)
        suffix = f" {{{', '.join(notes)}}}" if notes else ""
        return f"{prefix}{self.dtype}[{', '.join(parts)}]{suffix}"

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True, slots=True)
class Operator:
    """`@` (matmul: the left's last dim with the right's first) or `*` (einsum: dims
    not needed later are summed), optionally naming the dims it contracts (`*_D`)."""

    symbol: str
    contract: tuple[str, ...] | None = None

    def __str__(self) -> str:
        return subscripted(self.symbol, self.contract or ())


@dataclass(frozen=True, slots=True)
class Term:
    """A tensor inside a step: its dims as labels (one label per distinct dim), and how it
    is laid out on the mesh: the axes each label is split over (None for an intermediate,
    whose layout the lowering in `sharding/lowering.py` decides) and the axes it is unreduced over."""

    dtype: DType
    labels: tuple[str, ...]
    name: str | None = None
    axes: tuple[tuple[str, ...], ...] | None = None
    unreduced: tuple[str, ...] = ()

    def __str__(self) -> str:
        prefix = f"{self.name}: " if self.name else ""
        axes = self.axes or ((),) * len(self.labels)
        dims = ", ".join(subscripted(label_text(l), a) for l, a in zip(self.labels, axes))
        suffix = f" {{{subscripted('U', self.unreduced)}}}" if self.unreduced else ""
        return f"{prefix}{self.dtype}[{dims}]{suffix}"


@dataclass(frozen=True, slots=True)
class Step:
    """One op costed on its own: its inputs read from HBM, its output written to HBM, the
    labels in `summed` reduced over, at the `compute` dtype's rate.

    `kind` names its op kind in `symroof.ops` (which declares its FLOPs, unit and
    lowering), `fn` the function within the kind (`gelu`, `max`, `+`), and `form` how it
    prints: as an einsum (`*_D`), a prefix (`softmax_T x`), a call (`gelu(x)`) or infix
    (`a + b`), with `over` the dims its subscript names."""

    inputs: tuple[Term, ...]
    output: Term
    summed: tuple[str, ...]
    compute: DType
    kind: str = "contract"
    fn: str | None = None
    form: str = "einsum"
    over: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.form == "einsum":
            # Named sums go in the subscript; a literal size cannot be named there, and
            # plain '*' reads a literal contraction back the same way.
            summed = tuple(l for l in self.summed if not is_literal_label(l))
            op = subscripted("*", summed if len(summed) == len(self.summed) else ())
            return f" {op} ".join(str(t) for t in self.inputs) + f" -> {self.output}"
        return applied(self.fn or self.kind, self.over, self.form, [str(t) for t in self.inputs],
                       str(self.output))


def applied(word: str, over: tuple[str, ...], form: str, inputs: list[str], output: str) -> str:
    """A named op as the spec writes it: `softmax_T x -> y`, `gelu(x) -> y`, `a + b -> c`."""
    if form == "infix":
        return f" {word} ".join(inputs) + f" -> {output}"
    if form == "call":
        return f"{subscripted(word, over)}({', '.join(inputs)}) -> {output}"
    return f"{subscripted(word, over)} {', '.join(inputs)} -> {output}"


@dataclass(frozen=True, slots=True)
class Contraction:
    """One statement: operands joined left to right by operators, and the result.

    `steps` and `sizes` are derived from the rest when the statement is resolved;
    they are kept so that costing never has to resolve again.
    """

    operands: tuple[Tensor, ...]
    ops: tuple[Operator, ...]
    output: Tensor
    compute: DType | None
    steps: tuple[Step, ...]
    sizes: tuple[tuple[str, sympy.Expr], ...]

    def text(self, values: dict[str, int] | None = None, shown: set[str] | None = None) -> str:
        parts = [self.operands[0].text(values, shown)]
        for op, operand in zip(self.ops, self.operands[1:]):
            parts += [str(op), operand.text(values, shown)]
        notes = (f"compute={self.compute}",) if self.compute is not None else ()
        return " ".join(parts) + " -> " + self.output.text(values, shown, notes)

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True, slots=True)
class Apply:
    """A statement written with a word or an operator that names its op: `softmax_T x -> y`
    (form "prefix"), `gelu(x) -> y` ("call"), `a + b -> c` ("infix").

    `steps` (one: the op, whose `fn`, `over` and `form` say how it was written) and
    `sizes` are derived when the statement is resolved, as for a Contraction."""

    operands: tuple[Tensor, ...]
    output: Tensor
    steps: tuple[Step, ...]
    sizes: tuple[tuple[str, sympy.Expr], ...]

    def text(self, values: dict[str, int] | None = None, shown: set[str] | None = None) -> str:
        inputs = [t.text(values, shown) for t in self.operands]
        step = self.steps[0]
        return applied(step.fn or step.kind, step.over, step.form, inputs, self.output.text(values, shown))

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True, slots=True)
class Collective:
    """A collective written out: `AllGather_X bf16[I_X, J] -> bf16[I, J]`.

    `axes` are the mesh axes it runs over; `dim` is the dim a ReduceScatter scatters
    along or an AllToAll moves the sharding to (None for AllGather and AllReduce)."""

    kind: str
    axes: tuple[str, ...]
    dim: str | None
    input: Tensor
    output: Tensor

    @property
    def operands(self) -> tuple[Tensor, ...]:
        return (self.input,)

    def text(self, values: dict[str, int] | None = None, shown: set[str] | None = None) -> str:
        items = (*self.axes, self.dim) if self.dim is not None else self.axes
        return (f"{subscripted(self.kind, items)} {self.input.text(values, shown)} -> "
                f"{self.output.text(values, shown)}")

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True, slots=True)
class Fused:
    """`fused { ... }`: statements run as one kernel. Only what the block reads from
    outside and what it leaves for outside touch HBM; its intermediates stay on chip."""

    statements: tuple[Contraction | Apply, ...]

    @property
    def operands(self) -> tuple[Tensor, ...]:
        return tuple(t for s in self.statements for t in s.operands)

    @property
    def output(self) -> Tensor:
        return self.statements[-1].output

    def tensors(self) -> tuple[Tensor, ...]:
        return tuple(t for s in self.statements for t in (*s.operands, s.output))

    def text(self, values: dict[str, int] | None = None, shown: set[str] | None = None) -> str:
        return "fused {\n" + "".join(f"  {s.text(values, shown)}\n" for s in self.statements) + "}"

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True, slots=True)
class Arrays:
    """Arrays as stored, with no op (`bf16[I_XY, J], int8[B, S_X, D]`): they cost no FLOPs
    and move no bytes; what they take of each chip's memory is `stored.py`'s."""

    operands: tuple[Tensor, ...]

    def text(self, values: dict[str, int] | None = None, shown: set[str] | None = None) -> str:
        return ", ".join(t.text(values, shown) for t in self.operands)

    def __str__(self) -> str:
        return self.text()


Statement = Contraction | Apply | Collective | Fused | Arrays


def tensors_of(statement: Statement) -> tuple[Tensor, ...]:
    """Every tensor a statement writes, inputs and results (a fused block's, all of them)."""
    if isinstance(statement, Fused):
        return statement.tensors()
    if isinstance(statement, Arrays):
        return statement.operands
    return (*statement.operands, statement.output)


@dataclass(frozen=True, slots=True)
class Program:
    """A whole spec: its statements, the values given to named dims in it (`D=4096`), and
    the mesh it is sharded over (None for one chip)."""

    statements: tuple[Statement, ...]
    values: tuple[tuple[str, int], ...] = ()
    mesh: Mesh | None = None

    @property
    def dims(self) -> tuple[str, ...]:
        """Names of the named dims, in order of first appearance."""
        seen: dict[str, None] = {}
        for statement in self.statements:
            for tensor in tensors_of(statement):
                for dim in tensor.dims:
                    if dim.name is not None:
                        seen.setdefault(dim.name)
        return tuple(seen)

    @property
    def symbols(self) -> dict[str, sympy.Symbol]:
        """Name -> symbol for every named dim, for `sympy.parse_expr(..., local_dict=...)`."""
        return {name: dim_symbol(name) for name in self.dims}

    def __str__(self) -> str:
        values, shown = dict(self.values), set[str]()
        lines = [str(self.mesh)] if self.mesh is not None else []
        return "\n".join(lines + [s.text(values, shown) for s in self.statements])
