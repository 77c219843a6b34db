"""Limits and inequalities over positive dims, done on polynomials rather than by `sympy.limit`
and `sympy.solve`: costs are polynomials in the dims, so their ratios are rational
functions, whose limits are ratios of leading coefficients and whose sign changes
are the roots of one numerator. This is exact and takes milliseconds.

Examples:
    >>> from sympy import symbols
    >>> B, D, F = symbols("B D F", positive=True, integer=True)
    >>> limit_at_infinity(B*D*F / (B*D + D*F + B*F), [D, F])
    B
    >>> region = positive_region(41*B - 9850, B)
    >>> region.kind, region.root
    ('above', 9850/41)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import sympy


def limit_at_infinity(expr: sympy.Expr, symbols, together: bool = True) -> sympy.Expr:
    """Limit of a rational function as the given symbols grow without bound.

    With `together`, they grow at one rate (each replaced by one t -> oo); otherwise one
    after another, in the order given (an iterated limit).
    """
    symbols = [s for s in symbols if s in expr.free_symbols]
    if not symbols:
        return expr
    if not together:
        for symbol in symbols:
            expr = limit_at_infinity(expr, [symbol])
        return expr
    t = sympy.Dummy("t", positive=True)
    num, den = sympy.fraction(sympy.cancel(expr.subs({s: t for s in symbols})))
    if t not in (num.free_symbols | den.free_symbols):
        return sympy.cancel(num / den)
    pn, pd = sympy.Poly(num, t), sympy.Poly(den, t)
    ratio = sympy.cancel(pn.LC() / pd.LC())
    if pn.degree() < pd.degree():
        return sympy.Integer(0)
    if pn.degree() > pd.degree():
        sign = ratio.is_positive
        return sympy.oo if sign else (-sympy.oo if sign is False else sympy.oo * sympy.sign(ratio))
    return ratio


def limit_is_path_independent(expr: sympy.Expr, symbols, value: sympy.Expr) -> bool:
    """Whether the limit taken at one rate agrees with the iterated limits in every order
    (at most the first six orders are tried)."""
    symbols = [s for s in symbols if s in expr.free_symbols]
    if len(symbols) < 2:
        return True
    for order in itertools.islice(itertools.permutations(symbols), 6):
        other = limit_at_infinity(expr, order, together=False)
        if other != value and sympy.cancel(other - value) != 0:
            return False
    return True


@dataclass(frozen=True)
class Region:
    """Where a polynomial in x is positive, for x > 0.

    kind: "all" (every x), "none", "above" (x > root), "below" (x < root),
        "intervals" (the union of `intervals`), or "unknown" (could not be decided;
        `reason` says why).
    condition: for "above"/"below" with symbolic coefficients, the condition on the
        other symbols under which the root exists; otherwise None.
    """

    kind: str
    root: sympy.Expr | None = None
    condition: sympy.Basic | None = None
    intervals: tuple[tuple[sympy.Expr, sympy.Expr], ...] = ()
    reason: str | None = None


def sign_of(expr: sympy.Expr) -> int | None:
    """+1, -1 or 0 when the sign is known for all positive values of the symbols, else None.

    A polynomial whose coefficients all share one sign has that sign for positive
    symbols, which decides most costs that sympy's assumptions leave open.
    """
    expr = sympy.expand(expr)
    if expr == 0:
        return 0
    if expr.is_positive:
        return 1
    if expr.is_negative:
        return -1
    coefficients = expr.as_coefficients_dict().values()
    if all(c > 0 for c in coefficients):
        return 1
    if all(c < 0 for c in coefficients):
        return -1
    return None


def positive_region(poly: sympy.Expr, x: sympy.Symbol) -> Region:
    """Solve poly(x) > 0 over x > 0, with the other symbols positive."""
    poly = sympy.expand(poly)
    if x not in poly.free_symbols:
        sign = sign_of(poly)
        if sign is None:
            return Region("unknown", reason=f"the sign of {poly} does not depend on {x} but is not fixed")
        return Region("all" if sign > 0 else "none")
    p = sympy.Poly(poly, x)
    if p.degree() == 1:
        a, c = p.all_coeffs()
        return _linear(sympy.cancel(a), sympy.cancel(c))
    if p.free_symbols - {x}:
        return Region("unknown", reason=f"the threshold on {x} is a root of a degree-{p.degree()} "
                      "polynomial whose coefficients depend on other dims; give them values")
    return _numeric(p)


def _linear(a: sympy.Expr, c: sympy.Expr) -> Region:
    root = sympy.cancel(-c / a)
    sa, sc = sign_of(a), sign_of(c)
    if sa == 1:
        return Region("all") if sc in (0, 1) else Region("above", root)
    if sa == -1:
        return Region("none") if sc in (0, -1) else Region("below", root)
    if sc == -1:
        # The slope's sign depends on the other dims. Where it is positive, poly > 0 above
        # the root; where it is not, poly < 0 for every x (c < 0): the condition says which.
        return Region("above", root, condition=readable_positive(a))
    return Region("unknown", reason="the signs of both terms depend on other dims; give them values")


def readable_positive(expr: sympy.Expr) -> sympy.Basic:
    """`expr > 0` rearranged as `ratio > number` where it can be, e.g. D*F/(D + F) > 9850/41."""
    expr = sympy.expand(expr)
    positive = sympy.Add(*(t for t in expr.args if sign_of(t) == 1))
    negative = -sympy.Add(*(t for t in expr.args if sign_of(t) == -1))
    if isinstance(expr, sympy.Add) and positive != 0 and negative != 0 and \
            sympy.expand(positive - negative - expr) == 0:
        num, den = sympy.fraction(sympy.cancel(positive / negative))
        (cn, pn), (cd, pd) = num.as_content_primitive(), den.as_content_primitive()
        if cn > 0 and cd > 0:
            return sympy.StrictGreaterThan(sympy.cancel(pn / pd), cd / cn)
    return sympy.StrictGreaterThan(expr, 0)


def _numeric(p: sympy.Poly) -> Region:
    """A polynomial with numeric coefficients: cut (0, oo) at its positive real roots."""
    roots = sorted({r for r in p.real_roots() if r > 0}, key=float)
    cuts = [sympy.Integer(0), *roots, sympy.oo]
    inside = []
    for lo, hi in zip(cuts, cuts[1:]):
        probe = (lo + hi) / 2 if hi != sympy.oo else lo + 1
        if p.eval(probe) > 0:
            inside.append((lo, hi))
    merged: list[tuple] = []
    for lo, hi in inside:
        if merged and merged[-1][1] == lo and p.eval(lo) > 0:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    if not merged:
        return Region("none")
    if merged == [(0, sympy.oo)]:
        return Region("all")
    if len(merged) == 1 and merged[0][1] == sympy.oo:
        return Region("above", merged[0][0])
    if len(merged) == 1 and merged[0][0] == 0:
        return Region("below", merged[0][1])
    return Region("intervals", intervals=tuple(merged))
