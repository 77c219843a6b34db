"""Statements as written: what `syntax.py` reads out of the text, before anything means
anything. Names, sizes and operators are kept as the user wrote them, each with its span
(start and end offsets in the text), so that `resolve.py`, which decides what they mean,
can point at the spot when it finds a problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Start and end offsets of a piece of the spec text.
Span = tuple[int, int]


@dataclass
class WDim:
    """A dim as written: a name (`B`), a literal size (`4096`) or both (`D=4096`)."""

    name: str | None
    value: int | None
    axes: tuple[str, ...]
    span: Span
    axes_span: Span | None = None

    @property
    def text(self) -> str:
        if self.name is None:
            return str(self.value)
        return self.name if self.value is None else f"{self.name}={self.value}"


@dataclass
class WTensor:
    """A tensor as written. `head` is the word before '[' (a dtype or a name); einsum
    terms have none."""

    head: str | None
    head_span: Span | None
    name: str | None
    name_span: Span | None
    dims: list[WDim]
    span: Span
    annotations: list[WAnnotation] = field(default_factory=list)


@dataclass
class WOp:
    """An operator between operands: its symbol and the subscript it names, if any."""

    symbol: str
    subscript: list[tuple[str, Span]] | None
    span: Span


@dataclass
class WAnnotation:
    """One `{...}` item after the result, such as `compute=fp8` or `U_X`."""

    key: str
    subscript: list[tuple[str, Span]] | None
    value: str | None
    span: Span


@dataclass
class WStatement:
    """One contraction: operands joined by operators, then the result (whose `{...}`
    annotations, such as `compute=fp8`, speak for the whole statement)."""

    kind: str  # "spec", "book" or "einsum": which of the written forms it came in
    operands: list[WTensor]
    ops: list[WOp]
    output: WTensor
    span: Span
    text: str = field(repr=False, default="")


@dataclass
class WArrays:
    """`bf16[I_XY, J], int8[B, S_X, D]`: arrays as stored, with no op."""

    tensors: list[WTensor]
    span: Span


@dataclass
class WMeshAxis:
    """One axis of a `mesh` line: `Y=4@dcn` (the link is None where none is written; the
    size None for an axis left symbolic, `X`)."""

    name: str
    size: int | None
    link: str | None
    span: Span
    link_span: Span | None


@dataclass
class WMesh:
    """`mesh X=2, Y=4@dcn`."""

    axes: list[WMeshAxis]
    span: Span


@dataclass
class WCollective:
    """`AllGather_X bf16[I_X, J] -> bf16[I, J]`: its kind, subscript, input and output."""

    kind: str
    kind_span: Span
    subscript: list[tuple[str, Span]]
    subscript_span: Span
    input: WTensor
    output: WTensor
    span: Span


@dataclass
class WApply:
    """A statement that names its op: `softmax_T x -> y` (form "prefix"), `gelu(x) -> y`
    ("call"). Which op the word names is looked up in `resolve.py`."""

    word: str
    word_span: Span
    subscript: list[tuple[str, Span]] | None
    form: str
    operands: list[WTensor]
    output: WTensor
    span: Span


@dataclass
class WFused:
    """`fused { ... }` and the statements inside."""

    statements: list[WStatement | WApply]
    word_span: Span
    span: Span


# Any one statement as written, as `syntax.read` gives them.
Written = WStatement | WApply | WCollective | WFused | WArrays | WMesh
