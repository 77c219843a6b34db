"""Conditionals (the cond rule): `lax.cond` and `lax.switch` written as the branch that
costs the most.

No roofline can know which branch runs, and XLA's cost analysis counts a conditional as
the most of its branches' counts, each count on its own (measured:
benchmarks/xla_conventions.md). symroof writes one branch: the one that costs at least as
much as every other in every count (FLOPs, transcendentals, HBM bytes, the collectives'
bytes) at every size, proved on the counts' formulas. That is an upper bound on the time
whichever branch runs, and XLA's own figure. The other branches follow as comments, so a
reader can swap one in:

    # cond: branch 1 of 2 written, the costliest in every count (XLA counts a conditional so too)
    fp32[B, D] * fp32[] -> fp32[B, D]   # mul
    # cond: branch 0, not written: (no statement)

Where no branch costs the most in every count (one more FLOPs, another more bytes), or a
branch that might cost more holds a primitive symroof cannot cost, the conditional is not
costed, and said; every branch is then written as comments. The index (or predicate) is
a scalar, read for free.

Each branch is converted in a fork of the context (context.py) to be priced, the context
itself left as it was before the conditional; the chosen branch is then converted again,
in it, for real: names, lets and labels a branch not taken would have made are not left
behind. Pricing is the importer's (`Context.price`: this layer cannot analyse a program).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sympy

from ..errors import SymroofError
from ..lang import source
from .program import Env, Eqn, Line, View
from .rules import not_costed, rule, walk

if TYPE_CHECKING:
    from .context import Context

# the counts a branch is priced by (symroof's names for them)
COUNTS = ("FLOPs", "transcendentals", "bytes", "collective bytes")


@dataclass
class Tried:
    """One branch as converted to be priced: its lines, the primitives in it not costed
    (name -> count), the lets it made, and its counts (by COUNTS; None: not priced)."""

    lines: list[tuple[int, Line]]
    missing: dict[str, int]
    lets: dict[str, str]
    counts: dict[str, sympy.Expr] | None
    unpriced: str = ""  # why counts is None


@rule("cond", on_constants=True)
def cond(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    branches = eqn.params["branches"]
    operands = [ctx.view(v, env) for v in eqn.invars[1:]]
    tried = [_tried(ctx, closed, operands, depth) for closed in branches]
    k = costliest([(t.missing, t.counts) for t in tried])
    n = len(branches)
    if k is None:
        ctx.out.lines.append((depth, source.Comment(f"cond: {n} branches, none the costliest in every count: NOT "
                                                    "COSTED (each below, as comments)")))
        for i, t in enumerate(tried):
            _commented(ctx, i, t, depth)
        ctx.said(f"cond: none of its {n} branches is proved to cost the most in every count ({_why(tried)}): "
                 "not costed; its branches are written as comments in the program, to swap one in")
        return not_costed(ctx, eqn, env)
    ctx.out.lines.append((depth, source.Comment(f"cond: branch {k} of {n} written, the costliest in every count "
                                                "(XLA counts a conditional so too)")))
    inner = _branch(ctx, branches[k], operands, depth)
    for v, bv in zip(eqn.outvars, branches[k].jaxpr.outvars):
        env[v] = ctx.view(bv, inner)
    for i, t in enumerate(tried):
        if i != k:
            _commented(ctx, i, t, depth)


def _tried(ctx: Context, closed: Any, operands: list[View], depth: int) -> Tried:
    """A branch converted in a fork of the context (what it said goes with the fork: said
    again where it matters), and priced."""
    fork = ctx.fork()
    start, statements = len(fork.out.lines), len(fork.out.statements)
    _branch(fork, closed, operands, depth)
    lines = fork.out.lines[start:]
    before = ctx.out.skipped
    missing = {k: n - before.get(k, 0) for k, n in fork.out.skipped.items() if n > before.get(k, 0)}
    made = {k: v for k, v in fork.out.lets.items() if k not in ctx.out.lets}
    counts, why = _priced(fork, lines) if len(fork.out.statements) > statements \
        else (dict.fromkeys(COUNTS, sympy.Integer(0)), "")
    return Tried(lines, missing, made, counts, why)


def _branch(ctx: Context, closed: Any, operands: list[View], depth: int) -> Env:
    """Write one branch (a closed jaxpr) on the conditional's operands; its env."""
    jaxpr = closed.jaxpr
    inner: Env = {v: ctx.constant(v, value) for v, value in zip(jaxpr.constvars, closed.consts)}
    inner.update(zip(jaxpr.invars, operands))
    walk(ctx, jaxpr, inner, depth)
    return inner


def _priced(fork: Context, lines: list[tuple[int, Line]]) -> tuple[dict[str, sympy.Expr] | None, str]:
    """A branch's counts, or None and why it cannot be priced (no pricing given, or its
    program does not analyse on its own)."""
    if fork.price is None:
        return None, "no pricing given"
    try:
        return fork.price(fork, lines), ""
    except SymroofError as error:
        return None, f"it does not analyse on its own: {error}"


def _commented(ctx: Context, i: int, tried: Tried, depth: int) -> None:
    """A branch not written, as comments (with the lets it would need, which the
    program does not hold)."""
    if not tried.lines:
        ctx.out.lines.append((depth, source.Comment(f"cond: branch {i}, not written: (no statement)")))
        return
    need = {k: v for k, v in tried.lets.items() if k not in ctx.out.lets}
    lets = f" (with let {', '.join(f'{k} = {v}' for k, v in need.items())})" if need else ""
    ctx.out.lines.append((depth, source.Comment(f"cond: branch {i}, not written{lets}:")))
    ctx.out.lines += [(d, source.Comment("  " + str(line))) for d, line in tried.lines]


def _why(tried: list[Tried]) -> str:
    """Why no branch was chosen, in words: what a branch holds that is not costed or could
    not be priced; else each costs more than another in some count."""
    said = [f"branch {i} holds {', '.join(f'{k} x {n}' for k, n in t.missing.items())}, not costed"
            for i, t in enumerate(tried) if t.missing]
    said += [f"branch {i} is not priced: {t.unpriced}" for i, t in enumerate(tried) if t.counts is None]
    return "; ".join(said) or "each costs more than another in some count, or more only at some sizes"


def costliest(branches: list[tuple[dict, dict | None]]) -> int | None:
    """The first branch that costs at least as much as every other in every count, at
    every size: each a branch's primitives not costed and its counts (None: unknown).
    None where no branch does, or where one that might cost more holds a primitive that
    was not costed (or was not priced)."""
    for k, (_, mine) in enumerate(branches):
        if mine is None:
            continue
        if all(j == k or (not missing and theirs is not None and all(at_least(mine[c], theirs[c]) for c in COUNTS))
               for j, (missing, theirs) in enumerate(branches)):
            return k
    return None


def at_least(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Whether a >= b at every positive size, proved: a - b over a positive denominator is
    a polynomial in the dims without a negative coefficient. False where that does not
    prove it (it may still hold)."""
    numerator, denominator = sympy.together(sympy.expand(a - b)).as_numer_denom()
    if numerator == 0:
        return True
    if denominator.is_positive is not True:
        return False
    if numerator.is_number:
        return bool(numerator >= 0)
    try:
        poly = sympy.Poly(sympy.expand(numerator), *sorted(numerator.free_symbols, key=str))
    except sympy.PolynomialError:
        return False
    return all(c >= 0 for c in poly.coeffs())
