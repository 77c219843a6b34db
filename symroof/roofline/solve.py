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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import sympy
from sympy.polys.polyerrors import CoercionFailed
from sympy.polys.rings import PolyElement, PolyRing, ring

from .. import cancel
from ..lang.relations import Power


@functools.lru_cache(maxsize=256)
def _ring(symbols: tuple[sympy.Symbol, ...]) -> PolyRing:
    return ring(symbols, sympy.QQ)[0]


def polys(*exprs: sympy.Expr, extra: Iterable[sympy.Symbol] = ()) -> tuple[PolyElement, ...]:
    """The expressions as polynomials over QQ in one shared ring of their symbols."""
    symbols = set(extra)
    for expr in exprs:
        symbols |= expr.free_symbols
    r = _ring(tuple(sorted(symbols, key=str)) or (sympy.Dummy("one"),))
    return tuple(r.from_expr(expr) for expr in exprs)


def leading(p: PolyElement, symbols: Iterable[sympy.Symbol]) -> tuple[int, PolyElement]:
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


# What a limit of num/den comes to: ('finite', N, D), ('zero',) or ('infinite', sign), the
# sign None where it is not fixed.
LimitParts = (tuple[Literal["zero"]] | tuple[Literal["infinite"], int | None]
              | tuple[Literal["finite"], PolyElement, PolyElement])


def limit_parts(num: PolyElement, den: PolyElement, symbols: Sequence[sympy.Symbol],
                together: bool = True) -> LimitParts:
    """('finite', N, D), ('zero',) or ('infinite', sign) for the limit of num/den."""
    orders = [list(symbols)] if together else [[s] for s in symbols]
    for group in orders:
        dn, num = leading(num, group)
        dd, den = leading(den, group)
        if dn < dd:
            return ("zero",)
        if dn > dd:
            sn, sd = sign_of(num), sign_of(den)
            return ("infinite", None if sn is None or sd is None else sn * sd)
    return ("finite", num, den)


def _as_expr(parts: LimitParts) -> sympy.Expr:
    if parts[0] == "zero":
        return sympy.Integer(0)
    if parts[0] == "infinite":
        return -sympy.oo if parts[1] == -1 else sympy.oo
    return fraction_expr(parts[1], parts[2])


def cancel_simple(num: PolyElement, den: PolyElement) -> tuple[PolyElement, PolyElement]:
    """num/den with the common monomial factor and the numeric content cancelled.

    Costs are sums of monomials with positive coefficients, and what they share is
    almost always a monomial (2*B*D*F over 2*B*D + 2*D*F + 2*B*F shares 2). A full
    multivariate GCD would also find shared polynomial factors, but it takes seconds
    to minutes on specs with tens of dims; this takes microseconds and is always exact.
    """
    if not num:
        return num, den.ring.one
    monoms = [*num.itermonoms(), *den.itermonoms()]
    common = tuple(min(m[i] for m in monoms) for i in range(num.ring.ngens))
    if any(common):

        def shift(p: PolyElement) -> PolyElement:
            return p.ring({tuple(e - c for e, c in zip(m, common)): k for m, k in p.iterterms()})

        num, den = shift(num), shift(den)
    (cn, num), (cd, den) = num.primitive(), den.primitive()
    if den.LC < 0:
        cd, den = -cd, -den
    ratio = sympy.QQ(cn) / sympy.QQ(cd)
    return num * ratio.numerator, den * ratio.denominator


def fraction_expr(num: PolyElement, den: PolyElement) -> sympy.Expr:
    """num/den as a sympy expression, simply cancelled (see `cancel_simple`)."""
    num, den = cancel_simple(num, den)
    return num.as_expr() / den.as_expr()


