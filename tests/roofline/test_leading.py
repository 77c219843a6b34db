"""show.leading_coefficient, which pretty() scales a fraction by, read off the term list
where a dense sympy.Poly over a program's many dims took seconds (issue 31): equal to
Poly(p, *dims sorted by name).LC() on random sums of monomials, and on what is not one."""

from __future__ import annotations

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof import dim_symbol
from symroof.show import leading_coefficient

DIMS = [dim_symbol(n) for n in ("B", "D", "F", "T", "H", "X", "Y2")]

_monomial = st.lists(st.tuples(st.sampled_from(DIMS), st.integers(1, 3)), max_size=4).map(
    lambda factors: sympy.Mul(*(s**e for s, e in factors)))
_coefficient = st.tuples(st.integers(-10**6, 10**6).filter(bool), st.integers(1, 97)).map(
    lambda pq: sympy.Rational(*pq))
# a sum of monomials with at least one dim in it (a number has no leading term to scale by)
_sum = st.lists(st.tuples(_coefficient, _monomial), min_size=1, max_size=8).map(
    lambda terms: sympy.Add(*(c * m for c, m in terms))).filter(lambda p: not p.is_number)


@settings(max_examples=200, deadline=None)
@given(p=_sum)
def test_the_leading_coefficient_is_polys(p):
    assert leading_coefficient(p) == sympy.Poly(p, *sorted(p.free_symbols, key=str)).LC()


def test_a_factored_sum_and_a_non_polynomial_one():
    b, d, f = dim_symbol("B"), dim_symbol("D"), dim_symbol("F")
    for p in (b * f * (2 * d - 1) + 7 * d, 3 * b * d + 5):
        assert leading_coefficient(p) == sympy.Poly(p, *sorted(p.free_symbols, key=str)).LC()
    # no polynomial in its dims (a floor, as a strided convolution's output size): the leading
    # coefficient in sympy's own generators (floor(B/2) one), where Poly over the dims raised
    p = 4 * sympy.floor(b / 2) * d + 9 * d
    assert leading_coefficient(p) == sympy.Poly(p).LC()


def test_a_strided_convolutions_intensity_prints():
    """pretty() scales a fraction with large coefficients by its denominator's leading one;
    a floor in the denominator made Poly raise there, and the report crashed."""
    from symroof.show import pretty
    m = symroof.model("let H2 = floor((H - 3)/2) + 1, W2 = floor((W - 3)/2) + 1\n"
                      "conv_{H,W} bf16[B, H, W, C], bf16[3, 3, C, F] -> bf16[B, H2, W2, F]", "prefill", None,
                      {"C": 64, "F": 128})
    shown = pretty(m.analysis.intensity)
    assert "floor" in shown and "B" in shown
