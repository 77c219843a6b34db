"""FLOPs and HBM bytes of each step, as sympy expressions in the spec's dim names.

Conventions (stated, not implied):

* A FLOP is one multiply or one add; a multiply-add is 2 FLOPs. Integer dtypes
  count OPs the same way.
* FLOPs follow the einsum's loop nest. A step that sums nothing does one multiply
  per output element (elementwise or outer product). A step that sums does one
  multiply per point of its index space and, per output element, one add fewer
  than the terms it sums: the exact count. The leading count is the book's: two
  FLOPs per point of the index space (2*B*D*F for a matmul, against the exact
  B*F*(2*D - 1)). A one-input step that sums adds only; one that sums nothing
  (a copy or transpose) does no FLOPs.
* Bytes are HBM bytes: every input of a step read once (an operand named twice in
  one step is read once), its output written once. A chain's intermediates are
  written and read back.

Examples:
    >>> from symroof.parse import parse
    >>> c = cost(parse("bf16[B, D] @ bf16[D, F] -> bf16[B, F]"))
    >>> c.flops, c.flops_exact, c.bytes
    (2*B*D*F, B*F*(2*D - 1), 2*B*D + 2*B*F + 2*D*F)
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .ir import Program, Step, Term


@dataclass(frozen=True, slots=True)
class Counts:
    """FLOPs (leading and exact) and HBM bytes."""

    flops: sympy.Expr
    flops_exact: sympy.Expr
    bytes_read: sympy.Expr
    bytes_written: sympy.Expr

    @property
    def bytes(self) -> sympy.Expr:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True, slots=True)
class StepCost(Counts):
    """The counts of one step (one binary or unary contraction)."""

    step: Step | None = None


@dataclass(frozen=True, slots=True)
class Cost(Counts):
    """The totals over all steps, and each step's own counts."""

    steps: tuple[StepCost, ...] = ()


def cost(program: Program) -> Cost:
    """Cost every step of every statement, and total them."""
    steps = []
    for statement in program.statements:
        sizes = dict(statement.sizes)
        steps.extend(step_cost(step, sizes) for step in statement.steps)
    return Cost(*(sympy.Add(*(getattr(s, key) for s in steps))
                  for key in ("flops", "flops_exact", "bytes_read", "bytes_written")), steps=tuple(steps))


def step_cost(step: Step, sizes: dict[str, sympy.Expr]) -> StepCost:
    """FLOPs (leading and exact) and bytes of one step, given each label's size."""
    def product(labels) -> sympy.Expr:
        return sympy.Mul(*(sizes[label] for label in labels))

    out = product(step.output.labels)
    summed = product(step.summed)
    if not step.summed:
        # Nothing summed: one multiply per output element, or nothing at all for a copy.
        flops = flops_exact = out if len(step.inputs) > 1 else sympy.Integer(0)
    elif len(step.inputs) == 1:
        flops, flops_exact = out * summed, out * (summed - 1)
    else:
        flops, flops_exact = 2 * out * summed, out * (2 * summed - 1)
    read = sympy.Add(*(_bytes(term, product) for term in _distinct(step.inputs)))
    written = _bytes(step.output, product)
    return StepCost(flops, flops_exact, read, written, step=step)


def _distinct(terms: tuple[Term, ...]) -> list[Term]:
    """Inputs read from HBM: a tensor named twice in one step (x * x) is read once."""
    seen, kept = set(), []
    for term in terms:
        key = term.name if term.name is not None else id(term)
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept


def _bytes(term: Term, product) -> sympy.Expr:
    return term.dtype.bytes * product(term.labels)