def cleared(t_math: sympy.Expr, t_roof: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    """Both (times, or a ratio's two sides) times one positive factor that clears their denominators, where a
    symbolic chip's figures stand in them (2*B*D*F/C against bytes/W_hbm becomes
    2*B*D*F*W_hbm against bytes*C): which is larger, and where, is unchanged. So do a mesh
    axis's size where it divides (2*B*D*F/X)."""
    both = t_math + t_roof
    if not any(isinstance(s, sympy.Symbol) and s.is_positive and not s.is_integer for s in both.free_symbols) \
            and not any(p.base.is_Symbol and p.exp.is_negative for p in both.atoms(sympy.Pow)):
        return t_math, t_roof  # dims only: polynomials already
    (n1, d1), (n2, d2) = sympy.fraction(sympy.together(t_math)), sympy.fraction(sympy.together(t_roof))
    return sympy.expand(n1 * d2), sympy.expand(n2 * d1)


def ratio_limit(num: sympy.Expr, den: sympy.Expr, symbols: Sequence[sympy.Symbol],
                together: bool = True) -> sympy.Expr:
    """Limit of num/den (polynomials) as `symbols` grow: together (at one rate), or one
    after another in the order given (an iterated limit)."""
    p, q = polys(*cleared(num, den))
    return _as_expr(limit_parts(p, q, symbols, together))


def path_independent(num: sympy.Expr, den: sympy.Expr, symbols: Iterable[sympy.Symbol]) -> bool:
    """Whether the limit taken at one rate agrees with the iterated limits in every order
    (at most the first six orders are tried)."""
    p, q = polys(*cleared(num, den))
    symbols = [s for s in symbols if s in p.ring.symbols]
    if len(symbols) < 2:
        return True
    reference = limit_parts(p, q, symbols)
    for order in itertools.islice(itertools.permutations(symbols), 6):
        other = limit_parts(p, q, order, together=False)
        if other[0] != reference[0]:
            return False
        if other[0] == reference[0] == "finite" and other[1] * reference[2] != reference[1] * other[2]:
            return False
        if other[0] == reference[0] == "infinite" and other[1] != reference[1]:
            return False
    return True


def sign_of(expr: sympy.Expr | PolyElement) -> int | None:
    """+1, -1 or 0 when the sign is known for all positive values of the symbols, else None.

    A polynomial whose coefficients all share one sign has that sign for positive
    symbols. That decides every cost symroof asks about, and it does so without
    sympy's assumption system, which is slow and leaves mixed signs open anyway.
    """
    if isinstance(expr, PolyElement):
        coefficients = expr.coeffs() if expr else [0]
    elif expr.is_number:
        return 0 if expr == 0 else (1 if expr > 0 else -1)
    elif (found := cancel.terms(expr)) is not None:  # a sum of monomials: its coefficients as they stand
        coefficients = list(found.values()) or [0]
    else:
        try:  # the polynomial ring expands far faster than sympy.expand
            coefficients = polys(expr)[0].coeffs()
        except (ValueError, CoercionFailed):  # not a polynomial (a symbol in a denominator)
            expr = sympy.expand(expr)
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

    kind: "all" (every x), "none", "above" (x > root), "below" (x < root), or
        "unknown" (could not be decided; `reason` says why).
    condition: where the answer depends on the other symbols, the condition under
        which it holds, and `otherwise` what holds where it fails; else both None.
    """

    kind: str
    root: sympy.Expr | None = None
    condition: sympy.Basic | None = None
    otherwise: str | None = None  # "all" or "none": what holds where the condition fails
    reason: str | None = None


def positive_region(poly: sympy.Expr | PolyElement, x: sympy.Symbol) -> Region:
    """Solve poly(x) > 0 over x > 0, with the other symbols positive."""
    if not isinstance(poly, PolyElement):
        try:
            (poly,) = polys(poly, extra=(x,))
        except (ValueError, CoercionFailed):  # x in an exponent (a mixture of experts' experts touched)
            return _convex_region(poly, x)
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
    # Costs are products of distinct dims, so no cost difference is of degree 2 in one dim.
    return Region("unknown", reason=f"the threshold on {x} would be a root of a degree-{degree} "
                                    "polynomial, which symroof does not solve")


_FAR = sympy.Integer(10) ** 30  # past any batch or size a threshold could be useful at


def _convex_region(expr: sympy.Expr, x: sympy.Symbol) -> Region:
    """Where a*x + c + sum(k*r**(b*x)) > 0 for x > 0, every k > 0, 0 < r < 1, b > 0 and no
    other symbol: a convex function (what a decode step's time difference is once a mixture
    of experts reads the E*(1 - (1 - A/E)**B) experts its batch touches). Below zero at
    x = 0, it crosses zero once (then stays above) if a > 0, else never; the root is found
    by bisection, to 1e-9 relative. Anything else is "unknown", said so."""
    expr = sympy.expand(expr)
    unknown = Region("unknown", reason=f"the threshold on {x} would be a root of {expr} = 0, not a polynomial, "
                                       "which symroof solves only where it is linear in x plus decaying "
                                       "exponentials of x, with no other symbol")
    if expr.free_symbols != {x}:
        return unknown
    slope = sympy.Integer(0)
    for term in sympy.Add.make_args(expr):
        k, rest = term.as_independent(x)
        if rest == 1:
            continue
        if rest == x:
            slope += k
            continue
        if not (isinstance(rest, Power) and rest.args[0].is_number and 0 < rest.args[0] < 1 and k > 0):
            return unknown
        b = sympy.Poly(rest.args[1], x) if rest.args[1].is_polynomial(x) else None
        if b is None or b.degree() != 1 or not b.coeffs()[0] > 0 or len(b.coeffs()) != 1:
            return unknown
    if not expr.xreplace({x: 0}) < 0:
        return unknown
    if not slope > 0:
        return Region("none")
    low, high = sympy.Integer(0), sympy.Integer(1)
    while expr.xreplace({x: high}) <= 0:  # the slope is positive: at most ~log2(root) doublings
        low, high = high, 2 * high
        if high > _FAR:
            return Region("unknown", reason=f"the threshold on {x} lies past {_FAR}")
    while high - low > high * sympy.Rational(1, 10**9):
        mid = (low + high) / 2
        low, high = (mid, high) if expr.xreplace({x: mid}) <= 0 else (low, mid)
    return Region("above", root=sympy.Float(high, 12))


def _linear(a: PolyElement, c: PolyElement) -> Region:
    """Where a*x + c > 0 for x > 0, a and c polynomials in the other (positive) dims.

    Where a sign depends on the other dims, the answer carries the condition under
    which it holds and what holds otherwise.
    """
    sa, sc = sign_of(a), sign_of(c)
    root = fraction_expr(-c, a) if c and a else sympy.Integer(0)
    if sa == 0:
        if sc is None:
            return Region("all", condition=readable_positive(c), otherwise="none")
        return Region("all") if sc == 1 else Region("none")
    if sa == 1:
        if sc in (0, 1):
            return Region("all")
        # x > root; where c > 0 the root is negative and every x qualifies
        if sc == -1:
            return Region("above", root)
        return Region("above", root, condition=readable_positive(-c), otherwise="all")
    if sa == -1:
        if sc in (0, -1):
            return Region("none")
        if sc == 1:
            return Region("below", root)
        return Region("below", root, condition=readable_positive(c), otherwise="none")
    if sc == -1:
        # Where the slope is positive, poly > 0 above the root; elsewhere never (c < 0).
        return Region("above", root, condition=readable_positive(a), otherwise="none")
    if sc == 0:
        # poly = a*x: the same sign at every x; x does not matter.
        return Region("all", condition=readable_positive(a), otherwise="none")
    return Region("unknown", reason="whether it is compute-bound, and where, depends on the signs "
                                    "of terms in the other dims; give them values")


def readable_positive(p: PolyElement) -> sympy.Basic:
    """`p > 0` rearranged as `ratio > number` where it can be, e.g. D*F/(D + F) > 9850/41."""
    positive, negative = p.ring.zero, p.ring.zero
    for monom, coeff in p.iterterms():
        if coeff > 0:
            positive += p.ring({monom: coeff})
        else:
            negative -= p.ring({monom: coeff})
    if positive and negative:
        num, den = cancel_simple(positive, negative)
        (cn, pn), (cd, pd) = num.primitive(), den.primitive()
        if cn > 0 and cd > 0:
            return sympy.StrictGreaterThan(fraction_expr(pn, pd), sympy.Rational(cd) / sympy.Rational(cn),
                                           evaluate=False)
    return sympy.StrictGreaterThan(p.as_expr(), 0, evaluate=False)


