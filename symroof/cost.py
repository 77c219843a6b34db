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
* On a mesh, counts are per chip: each chip runs the step on its shards. The adds that
  reduce partial sums across chips are left out, as the book leaves them out, and a
  collective's HBM traffic is not counted: its cost is its time on the links. Each
  collective's `bytes` is V, the bytes each chip holds of its larger side (after an
  AllGather, before a ReduceScatter, the unreduced block of an AllReduce).

Examples:
    >>> from symroof.parse import parse
    >>> c = cost(parse("bf16[B, D] @ bf16[D, F] -> bf16[B, F]"))
    >>> c.flops, c.flops_exact, c.bytes
    (2*B*D*F, B*F*(2*D - 1), 2*B*D + 2*B*F + 2*D*F)
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .ir import Collective, Contraction, Mesh, Program, Step, Term, dim_symbol
from .oneline import counts_line, move_line
from .sharding import Layout, Local, Move, Plan, local_elements, local_size, lower


@dataclass(frozen=True, slots=True)
class Counts:
    """FLOPs (leading and exact) and HBM bytes."""

    flops: sympy.Expr
    flops_exact: sympy.Expr
    bytes_read: sympy.Expr
    bytes_written: sympy.Expr

    def __repr__(self) -> str:
        return counts_line(self)

    @property
    def bytes(self) -> sympy.Expr:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True, slots=True, repr=False)  # Counts' one-line repr
class StepCost(Counts):
    """The counts of one step (one binary or unary contraction)."""

    step: Step | None = None


@dataclass(frozen=True, slots=True)
class MoveCost:
    """A collective and V, the bytes each chip holds of its larger side."""

    move: Move
    bytes: sympy.Expr

    def __repr__(self) -> str:
        return move_line(self)


@dataclass(frozen=True, slots=True, repr=False)  # Counts' one-line repr
class Cost(Counts):
    """The totals over all steps, and each step's own counts. On a mesh the counts are per
    chip, `moves` are the collectives in order, `flops_total` counts the FLOPs of the whole
    computation once (not per chip), and `plans` keep each statement's lowering."""

    steps: tuple[StepCost, ...] = ()
    moves: tuple[MoveCost, ...] = ()
    flops_total: sympy.Expr | None = None
    mesh: Mesh | None = None
    plans: tuple[Plan, ...] = ()


_KEYS = ("flops", "flops_exact", "bytes_read", "bytes_written")


def cost(program: Program) -> Cost:
    """Cost every statement and total them (per chip, on a mesh)."""
    return combine([statement_cost(s, program.mesh) for s in program.statements], program.mesh)


def combine(costs: list[Cost], mesh: Mesh | None = None) -> Cost:
    total = {key: sympy.Add(*(getattr(c, key) for c in costs)) for key in _KEYS}
    flops_total = None if mesh is None else sympy.Add(*(c.flops_total for c in costs))
    return Cost(**total, steps=tuple(s for c in costs for s in c.steps),
                moves=tuple(m for c in costs for m in c.moves), flops_total=flops_total, mesh=mesh,
                plans=tuple(p for c in costs for p in c.plans))


def statement_cost(statement: Contraction | Collective, mesh: Mesh | None) -> Cost:
    """One statement's counts: on one chip, or per chip on the mesh after lowering."""
    if mesh is None:
        sizes = dict(statement.sizes)
        steps = [step_cost(step, sizes) for step in statement.steps]
        return Cost(**{key: sympy.Add(*(getattr(s, key) for s in steps)) for key in _KEYS},
                    steps=tuple(steps))
    plan = lower(statement, mesh)
    steps, moves = [], []
    for item in plan.items:
        if isinstance(item, Local):
            local = {label: local_size(layout, label, plan.sizes, mesh)
                     for layout in (*item.inputs, item.output) for label in layout.labels}
            steps.append(step_cost(item.step, local))
        else:
            moves.append(MoveCost(item, item.dtype.bytes * local_elements(_larger(item), _move_sizes(item, plan),
                                                                         mesh)))
    whole = statement.steps if isinstance(statement, Contraction) else ()
    flops_total = sympy.Add(*(step_cost(step, plan.sizes).flops for step in whole))
    return Cost(**{key: sympy.Add(*(getattr(s, key) for s in steps)) for key in _KEYS},
                steps=tuple(steps), moves=tuple(moves), flops_total=flops_total, mesh=mesh, plans=(plan,))


def _larger(move: Move) -> Layout:
    """The side whose per-chip block is V: after an AllGather, before anything else."""
    return move.after if move.kind == "AllGather" else move.before


def _move_sizes(move: Move, plan: Plan) -> dict:
    if plan.sizes:
        return plan.sizes
    # a written collective: its dims are named by the spec, or literal sizes
    return {label: (sympy.Integer(int(label)) if label.isdigit() else dim_symbol(label))
            for label in move.before.labels}


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
