"""The ring-free cancellation gives exactly what the polynomial ring gives, on random costs."""

from __future__ import annotations

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
