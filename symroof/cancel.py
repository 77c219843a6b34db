"""Ratios of costs without a polynomial ring, where the costs are sums of
monomials with rational coefficients (almost always).

`solve.fraction_expr(*solve.polys(num, den))` cancels a ratio's common monomial and
numeric content on sympy's sparse polynomial rings; building a ring for a new set of
symbols costs about a millisecond, and a program whose lines each have their own dim
names builds one per line and quantity. For sums of monomials the same cancellation is a
few dict operations, so `fraction` does it directly and gives back exactly the
expression the ring gives (tests/roofline/test_cancel.py checks it on random costs); anything
else (a float, a sum inside a product, a symbol in a denominator) returns None, and the
caller takes the ring.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy

Monomial = tuple  # ((symbol, exponent), ...) sorted by the symbol's name


def as_written(expr: sympy.Expr) -> bool:
    """Whether expr is a sum of monomials as it stands: `terms` of it with nothing
    multiplied out."""
    return _terms(expr)[1]


def terms(expr: sympy.Expr) -> dict[Monomial, Fraction] | None:
    """expr as {monomial: coefficient}, or None where it is not a sum of monomials in
    symbols with positive integer powers and rational coefficients. A term may hold one
    such sum as a factor (an exact count, B*F*(2*D - 1)): it is multiplied out, as the
    ring would."""
    return _terms(expr)[0]


def _terms(expr: sympy.Expr) -> tuple[dict[Monomial, Fraction] | None, bool]:
    """`terms`, and whether expr is already that sum as it stands (nothing multiplied out)."""
    found: dict[Monomial, Fraction] = {}
    plain = True
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Rational:
            return None, False
        powers: dict = {}
        inner: dict[Monomial, Fraction] | None = None
        if rest is not sympy.S.One:
            for factor in sympy.Mul.make_args(rest):
                if factor.is_Symbol:
                    powers[factor] = 1
                elif factor.is_Pow and factor.base.is_Symbol and factor.exp.is_Integer and factor.exp > 0:
                    powers[factor.base] = int(factor.exp)
                elif factor.is_Add and inner is None:
                    inner, plain = terms(factor), False
                    if inner is None:
                        return None, False
                else:
                    return None, False
        scale = Fraction(int(coeff.p), int(coeff.q))
        for monomial, c in (inner or {(): Fraction(1)}).items():
            merged = dict(monomial)
            for s, e in powers.items():
                merged[s] = merged.get(s, 0) + e
            key = tuple(sorted(merged.items(), key=lambda p: p[0].name))
            found[key] = found.get(key, Fraction(0)) + scale * c
    return {m: c for m, c in found.items() if c != 0}, plain


def _expr(found: dict[Monomial, Fraction]) -> sympy.Expr:
    return sympy.Add(*(sympy.Mul(sympy.Rational(c.numerator, c.denominator), *(s**e for s, e in m))
                       for m, c in found.items()))


def _content(found: dict[Monomial, Fraction]) -> Fraction:
    """The gcd of the coefficients over QQ, as the ring takes it: gcd of the numerators
    over lcm of the denominators."""
    top, bottom = 0, 1
    for c in found.values():
        top, bottom = math.gcd(top, c.numerator), math.lcm(bottom, c.denominator)
    return Fraction(top, bottom)


def _leading(found: dict[Monomial, Fraction], rank: dict) -> Fraction:
    """The coefficient of the lex-leading monomial (symbols ordered by name), as the
    ring's LC: the smallest key below is the largest monomial."""
    end = (math.inf,)
    lead = min(found, key=lambda m: (*((rank[s], -e) for s, e in m), end))
    return found[lead]


