"""The ring-free cancellation gives exactly what the polynomial ring gives, on random costs."""

from __future__ import annotations

import math

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof import cancel
from symroof.roofline.solve import fraction_expr, polys, sign_of

SYMBOLS = [sympy.Symbol(n, positive=True, integer=True) for n in ["B", "D", "F", "T", "B0x1", "D10", "X", "a"]]

coefficients = st.one_of(
    st.integers(-50, 10**18).map(sympy.Integer),
    st.fractions(min_value=-100, max_value=100, max_denominator=30).map(
        lambda f: sympy.Rational(f.numerator, f.denominator)),
)
monomials = st.builds(
    lambda c, powers: c * sympy.Mul(*(s**e for s, e in powers)),
    coefficients,
    st.lists(st.tuples(st.sampled_from(SYMBOLS), st.integers(1, 3)), max_size=4),
)
sums = st.lists(monomials, min_size=1, max_size=10).map(lambda terms: sympy.Add(*terms))
# costs share monomial factors and numeric content more often than random sums do
shared = st.tuples(sums, monomials).map(lambda p: sympy.expand(p[0] * p[1]))
# exact counts keep a sum inside a term: B*F*(2*D - 1)
factored = st.tuples(monomials, sums, sums).map(lambda p: p[0] * p[1] + p[2])
costs = st.one_of(sums, shared, factored)


@settings(max_examples=400, deadline=None)
@given(costs, costs)
def test_fraction_is_what_the_ring_gives(num, den):
    if den == 0:
        return
    fast = cancel.fraction(num, den)
    assert fast is not None
    assert fast == fraction_expr(*polys(num, den))
    assert sympy.sstr(fast) == sympy.sstr(fraction_expr(*polys(num, den)))


@settings(max_examples=200, deadline=None)
@given(costs)
def test_sign_is_what_the_ring_gives(expr):
    coefficients = polys(expr)[0].coeffs() if expr != 0 else [0]
    expected = 0 if all(c == 0 for c in coefficients) else 1 if all(c > 0 for c in coefficients) \
        else -1 if all(c < 0 for c in coefficients) else None
    assert sign_of(expr) == expected


def test_not_a_sum_of_monomials_goes_to_the_ring():
    B, D, F = SYMBOLS[:3]
    assert cancel.terms(B * (D + F) * (D + 2)) is None  # two sums inside a product
    assert cancel.terms(B / D) is None  # a symbol in a denominator
    assert cancel.terms(sympy.Float(1.5) * B) is None  # the ring makes floats rational
    assert cancel.fraction(2 * B * D, 4 * B * F + 6 * B) == D / (2 * F + 3)


# a fraction of products of sums: a whole program's effective peak (its FLOPs over the
# time its units take) times its network time, over the collectives' bytes
products = st.lists(st.one_of(sums, monomials), min_size=1, max_size=3).map(lambda f: sympy.Mul(*f))
quotients = st.tuples(products, products).map(lambda p: p[0] / p[1])


def _at(expr: sympy.Expr, point: dict) -> sympy.Expr:
    return expr.xreplace(point)


@settings(max_examples=150, deadline=None)
@given(quotients, st.one_of(products, quotients), st.lists(st.integers(1, 97), min_size=len(SYMBOLS),
                                                          max_size=len(SYMBOLS)))
def test_in_parts_is_the_fraction(num, den, values):
    point = {s: sympy.Integer(v) for s, v in zip(SYMBOLS, values)}
    if _at(den, point) == 0 or den == 0 or sympy.fraction(num)[1].xreplace(point) == 0:
        return
    found = cancel.in_parts(num, den, large=1)  # every product of more than one term kept in parts
    # each side's factors, worked out here: the numerator's and the denominator's denominator, and the other two
    (n_top, n_bottom), (d_top, d_bottom) = sympy.fraction(num), sympy.fraction(den)
    sides = [[cancel.terms(f) for part in parts for f in sympy.Mul.make_args(part)]
             for parts in ((n_top, d_bottom), (d_top, n_bottom))]
    unsummed = any(f is None for side in sides for f in side)
    small = not unsummed and max(math.prod(len(f) for f in side) for side in sides) <= 1
    # None exactly where some factor is no sum of monomials (the ring takes it), or no side has a product to keep
    assert (found is None) == (unsummed or small)
    if found is None:
        return
    assert _at(found, point) == _at(num, point) / _at(den, point)
    assert cancel.in_parts(num, den, large=10**9) is None  # small: multiplied out, as ever


def test_in_parts_cancels_each_sums_content_and_shared_sums():
    B, D, F, T = SYMBOLS[:4]
    peak = (4 * B * D * F + 6 * B * D) / (2 * B * F + 5 * B * T)  # FLOPs over the units' time
    found = cancel.in_parts(peak * (3 * B * D + 3 * D * T), 6 * B * D * (2 * F + 3), large=1)
    assert found == D * (B + T) / (B * (2 * F + 5 * T))  # 2F + 3 on both sides, B's and 6's cancelled
    assert sympy.Mul.make_args(found) == sympy.Mul.make_args(D * (B + T) / (B * (2 * F + 5 * T)))  # kept in parts
