"""Numbers and expressions for people: six significant figures, one exponent style,
fractions that read the way a person writes them. Used by every rendering."""

from __future__ import annotations

import mpmath
import sympy
from sympy.printing.str import StrPrinter

_FACTOR_TERMS = 40
_TIME_UNITS = [(1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps"), (1e-15, "fs")]


def number(value, digits: int = 6) -> str:
    """A number for people: 240.244, 1.97e14, 4096, 1e-300; any magnitude.

    Examples:
        >>> number(sympy.Rational(9850, 41)), number(197000000000000), number(4096)
        ('240.244', '1.97e14', '4096')
        >>> number(sympy.Rational(1, 10**300)), number(2.5e-5)
        ('1e-300', '2.5e-5')
    """
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        value = sympy.Integer(value)
    elif isinstance(value, float):
        value = sympy.Float(value)
    if value is sympy.nan:
        return "nan"
    if value in (sympy.oo, -sympy.oo, sympy.zoo):
        return "-oo" if value == -sympy.oo else "oo"
    if value.is_Integer and abs(value) < 10**7:
        return str(int(value))
    if value == 0:
        return "0"
    # mpmath keeps any exponent (a float would overflow past 1e308)
    text = mpmath.nstr(sympy.Float(value, digits + 3)._to_mpmath(60), digits, min_fixed=-4, max_fixed=7)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}e{int(exponent)}"
    elif "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


class _Printer(StrPrinter):
    """sympy's str printer with numbers written by `number`."""

    def _print_Float(self, expr):
        return number(expr)


def seconds(value) -> str:
    """A time with a unit: 1.01112 ms."""
    f = float(value)
    for scale, unit in _TIME_UNITS:
        if abs(f) >= scale:
            return f"{f / scale:.6g} {unit}"
    return f"{f:.6g} s"


def pretty(expr: sympy.Basic) -> str:
    """An expression for people: common factors pulled out, a fraction with large
    coefficients scaled so its denominator leads with 1, large or non-integer numbers
    as six-figure decimals.

    Examples:
        >>> D, F = sympy.symbols("D F", positive=True)
        >>> pretty(9850*D*F/(41*D*F - 9850*D - 9850*F))
        '240.244*D*F/(D*F - 240.244*D - 240.244*F)'
        >>> pretty((2*D*F - F)/(2*D + 2*F))
        'F*(2*D - 1)/(2*(D + F))'
    """
    if isinstance(expr, str):
        return expr
    if isinstance(expr, sympy.Rel):
        return f"{pretty(expr.lhs)} {expr.rel_op} {pretty(expr.rhs)}"
    if expr.is_Rational and not expr.is_Integer and abs(expr.p) <= 1000 and expr.q <= 1000:
        return str(expr)  # 1/2 reads better than 0.5
    if expr.is_Integer and abs(expr) < 10**15:
        return str(expr)  # an exact count stays exact
    if expr.is_number:
        return number(expr)
    if isinstance(expr, (sympy.Max, sympy.Min)):
        return f"{type(expr).__name__.lower()}({', '.join(pretty(a) for a in expr.args)})"
    num, den = sympy.fraction(expr)  # analyses hand over expressions already cancelled
    if den == 1:
        shown = expr
    elif not den.is_number and _large_coefficients(num, den):
        lead = sympy.Poly(den, *sorted(den.free_symbols, key=str)).LC()
        shown = sympy.expand(num / lead) / sympy.expand(den / lead)
    elif len(sympy.Add.make_args(num)) + len(sympy.Add.make_args(den)) <= _FACTOR_TERMS:
        shown = sympy.factor_terms(num) / sympy.factor_terms(den)
    else:  # pulling common factors out of hundreds of terms costs seconds and reads no better
        shown = num / den
    # Exact counts stay exact; 9850/41 reads better as 240.244 and 1/2 as 1/2.
    floats = {a: sympy.Float(a, 6) for a in shown.atoms(sympy.Rational)
              if abs(a.p) >= 10**15 or (not a.is_Integer and (abs(a.p) > 1000 or a.q > 1000))}
    return _Printer().doprint(shown.xreplace(floats) if floats else shown)


def _large_coefficients(*polys) -> bool:
    return any(abs(c) > 100 for p in polys for c in sympy.expand(p).as_coefficients_dict().values())


def over(expr: sympy.Expr, divisor) -> str:
    """`expr / divisor` as a person writes it: 2*B*D*F / 1.97e14."""
    shown = pretty(expr)
    if isinstance(expr, sympy.Add):
        shown = f"({shown})"
    return f"{shown} / {number(divisor)}"


