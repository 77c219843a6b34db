"""Conditionals (a part of jax_convert.Converter): `lax.cond` and `lax.switch` written as
the branch that costs the most.

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

Each branch is converted once to be priced, then the converter's state is put back as it
was before the conditional and the chosen branch converted again, for real: names, lets
and labels a branch not taken would have made are not left behind.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from ..errors import SymroofError
from .program import Converted, Parts, View

# the counts a branch is priced by (symroof's names for them)
COUNTS = ("FLOPs", "transcendentals", "bytes", "collective bytes")
# the state a branch's conversion may change; the rest (the function's jaxpr and what is
# known of it) is read-only
_FIXED = ("rename", "folded", "price")


@dataclass
class Tried:
    """One branch as converted to be priced: its lines, the primitives in it not costed
    (name -> count), the lets it made, and its counts (by COUNTS; None: not priced)."""

    lines: list[tuple[int, str]]
    missing: dict[str, int]
    lets: dict[str, str]
    counts: dict[str, sympy.Expr] | None
    unpriced: str = ""  # why counts is None


class Conds(Parts):
    """The cond handler; the converter provides the rest."""

    # a program (what the converter has built, with these lines in place of its own) -> its
    # counts, by COUNTS; set by jax_import, which can analyse a program (the converter's
    # layer cannot). None: conditionals are not costed.
    price: Callable[[Converted, list[tuple[int, str]]], dict[str, sympy.Expr]] | None = None

    def _cond(self, eqn, env, depth: int) -> None:
        branches = eqn.params["branches"]
        operands = [self.view(v, env) for v in eqn.invars[1:]]
        saved = self._state()
        tried: list[Tried] = []
        for closed in branches:
            self._restore(saved)
            start, statements = len(self.out.lines), len(self.out.statements)
            skipped, lets = dict(self.out.skipped), dict(self.out.lets)
            self._branch(closed, operands, depth)
            lines = self.out.lines[start:]
            missing = {k: n - skipped.get(k, 0) for k, n in self.out.skipped.items() if n > skipped.get(k, 0)}
            made = {k: v for k, v in self.out.lets.items() if k not in lets}
            counts, why = self._priced(lines) if len(self.out.statements) > statements else \
                (dict.fromkeys(COUNTS, sympy.Integer(0)), "")
            tried.append(Tried(lines, missing, made, counts, why))
        self._restore(saved)  # (what a branch said went with it: said again below, where it matters)
        k = costliest([(t.missing, t.counts) for t in tried])
        n = len(branches)
        if k is None:
            self.out.lines.append((depth, f"# cond: {n} branches, none the costliest in every count: NOT COSTED "
                                          "(each below, as comments)"))
            for i, t in enumerate(tried):
                self._commented(i, t, depth)
            self._said(f"cond: none of its {n} branches is proved to cost the most in every count ({_why(tried)}): "
                       "not costed; its branches are written as comments in the program, to swap one in")
            return self._skip(eqn, env)
        self.out.lines.append((depth, f"# cond: branch {k} of {n} written, the costliest in every count (XLA "
                                      "counts a conditional so too)"))
        inner = self._branch(branches[k], operands, depth)
        for v, bv in zip(eqn.outvars, branches[k].jaxpr.outvars):
            env[v] = self.view(bv, inner)
        for i, t in enumerate(tried):
            if i != k:
                self._commented(i, t, depth)

    def _branch(self, closed, operands: list[View], depth: int) -> dict:
        """Write one branch (a closed jaxpr) on the conditional's operands; its env."""
        jaxpr = closed.jaxpr
        inner = {v: self.constant(v, value) for v, value in zip(jaxpr.constvars, closed.consts)}
        inner.update(zip(jaxpr.invars, operands))
        self.walk(jaxpr, inner, depth)
        return inner

    def _priced(self, lines: list[tuple[int, str]]) -> tuple[dict | None, str]:
        """A branch's counts, or None and why it cannot be priced (no pricing given, or its
        program does not analyse on its own)."""
        if self.price is None:
            return None, "no pricing given"
        try:
            return self.price(self.out, lines), ""
        except SymroofError as error:
            return None, f"it does not analyse on its own: {error}"

    def _commented(self, i: int, tried: Tried, depth: int) -> None:
        """A branch not written, as comments (with the lets it would need, which the
        program does not hold)."""
        if not tried.lines:
            self.out.lines.append((depth, f"# cond: branch {i}, not written: (no statement)"))
            return
        need = {k: v for k, v in tried.lets.items() if k not in self.out.lets}
        lets = f" (with let {', '.join(f'{k} = {v}' for k, v in need.items())})" if need else ""
        self.out.lines.append((depth, f"# cond: branch {i}, not written{lets}:"))
        self.out.lines += [(d, "#   " + text) for d, text in tried.lines]

    def _state(self) -> dict:
        return {k: copy.deepcopy(v) for k, v in vars(self).items() if k not in _FIXED}

    def _restore(self, saved: dict) -> None:
        for k in [k for k in vars(self) if k not in _FIXED and k not in saved]:
            delattr(self, k)
        for k, v in saved.items():
            setattr(self, k, copy.deepcopy(v))


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
