"""What every op kind declares, and the shared pieces of their declarations.

An op kind is one module in this package holding one `Kind`: the words it is written
with, the shapes it accepts, its FLOPs and transcendentals, the unit it runs on, its
HBM traffic, and what it needs from the network when a dim it reduces over is split.
The parser, the lowering, the cost model and the renderers ask the kind; none of them
tests which kind it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy

from ..ir import Step, Term, label_text, subscripted

MATRIX, VECTOR, NONE = "matrix", "vector", "none"

# The size of a tuple of labels: the product of their extents (per chip on a mesh).
Size = Callable[[Sequence[str]], sympy.Expr]


class ShapeError(ValueError):
    """A statement whose shapes this kind cannot run; `operand` is the index of the
    operand to point at (None: the result)."""

    def __init__(self, message: str, operand: int | None = None):
        super().__init__(message)
        self.operand = operand


@dataclass(frozen=True, slots=True)
class Counted:
    """FLOPs (leading and exact) and transcendentals of one step."""

    flops: sympy.Expr
    flops_exact: sympy.Expr
    transcendentals: sympy.Expr = sympy.Integer(0)


ZERO = Counted(sympy.Integer(0), sympy.Integer(0))


class Kind:
    """The declaration of one op kind. Subclasses set the attributes and override the
    methods whose default does not fit.

    Attributes:
        name: the key in the registry and in `Step.kind`.
        unit: where its FLOPs run: MATRIX (the chip's peak for the compute dtype), VECTOR
            (the chip's vector_flops_per_s) or NONE (it does no arithmetic).
        words: the words it is written with before its operands (`softmax_T x -> y`,
            `gelu(x) -> y`); empty for kinds only reached from einsum statements.
        arity: the fewest and most operands it takes.
        takes_dims: whether it names the dims it works over (`softmax_T`): required then.
        infix: the operator symbols it is written with between operands (`+`).
    """

    name = ""
    unit = VECTOR
    words: tuple[str, ...] = ()
    infix: tuple[str, ...] = ()
    arity = (1, 1)
    takes_dims = False
    # Whether operands whose shared dims are split differently are an error (with the
    # gathers that would fix it) rather than gathered silently.
    same_layouts = False
    # Whether it scans the dims it works over (cumsum): each element depends on every one
    # before it, on other chips too where such a dim is split (a prefix across the mesh,
    # which symroof does not cost). Split, the lowering says so and names the AllGather that
    # fixes it; a result written split there is computed whole and sliced.
    scans = False
    # How a report says what the step does with the dims in `Step.summed`: a contraction
    # or reduction "sums" them, a softmax or norm works "over" them, a gather indexes them.
    over_word = "over"
    # Whether its result may have dims no operand has (a pad's padded dim, T2 = T + 3; the
    # rows of a scatter into a new array): `summed` checks them.
    makes_dims = False

    def summed(self, word: str, inputs: Sequence[Sequence[str]], over: Sequence[str],
               output: Sequence[str]) -> tuple[str, ...]:
        """Check the shapes (as labels); return the labels the step reduces over."""
        raise NotImplementedError

    def count(self, step: Step, size: Size) -> Counted:
        raise NotImplementedError

    def stats(self, word: str | None) -> int:
        """Per-row statistics combined across chips when a dim it works over is split
        (softmax: a max and a sum; rmsnorm: a sum of squares): an AllReduce of that many
        fp32 values per row, and the result keeps the input's layout. 0: such a split
        leaves partial results, reduced as a contraction's partial sums are."""
        return 0

    def read(self, step: Step, size: Size, kept: frozenset[int] = frozenset()) -> sympy.Expr:
        """HBM bytes read: every distinct input once, but those kept on chip (their indices
        in `kept`: a fused block's intermediates)."""
        read = distinct(step.inputs)
        return sympy.Add(*(term_bytes(t, size) for i, t in enumerate(step.inputs)
                           if i not in kept and any(t is r for r in read)))

    def written(self, step: Step, size: Size) -> sympy.Expr:
        """HBM bytes written: the whole result (a scatter writes only the rows it touches)."""
        return term_bytes(step.output, size)

    def whole(self, step: Step) -> tuple[str, ...]:
        """The input dims each chip needs whole (a pad's padded dims): an input split over
        one is gathered first (AllGather) on a mesh."""
        return ()

    def describe(self, word: str) -> str:
        """One line for the conventions page's table (docs/conventions.md) (`table()`): what it counts per element."""
        return ""


def function_of(step: Step) -> str:
    """The function a named op's step computes (`gelu`, `rmsnorm`): the parser sets it on
    every step of a kind written with words."""
    if step.fn is None:
        raise ValueError(f"a {step.kind} step without its function: {step}")
    return step.fn


def term_bytes(term: Term, size: Size) -> sympy.Expr:
    return term.dtype.bytes * size(term.labels)


def distinct(terms: Sequence[Term]) -> list[Term]:
    """Inputs read from HBM: a tensor named twice in one step (x * x) is read once."""
    seen: set = set()
    kept = []
    for term in terms:
        key = term.name if term.name is not None else id(term)
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept


def shown(labels: Sequence[str], sep: str = ", ") -> str:
    """Labels as a message writes them: a literal's label `4096#2` as its size."""
    return sep.join(map(label_text, labels))


def same_dims(word: str, inputs: Sequence[Sequence[str]], output: Sequence[str]) -> None:
    """Elementwise shapes: the result has every input dim, and nothing else (inputs
    broadcast by dim name)."""
    union = list(dict.fromkeys(l for labels in inputs for l in labels))
    extra = [l for l in output if l not in union]
    if extra:
        raise ShapeError(f"{word}: result dim {label_text(extra[0])} is in no input")
    missing = [l for l in union if l not in output]
    if missing:
        raise ShapeError(f"{word} is elementwise: its result keeps every input dim, and "
                         f"{label_text(missing[0])} is missing (to sum it, write sum_"
                         f"{label_text(missing[0])} as its own statement)")


def over_dims(word: str, labels: Sequence[str], over: Sequence[str]) -> None:
    for label in over:
        if label not in labels:
            raise ShapeError(f"{subscripted(word, (label_text(label),), short=True)}: {label_text(label)} is not a "
                             "dim of its input", 0)
