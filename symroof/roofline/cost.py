"""FLOPs and HBM bytes of each step, as sympy expressions in the spec's dim names.

Conventions (stated, not implied):

* A FLOP is one multiply or one add; a multiply-add is 2 FLOPs. Integer dtypes
  count OPs the same way.
* Each step's FLOPs, transcendentals and unit (matrix or vector) are its op kind's
  (`symroof.ops`, one module per kind, each stating its count). A contraction does one
  multiply per point of its index space and, per output element, one add fewer than
  the terms it sums: the exact count; the leading count is the book's two FLOPs per
  point (2*B*D*F for a matmul, against the exact B*F*(2*D - 1)).
* Bytes are HBM bytes: every input of a step read once (an operand named twice in
  one step is read once), its output written once. A chain's intermediates are
  written and read back, except inside a `fused { ... }` block: there a tensor one
  statement writes and a later one reads stays on chip, as do a chain's intermediates,
  and only what the block reads from outside and leaves for outside touches HBM.
* On a mesh, counts are per chip: each chip runs the step on its shards. The adds that
  reduce partial sums across chips are left out, as the book leaves them out, and a
  collective's HBM traffic is not counted: its cost is its time on the links. Each
  collective's `bytes` is V, the bytes each chip holds of its larger side (after an
  AllGather, before a ReduceScatter, the unreduced block of an AllReduce).

Examples:
    >>> from symroof.lang.parsing import parse
    >>> c = cost(parse("bf16[B, D] @ bf16[D, F] -> bf16[B, F]"))
    >>> c.flops, c.flops_exact, c.bytes
    (2*B*D*F, B*F*(2*D - 1), 2*B*D + 2*B*F + 2*D*F)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import sympy

from .. import ops
from ..ir import (
    Apply,
    Arrays,
    Collective,
    Contraction,
    Fused,
    Mesh,
    Program,
    Statement,
    Step,
    Term,
    dim_symbol,
    label_text,
)
from ..ops.base import term_bytes
from ..sharding.lowering import Local, Move, Plan, local_size, lower
from .oneline import counts_line, move_line

_ZERO = sympy.Integer(0)
_ONE = sympy.Integer(1)


@dataclass(frozen=True, slots=True)
class Counts:
    """FLOPs (leading and exact), HBM bytes, transcendentals (exp, log, tanh, rsqrt, ...,
    counted apart from FLOPs as XLA counts them), and the FLOPs that run on the vector
    unit (the rest run on the matrix unit)."""

    flops: sympy.Expr
    flops_exact: sympy.Expr
    bytes_read: sympy.Expr
    bytes_written: sympy.Expr
    transcendentals: sympy.Expr = _ZERO
    flops_vector: sympy.Expr = _ZERO

    def __repr__(self) -> str:
        return counts_line(self)

    @property
    def bytes(self) -> sympy.Expr:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True, slots=True, repr=False)  # Counts' one-line repr
class StepCost(Counts):
    """The counts of one step, and the bytes of its result when it stays on chip (inside a
    fused block) rather than going to HBM."""

    step: Step | None = None
    kept: sympy.Expr = _ZERO

    @property
    def unit(self) -> str:
        """Where its FLOPs run: "matrix", "vector", or "none"."""
        return ops.kind_of(self.step.kind).unit if self.step is not None else ops.MATRIX


@dataclass(frozen=True, slots=True)
class MoveCost:
    """A collective and V, the bytes each chip holds of its larger side; `count` times
    (a repeated block's collectives: L of them, each of V bytes, each paying its latency)."""

    move: Move
    bytes: sympy.Expr
    count: sympy.Expr = sympy.Integer(1)

    def __repr__(self) -> str:
        return move_line(self)


@dataclass(frozen=True, slots=True, repr=False)  # Counts' one-line repr
class Cost(Counts):
    """The totals over all steps, and each step's own counts. On a mesh the counts are per
    chip, `moves` are the collectives in order, `flops_total` counts the FLOPs of the whole
    computation once (not per chip), and `plans` keep each statement's lowering.
    `statements` holds each statement's own Cost, in order."""

    steps: tuple[StepCost, ...] = ()
    moves: tuple[MoveCost, ...] = ()
    flops_total: sympy.Expr | None = None
    mesh: Mesh | None = None
    plans: tuple[Plan, ...] = ()
    statements: tuple[Cost, ...] = ()


_KEYS = ("flops", "flops_exact", "bytes_read", "bytes_written", "transcendentals", "flops_vector")


def cost(program: Program) -> Cost:
    """Cost every statement and total them (per chip, on a mesh)."""
    return combine(statement_costs(program), program.mesh)


def statement_costs(program: Program) -> list[Cost]:
    """Each statement's cost, not totalled (for a caller that scales or picks them first)."""
    return [statement_cost(s, program.mesh) for s in program.statements]


def combine(costs: list[Cost], mesh: Mesh | None = None) -> Cost:
    total = _totals(costs)
    flops_total = None if mesh is None else sympy.Add(*(c.flops_total for c in costs))
    return Cost(**total, steps=tuple(s for c in costs for s in c.steps),
                moves=tuple(m for c in costs for m in c.moves), flops_total=flops_total, mesh=mesh,
                plans=tuple(p for c in costs for p in c.plans), statements=tuple(costs))


# Which of a step's inputs, and whether its result, stay on chip (a fused block's
# intermediates): None for none of them.
Kept = tuple[tuple[bool, ...], bool]


@functools.lru_cache(maxsize=4096)  # a model's layers repeat statements; an unfused view repeats them all
def statement_cost(statement: Statement, mesh: Mesh | None) -> Cost:
    """One statement's counts: on one chip, or per chip on the mesh after lowering."""
    if isinstance(statement, Fused):
        inner = [_cost(s, mesh, kept) for s, kept in zip(statement.statements, fused_kept(statement))]
        return combine(inner, mesh)
    if isinstance(statement, Arrays):  # stored, not moved: no FLOPs, no HBM traffic (stored.py)
        return Cost(**{key: _ZERO for key in _KEYS}, flops_total=None if mesh is None else _ZERO, mesh=mesh)
    return _cost(statement, mesh, None)


def _cost(statement: Contraction | Apply | Collective, mesh: Mesh | None, kept: list[Kept] | None) -> Cost:
    steps_of = statement.steps if not isinstance(statement, Collective) else ()
    if mesh is None:
        sizes = dict(statement.sizes) if not isinstance(statement, Collective) else {}
        steps = [step_cost(step, sizes, kept[k] if kept else None) for k, step in enumerate(steps_of)]
        return Cost(**_totals(steps), steps=tuple(steps))
    plan = lower(statement, mesh)
    steps, moves = [], []
    k = 0
    for item in plan.items:
        if isinstance(item, Local):
            local = {label: local_size(layout, label, plan.sizes, mesh)
                     for layout in (*item.inputs, item.output) for label in layout.labels}
            steps.append(step_cost(item.step, local, kept[k] if kept else None))
            k += 1
        else:
            moves.append(MoveCost(item, item.bytes_per_chip(_move_sizes(item, plan), mesh)))
    flops_total = sympy.Add(*(step_cost(step, plan.sizes).flops for step in steps_of))
    return Cost(**_totals(steps), steps=tuple(steps), moves=tuple(moves), flops_total=flops_total, mesh=mesh,
                plans=(plan,))


def _totals(counts: Sequence[Counts]) -> dict:
    """Each count summed over steps, or over statements."""
    return {key: sympy.Add(*(getattr(c, key) for c in counts)) for key in _KEYS}


def fused_kept(block: Fused) -> list[list[Kept]]:
    """For each statement of a fused block, for each of its steps: which inputs and whether
    the result stay on chip. A chain's intermediates do; so does a result a later statement
    of the block reads (the same dtype, dims and layout, and the same name where both
    have one), and the input that reads it."""
    outputs = [s.steps[-1].output for s in block.statements]
    read_later = [any(_same(out, term) for later in block.statements[i + 1:] for step in later.steps
                      for term in step.inputs)
                  for i, out in enumerate(outputs)]
    found = []
    for i, statement in enumerate(block.statements):
        flags = []
        for k, step in enumerate(statement.steps):
            inputs = tuple(term.axes is None or any(_same(out, term) for out in outputs[:i])
                           for term in step.inputs)
            final = k == len(statement.steps) - 1
            flags.append((inputs, read_later[i] if final else True))
        found.append(flags)
    return found


def _same(out: Term, term: Term) -> bool:
    if term.axes is None or out.dtype != term.dtype or out.axes != term.axes:
        return False
    if out.name is not None and term.name is not None and out.name != term.name:
        return False
    return tuple(map(label_text, out.labels)) == tuple(map(label_text, term.labels))


def _move_sizes(move: Move, plan: Plan) -> dict[str, sympy.Expr]:
    if plan.sizes:
        return plan.sizes
    # a written collective: its dims are named by the spec, or literal sizes
    return {label: (sympy.Integer(int(label)) if label.isdigit() else dim_symbol(label))
            for label in move.before.labels}


def step_cost(step: Step, sizes: dict[str, sympy.Expr], kept: Kept | None = None) -> StepCost:
    """FLOPs (leading and exact), transcendentals and bytes of one step, given each label's
    size, as its op kind counts them; `kept` says what stays on chip."""
    def size(labels: Sequence[str]) -> sympy.Expr:
        return sympy.Mul(*(sizes[label] for label in labels))

    kind = ops.kind_of(step.kind)
    counted = kind.count(step, size)
    inputs_kept, output_kept = kept if kept is not None else ((False,) * len(step.inputs), False)
    read = kind.read(step, size, frozenset(i for i, k in enumerate(inputs_kept) if k))
    out = kind.written(step, size)
    vector = counted.flops if kind.unit == ops.VECTOR else _ZERO
    return StepCost(counted.flops, counted.flops_exact, read, _ZERO if output_kept else out,
                    counted.transcendentals, vector, step=step,
                    kept=term_bytes(step.output, size) if output_kept else _ZERO)


def repeated(c: Cost, k: sympy.Expr, subs: Mapping[sympy.Basic, sympy.Expr],
             memo: dict[tuple[sympy.Expr, sympy.Expr], sympy.Expr] | None = None) -> Cost:
    """A statement's cost run k times (a `repeat` block's: k may be a symbol, L), with
    `subs` (relations, sizes) put in. Collectives keep their V and count k times each, so
    that each pays its latency. `memo` keeps what each (formula, k) came to, for the
    statements of one program put in with the same `subs`: most of their steps' formulas
    recur, statement to statement."""
    memo = {} if memo is None else memo

    def f(e: sympy.Expr, k: sympy.Expr = k) -> sympy.Expr:
        found = memo.get((e, k))
        if found is None:
            found = memo[e, k] = (e * k).xreplace(subs)
        return found

    steps = tuple(replace(s, flops=f(s.flops), flops_exact=f(s.flops_exact),
                                      bytes_read=f(s.bytes_read), bytes_written=f(s.bytes_written),
                                      transcendentals=f(s.transcendentals), flops_vector=f(s.flops_vector),
                                      kept=f(s.kept, _ONE))
                  for s in c.steps)
    moves = tuple(MoveCost(m.move, f(m.bytes, _ONE), f(m.count)) for m in c.moves)
    return Cost(flops=f(c.flops), flops_exact=f(c.flops_exact), bytes_read=f(c.bytes_read),
                bytes_written=f(c.bytes_written), transcendentals=f(c.transcendentals),
                flops_vector=f(c.flops_vector), steps=steps, moves=moves,
                flops_total=None if c.flops_total is None else f(c.flops_total), mesh=c.mesh, plans=c.plans,
                statements=c.statements)
