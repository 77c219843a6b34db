"""The fast printer writes exactly what sympy's str printer writes, on random costs."""

from __future__ import annotations

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy.printing.str import StrPrinter

from symroof import plain, show

NAMES = ["B", "D", "F", "T", "N", "H", "B0x1", "D0x1", "D10", "X", "a", "Z9"]
SYMBOLS = [sympy.Symbol(n, positive=True, integer=True) for n in NAMES]

coefficients = st.one_of(
    st.integers(-1000, 10**20).map(sympy.Integer),
    st.fractions(min_value=-100, max_value=100, max_denominator=50).map(
        lambda f: sympy.Rational(f.numerator, f.denominator)),
    st.floats(-1e16, 1e16, allow_nan=False, allow_infinity=False).map(sympy.Float),
    st.just(sympy.Float(1.0)), st.just(sympy.Float(-1.0)),
)
monomials = st.builds(
    lambda c, powers: c * sympy.Mul(*(s**e for s, e in powers)),
    coefficients,
    st.lists(st.tuples(st.sampled_from(SYMBOLS), st.integers(-3, 3)), max_size=5),
)
sums = st.lists(monomials, min_size=1, max_size=8).map(lambda terms: sympy.Add(*terms)).filter(lambda e: e != 0)
costs = st.one_of(
    sums,
    st.tuples(sums, sums).map(lambda p: p[0] / p[1]),
    st.tuples(sums, sums).map(lambda p: sympy.Max(p[0], p[1], evaluate=False)),
    st.tuples(sums, sums).map(lambda p: sympy.Min(p[0], p[1], evaluate=False)),
    st.tuples(monomials, sums).map(lambda p: p[0] * p[1]),
    st.tuples(monomials, sums, sums).map(lambda p: p[0] * p[1] / p[2]),  # intensities, factored
    st.tuples(monomials, sums, st.integers(-2, 2)).map(lambda p: p[0] * p[1] ** p[2]),
    st.tuples(coefficients, sums).map(lambda p: sympy.Mul(p[0], p[1], evaluate=False)),
    st.tuples(monomials, sums).map(lambda p: sympy.Max(p[0], p[1], evaluate=False)),
    st.tuples(monomials, monomials, sums).map(lambda p: sympy.Min(p[0], p[1] / p[2], evaluate=False)),
    st.tuples(coefficients, sums).map(lambda p: sympy.Min(p[0], p[1], evaluate=False)),
    st.tuples(monomials, monomials).map(lambda p: sympy.Max(p[0], p[1], evaluate=False)),  # a line's T_lower
    st.tuples(monomials, monomials, monomials).map(lambda p: sympy.Min(*p, evaluate=False)),
)


class _SlowShow(StrPrinter):
    """show's printer without the fast paths: what it wrote before them (max and min in
    lowercase, and a sum's positive terms first, as `show.pretty` writes them)."""

    def _print_Float(self, expr):
        return show.number(expr)

    def _as_ordered_terms(self, expr, order=None):  # a sum's positive terms first, each part in sympy's order
        terms = super()._as_ordered_terms(expr, order=order)
        return sorted(terms, key=lambda term: bool(term.as_coeff_Mul()[0] < 0))

    def _print_Max(self, expr):
        return "max" + StrPrinter._print_LatticeOp(self, expr)[3:]

    def _print_Min(self, expr):
        return "min" + StrPrinter._print_LatticeOp(self, expr)[3:]


@settings(max_examples=300, deadline=None)
@given(costs)
def test_fast_printer_writes_what_sympy_writes(expr):
    assert plain.text(expr) == sympy.sstr(expr)


@settings(max_examples=200, deadline=None)
@given(costs)
def test_show_printer_unchanged_by_the_fast_paths(expr):
    assert show._Printer().doprint(expr) == _SlowShow().doprint(expr)


def test_fast_paths_taken_on_costs(monkeypatch):
    # the checks above would pass with no fast path at all: make sure the fast ones run
    B, D, F = SYMBOLS[:3]
    expr = sympy.Max(2 * B * D + 3 * D * F**2 - B / F, sympy.Rational(1, 2) * B + 1.5 * D, evaluate=False)
    ratios = [B * D * F / (B * D + B * F + D * F), (B + D)**2 * F / 3]
    expected = [sympy.sstr(e) for e in [expr, *ratios]]
    for name in ("_print_Add", "_print_Mul", "_print_LatticeOp"):
        monkeypatch.setattr(StrPrinter, name, lambda *args, **kwargs: 1 / 0)
    assert [plain.text(e) for e in [expr, *ratios]] == expected == [
        "Max(B/2 + 1.5*D, 2*B*D - B/F + 3*D*F**2)", "B*D*F/(B*D + B*F + D*F)", "F*(B + D)**2/3"]


def test_same_name_different_assumptions_left_to_sympy():
    x, y = sympy.Symbol("x"), sympy.Symbol("x", positive=True)
    assert plain._ordered_terms(x + 2 * y) is None
    assert plain.text(x * y) == sympy.sstr(x * y)

