"""Limits and inequalities over positive dims, done on polynomials rather than by `sympy.limit`
and `sympy.solve`.

Costs are polynomials in the dims, so every ratio symroof takes a limit of is a ratio
of polynomials. As a set of dims grows together (each replaced by one t -> oo), a
polynomial is led by its terms of highest total degree in those dims: the limit of a
ratio is the ratio of those leading parts when their degrees match, 0 or oo when they
do not. And whether a cost difference is positive is the sign of one polynomial.
All of it is exact (rational coefficients) and runs on sympy's sparse polynomial rings,
which skip the assumption system that makes `cancel` and `expand` slow.

Examples:
    >>> from sympy import symbols
    >>> B, D, F = symbols("B D F", positive=True, integer=True)
    >>> ratio_limit(B*D*F, B*D + D*F + B*F, [D, F])
    B
    >>> region = positive_region(41*B - 9850, B)
    >>> region.kind, region.root
    ('above', 9850/41)
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import sympy
from sympy.polys.rings import PolyElement, PolyRing, ring


@functools.lru_cache(maxsize=256)
def _ring(symbols: tuple[sympy.Symbol, ...]) -> PolyRing:
    return ring(symbols, sympy.QQ)[0]


def polys(*exprs, extra=()) -> tuple[PolyElement, ...]:
    """The expressions as polynomials over QQ in one shared ring of their symbols."""
    symbols = set(extra)
    for expr in exprs:
        symbols |= expr.free_symbols
    r = _ring(tuple(sorted(symbols, key=str)) or (sympy.Dummy("one"),))
    return tuple(r.from_expr(expr) for expr in exprs)


def leading(p: PolyElement, symbols) -> tuple[int, PolyElement]:
    """The terms of p of highest total degree in `symbols`, with those symbols set to 1,
    and that degree: what is left of p as the symbols grow together."""
    gens = p.ring.symbols
    idx = [gens.index(s) for s in symbols if s in gens]
    if not idx or not p:
        return 0, p
    degree = max(sum(m[i] for i in idx) for m in p.itermonoms())
    kept = p.ring.zero
    for monom, coeff in p.iterterms():
        if sum(monom[i] for i in idx) == degree:
            reduced = tuple(0 if i in idx else e for i, e in enumerate(monom))
            kept += p.ring({reduced: coeff})
    return degree, kept


def limit_parts(num: PolyElement, den: PolyElement, symbols, together: bool = True):
    """('finite', N, D), ('zero',) or ('infinite', sign) for the limit of num/den."""
    orders = [list(symbols)] if together else [[s] for s in symbols]
    for group in orders:
        dn, num = leading(num, group)
        dd, den = leading(den, group)
        if dn < dd:
            return ("zero",)
        if dn > dd:
            signs = (sign_of(num), sign_of(den))
            return ("infinite", None if None in signs else signs[0] * signs[1])
    return ("finite", num, den)


def _as_expr(parts) -> sympy.Expr:
    if parts[0] == "zero":
        return sympy.Integer(0)
    if parts[0] == "infinite":
        return -sympy.oo if parts[1] == -1 else sympy.oo
    return fraction_expr(parts[1], parts[2])


def fraction_expr(num: PolyElement, den: PolyElement) -> sympy.Expr:
    """num/den as a sympy expression, common factors cancelled."""
    num, den = num.cancel(den)
    return num.as_expr() / den.as_expr()


def ratio_limit(num: sympy.Expr, den: sympy.Expr, symbols, together: bool = True) -> sympy.Expr:
    """Limit of num/den (polynomials) as `symbols` grow: together (at one rate), or one
    after another in the order given (an iterated limit)."""
    p, q = polys(num, den)
    return _as_expr(limit_parts(p, q, symbols, together))


def limit_at_infinity(expr: sympy.Expr, symbols, together: bool = True) -> sympy.Expr:
    """Limit of a rational function as the symbols grow (see `ratio_limit`)."""
    num, den = sympy.fraction(sympy.together(expr))
    return ratio_limit(num, den, symbols, together)


def path_independent(num: sympy.Expr, den: sympy.Expr, symbols) -> bool:
    """Whether the limit taken at one rate agrees with the iterated limits in every order
    (at most the first six orders are tried)."""
    p, q = polys(num, den)
    symbols = [s for s in symbols if s in p.ring.symbols]
    if len(symbols) < 2:
        return True
    reference = limit_parts(p, q, symbols)
    for order in itertools.islice(itertools.permutations(symbols), 6):
        other = limit_parts(p, q, order, together=False)
        if other[0] != reference[0]:
            return False
        if other[0] == "finite" and other[1] * reference[2] != reference[1] * other[2]:
            return False
        if other[0] == "infinite" and other[1] != reference[1]:
            return False
    return True


def sign_of(expr) -> int | None:
    """+1, -1 or 0 when the sign is known for all positive values of the symbols, else None.

    A polynomial whose coefficients all share one sign has that sign for positive
    symbols. That decides every cost symroof asks about, and it does so without
    sympy's assumption system, which is slow and leaves mixed signs open anyway.
    """
    if isinstance(expr, PolyElement):
        coefficients = expr.coeffs() if expr else [0]
    else:
        expr = sympy.expand(expr)
        if expr.is_number:
            return 0 if expr == 0 else (1 if expr > 0 else -1)
        coefficients = list(expr.as_coefficients_dict().values())
    if all(c == 0 for c in coefficients):
        return 0
    if all(c > 0 for c in coefficients):
        return 1
    if all(c < 0 for c in coefficients):
        return -1
    return None


@dataclass(frozen=True)
class Region:
    """Where a polynomial in x is positive, for x > 0.

    kind: "all" (every x), "none", "above" (x > root), "below" (x < root),
        "intervals" (the union of `intervals`), or "unknown" (could not be decided;
        `reason` says why).
    condition: for "above" with symbolic coefficients, the condition on the other
        symbols under which the root exists; otherwise None.
    """

    kind: str
    root: sympy.Expr | None = None
    condition: sympy.Basic | None = None
    intervals: tuple[tuple[sympy.Expr, sympy.Expr], ...] = ()
    reason: str | None = None


def positive_region(poly, x: sympy.Symbol) -> Region:
    """Solve poly(x) > 0 over x > 0, with the other symbols positive."""
    if not isinstance(poly, PolyElement):
        (poly,) = polys(poly, extra=(x,))
    if x not in poly.ring.symbols or poly.degree(poly.ring.symbols.index(x)) <= 0:
        sign = sign_of(poly)
        if sign is None:
            return Region("unknown", reason=f"the sign of {poly.as_expr()} does not depend on {x} "
                                            "but is not fixed")
        return Region("all" if sign > 0 else "none")
    i = poly.ring.symbols.index(x)
    by_power: dict[int, PolyElement] = {}
    for monom, coeff in poly.iterterms():
        rest = tuple(0 if j == i else e for j, e in enumerate(monom))
        by_power[monom[i]] = by_power.get(monom[i], poly.ring.zero) + poly.ring({rest: coeff})
    degree = max(by_power)
    if degree == 1:
        return _linear(by_power[1], by_power.get(0, poly.ring.zero))
    if any(any(sum(m) for m in p.itermonoms()) for p in by_power.values()):
        return Region("unknown", reason=f"the threshold on {x} is a root of a degree-{degree} "
                      "polynomial whose coefficients depend on other dims; give them values")
    return _numeric(sympy.Poly(poly.as_expr(), x))


def _linear(a: PolyElement, c: PolyElement) -> Region:
    sa, sc = sign_of(a), sign_of(c)
    root = fraction_expr(-c, a) if c else sympy.Integer(0)
    if sa == 1:
        return Region("all") if sc in (0, 1) else Region("above", root)
    if sa == -1:
        return Region("none") if sc in (0, -1) else Region("below", root)
    if sc == -1:
        # The slope's sign depends on the other dims. Where it is positive, poly > 0 above
        # the root; where it is not, poly < 0 for every x (c < 0): the condition says which.
        return Region("above", root, condition=readable_positive(a))
    return Region("unknown", reason="the signs of both terms depend on other dims; give them values")


def readable_positive(p: PolyElement) -> sympy.Basic:
    """`p > 0` rearranged as `ratio > number` where it can be, e.g. D*F/(D + F) > 9850/41."""
    positive, negative = p.ring.zero, p.ring.zero
    for monom, coeff in p.iterterms():
        if coeff > 0:
            positive += p.ring({monom: coeff})
        else:
            negative -= p.ring({monom: coeff})
    if positive and negative:
        num, den = positive.cancel(negative)
        (cn, pn), (cd, pd) = num.primitive(), den.primitive()
        if cn > 0 and cd > 0:
            return sympy.StrictGreaterThan(fraction_expr(pn, pd), sympy.Rational(cd) / sympy.Rational(cn),
                                           evaluate=False)
    return sympy.StrictGreaterThan(p.as_expr(), 0, evaluate=False)


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