def fraction(num: sympy.Expr, den: sympy.Expr) -> sympy.Expr | None:
    """num/den with the common monomial and numeric content cancelled, exactly as
    `solve.cancel_simple` does; None where num or den is not a sum of monomials."""
    (n, plain_n), (d, plain_d) = _terms(num), _terms(den)
    if n is None or d is None or not d:
        return None
    if not n:
        return sympy.Integer(0)
    monomials = [*n, *d]
    common = dict(monomials[0])
    for m in monomials[1:]:
        powers = dict(m)
        common = {s: min(e, powers[s]) for s, e in common.items() if s in powers}
    if common:
        def shift(found: dict[Monomial, Fraction]) -> dict[Monomial, Fraction]:
            return {tuple((s, e - common.get(s, 0)) for s, e in m if e != common.get(s, 0)): c
                    for m, c in found.items()}
        n, d = shift(n), shift(d)
    cn, cd = _content(n), _content(d)
    rank = {s: i for i, s in enumerate(sorted({s for m in d for s, _ in m}, key=lambda s: s.name))}
    if _leading(d, rank) < 0:
        cd = -cd
    scale = cn / cd
    by_n, by_d = scale.numerator / cn, scale.denominator / cd
    if not common and plain_n and plain_d:
        # the sums as they stand, scaled: sympy spreads a number over a sum's terms, giving
        # the expression the ring gives, without rebuilding hundreds of terms
        return _scaled(num, by_n) / _scaled(den, by_d)
    n = {m: c * by_n for m, c in n.items()}
    d = {m: c * by_d for m, c in d.items()}
    return _expr(n) / _expr(d)


def _scaled(expr: sympy.Expr, by: Fraction) -> sympy.Expr:
    return expr if by == 1 else sympy.Rational(by.numerator, by.denominator) * expr



LARGE = 256  # terms a fraction's numerator or denominator would have multiplied out, past which it is kept in parts


def in_parts(num: sympy.Expr, den: sympy.Expr, large: int = LARGE) -> sympy.Expr | None:
    """num/den kept as a product of its sums, where multiplying them out would give a
    numerator or denominator of more than `large` terms (a whole program's effective peak,
    itself a fraction of sums, times its network time): each sum's own monomial and
    numeric content taken out, and those cancelled across the fraction, as `fraction`
    cancels them; None where some factor is not a sum of monomials, or the product is
    small (`fraction`, or the ring, then gives it multiplied out, as it always has). A
    sum that stands on both sides, once its content is out, cancels too (sympy's product
    takes a sum over itself as 1). Exact: the same value, in fewer terms."""
    sides: list[list[dict[Monomial, Fraction]]] = [[], []]
    for at, expr in ((0, num), (1, den)):
        top, bottom = sympy.fraction(expr)
        for k, part in ((at, top), (1 - at, bottom)):
            for factor in sympy.Mul.make_args(part):
                found = terms(factor)
                if found is None or not found and k == 1:
                    return None
                sides[k].append(found)
    counts = [math.prod(len(s) for s in side) for side in sides]
    if max(counts) <= large:
        return None
    if not counts[0]:
        return sympy.Integer(0)
    scale, powers = Fraction(1), dict[sympy.Symbol, int]()
    kept: list[list[dict[Monomial, Fraction]]] = [[], []]
    for k, side in enumerate(sides):
        for found in side:
            common = dict(next(iter(found)))
            for m in found:
                mine = dict(m)
                common = {s: min(e, mine[s]) for s, e in common.items() if s in mine}
            content = _content(found) if len(found) > 1 else next(iter(found.values()))  # a term: its coefficient
            if len(found) > 1 and _leading(found, {s: i for i, s in enumerate(
                    sorted({s for m in found for s, _ in m}, key=lambda s: s.name))}) < 0:
                content = -content  # each sum's leading coefficient positive, as the ring's denominator's
            scale = scale * content if k == 0 else scale / content
            for s, e in common.items():
                powers[s] = powers.get(s, 0) + (e if k == 0 else -e)
            if len(found) > 1:
                kept[k].append({tuple((s, e - common.get(s, 0)) for s, e in m if e != common.get(s, 0)): c / content
                                for m, c in found.items()})
    top = [sympy.Rational(scale.numerator), *(s**e for s, e in powers.items() if e > 0), *map(_expr, kept[0])]
    bottom = [sympy.Rational(scale.denominator), *(s**-e for s, e in powers.items() if e < 0), *map(_expr, kept[1])]
    return sympy.Mul(*top) / sympy.Mul(*bottom)
